"""RollbackRemediation: roll a failed release back to the previous good snapshot (Flux's)."""

from __future__ import annotations

from engine.helm.options import rollback_options
from engine.reconcile import conditions as cond
from engine.reconcile.action import (
    ActionContext,
    ReconcilerType,
    newer,
    observed_run,
    outcome,
    release_ref,
    set_conditions,
)
from engine.reconcile.errors import ActionFailed, MissingRollbackTarget
from engine.reconcile.request import Request
from engine.reconcile.status import ActionOutcome


class RollbackRemediation:
    """Type ``remediate``. The target is History.previous (skipping failed tests unless ignored)."""

    name = "rollback"
    type: ReconcilerType = "remediate"

    def __init__(self, ctx: ActionContext):
        self.ctx = ctx

    async def reconcile(self, req: Request) -> ActionOutcome:
        spec = req.spec
        ns, release = req.key
        target = req.status.history.previous(spec.test.ignore_failures)
        if target is None:
            raise MissingRollbackTarget("no earlier deployed or superseded revision to roll back to")
        before = self.ctx.observer.latest(ns, release)
        opts = rollback_options(spec)
        self.ctx.events(self.name, "started", f"rolling back to revision {target.version}", ())
        seen, error = await observed_run(
            self.ctx, req, self.ctx.paused, lambda: self.ctx.helm.rollback(release, ns, target.version, opts))
        written = newer(seen, before)
        if error is not None or written is None or written.status != "deployed":
            reason = error.message if error else f"stored as {written.status}" if written else "nothing stored"
            message = f"Helm rollback to revision {target.version} failed for {release_ref(req, None)}: {reason}"
            set_conditions(req, (cond.REMEDIATED, False, cond.ROLLBACK_FAILED, message))
            self.ctx.events(self.name, "failed", message, error.tail if error else ())
            if written is None:
                raise ActionFailed(message)
            return outcome(self.name, False, message, written, error)
        message = (f"Helm rollback to revision {target.version} succeeded for release "
                   f"{release_ref(req, written.version)}")
        set_conditions(req, (cond.REMEDIATED, True, cond.ROLLBACK_SUCCEEDED, message))
        self.ctx.events(self.name, "succeeded", message, ())
        return outcome(self.name, True, message, written)
