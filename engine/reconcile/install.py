"""Install: ``helm install`` of a package whose release is absent (Flux's Install reconciler)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from engine.helm.crds import prepare_crds
from engine.package.model import InstallSpec
from engine.reconcile import conditions as cond
from engine.reconcile.action import ReleaseReconciler
from engine.reconcile.options import install_options
from engine.reconcile.request import Request
from engine.resolve.release import crd_labels


class Install(ReleaseReconciler):
    """Type ``release``. A failure that stored a release counts against the install remediation."""

    name = "install"
    verb = "installing"
    reasons = (cond.INSTALL_SUCCEEDED, cond.INSTALL_FAILED)

    def section(self, req: Request) -> InstallSpec:
        return req.spec.install

    def helm_call(self, req: Request) -> Callable[[], Awaitable[object]]:
        ns, release = req.key
        before = self.latest(req)
        # Helm refuses a name still held by an uninstalled release unless told to replace it.
        opts = install_options(req.spec, labels=req.release_labels, post_renderer=req.post_renderer,
                               replace=before is not None and before.status == "uninstalled")
        async def call() -> object:
            await prepare_crds(self.ctx.api, req.chart.path, req.spec.crds.install, install=True,
                               timeout=req.spec.timeout, values=req.values, as_user=opts.kube_as_user,
                               labels=crd_labels(req.spec))
            return await self.ctx.helm.install(release, ns, req.chart.path, req.values, opts)
        return call
