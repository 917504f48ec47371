"""What to run next for a release state (after Flux's ``actionForState``).

Pure: decides nothing about the release's content (that is
:func:`engine.reconcile.state.determine_state`'s), only what a state asks for.
Returns an action name or None, or raises a named error that ends the
pass. Action names: ``install``, ``upgrade``, ``test``, ``rollback``
(remediation), ``uninstall-remediation``, ``unlock``, ``correct-drift``, ``uninstall`` (the release target
changed: the install follows on the next pass).
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from engine.package.model import InstallSpec, UpgradeSpec
from engine.reconcile import state as st
from engine.reconcile.errors import ExceededMaxRetries, MissingRollbackTarget, ReleaseLocked
from engine.reconcile.request import Request
from engine.storage.observation import Observation
from engine.storage.snapshot import History

INSTALL = "install"
UPGRADE = "upgrade"
TEST = "test"
ROLLBACK = "rollback"
UNINSTALL_REMEDIATION = "uninstall-remediation"
UNLOCK = "unlock"
CORRECT_DRIFT = "correct-drift"
UNINSTALL = "uninstall"
# Slack on top of the package timeout before a pending release counts as stale.
STALE_GRACE = 5.0


def next_action(
    req: Request,
    state: st.ReleaseState,
    latest: Observation | None,
    *,
    action_running: bool = False,
    now: float | None = None,
    stored: Mapping[int, Observation] | None = None,
) -> str | None:
    """The action for ``state`` (see module docstring). ``stored``: the release's revisions in storage by
    version (None: not looked at), to verify a rollback target before rolling back to it.

    Raises ExceededMaxRetries (stall: retries used up), MissingRollbackTarget
    (stall) and ReleaseLocked (a pending release that is not stale yet).
    ``action_running`` says whether an action of ours runs on this release.
    """
    status = state.status
    if state.maintenance:
        return None  # held in maintenance: not even a forced upgrade (nelm's Service)
    if status == st.IN_SYNC:
        return UPGRADE if req.force else None
    if status == st.LOCKED:
        if action_running or latest is None:
            raise ReleaseLocked(f"{state.reason}; an action of helmdeck's is running on it")
        started = st.helm_time(latest.last_deployed) or st.helm_time(latest.first_deployed)
        age = (now if now is not None else time.time()) - (started or 0.0)
        limit = req.spec.action_timeout(latest.status) + STALE_GRACE
        if age <= limit:
            raise ReleaseLocked(f"{state.reason} for {age:.0f}s; unlocked only after {limit:.0f}s (its timeout)",
                                retry_after=limit - age + 0.5)
        return UNLOCK
    if status == st.TARGET_CHANGED:
        return UNINSTALL
    if status == st.ABSENT:
        return _unless_exhausted(req, INSTALL)
    if status == st.UNMANAGED:
        return UPGRADE
    if status == st.OUT_OF_SYNC:
        return _unless_exhausted(req, UPGRADE)
    if status == st.DRIFTED:
        return CORRECT_DRIFT if req.spec.drift_detection == "enabled" else None
    if status == st.UNTESTED:
        return TEST
    if status == st.FAILED:
        return _for_failed(req, stored)
    raise ReleaseLocked(state.reason)  # Unknown: wait and look again


def _unless_exhausted(req: Request, action: str, where: str = "") -> str:
    """``action`` (install or upgrade), or ExceededMaxRetries when its retries are used up and it is not
    forced (a force runs it all the same, its counters kept, as Flux's helm-controller forces an install or
    upgrade "while out of retries": internal/reconcile/atomic_release.go, ``actionForState``)."""
    if not req.force and req.retries_exhausted(req.spec.install if action == INSTALL else req.spec.upgrade):
        raise ExceededMaxRetries(f"{action} retries exhausted: cannot {action} release{where}")
    return action


def _for_failed(req: Request, stored: Mapping[int, Observation] | None) -> str:
    if req.spec.maintenance:
        # In maintenance nothing is remediated: as nelm's Service, a release not deployed is upgraded.
        return _unless_exhausted(req, UPGRADE, " in maintenance")
    if req.active_retry() is not None:
        # RetryOnFailure: the failed release is upgraded, as a forced upgrade with no retries would be: no
        # remediation, no retry budget (helm-controller internal/reconcile/atomic_release.go, actionForState,
        # ReleaseStatusFailed); the atomic loop spaces the attempts by the retry interval.
        return UPGRADE
    remediation = _remediation(req)
    if remediation is None:
        return UPGRADE
    if isinstance(remediation, InstallSpec) or remediation.strategy == "uninstall":
        return UNINSTALL_REMEDIATION
    target = req.status.history.previous(req.spec.test.ignore_failures)
    if target is None:
        raise MissingRollbackTarget("no earlier deployed or superseded revision to roll back to")
    if stored is not None and ((found := stored.get(target.version)) is None or not target.verifies(found)):
        # Gone from storage or changed there: upgrade again instead, as Flux's helm-controller does
        # (internal/reconcile/atomic_release.go, actionForState, after internal/action/verify.go VerifySnapshot).
        return UPGRADE
    return ROLLBACK


def _remediation(req: Request) -> InstallSpec | UpgradeSpec | None:
    """The remediation a failed release (no RetryOnFailure, not in maintenance) gets now, None when it is upgraded
    instead: no remediation in play, or the failure predates a spec change, or a forced upgrade (no further checks,
    as Flux's ``actionForState``). Raises ExceededMaxRetries when its retries are used up and the last failure is
    not remediated."""
    remediation = req.active_remediation()
    if remediation is None or req.failure_count(remediation) <= 0 or req.force:
        return None
    if req.retries_exhausted(remediation) and not remediation.remediate_last:
        raise ExceededMaxRetries("retries exhausted: ignoring the last failure")
    return remediation


def trimmed_history(req: Request, state: st.ReleaseState) -> History:
    """The status history as helm-controller v1.6.3 trims it when it decides the next action for ``state``
    (internal/reconcile/atomic_release.go ``actionForState``; api/v2 snapshot_types.go): in sync, and for a failed
    release about to be remediated, down to the rollback target (``Snapshots.Truncate``, test failures ignored as
    ``test.ignoreFailures`` says); under RetryOnFailure, in sync or failed, to the 5 newest
    (``TruncateIgnoringPreviousSnapshots``). Else, and in maintenance, as it is. ``spec.maxHistory`` plays no
    part: it bounds helm's stored revisions. Pure."""
    history = req.status.history
    if state.maintenance or req.spec.maintenance or state.status not in (st.IN_SYNC, st.FAILED):
        return history
    if req.active_retry() is not None:
        return history.truncate_ignoring_previous()
    if state.status == st.FAILED:
        try:
            if _remediation(req) is None:
                return history
        except ExceededMaxRetries:
            return history
    return history.truncate(req.spec.test.ignore_failures)
