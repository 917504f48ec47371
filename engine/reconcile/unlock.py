"""Unlock: mark a stale pending-* release failed so the release can move again (Flux's Unlock).

Only called for a stale lock (see next_action): no action of helmdeck's runs
on the release and it has been pending longer than its timeout, e.g. after
a helm process was killed mid-upgrade.
"""

from __future__ import annotations

from engine.reconcile import conditions as cond
from engine.reconcile.action import (
    ActionContext,
    ObservedReleases,
    ReconcilerType,
    outcome,
    record,
    release_ref,
    set_conditions,
)
from engine.reconcile.errors import ActionFailed
from engine.reconcile.request import Request
from engine.reconcile.status import ActionOutcome
from engine.storage.codec import StorageDecodeError
from engine.storage.writer import StorageWriteError


class Unlock:
    """Type ``unlock``."""

    name = "unlock"
    type: ReconcilerType = "unlock"

    def __init__(self, ctx: ActionContext):
        self.ctx = ctx

    async def reconcile(self, req: Request) -> ActionOutcome:
        spec = req.spec
        ns, release = req.key
        latest = self.ctx.observer.latest(ns, release)
        if latest is None or not latest.is_pending:
            raise ActionFailed(f"release {release_ref(req, None)} is not pending: nothing to unlock")
        if self.ctx.unlock is None:
            raise ActionFailed("this engine cannot write release storage to unlock")
        detail = f"pending longer than its {spec.timeout:.0f}s timeout"
        self.ctx.events(self.name, "started", f"unlocking revision {latest.version} ({latest.status})", ())
        async with ObservedReleases(self.ctx, spec.storage_ns, release, ns) as seen:
            with self.ctx.paused(ns, release):
                try:
                    await self.ctx.unlock(latest, detail)
                except (StorageWriteError, StorageDecodeError) as exc:
                    message = f"unlock of {release_ref(req, latest.version)} failed: {exc}"
                    self.ctx.events(self.name, "failed", message, ())
                    raise ActionFailed(message) from exc
        record(req, seen.observed)
        written = seen.observed.get(latest.version)
        if written is None or written.status != "failed":
            message = f"unlock of {release_ref(req, latest.version)} was not stored"
            self.ctx.events(self.name, "failed", message, ())
            raise ActionFailed(message)
        message = f"Unlocked release {release_ref(req, latest.version)}: was {latest.status}, now failed"
        set_conditions(req, (cond.RELEASED, False, cond.PENDING_RELEASE, message))
        self.ctx.events(self.name, "succeeded", message, ())
        return outcome(self.name, True, message, written)
