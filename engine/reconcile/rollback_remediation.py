"""RollbackRemediation: roll a failed release back to the previous good snapshot (Flux's)."""

from __future__ import annotations

from engine.reconcile import conditions as cond
from engine.reconcile.action import Reconciler, newer, not_deployed, observed_run, outcome, release_ref
from engine.reconcile.errors import ActionFailed, MissingRollbackTarget
from engine.reconcile.options import rollback_options
from engine.reconcile.request import Request
from engine.reconcile.status import ActionOutcome


class RollbackRemediation(Reconciler):
    """Type ``remediate``. The target is History.previous (skipping failed tests unless ignored)."""

    name = "rollback"
    type = "remediate"

    async def reconcile(self, req: Request) -> ActionOutcome:
        ns, release = req.key
        target = req.status.history.previous(req.spec.test.ignore_failures)
        if target is None:
            raise MissingRollbackTarget("no earlier deployed or superseded revision to roll back to")
        before = self.latest(req)
        opts = rollback_options(req.spec, method=self.apply_method(req, target.version))
        await self.begin(req, f"rolling back to revision {target.version}")
        seen, error = await observed_run(
            self.ctx, req, self.ctx.paused, lambda: self.ctx.helm.rollback(release, ns, target.version, opts),
            action=self.name)
        written = newer(seen, before)
        reason = not_deployed(error, written)
        if reason is not None:
            message = self.failed(
                req, f"Helm rollback to revision {target.version} failed for {release_ref(req, None)}: {reason}",
                (cond.REMEDIATED, False, cond.ROLLBACK_FAILED), error)
            if written is None:
                raise ActionFailed(message)
            return outcome(self.name, False, message, written, error)
        message = (f"Helm rollback to revision {target.version} succeeded for release "
                   f"{release_ref(req, written)}")
        return self.succeeded(req, message, written, (cond.REMEDIATED, True, cond.ROLLBACK_SUCCEEDED))
