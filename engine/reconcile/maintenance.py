"""Maintenance: the pass of a package in ``NoResourceReconciliation`` (after nelm's Service.Upgrade).

In maintenance only the release service acts: entering costs one upgrade
that stamps the maintenance label on the release and its resources; after
that nothing is rendered or upgraded, and the reconcile loop neither
upgrades, remediates nor corrects drift. Like
:class:`~engine.reconcile.atomic.AtomicRelease` it runs a whole pass and
returns a :class:`~engine.reconcile.atomic.PassResult`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from engine.base import wire
from engine.base.fields import PackageError
from engine.helm import HelmError
from engine.package.model import PackageSpec
from engine.reconcile import conditions as cond
from engine.reconcile import state as st
from engine.reconcile.action import ObservedReleases, Reconciler, drop_conditions, fenced, record, set_conditions
from engine.reconcile.atomic import PassResult
from engine.reconcile.request import Request
from engine.reconcile.status import ActionOutcome


class ServiceUpgrade(Protocol):
    """What the pass needs of the release service's upgrade result."""

    @property
    def action(self) -> str: ...
    @property
    def revision(self) -> int | None: ...


class MaintenanceService(Protocol):
    """The release service's smart upgrade (engine.service.ReleaseService.upgrade)."""

    async def upgrade(self, namespace: str, package: PackageSpec, *,
                      release_labels: Mapping[str, str] | None = None) -> ServiceUpgrade: ...


# Release labels of the request the service stamps as well (its own labels cover the rest).
_PASSED_LABELS = (wire.SPEC_DIGEST, wire.PACKAGE_SET)
IN_MAINTENANCE = "package is in maintenance (NoResourceReconciliation): the release is left as it is"


@dataclass
class Maintenance(Reconciler):
    """One pass of a package in maintenance (a pass, as AtomicRelease's, not an action of one type).

    Never raises for helm or package errors.
    """

    name = "maintenance"

    service: MaintenanceService

    async def reconcile(self, req: Request) -> PassResult:
        """Run the service's upgrade (a no-op once the release carries the label) and report the state.

        Ready is Unknown (reason InMaintenance) and Reconciling is dropped;
        a failure of the service's upgrade ends the pass with ``error``.
        """
        spec = req.spec
        outcomes: tuple[ActionOutcome, ...] = ()
        await fenced(self.ctx, req, self.name)
        async with ObservedReleases(self.ctx, req) as seen:
            try:
                extra = {k: v for k, v in req.release_labels.items() if k in _PASSED_LABELS}
                result = await self.service.upgrade(spec.release_namespace, spec, release_labels=extra)
            except (HelmError, PackageError) as exc:
                message = f"entering maintenance failed: {exc}"
                self.ctx.events(self.name, "failed", message, getattr(exc, "tail", ()))
                return PassResult(st.FAILED, "error", message)
        record(req, seen.observed, result.action)
        if result.action in ("install", "upgrade"):
            message = (f"entered maintenance: revision {result.revision} stamps the maintenance label; "
                       "resources are no longer reconciled")
            self.ctx.events(self.name, "succeeded", message, ())
            outcomes = (ActionOutcome(self.name, True, message, result.revision, (), time.time()),)
        set_conditions(req, (cond.READY, None, cond.IN_MAINTENANCE, IN_MAINTENANCE))
        drop_conditions(req, cond.RECONCILING)
        return PassResult(st.determine_state(req, self.latest(req)).status, "interval", IN_MAINTENANCE, outcomes)
