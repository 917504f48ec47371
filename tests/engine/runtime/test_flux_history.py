"""A Package's ``status.history`` entries in the shape of helm-controller's ``v2.Snapshot`` (api/v2
snapshot_types.go; internal/release/observation.go ``ObservedToSnapshot`` and ``TestHooksFromRelease``)."""

from __future__ import annotations

from engine.runtime.cluster.object_status import flux_snapshot, flux_test_hooks
from engine.storage import Snapshot, observation_from_release
from tests.storage_records import release


def test_test_hooks_read_as_fluxs_test_hook_status() -> None:
    """``lastStarted``/``lastCompleted`` are ``metav1.Time`` (seconds, UTC; ``null`` when unset), ``phase`` is
    left out when empty, keyed by the hook's name."""
    rel = release(version=2)
    rel["hooks"][0]["last_run"]["started_at"] = "2026-11-30T10:06:00.123456789+01:00"
    rel["hooks"].append({"name": "web-other", "events": ["test"], "last_run": {"phase": ""}})
    snap = Snapshot.from_observation(observation_from_release(rel))
    assert flux_test_hooks(snap) == {
        "web-test": {"lastStarted": "2026-11-30T09:06:00Z", "lastCompleted": "2026-11-30T10:06:05Z",
                     "phase": "Succeeded"},
        "web-other": {"lastStarted": None, "lastCompleted": None},
    }


def test_an_entry_has_fluxs_fields_and_times() -> None:
    """api/v2 ``Snapshot``'s JSON: ``metav1.Time`` in UTC to the second (helm stored nanoseconds and an offset),
    a zero ``deleted`` left out (``null``, dropped by the API server), the ``omitempty`` fields ``action``,
    ``appVersion`` and ``ociDigest`` written when set; ``chart`` is helmdeck's own."""
    obs = observation_from_release(release(version=2, status="uninstalled") | {
        "info": {**release()["info"], "status": "uninstalled", "deleted": "2026-12-01T00:30:00.9-02:00"}})
    oci = "sha256:" + "a" * 64
    entry = flux_snapshot(Snapshot.from_observation(obs, "uninstall", oci))
    assert entry == {
        "apiVersion": "v2", "digest": obs.digest_with(oci), "name": "web", "namespace": "demo", "version": 2,
        "status": "uninstalled", "action": "uninstall", "chart": "web@0.2.0", "chartName": "web",
        "chartVersion": "0.2.0", "appVersion": "1.27", "configDigest": obs.config_digest,
        "firstDeployed": "2026-11-30T10:00:00Z", "lastDeployed": "2026-11-30T09:05:00Z",
        "deleted": "2026-12-01T02:30:00Z", "ociDigest": oci, "testHooks": flux_test_hooks(
            Snapshot.from_observation(obs))}
    assert obs.digest_with(oci) != obs.digest == obs.digest_with("")
    bare = flux_snapshot(Snapshot.from_observation(observation_from_release(release(
        chart={"metadata": {"name": "web", "version": "1.0.0"}}, hooks=[]))))
    assert not {"action", "appVersion", "deleted", "ociDigest", "testHooks"} & set(bare)
