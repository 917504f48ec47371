"""UninstallRemediation: uninstall a failed release so the next pass installs afresh (Flux's)."""

from __future__ import annotations

from engine.reconcile import conditions as cond
from engine.reconcile.action import UninstallReconciler, release_ref
from engine.reconcile.errors import ActionFailed
from engine.reconcile.request import Request
from engine.reconcile.status import ActionOutcome


class UninstallRemediation(UninstallReconciler):
    """Type ``remediate``; install remediation always takes this path."""

    name = "uninstall-remediation"
    type = "remediate"

    async def reconcile(self, req: Request) -> ActionOutcome:
        latest, error, reason = await self.uninstall(req, "uninstalling the failed release")
        ref = release_ref(req, None)
        if reason is not None:
            raise ActionFailed(self.failed(req, f"Helm uninstall remediation failed for release {ref}: {reason}",
                                           (cond.REMEDIATED, False, cond.UNINSTALL_FAILED), error))
        return self.succeeded(req, f"Helm uninstall remediation succeeded for release {ref}", latest,
                              (cond.REMEDIATED, True, cond.UNINSTALL_SUCCEEDED))
