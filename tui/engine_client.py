"""The app's one door to the engine: reads, actions and capability reasons.

Everything the views need from :class:`~engine.runtime.engine.Engine` goes
through here, so the screens never depend on how the engine does it. An
action the engine cannot do now (``Engine.capabilities()``) raises
:class:`~engine.runtime.engine.NotAvailable` with the engine's reason.
"""

from __future__ import annotations

from typing import Any

from engine.runtime.engine import Engine, NotAvailable
from engine.runtime.state import ActionOutcome, CleanupItem, ReconcileEvent, ReleaseKey, ReleaseView
from engine.storage.observation import Observation


class EngineClient:
    """Wraps one :class:`Engine` for the app."""

    def __init__(self, engine: Engine):
        self.engine = engine

    @property
    def readonly(self) -> bool:
        return self.engine.readonly

    # -- availability ----------------------------------------------------------
    def reason(self, capability: str) -> str | None:
        """None when ``capability`` can be used now, else why not (from ``Engine.capabilities()``)."""
        return self.engine.capabilities().get(capability, f"the engine does not know the action {capability!r}")

    def _check(self, capability: str) -> None:
        reason = self.reason(capability)
        if reason is not None:
            raise NotAvailable(reason)

    # -- reading -----------------------------------------------------------------
    def releases(self) -> list[ReleaseView]:
        return self.engine.releases()

    def release(self, key: ReleaseKey) -> ReleaseView | None:
        return self.engine.release(key)

    def history(self, key: ReleaseKey) -> list[Observation]:
        """Stored revisions, newest first."""
        return self.engine.history(key)

    def events(self, key: ReleaseKey) -> list[ReconcileEvent]:
        return self.engine.events(key)

    def has_package(self, key: ReleaseKey) -> bool:
        return key in self.engine.packages

    async def manifest(self, key: ReleaseKey, revision: int) -> str:
        return await self.engine.manifest(key, revision)

    async def values(self, key: ReleaseKey, revision: int, *, computed: bool) -> dict[str, Any]:
        return await self.engine.values(key, revision, computed=computed)

    async def desired_diff(self, key: ReleaseKey, *, reveal: bool = False) -> str:
        """What an upgrade would change now (a unified diff, "" = nothing), secrets masked unless ``reveal``."""
        self._check("diff")
        return await self.engine.diff(key, reveal=reveal)

    # -- acting ------------------------------------------------------------------
    async def upgrade(self, key: ReleaseKey) -> ActionOutcome | None:
        return await self.engine.reconcile(key, force=True)

    async def rollback(self, key: ReleaseKey, revision: int) -> ActionOutcome:
        return await self.engine.rollback(key, revision)

    async def test(self, key: ReleaseKey) -> ActionOutcome:
        return await self.engine.test(key)

    def suspend(self, key: ReleaseKey, suspended: bool) -> None:
        self.engine.suspend(key, suspended)

    async def uninstall(self, key: ReleaseKey) -> ActionOutcome:
        return await self.engine.uninstall(key)

    async def cleanup(self, *, dry_run: bool) -> list[CleanupItem]:
        return await self.engine.cleanup(dry_run=dry_run)

    async def pause_monitor(self, key: ReleaseKey) -> int:
        """The monitor's pause counter +1; returns the new count."""
        self._check("monitor")
        return self.engine.pause_monitor(key)

    async def resume_monitor(self, key: ReleaseKey) -> int:
        """The monitor's pause counter -1 (never below 0); returns the new count."""
        self._check("monitor")
        return self.engine.resume_monitor(key)

    async def set_maintenance(self, key: ReleaseKey, mode: str) -> object:
        """Enter (``"NoResourceReconciliation"``) or leave (``""``) maintenance mode."""
        self._check("maintenance")
        return await self.engine.set_maintenance(key, mode)

    async def unlock(self, key: ReleaseKey) -> ActionOutcome:
        """Make a release stuck in a pending state actionable again."""
        self._check("unlock")
        return await self.engine.unlock(key)
