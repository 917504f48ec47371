"""Uninstall: remove the release on request (a pruned package, or the app's uninstall key)."""

from __future__ import annotations

import dataclasses

from engine.reconcile import conditions as cond
from engine.reconcile.action import UninstallReconciler, outcome, release_ref
from engine.reconcile.request import Request
from engine.reconcile.status import ActionOutcome


class Uninstall(UninstallReconciler):
    """Type ``release``. A missing release is success (idempotent)."""

    name = "uninstall"
    type = "release"

    async def reconcile(self, req: Request) -> ActionOutcome:
        latest, error, reason = await self.uninstall(req, "uninstalling")
        if reason is not None:
            message = self.failed(req, f"Helm uninstall failed for release {release_ref(req, None)}: {reason}",
                                  error=error)
            return outcome(self.name, False, message, latest, error)
        req.status = dataclasses.replace(req.status, history=req.status.history.clear())
        return self.succeeded(req, f"Helm uninstall succeeded for release {release_ref(req, None)}", latest,
                              (cond.RELEASED, False, cond.UNINSTALL_SUCCEEDED))
