"""Install: ``helm install`` of a package whose release is absent (Flux's Install reconciler)."""

from __future__ import annotations

from engine.helm.options import install_options
from engine.reconcile import conditions as cond
from engine.reconcile.action import ActionContext, ReconcilerType, release_action
from engine.reconcile.request import Request
from engine.reconcile.status import ActionOutcome


class Install:
    """Type ``release``. A failure that stored a release counts against the install remediation."""

    name = "install"
    type: ReconcilerType = "release"

    def __init__(self, ctx: ActionContext):
        self.ctx = ctx

    async def reconcile(self, req: Request) -> ActionOutcome:
        spec = req.spec
        ns, release = req.key
        before = self.ctx.observer.latest(ns, release)
        # Helm refuses a name still held by an uninstalled release unless told to replace it.
        opts = install_options(spec, labels=req.release_labels, post_renderer=req.post_renderer,
                               replace=before is not None and before.status == "uninstalled")
        return await release_action(
            self.ctx, req, self.name, "installing",
            lambda: self.ctx.helm.install(release, ns, req.chart.path, req.values, opts),
            succeeded=cond.INSTALL_SUCCEEDED, failed=cond.INSTALL_FAILED,
        )
