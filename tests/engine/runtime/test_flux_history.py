"""A Package's ``status.history`` entries in the shape of helm-controller's ``v2.Snapshot`` (api/v2
snapshot_types.go; internal/release/observation.go ``ObservedToSnapshot`` and ``TestHooksFromRelease``)."""

from __future__ import annotations

from engine.runtime.cluster.object_status import flux_test_hooks
from engine.storage import Snapshot, TestHookRun, observation_from_release
from tests.storage_records import release


def test_test_hooks_read_as_fluxs_test_hook_status() -> None:
    """``lastStarted``/``lastCompleted`` are ``metav1.Time`` (seconds, UTC; ``null`` when unset), ``phase`` is
    left out when empty, keyed by the hook's name."""
    snap = Snapshot.from_observation(observation_from_release(release(version=2)))
    snap = Snapshot(**{**snap.__dict__, "test_hooks": (
        TestHookRun("web-test", "Succeeded", "2026-11-30T10:06:00.123456789+01:00", "2026-11-30T10:06:05Z"),
        TestHookRun("web-other", "", "", ""))})
    assert flux_test_hooks(snap) == {
        "web-test": {"lastStarted": "2026-11-30T09:06:00Z", "lastCompleted": "2026-11-30T10:06:05Z",
                     "phase": "Succeeded"},
        "web-other": {"lastStarted": None, "lastCompleted": None},
    }
