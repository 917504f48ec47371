"""The history's ``digest`` in Flux's format (issue 34, behaviour 21): helmdeck's
:func:`engine.storage.release_digest.release_digest` against helm-controller v1.6.3's ``Digest(ObserveRelease(rls))``
(internal/release/digest.go, internal/release/observation.go). helm-controller's module cannot be built here, so the
oracle's "observe" op (tests/oracle/observation.go) holds a copy of its ``Observation`` struct and reads the release
with helm's own Go types; it is compared on generated releases and on records helm 4 and helm 3 wrote on the local
cluster. A difference fails and prints the input and the bytes Go hashed."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes import client

from engine.helm import Helm
from engine.storage.codec import decode_payload
from engine.storage.observation import observation_from_release
from engine.storage.release_digest import release_digest
from engine.storage.snapshot import SNAPSHOT_API_VERSION, Snapshot
from tests.conftest import run_helm
from tests.engine.storage.test_values_digest import _KEYS, _TEXT, _VALUES, _json_number
from tests.flux_oracle import Oracle

pytestmark = pytest.mark.binaries("oracle")

CHART = Path(__file__).parents[2] / "data" / "charts" / "digest"
BATCH = 8
_TIMES = st.sampled_from([
    "", None, "0001-01-01T00:00:00Z", "2026-01-02T03:04:05Z", "2026-01-02T03:04:05.120000Z",
    "2026-01-02T03:04:05.123456789+02:00", "2026-01-02T03:04:05+00:00", "2026-01-02T03:04:05.5-07:30",
    "2026-01-02T03:04:05.000000000Z",
])
_STRINGS = st.lists(_TEXT, max_size=3)
_EVENTS = st.lists(st.sampled_from(["test", "test-success", "pre-install", "post-upgrade", "pre-delete"]),
                   max_size=3)
_HOOKS = st.lists(st.fixed_dictionaries({}, optional={
    "name": _TEXT, "kind": st.sampled_from(["Pod", "Job", "ConfigMap"]), "path": _TEXT, "manifest": _TEXT,
    "events": _EVENTS, "weight": st.integers(-10, 10), "delete_policies": _STRINGS, "output_log_policies": _STRINGS,
    "last_run": st.fixed_dictionaries({}, optional={"started_at": _TIMES, "completed_at": _TIMES,
                                                    "phase": st.sampled_from(["", "Succeeded", "Failed", "Running"])}),
}), max_size=4)
_DEPENDENCY = st.fixed_dictionaries({}, optional={
    "name": _TEXT, "version": _TEXT, "repository": _TEXT, "condition": _TEXT, "tags": _STRINGS,
    "enabled": st.booleans(), "import-values": st.lists(_VALUES, max_size=2), "alias": _TEXT})
_METADATA = st.fixed_dictionaries({}, optional={
    "name": _TEXT, "home": _TEXT, "sources": _STRINGS, "version": _TEXT, "description": _TEXT, "keywords": _STRINGS,
    "maintainers": st.lists(st.fixed_dictionaries({}, optional={"name": _TEXT, "email": _TEXT, "url": _TEXT}),
                            max_size=2),
    "icon": _TEXT, "apiVersion": st.sampled_from(["v1", "v2"]), "condition": _TEXT, "tags": _TEXT,
    "appVersion": _TEXT, "deprecated": st.booleans(), "annotations": st.dictionaries(_KEYS, _TEXT, max_size=3),
    "kubeVersion": _TEXT, "dependencies": st.lists(_DEPENDENCY, max_size=2),
    "type": st.sampled_from(["", "application", "library"])})
_RELEASES = st.fixed_dictionaries({"name": _TEXT, "version": st.integers(1, 20)}, optional={
    "namespace": _TEXT, "manifest": _TEXT,
    "info": st.fixed_dictionaries({}, optional={
        "first_deployed": _TIMES, "last_deployed": _TIMES, "deleted": _TIMES, "description": _TEXT,
        "status": st.sampled_from(["deployed", "failed", "superseded", "pending-upgrade"]), "notes": _TEXT}),
    "chart": st.fixed_dictionaries({}, optional={"metadata": _METADATA,
                                                "values": st.dictionaries(_KEYS, _VALUES, max_size=3)}),
    "config": st.dictionaries(_KEYS, _VALUES, max_size=4),
    "hooks": _HOOKS,
    "apply_method": st.sampled_from(["", "ssa", "csa"]),
})


OCI_DIGEST = "sha256:" + "0123456789abcdef" * 4


def _compare(oracle: Oracle, releases: list[dict[str, Any]]) -> None:
    """Each release's digest is the oracle's: every other one with an OCI digest (the Observation's ``ociDigest``, as
    internal/reconcile/release.go ``mutateOCIDigest`` sets it for a chart from an OCIRepository)."""
    asked = [(r, OCI_DIGEST if i % 2 else "") for i, r in enumerate(releases)]
    answers = oracle.ask_many([{"op": "observe", "object": r, "ociDigest": oci} for r, oci in asked])
    for (rel, oci), answer in zip(asked, answers, strict=True):
        assert "error" not in answer, (rel, answer)
        assert release_digest(rel, oci) == answer["digest"], f"{rel!r} {oci!r}\nGo hashed:\n{answer['text']}"


@settings(max_examples=800 // BATCH, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(_RELEASES, min_size=BATCH, max_size=BATCH))
def test_digest_is_helm_controllers_on_generated_releases(flux_oracle_process: Oracle,
                                                          releases: list[dict[str, Any]]) -> None:
    _compare(flux_oracle_process, [_json_number(r) for r in releases])


def test_a_test_hook_is_left_out_and_an_empty_list_is_null(flux_oracle_process: Oracle) -> None:
    """``IgnoreHookTestEvents``: a hook firing on ``test`` is not hashed (so running tests does not change the
    digest); no hooks left and no values are ``null``, as Go writes a nil slice and map."""
    bare = {"name": "a", "version": 1, "info": {"status": "deployed"}}
    tested = {**bare, "config": {}, "hooks": [{"name": "t", "events": ["test"], "last_run": {"phase": "Failed"}}]}
    answer = flux_oracle_process.ask({"op": "observe", "object": tested})
    assert '"config":null' in answer["text"] and '"hooks":null' in answer["text"]
    assert release_digest(tested) == release_digest(bare) == answer["digest"]


@pytest.mark.cluster
def test_digest_of_records_helm_wrote_is_helm_controllers(
    any_helm: Helm, namespace: str, core_api: client.CoreV1Api, tmp_path: Path, flux_oracle_process: Oracle,
) -> None:
    """Records helm 4 and helm 3 wrote (helm 3 stores unset times as ``""``; helm 4.3 a rollback's
    ``info.rollback_revision``, which helm 4.2's Info, the one helm-controller v1.6.3 decodes with, drops): an
    install, an upgrade and a rollback of a chart with a weighted hook, a test hook, notes, chart annotations and
    maintainers, unicode and ``<>&`` in values; each revision's digest, as helmdeck reads the record
    (:func:`observation_from_release`, the snapshot made of it), is the oracle's."""
    chart = shutil.copytree(CHART, tmp_path / "digest")
    run_helm(any_helm, "install", "rel", str(chart), "-n", namespace, "--set", "message=first <one> & é",
             "--set-json", 'extra={"n":1.5,"big":1e21,"list":[true,null,"🚀"]}')
    run_helm(any_helm, "upgrade", "rel", str(chart), "-n", namespace, "--set", "message=second\u2028line")
    run_helm(any_helm, "rollback", "rel", "1", "-n", namespace)
    secrets = core_api.list_namespaced_secret(namespace, label_selector="owner=helm,name=rel").items
    releases = [decode_payload(base64.b64decode((s.data or {})["release"])) for s in secrets]
    assert sorted(r["version"] for r in releases) == [1, 2, 3]
    _compare(flux_oracle_process, releases)
    for rel in releases:
        obs = observation_from_release(rel)
        snap = Snapshot.from_observation(obs)
        assert (snap.api_version, snap.digest) == (SNAPSHOT_API_VERSION, release_digest(rel))
        assert snap.verifies(obs)
        from_oci = Snapshot.from_observation(obs, "upgrade", OCI_DIGEST)
        assert from_oci.digest == obs.digest_with(OCI_DIGEST) == release_digest(rel, OCI_DIGEST) != snap.digest
        assert from_oci.verifies(obs)
    assert any(json.dumps(h["events"]) == '["test"]' for h in releases[0]["hooks"])
