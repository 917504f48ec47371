"""CorrectClusterDrift: put drifted objects back as the release manifest says (Flux's)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from engine.reconcile import conditions as cond
from engine.reconcile.action import Reconciler, outcome, release_ref
from engine.reconcile.drift import DriftDetector
from engine.reconcile.errors import ActionFailed
from engine.reconcile.request import Request
from engine.reconcile.status import ActionOutcome

# Helm's own field manager name, so helm keeps owning the fields afterwards.
HELM_FIELD_MANAGER = "helm"


@dataclass
class CorrectClusterDrift(Reconciler):
    """Type ``drift correction``: re-applies (server-side, forced) only the drifted objects; paths the
    package's ignore rules name keep their live values."""

    name = "correct-drift"
    type = "drift correction"

    detector: DriftDetector

    async def reconcile(self, req: Request) -> ActionOutcome:
        ns, release = req.key
        latest = self.latest(req)
        if latest is None:
            raise ActionFailed(f"release {release_ref(req, None)} is not in storage")
        record = await asyncio.to_thread(self.ctx.observer.load_release, ns, release, latest.version)
        manifest = str(record.get("manifest") or "")
        items = await asyncio.to_thread(self.detector.detect, manifest, ns, req.spec.drift_ignore)
        if not items:
            return outcome(self.name, True, "no drift left to correct", latest)
        await self.begin(req, "; ".join(i.describe() for i in items))
        try:
            fixed = await asyncio.to_thread(self.detector.correct, manifest, ns, items, HELM_FIELD_MANAGER,
                                            req.spec.drift_ignore)
        except Exception as exc:  # API errors of any kind end up in the event, not a crash
            raise ActionFailed(self.failed(
                req, f"drift correction failed for {release_ref(req, latest.version)}: {exc}")) from exc
        message = f"corrected cluster drift of {release_ref(req, latest.version)}: {', '.join(fixed)}"
        return self.succeeded(req, message, latest, (cond.READY, True, cond.DRIFT_CORRECTED))
