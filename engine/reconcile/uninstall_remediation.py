"""UninstallRemediation: uninstall a failed release so the next pass installs afresh (Flux's)."""

from __future__ import annotations

from engine.helm import UninstallOptions
from engine.reconcile import conditions as cond
from engine.reconcile.action import (
    ActionContext,
    ReconcilerType,
    observed_run,
    outcome,
    release_ref,
    set_conditions,
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
        spec = req.spec
        ns, release = req.key
        opts = UninstallOptions(timeout=spec.timeout, wait=not spec.uninstall.disable_wait,
                                keep_history=spec.uninstall.keep_history,
                                disable_hooks=spec.uninstall.disable_hooks)
        self.ctx.events(self.name, "started", "uninstalling the failed release", ())
        _, error = await observed_run(
            self.ctx, req, self.ctx.paused, lambda: self.ctx.helm.uninstall(release, ns, opts))
        latest = self.ctx.observer.latest(ns, release)
        gone = latest is None or latest.status == "uninstalled"
        if error is not None or not gone:
            reason = error.message if error else f"revision still {latest.status if latest else '?'}"
            message = f"Helm uninstall remediation failed for release {release_ref(req, None)}: {reason}"
            set_conditions(req, (cond.REMEDIATED, False, cond.UNINSTALL_FAILED, message))
            self.ctx.events(self.name, "failed", message, error.tail if error else ())
            raise ActionFailed(message)
        message = f"Helm uninstall remediation succeeded for release {release_ref(req, None)}"
        set_conditions(req, (cond.REMEDIATED, True, cond.UNINSTALL_SUCCEEDED, message))
        self.ctx.events(self.name, "succeeded", message, ())
        return outcome(self.name, True, message, latest)
