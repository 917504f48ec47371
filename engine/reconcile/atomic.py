"""The atomic release loop (after Flux's AtomicRelease).

One pass: determine the release state, pick the next action, run it, and
loop. The state is decided spec first (:mod:`engine.reconcile.state`): a
pass renders only when the spec digest changed (to compare manifest
checksums): an install or upgrade labels the revision it made with its
checksum afterwards, from helm's own answer (one helm process); a changed
spec that renders the released manifest is adopted on the status, with no
revision. Each action type runs at most once per pass (a second one asks for an
immediate requeue); a remediation ends the pass (requeue at once); retries
exhausted or a missing rollback target stall the package until its spec
changes. Under RetryOnFailure (``spec.install/upgrade.strategy``) a failed release is upgraded, never
remediated, once per retry interval. Failure counters reset when the package's generation, the chart version or
the spec digest differs from what was last attempted (Flux's MustResetFailures).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from engine.helm.cli import go_duration
from engine.reconcile import conditions as cond
from engine.reconcile import next_action as na
from engine.reconcile import state as st
from engine.reconcile.action import (
    ActionContext,
    ActionReconciler,
    ObservedReleases,
    drop_conditions,
    fenced,
    outcome,
    record,
    release_ref,
    set_conditions,
)
from engine.reconcile.correct_drift import CorrectClusterDrift
from engine.reconcile.drift import DriftDetector, DriftItem
from engine.reconcile.errors import ActionFailed, ExceededMaxRetries, MissingRollbackTarget, ReleaseLocked
from engine.reconcile.install import Install
from engine.reconcile.request import Request
from engine.reconcile.rollback_remediation import RollbackRemediation
from engine.reconcile.status import ActionOutcome, FailureCounts
from engine.reconcile.test import Test
from engine.reconcile.uninstall import Uninstall
from engine.reconcile.uninstall_remediation import UninstallRemediation
from engine.reconcile.unlock import Unlock
from engine.reconcile.upgrade import Upgrade
from engine.storage.observation import Observation

Next = Literal["interval", "now", "error", "stop", "soon", "retry"]
# How soon to look again at a release locked by an operation that is not stale yet.
LOCKED_RECHECK = 15.0


@dataclass(frozen=True)
class PassResult:
    """How a pass ended: the release ``state`` (or Stalled), what the queue should do, and why.

    ``next``: "interval" (in sync, or waiting: requeue at the package interval),
    "now" (more work), "error" (backoff), "stop" (stalled: wait for a spec
    change), "soon" (a lock that may turn stale: requeue after LOCKED_RECHECK), "retry" (RetryOnFailure:
    requeue after ``retry_after`` seconds, its retry interval).
    """

    state: str
    next: Next
    message: str
    outcomes: tuple[ActionOutcome, ...] = ()
    drift: tuple[DriftItem, ...] = ()
    retry_after: float | None = None


# The reconciler of each action next_action names (correct-drift needs the drift detector too).
_RECONCILERS: dict[str, Callable[[ActionContext], ActionReconciler]] = {
    na.INSTALL: Install, na.UPGRADE: Upgrade, na.TEST: Test, na.ROLLBACK: RollbackRemediation,
    na.UNINSTALL_REMEDIATION: UninstallRemediation, na.UNLOCK: Unlock, na.UNINSTALL: Uninstall,
}


def helm_refusal(req: Request, action: str | None) -> str | None:
    """Why the pass cannot run ``action`` (a next_action name; None: nothing to run) on ``req``'s release,
    None when it can: every action but unlock (a storage write of helmdeck's own) runs helm's CLI, which
    cannot act on a release stored apart from its namespace (engine.package.identity.storage_apart_reason)."""
    if action is None or action == na.UNLOCK:
        return None
    return req.spec.helm_refusal(action)


class AtomicRelease:
    """Runs passes for requests; one instance serves every package of an engine."""

    def __init__(self, ctx: ActionContext, detector: DriftDetector | None = None):
        self.ctx = ctx
        self.detector = detector

    def _reconciler(self, action: str) -> ActionReconciler:
        if action == na.CORRECT_DRIFT and self.detector is not None:
            return CorrectClusterDrift(self.ctx, self.detector)
        kind = _RECONCILERS.get(action)
        if kind is None:
            raise ValueError(f"no reconciler for action {action!r}")
        return kind(self.ctx)

    @staticmethod
    def reset_on_spec_change(req: Request) -> bool:
        """Reset failure counters (and Stalled) when the package's generation (any change of its spec, e.g.
        its timeout or its retries), its chart version or its spec digest (chart and composed values) differs
        from the last attempt, as Flux's helm-controller does (internal/action/reset.go, ``MustResetFailures``);
        True if reset."""
        s = req.status
        changed = (s.last_attempted_spec_digest != req.spec_digest
                   or s.last_attempted_chart_version != req.chart.version
                   or s.last_attempted_generation != req.spec.generation)
        if changed:
            req.status = dataclasses.replace(
                s, failures=FailureCounts(), last_attempted_spec_digest=req.spec_digest,
                last_attempted_chart_version=req.chart.version, last_attempted_generation=req.spec.generation,
                conditions=cond.delete_condition(s.conditions, cond.STALLED),
            )
        return changed

    def _finish(self, req: Request, result: PassResult) -> PassResult:
        drop_conditions(req, cond.RECONCILING)
        tests_count = req.spec.test.enable and not req.spec.test.ignore_failures
        req.status = dataclasses.replace(
            req.status, conditions=cond.summarize(req.status.conditions, tests_count=tests_count))
        return result

    async def _drift(self, req: Request) -> list[DriftItem]:
        if self.detector is None or req.spec.drift_detection == "disabled":
            return []
        ns, release = req.key
        latest = self.ctx.observer.latest(ns, release)
        if latest is None:
            return []
        record = await asyncio.to_thread(self.ctx.observer.load_release, ns, release, latest.version)
        return await asyncio.to_thread(self.detector.detect, str(record.get("manifest") or ""), ns,
                                       req.spec.drift_ignore)

    @staticmethod
    def _mark_drift(req: Request, drift: list[DriftItem]) -> None:
        """The Drifted condition, with drift detection on: True (DriftDetected, what drifted) or False
        (NoDriftDetected), as Flux's helm-controller marks it (internal/reconcile/atomic_release.go
        ``actionForState``); left as it was with drift detection disabled, as Flux leaves it."""
        if drift:
            ns, release = req.key
            text = "; ".join(i.describe() for i in drift[:5])
            set_conditions(req, (cond.DRIFTED, True, cond.DRIFT_DETECTED,
                                 f"Cluster state of release {ns}/{release} has drifted from the desired state: "
                                 f"{text}"))
        else:
            set_conditions(req, (cond.DRIFTED, False, cond.NO_DRIFT_DETECTED,
                                 "No drift detected against the cluster state"))

    def _retry_later(self, req: Request, state: st.ReleaseState, retry: float, why: str,
                     outcomes: tuple[ActionOutcome, ...]) -> PassResult:
        """End the pass to try again after RetryOnFailure's ``retry`` seconds: the conditions summarised, then
        Reconciling=True (ProgressingWithRetry, "retrying after 5m0s") kept, as Flux's helm-controller ends with
        ErrRetryAfterInterval and requeues after ``GetActiveRetry(...).GetRetryInterval()``
        (internal/reconcile/atomic_release.go ``Reconcile``; internal/controller/helmrelease_controller.go
        ``reconcileRelease``). ``why``: what ended the pass."""
        text = f"retrying after {go_duration(retry)}"
        self._finish(req, PassResult(state.status, "retry", why))
        set_conditions(req, (cond.RECONCILING, True, cond.PROGRESSING_WITH_RETRY, text))
        return PassResult(state.status, "retry", f"{why}; {text}", outcomes, retry_after=retry)

    async def _render_checksum(self, req: Request) -> None:
        """Render once per pass for the manifest checksum (the spec changed: does the manifest?); "" when it
        cannot render (then nothing compares equal, and the upgrade reports the render error)."""
        if req.manifest_checksum is not None:
            return
        checksum = ""
        if self.ctx.checksum is not None:
            try:
                checksum = await self.ctx.checksum(req)
            except Exception as exc:  # any render failure: the release action reports it properly
                self.ctx.events("render", "info", f"cannot render to compare manifests: {exc}", ())
        req.manifest_checksum = checksum

    async def _decide(self, req: Request, latest: Observation | None) -> st.ReleaseState:
        """The state of ``latest`` for ``req``, rendering only when the spec changed; adopts a
        changed spec that renders the released manifest (recorded on the status, no revision)."""
        state = st.determine_state(req, latest)
        if state.render:
            await self._render_checksum(req)
            state = st.determine_state(req, latest)
        if state.adopt and latest is not None and (req.status.adopted_spec_digest, req.status.adopted_revision) \
                != (req.spec_digest, latest.version):
            req.status = dataclasses.replace(req.status, adopted_spec_digest=req.spec_digest,
                                             adopted_revision=latest.version)
            self.ctx.events("upgrade", "info", f"spec changed but renders the manifest of revision "
                            f"{latest.version}: recorded, no new revision", ())
        return state

    async def _record_made(self, req: Request, latest: Observation) -> None:
        """Record ``latest``, a revision made from this spec that the history lacks (``record``: another
        controller replica's helm finished it, or this engine's before a restart), as the install or upgrade it
        was: in the history, Released=True, the last outcome. Under the context's fence (``--shards auto``: the
        claim, which re-reads the persisted status first and clears a silent member's claim after), since it
        writes the status as an action's end does. Raises what the fence raises."""
        action = "install" if latest.description.startswith("Install") else "upgrade"
        await fenced(self.ctx, req, "record")
        record(req, {latest.version: latest}, action)
        message = (f"Helm {action} of release {release_ref(req, latest)} with chart {req.chart.name}@"
                   f"{req.chart.version} was made from this spec before it was kept (helm's storage holds it): "
                   f"recorded, not run again")
        req.status = dataclasses.replace(req.status, last_attempted_release_action=action,
                                         last=outcome(action, True, message, latest))
        drop_conditions(req, cond.REMEDIATED, cond.TEST_SUCCESS)
        set_conditions(req, (cond.RELEASED, True, cond.INSTALL_SUCCEEDED if action == "install"
                             else cond.UPGRADE_SUCCEEDED, message))
        self.ctx.events(action, "info", message, ())

    def _nothing_to_do(self, req: Request, state: st.ReleaseState, latest: Observation | None) -> bool:
        """Is the release in sync with no action due (the next action decided on ``state``)?"""
        if state.status != st.IN_SYNC or req.force or state.maintenance or state.record:
            return False
        try:
            return na.next_action(req, state, latest, now=self.ctx.now()) is None
        except (ExceededMaxRetries, MissingRollbackTarget, ReleaseLocked):
            return False

    async def reconcile(self, req: Request) -> PassResult:
        """Run one pass on ``req`` (its status is updated in place). Never raises for helm failures; a
        cancelled pass leaves its status summarised (Ready from what the cancelled action recorded)."""
        try:
            return await self._pass(req)
        except asyncio.CancelledError:
            self._finish(req, PassResult(st.FAILED, "error", "cancelled"))
            raise

    async def _pass(self, req: Request) -> PassResult:
        self.reset_on_spec_change(req)
        # Set at each pass, as helm-controller's reconcileRelease sets its last attempt values: what an install or
        # upgrade records as its snapshot's ociDigest (History.record).
        req.status = dataclasses.replace(req.status, last_attempted_revision_digest=req.oci_digest)
        if req.force:  # runs past exhausted retries (next_action), its counters kept: Stalled is decided anew
            req.status = dataclasses.replace(
                req.status, conditions=cond.delete_condition(req.status.conditions, cond.STALLED))
        set_conditions(req, (cond.RECONCILING, True, cond.PROGRESSING, "reconciliation in progress"))
        done: set[str] = set()
        outcomes: list[ActionOutcome] = []
        drift: list[DriftItem] = []
        consistent = recorded = False
        while True:
            latest = self.ctx.observer.latest(*req.key)
            state = await self._decide(req, latest)
            if state.status == st.IN_SYNC and not req.force and not state.maintenance:
                drift = await self._drift(req)
                if req.spec.drift_detection != "disabled":
                    self._mark_drift(req, drift)
                if drift:
                    state = st.ReleaseState(st.DRIFTED, "; ".join(i.describe() for i in drift[:5]))
            if not consistent and not self._nothing_to_do(req, state, latest):
                # Act (or stop) on what storage holds now, not on a watch event still in flight: a quorum
                # read of the release's records, then decide again. A release in sync on the observer's
                # view needs none (one API call per package per pass saved): a write still in flight
                # reaches the observer, which queues another pass.
                async with ObservedReleases(self.ctx, req):
                    pass
                consistent = True
                continue
            if state.record and latest is not None and not recorded:
                await self._record_made(req, latest)
                recorded = True
                continue
            if state.status == st.UNMANAGED:
                req.status = dataclasses.replace(req.status, history=req.status.history.clear())
            req.status = dataclasses.replace(req.status, history=na.trimmed_history(req, state))
            try:
                stored = {o.version: o for o in self.ctx.observer.history(*req.key)} \
                    if state.status == st.FAILED else None  # a rollback target is verified there
                action = na.next_action(req, state, latest, now=self.ctx.now(), stored=stored)
            except ExceededMaxRetries as exc:
                set_conditions(req, (cond.STALLED, True, cond.RETRIES_EXCEEDED, str(exc)))
                return self._finish(req, PassResult(st.STALLED, "stop", str(exc), tuple(outcomes)))
            except MissingRollbackTarget as exc:
                set_conditions(req, (cond.STALLED, True, cond.MISSING_ROLLBACK_TARGET, str(exc)))
                return self._finish(req, PassResult(st.STALLED, "stop", str(exc), tuple(outcomes)))
            except ReleaseLocked as exc:
                set_conditions(req, (cond.READY, False, cond.PENDING_RELEASE, str(exc)))
                return self._finish(req, PassResult(state.status, "soon", str(exc), tuple(outcomes),
                                                    retry_after=exc.retry_after))
            if action is None and state.maintenance:
                self._finish(req, PassResult(state.status, "interval", state.reason))
                set_conditions(req, (cond.READY, None, cond.IN_MAINTENANCE, state.reason))
                return PassResult(state.status, "interval", state.reason, tuple(outcomes))
            if action is None:
                if state.status == st.DRIFTED:
                    self.ctx.events("drift", "info", f"drift detected (mode warn): {state.reason}", ())
                drop_conditions(req, cond.STALLED)
                return self._finish(req, PassResult(state.status, "interval", state.reason, tuple(outcomes),
                                                    tuple(drift)))
            refused = helm_refusal(req, action)
            if refused is not None:
                set_conditions(req, (cond.STALLED, True, cond.STORAGE_APART, refused))
                return self._finish(req, PassResult(st.STALLED, "stop", refused, tuple(outcomes)))
            reconciler = self._reconciler(action)
            if reconciler.type in done:
                if (retry := req.active_retry()) is not None:
                    last = outcomes[-1].message if outcomes else state.reason
                    return self._retry_later(req, state, retry, last, tuple(outcomes))
                return self._finish(req, PassResult(state.status, "now",
                                                    f"{reconciler.name} would run twice in one pass: requeue",
                                                    tuple(outcomes)))
            try:
                outcomes.append(await reconciler.reconcile(req))
            except ActionFailed as exc:
                if (retry := req.active_retry()) is not None:  # nothing stored: retried after the interval too
                    return self._retry_later(req, state, retry, str(exc), tuple(outcomes))
                return self._finish(req, PassResult(state.status, "error", str(exc), tuple(outcomes)))
            except MissingRollbackTarget as exc:
                set_conditions(req, (cond.STALLED, True, cond.MISSING_ROLLBACK_TARGET, str(exc)))
                return self._finish(req, PassResult(st.STALLED, "stop", str(exc), tuple(outcomes)))
            req.force = False  # a forced upgrade is done once
            if action == na.UNINSTALL:
                # The release target changed: its history (cleared by the uninstall) and failure counters go,
                # and the install is the next pass's, as Flux's helm-controller requeues after it
                # (internal/controller/helmrelease_controller.go reconcileRelease, ReleaseTargetChanged).
                if outcomes[-1].ok:
                    req.status = dataclasses.replace(req.status, failures=FailureCounts())
                return self._finish(req, PassResult(state.status, "now" if outcomes[-1].ok else "error",
                                                    outcomes[-1].message, tuple(outcomes)))
            if reconciler.type == "release" and outcomes[-1].ok:
                req.absent = ()  # the manifest was just applied: what was absent is back
            if reconciler.type == "remediate":
                return self._finish(req, PassResult(state.status, "now", outcomes[-1].message, tuple(outcomes)))
            done.add(reconciler.type)
