"""The history's ``configDigest`` in Flux's format (issue 34, behaviour 21): helmdeck's
:func:`engine.storage.values_digest.digest_values` against fluxcd/pkg/chartutil ``DigestValues`` (digest.go, the
oracle runs it), on generated values: nested maps and lists, strings YAML 1.1 reads as something else, long and
multi-line strings, numbers as helm's float64 holds them. A difference fails and prints the smallest input."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes import client

from engine.helm import Helm
from engine.kube.client import KubeTarget
from engine.runtime.assemble import build_engine
from engine.runtime.cluster.object_status import flux_status
from engine.storage.codec import decode_payload
from engine.storage.values_digest import digest_values, encode
from testkit.chart_sources import ChartRepoServer, package_chart, publish_http, write
from testkit.packages import write_package
from tests.conftest import run_helm
from tests.engine.reconcile.test_flux_rules import helm_release, repository
from tests.flux_oracle import Oracle

pytestmark = pytest.mark.binaries("oracle")

BATCH = 8
_WORDS = st.sampled_from([
    "y", "n", "yes", "No", "on", "OFF", "true", "False", "null", "~", "", "<<", "0o17", "017", "0x1F", "0b101",
    "-0b11", "1e3", "1_000", ".5", "+.inf", ".NaN", "-1.5e-3", "1.", "1e400", "2024-01-02", "2024-13-02",
    "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43", "1:20", "190:20:30.15", "- a", "a: b", "a #b", "#a",
    "key:", "&a", "*a", "!t", "|", ">", "'q'", '"d"', "%x", "@a", "`b", "{a}", "[a]", "a, b", " lead", "trail ",
    "tab\there", "é", "日本", "emoji 🚀", "\u0085", "\ufeff", "\x07bell", "a\\b", "web", "nginx:1.27", "--set",
])
_TEXT = st.one_of(_WORDS, st.text(st.sampled_from("ab :#-'\"\n\t.é0"), max_size=12),
                  st.lists(st.sampled_from(["word", "x:", "#", "long-ish", "é"]), min_size=14, max_size=30)
                  .map(" ".join))
_NUMBERS = st.one_of(st.integers(-(2**70), 2**70), st.sampled_from([2**53 + 1, 2**63, 2**63 - 1, 2**64, -(2**63)]),
                     st.floats(allow_nan=False, allow_infinity=False),
                     st.sampled_from([0.1, 1e-5, 1e-4, 1234567.5, 123456.5, 1e20, 1e21, 1e22, -0.0, 5e-324]))
_SCALARS = st.one_of(_TEXT, _NUMBERS, st.booleans(), st.none())
_KEYS = st.one_of(_WORDS, st.text(st.sampled_from("abz:é 0"), min_size=1, max_size=6))
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                         st.dictionaries(_KEYS, inner, max_size=4)), max_leaves=12)


def _json_number(value: Any) -> Any:
    """``value`` as it reaches both sides: a JSON number is helm's float64 (Go decodes the request so)."""
    if isinstance(value, dict):
        return {k: _json_number(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_number(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value) if abs(value) > 2**53 else value
    return value


@settings(max_examples=2000 // BATCH, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(st.dictionaries(_KEYS, _VALUES, max_size=5), min_size=BATCH, max_size=BATCH))
def test_config_digest_is_chartutils_digest_values(flux_oracle_process: Oracle, cases: list[dict[str, Any]]) -> None:
    cases = [_json_number(c) for c in cases]
    answers = flux_oracle_process.ask_many([{"op": "digest", "values": c} for c in cases])
    for values, answer in zip(cases, answers, strict=True):
        mine = encode(values) if values else ""
        assert digest_values(values) == answer["digest"], f"{values!r}\nhelmdeck:\n{mine}\nFlux:\n{answer['text']}"


def test_empty_values_digest_nothing(flux_oracle_process: Oracle) -> None:
    """``valuesOrNil``: empty values and no values are the digest of no bytes."""
    assert digest_values({}) == flux_oracle_process.ask({"op": "digest", "values": {}})["digest"]


@pytest.mark.cluster
async def test_a_packages_and_a_helmreleases_history_record_fluxs_config_digest(
    kube_target: KubeTarget, helm: Helm, namespace: str, tmp_path: Path, repo: ChartRepoServer,
    flux_oracle_process: Oracle, core_api: client.CoreV1Api,
) -> None:
    """The status of a Package and of a HelmRelease installing the same chart with the same values reads alike:
    ``status.history[0].configDigest`` is what helm-controller writes for the release (internal/release
    observation.go ``ObservedToSnapshot``: chartutil ``DigestValues`` of the release's config), the oracle's
    digest of ``helm get values``; ``digest`` and ``apiVersion`` are its ``Digest`` of the stored record (the
    oracle's "observe") and ``v2``."""
    publish_http(helm.binary, package_chart(helm.binary, tmp_path, "1.0.0"), repo)
    folder = tmp_path / "folder"
    values = {"replicas": 2, "image": {"tag": "y"}, "note": "two\nlines", "ratio": 0.5, "on": "off"}
    write(folder, "repository.yaml", repository(namespace, repo.url))
    write(folder, "web.yaml", helm_release(namespace, values=json.dumps(values)))
    write_package(folder, "pkg", namespace, chart={"spec": {"chart": "web", "version": "*",
                                                            "sourceRef": {"kind": "HelmRepository", "name": "charts"}}},
                  values=values, timeout="60s")
    engine = build_engine(kube_target, helm, folder, namespaces=[namespace], watch_packages=False)
    await engine.start(reconcile=False)
    try:
        digests = []
        for release in ("web", "pkg"):
            key = (namespace, release)
            result = await engine.controller.run_pass(key)
            assert [(o.action, o.ok) for o in result.outcomes] == [("install", True)], result
            stored = json.loads(run_helm(helm, "get", "values", release, "-n", namespace, "-o", "json"))
            flux = flux_oracle_process.ask({"op": "digest", "values": stored})["digest"]
            history = flux_status(engine.status(key), 1)["history"]
            assert history[0]["configDigest"] == flux, release
            secret = core_api.read_namespaced_secret(f"sh.helm.release.v1.{release}.v1", namespace)
            record = decode_payload(base64.b64decode((secret.data or {})["release"]))
            observed = flux_oracle_process.ask({"op": "observe", "object": record})["digest"]
            assert (history[0]["apiVersion"], history[0]["digest"]) == ("v2", observed), release
            digests.append(flux)
    finally:
        await engine.stop()
    assert digests[0] == digests[1]
