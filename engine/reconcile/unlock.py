"""Unlock: mark a stale pending-* release failed so the release can move again (Flux's Unlock).

Only called for a stale lock (see next_action): no action of helmdeck's runs
on the release and it has been pending longer than its timeout, e.g. after
a helm process was killed mid-upgrade.
"""

from __future__ import annotations

from engine.reconcile import conditions as cond
from engine.reconcile.action import ObservedReleases, Reconciler, record, release_ref
from engine.reconcile.errors import ActionFailed
from engine.reconcile.request import Request
from engine.reconcile.status import ActionOutcome
from engine.storage.codec import StorageDecodeError
from engine.storage.writer import StorageWriteError


class Unlock(Reconciler):
    """Type ``unlock``."""

    name = "unlock"
    type = "unlock"

    async def reconcile(self, req: Request) -> ActionOutcome:
        latest = self.latest(req)
        if latest is None or not latest.is_pending:
            raise ActionFailed(f"release {release_ref(req, None)} is not pending: nothing to unlock")
        if self.ctx.unlock is None:
            raise ActionFailed("this engine cannot write release storage to unlock")
        detail = f"pending longer than its {req.spec.action_timeout(latest.status):.0f}s timeout"
        await self.begin(req, f"unlocking revision {latest.version} ({latest.status})")
        async with ObservedReleases(self.ctx, req) as seen:
            with self.ctx.paused(*req.key):
                try:
                    await self.ctx.unlock(latest, detail)
                except (StorageWriteError, StorageDecodeError) as exc:
                    raise ActionFailed(self.failed(
                        req, f"unlock of {release_ref(req, latest.version)} failed: {exc}")) from exc
        record(req, seen.observed, self.name)
        written = seen.observed.get(latest.version)
        if written is None or written.status != "failed":
            raise ActionFailed(self.failed(req, f"unlock of {release_ref(req, latest.version)} was not stored"))
        message = f"Unlocked release {release_ref(req, latest.version)}: was {latest.status}, now failed"
        return self.succeeded(req, message, written, (cond.RELEASED, False, cond.PENDING_RELEASE))
