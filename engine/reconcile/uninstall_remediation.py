"""UninstallRemediation: uninstall a failed release so the next pass installs afresh (Flux's)."""

from __future__ import annotations

from engine.reconcile import conditions as cond
from engine.reconcile.action import (
    ActionContext,
    ReconcilerType,
    outcome,
    release_ref,
    set_conditions,
    uninstall_release,
)
from engine.reconcile.errors import ActionFailed
from engine.reconcile.request import Request
from engine.reconcile.status import ActionOutcome


class UninstallRemediation:
    """Type ``remediate``; install remediation always takes this path."""

    name = "uninstall-remediation"
    type: ReconcilerType = "remediate"

    def __init__(self, ctx: ActionContext):
        self.ctx = ctx

    async def reconcile(self, req: Request) -> ActionOutcome:
        error, latest = await uninstall_release(self.ctx, req, self.name, "uninstalling the failed release")
        if error is not None or (latest is not None and latest.status != "uninstalled"):
            reason = error.message if error else f"revision still {latest.status if latest else '?'}"
            message = f"Helm uninstall remediation failed for release {release_ref(req, None)}: {reason}"
            set_conditions(req, (cond.REMEDIATED, False, cond.UNINSTALL_FAILED, message))
            self.ctx.events(self.name, "failed", message, error.tail if error else ())
            raise ActionFailed(message)
        message = f"Helm uninstall remediation succeeded for release {release_ref(req, None)}"
        set_conditions(req, (cond.REMEDIATED, True, cond.UNINSTALL_SUCCEEDED, message))
        self.ctx.events(self.name, "succeeded", message, ())
        return outcome(self.name, True, message, latest)
