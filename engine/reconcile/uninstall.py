"""Uninstall: remove the release on request (a pruned package, or the app's uninstall key)."""

from __future__ import annotations

import dataclasses

from engine.reconcile import conditions as cond
from engine.reconcile.action import (
    ActionContext,
    ReconcilerType,
    outcome,
    release_ref,
    set_conditions,
    uninstall_release,
)
from engine.reconcile.request import Request
from engine.reconcile.status import ActionOutcome


class Uninstall:
    """Type ``release``. A missing release is success (idempotent)."""

    name = "uninstall"
    type: ReconcilerType = "release"

    def __init__(self, ctx: ActionContext):
        self.ctx = ctx

    async def reconcile(self, req: Request) -> ActionOutcome:
        error, latest = await uninstall_release(self.ctx, req, self.name, "uninstalling")
        if error is not None or (latest is not None and latest.status != "uninstalled"):
            reason = error.message if error else f"revision {latest.version if latest else '?'} remains"
            message = f"Helm uninstall failed for release {release_ref(req, None)}: {reason}"
            self.ctx.events(self.name, "failed", message, error.tail if error else ())
            return outcome(self.name, False, message, latest, error)
        message = f"Helm uninstall succeeded for release {release_ref(req, None)}"
        set_conditions(req, (cond.RELEASED, False, cond.UNINSTALL_SUCCEEDED, message))
        req.status = dataclasses.replace(req.status, history=req.status.history.clear())
        self.ctx.events(self.name, "succeeded", message, ())
        return outcome(self.name, True, message, latest)
