"""The release a HelmRelease object owns, as Flux's own code names it: the oracle (tests/oracle/main.go,
helm-controller api/v2 ``GetReleaseName``, ``GetReleaseNamespace``) against the cockpit's
:func:`engine.runtime.cockpit.flux.release_key`, then helm-controller's internal/release ``ShortenName`` (run by
internal/action install.go and upgrade.go; not in the API module, so not in the oracle: helmdeck's
``shorten_release_name``)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.package.model import shorten_release_name
from engine.runtime.cockpit.flux import release_key
from tests.flux_oracle import Oracle

pytestmark = pytest.mark.binaries("oracle")

_LABEL = st.from_regex(r"\A[a-z][a-z0-9-]{0,20}[a-z0-9]\Z")


@st.composite
def helmreleases(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {"interval": "5m", "chart": {"spec": {"chart": "c", "sourceRef": {
        "kind": "HelmRepository", "name": "r"}}}}
    if draw(st.booleans()):
        spec["targetNamespace"] = draw(_LABEL)
    if draw(st.booleans()):
        spec["releaseName"] = draw(st.one_of(_LABEL, st.from_regex(r"\A[a-z]{50,60}\Z")))
    name = draw(st.one_of(_LABEL, st.from_regex(r"\A[a-z]{40,60}\Z")))
    return {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": name, "namespace": draw(_LABEL)}, "spec": spec}


@settings(max_examples=50, deadline=None)
@given(st.lists(helmreleases(), min_size=1, max_size=10))
def test_the_release_a_helmrelease_owns_is_fluxs(flux_oracle_process: Oracle, objects: list[dict[str, Any]]) -> None:
    answers = flux_oracle_process.ask_many([{"op": "helmRelease", "object": o} for o in objects])
    for obj, answer in zip(objects, answers, strict=True):
        getters = answer["getters"]
        assert release_key(obj) == (getters["releaseNamespace"], shorten_release_name(getters["releaseName"])), obj
