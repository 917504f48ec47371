"""Upgrade: ``helm upgrade`` to the package's chart and values (Flux's Upgrade reconciler)."""

from __future__ import annotations

from engine.helm.options import upgrade_options
from engine.reconcile import conditions as cond
from engine.reconcile.action import ActionContext, ReconcilerType, release_action
from engine.reconcile.request import Request
from engine.reconcile.status import ActionOutcome


class Upgrade:
    """Type ``release``. A failure that stored a release counts against the upgrade remediation."""

    name = "upgrade"
    type: ReconcilerType = "release"

    def __init__(self, ctx: ActionContext):
        self.ctx = ctx

    async def reconcile(self, req: Request) -> ActionOutcome:
        spec = req.spec
        ns, release = req.key
        opts = upgrade_options(spec, labels=req.release_labels, post_renderer=req.post_renderer,
                               force_conflicts=req.force_conflicts)
        return await release_action(
            self.ctx, req, self.name, "upgrading to",
            lambda: self.ctx.helm.upgrade(release, ns, req.chart.path, req.values, opts),
            succeeded=cond.UPGRADE_SUCCEEDED, failed=cond.UPGRADE_FAILED,
        )
