"""Where a release stands: the release state, decided in DESIGN's order (after Flux).

Pure: it reads the request (spec, chart, spec digest, engine status) and the
latest stored observation; the caller supplies drift detection lazily so it
only runs when everything else is in sync.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engine import labels
from engine.reconcile.request import Request
from engine.storage.helmtime import helm_time as helm_time  # re-exported: next_action asks it here
from engine.storage.observation import PENDING_STATUSES, Observation
from engine.storage.snapshot import Snapshot

ABSENT = "Absent"
LOCKED = "Locked"
UNMANAGED = "Unmanaged"
FAILED = "Failed"
OUT_OF_SYNC = "OutOfSync"
UNTESTED = "Untested"
DRIFTED = "Drifted"
IN_SYNC = "InSync"
UNKNOWN = "Unknown"
STALLED = "Stalled"


@dataclass(frozen=True)
class ReleaseState:
    """A release state (one of the constants above) and why."""

    status: str
    reason: str


def determine_state(
    req: Request,
    latest: Observation | None,
    drift: Callable[[], bool] | None = None,
) -> ReleaseState:
    """Decide the release state, in this order (DESIGN, "Reconcile"):

    no release → Absent; pending-* → Locked; no history of ours → Absent if
    uninstalled, else Unmanaged; latest stored release differs from our latest
    snapshot (digest) → Unmanaged; failed → Failed; uninstalled → Absent;
    deployed and chart or values changed (or, with the release service: the
    rendered manifest changed, the release is leaving maintenance, or its
    monitor finds resources absent) → OutOfSync; tests enabled and not
    run → Untested; a test failed under an active remediation that does not
    ignore test failures → Failed; drift detection on and drift found →
    Drifted; else InSync. Any other stored status → Unknown.
    """
    if latest is None:
        return ReleaseState(ABSENT, "no release in storage")
    if latest.status in PENDING_STATUSES:
        return ReleaseState(LOCKED, f"release revision {latest.version} is {latest.status}")
    ours = req.status.history.latest()
    if ours is None:
        if latest.status == "uninstalled":
            return ReleaseState(ABSENT, "found an uninstalled release in storage")
        return ReleaseState(UNMANAGED, "found a release in storage that helmdeck did not make")
    if Snapshot.from_observation(latest).digest != ours.digest:
        return ReleaseState(UNMANAGED, f"release revision {latest.version} changed outside helmdeck "
                                       "(it does not match the last snapshot)")
    if latest.status == "failed":
        return ReleaseState(FAILED, f"release revision {latest.version} failed")
    if latest.status == "uninstalled":
        return ReleaseState(ABSENT, "release is uninstalled")
    if latest.status != "deployed":
        return ReleaseState(UNKNOWN, f"cannot decide for a release with status {latest.status}")
    if latest.chart_name != req.chart.name or latest.chart_version != req.chart.version:
        return ReleaseState(OUT_OF_SYNC, f"chart changed from {latest.chart_name}@{latest.chart_version} "
                                         f"to {req.chart.name}@{req.chart.version}")
    if latest.label_map.get(labels.SPEC_DIGEST) != req.spec_digest:
        return ReleaseState(OUT_OF_SYNC, "values or chart files changed")
    checksum = req.release_labels.get(labels.MANIFEST_CHECKSUM)
    if checksum and latest.label_map.get(labels.MANIFEST_CHECKSUM) != checksum:
        return ReleaseState(OUT_OF_SYNC, "the rendered manifest changed")
    want = req.release_labels.get(labels.MAINTENANCE)
    if want is not None and latest.label_map.get(labels.MAINTENANCE, "false") != want:
        return ReleaseState(OUT_OF_SYNC, "entering maintenance" if want == "true" else "leaving maintenance")
    if req.absent:
        return ReleaseState(OUT_OF_SYNC, f"absent resources: {', '.join(req.absent[:5])}")
    test = req.spec.test
    # A chart without test hooks has nothing to run: it counts as tested.
    if test.enable and ours.test_hooks and not ours.has_been_tested():
        return ReleaseState(UNTESTED, "release has not been tested")
    if (test.enable and req.active_remediation() is not None and not test.ignore_failures
            and ours.has_test_in_phase("Failed")):
        return ReleaseState(FAILED, "release has failed tests")
    if req.spec.drift_detection != "disabled" and drift is not None and drift():
        return ReleaseState(DRIFTED, "cluster state differs from the release manifest")
    return ReleaseState(IN_SYNC, "release is in sync")

