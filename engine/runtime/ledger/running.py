"""The one start/stop shape of an engine's running parts: the builder (:mod:`engine.runtime.assemble`) gives the
facade the parts its mode has, in start order and in stop order, and the facade walks them
(:meth:`engine.runtime.engine.Engine.start`, :meth:`~engine.runtime.engine.Engine.stop`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Starting:
    """How the engine starts: with ``reconcile`` False nothing is queued (actions still run on request)."""

    reconcile: bool = True


class Running(Protocol):
    """A part that runs while the engine does."""

    async def start(self, how: Starting) -> None:
        """Start, once the engine has read storage and the persisted statuses."""

    async def stop(self, deadline: float) -> bool:
        """Stop; running helm actions may finish for up to ``deadline`` seconds. Returns False when something it
        ran had to be cancelled (True: every running action finished on its own)."""


async def _nothing(_how: Starting) -> None:
    return None


async def _clean(_deadline: float) -> bool:
    return True


@dataclass(frozen=True)
class Step:
    """A :class:`Running` made of a part's own calls, as the builder wires them (either side may be nothing).
    ``name`` says which part it is, in logs and tests."""

    name: str
    on_start: Callable[[Starting], Awaitable[None]] = _nothing
    on_stop: Callable[[float], Awaitable[bool]] = _clean

    async def start(self, how: Starting) -> None:
        await self.on_start(how)

    async def stop(self, deadline: float) -> bool:
        return await self.on_stop(deadline)
