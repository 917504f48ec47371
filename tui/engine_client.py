"""The app's one door to the engine: reads, actions and capability reasons.

Everything the views need from :class:`~engine.runtime.engine.Engine` goes
through here, so the screens never depend on how the engine does it. The
engine is being extended; the methods it announces but does not have yet
(``pause_monitor``, ``resume_monitor``, ``set_maintenance``, ``unlock``,
``diff``) are called by name here only, and only once
``Engine.capabilities()`` reports them available; until then they raise
:class:`~engine.runtime.engine.NotAvailable` with the engine's reason.
"""

from __future__ import annotations

import inspect
from typing import Any

from engine.runtime.engine import Engine, NotAvailable
from engine.runtime.state import ActionOutcome, CleanupItem, ReconcileEvent, ReleaseKey, ReleaseView
from engine.storage.observation import Observation

NO_DIFF = "the engine does not offer diff(key) yet"


class EngineClient:
    """Wraps one :class:`Engine` for the app."""

    def __init__(self, engine: Engine):
        self.engine = engine

    @property
    def readonly(self) -> bool:
        return self.engine.readonly

    # -- availability ----------------------------------------------------------
    def reason(self, capability: str) -> str | None:
        """None when ``capability`` can be used now, else why not (from ``Engine.capabilities()``).

        ``diff`` is read-only: available when the engine lists it as such, or
        (before it does) when the engine has a ``diff`` method at all.
        """
        caps = self.engine.capabilities()
        if capability == "diff" and "diff" not in caps:
            return None if callable(getattr(self.engine, "diff", None)) else NO_DIFF
        return caps.get(capability, f"the engine does not know the action {capability!r}")

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

    async def desired_diff(self, key: ReleaseKey) -> str:
        """What an upgrade would change now: ``Engine.diff(key) -> str`` (a unified diff, "" = nothing)."""
        result = await self._call("diff", "diff", key)
        return result if isinstance(result, str) else str(result)

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

    async def pause_monitor(self, key: ReleaseKey) -> None:
        """``Engine.pause_monitor(key)``: the monitor's pause counter +1."""
        await self._call("monitor", "pause_monitor", key)

    async def resume_monitor(self, key: ReleaseKey) -> None:
        """``Engine.resume_monitor(key)``: the counter minus 1, never below 0."""
        await self._call("monitor", "resume_monitor", key)

    async def set_maintenance(self, key: ReleaseKey, mode: str) -> object:
        """``Engine.set_maintenance(key, mode)`` with mode ``""`` or ``"NoResourceReconciliation"``."""
        return await self._call("maintenance", "set_maintenance", key, mode)

    async def unlock(self, key: ReleaseKey) -> object:
        """``Engine.unlock(key)``: make a stale pending release actionable again."""
        return await self._call("unlock", "unlock", key)

    async def _call(self, capability: str, method: str, *args: object) -> object:
        reason = self.reason(capability)
        if reason is not None:
            raise NotAvailable(reason)
        fn = getattr(self.engine, method, None)
        if not callable(fn):
            raise NotAvailable(f"the engine has no {method}() yet")
        result = fn(*args)
        # The arriving methods may be sync or async; accept both.
        return await result if inspect.isawaitable(result) else result
