"""Install: ``helm install`` of a package whose release is absent (Flux's Install reconciler)."""

from __future__ import annotations

import dataclasses

from engine.helm import InstallOptions
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
        req.status = dataclasses.replace(req.status, last_attempted_release_action="install")
        opts = InstallOptions(
            timeout=spec.timeout,
            wait=not spec.install.disable_wait,
            create_namespace=spec.install.create_namespace,
            disable_hooks=spec.install.disable_hooks,
            # Helm refuses a name still held by an uninstalled release unless told to replace it.
            replace=spec.install.replace or (before is not None and before.status == "uninstalled"),
            labels=req.release_labels,
            post_renderer=req.post_renderer,
        )
        self.ctx.events(self.name, "started", f"installing {req.chart.name}@{req.chart.version}", ())
        async with ObservedReleases(self.ctx, spec.storage_ns, release, ns) as seen:
            with self.ctx.quiet(ns, release):
                error = await run_helm(lambda: self.ctx.helm.install(release, ns, req.chart.path, req.values, opts))
        record(req, seen.observed)
        written = newer(seen, before)
        if error is not None or written is None or written.status != "deployed":
            reason = error.message if error else f"stored as {written.status}" if written else "nothing stored"
            message = f"Helm install failed for release {release_ref(req, written)}: {reason}"
            set_conditions(req, (cond.RELEASED, False, cond.INSTALL_FAILED, message))
            self.ctx.events(self.name, "failed", message, error.tail if error else ())
            if written is None:
                raise ActionFailed(message)
            count_failure(req)
            return outcome(self.name, False, message, written, error)
        message = (f"Helm install succeeded for release {release_ref(req, written.version)} "
                   f"with chart {req.chart.name}@{req.chart.version}")
        set_conditions(req, (cond.RELEASED, True, cond.INSTALL_SUCCEEDED, message))
        drop_conditions(req, cond.REMEDIATED, cond.TEST_SUCCESS)
        self.ctx.events(self.name, "succeeded", message, ())
        return outcome(self.name, True, message, written)
