"""A Package's ``status.history`` entries in the shape of helm-controller's ``v2.Snapshot`` (api/v2
snapshot_types.go; internal/release/observation.go ``ObservedToSnapshot`` and ``TestHooksFromRelease``)."""

from __future__ import annotations

from engine.reconcile.status import EngineStatus
from engine.runtime.cluster.object_status import flux_snapshot, flux_status, flux_test_hooks
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


def test_storage_namespace_is_where_the_release_was_recorded() -> None:
    """``status.storageNamespace`` is what the last pass recorded (``EngineStatus.storage_namespace``), not the
    spec's: helm-controller v1.6.3 internal/controller/helmrelease_controller.go ``reconcileRelease`` sets it
    after its release-target check and before any action, and clears it after uninstalling a changed target (and
    in ``reconcileReleaseDeletion``); api/v2 ``HelmReleaseStatus.StorageNamespace`` is omitted empty. A Package
    whose spec now names another target showed the new namespace while its release was still in the old one."""
    assert flux_status(EngineStatus(storage_namespace="apps"), 3)["storageNamespace"] == "apps"
    # None recorded (no pass yet, or the old target uninstalled): null, which the status merge patch removes.
    assert flux_status(EngineStatus(), 3)["storageNamespace"] is None
    assert flux_status(None, 3)["storageNamespace"] is None
