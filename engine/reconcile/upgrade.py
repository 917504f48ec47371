"""Upgrade: ``helm upgrade`` to the package's chart and values (Flux's Upgrade reconciler)."""

from __future__ import annotations

import dataclasses

from engine.helm import UpgradeOptions
from engine.reconcile import conditions as cond
from engine.reconcile.action import (
    ActionContext,
    ObservedReleases,
    ReconcilerType,
    count_failure,
    drop_conditions,
    newer,
    outcome,
    record,
    release_ref,
    run_helm,
    set_conditions,
)
from engine.reconcile.errors import ActionFailed
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
        before = self.ctx.observer.latest(ns, release)
        req.status = dataclasses.replace(req.status, last_attempted_release_action="upgrade")
        opts = UpgradeOptions(
            timeout=spec.timeout,
            wait=not spec.upgrade.disable_wait,
            force=spec.upgrade.force,
            cleanup_on_fail=spec.upgrade.cleanup_on_fail,
            reuse_values=spec.upgrade.preserve_values,
            reset_values=not spec.upgrade.preserve_values,
            disable_hooks=spec.upgrade.disable_hooks,
            max_history=spec.max_history,
            labels=req.release_labels,
            post_renderer=req.post_renderer,
            force_conflicts=req.force_conflicts,
        )
        self.ctx.events(self.name, "started", f"upgrading to {req.chart.name}@{req.chart.version}", ())
        async with ObservedReleases(self.ctx, spec.storage_ns, release, ns) as seen:
            with self.ctx.quiet(ns, release):
                error = await run_helm(lambda: self.ctx.helm.upgrade(release, ns, req.chart.path, req.values, opts))
        record(req, seen.observed)
        written = newer(seen, before)
        if written is not None and before is not None and written.version <= before.version:
            written = None  # only an older revision changed (superseded): no new release
        if error is not None or written is None or written.status != "deployed":
            reason = error.message if error else f"stored as {written.status}" if written else "nothing stored"
            message = f"Helm upgrade failed for release {release_ref(req, written)}: {reason}"
            set_conditions(req, (cond.RELEASED, False, cond.UPGRADE_FAILED, message))
            self.ctx.events(self.name, "failed", message, error.tail if error else ())
            if written is None:
                raise ActionFailed(message)
            count_failure(req)
            return outcome(self.name, False, message, written, error)
        message = (f"Helm upgrade succeeded for release {release_ref(req, written.version)} "
                   f"with chart {req.chart.name}@{req.chart.version}")
        set_conditions(req, (cond.RELEASED, True, cond.UPGRADE_SUCCEEDED, message))
        drop_conditions(req, cond.REMEDIATED, cond.TEST_SUCCESS)
        self.ctx.events(self.name, "succeeded", message, ())
        return outcome(self.name, True, message, written)
