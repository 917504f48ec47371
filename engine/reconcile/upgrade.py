"""Upgrade: ``helm upgrade`` to the package's chart and values (Flux's Upgrade reconciler)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from engine.base import wire
from engine.helm.crds import prepare_crds
from engine.package.model import UpgradeSpec
from engine.reconcile import conditions as cond
from engine.reconcile.action import ReleaseReconciler
from engine.reconcile.options import upgrade_options
from engine.reconcile.request import Request
from engine.resolve.release import crd_labels


class Upgrade(ReleaseReconciler):
    """Type ``release``. A failure that stored a release counts against the upgrade remediation."""

    name = "upgrade"
    verb = "upgrading to"
    reasons = (cond.UPGRADE_SUCCEEDED, cond.UPGRADE_FAILED)

    def section(self, req: Request) -> UpgradeSpec:
        return req.spec.upgrade

    def helm_call(self, req: Request) -> Callable[[], Awaitable[object]]:
        # helm carries the previous revision's labels over: its checksum is dropped, the new one set after.
        stamped = {**req.release_labels, wire.MANIFEST_CHECKSUM: wire.DROPPED}
        last = self.latest(req)
        opts = upgrade_options(req.spec, labels=stamped, post_renderer=req.post_renderer,
                               force_conflicts=req.force_conflicts,
                               server_side=last is not None and last.apply_method == "ssa")
        async def call() -> object:
            await prepare_crds(self.ctx.api, req.chart.path, req.spec.crds.upgrade, install=False,
                               timeout=req.spec.timeout, values=req.values, as_user=opts.kube_as_user,
                               labels=crd_labels(req.spec))
            return await self.ctx.helm.upgrade(req.key[1], req.key[0], req.chart.path, req.values, opts)
        return call
