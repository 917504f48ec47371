"""Hand items from worker threads to an asyncio loop in batches: one loop wake-up per burst.

``loop.call_soon_threadsafe`` per item writes to the loop's self-pipe each time; a thread that
lists 10,000 release records then spends more time waking the loop (and waiting for the GIL the
loop's thread holds) than decoding (profiled in issue 24: 5.2 s of a 13.4 s list). Here the first
item of a burst schedules one drain; the items that follow join the queue without a wake-up.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

log = logging.getLogger(__name__)

# Items handled per loop callback: a long burst yields to the loop's other callbacks (keys, frames)
# between slices instead of holding it for the whole burst.
SLICE = 256


class LoopHandoff(Generic[T]):
    """Calls ``handle(item)`` on ``loop`` for every :meth:`put` item, in order.

    ``put`` may be called from any thread; before ``loop`` is set (or once it stopped running) it
    calls ``handle`` at once in the caller's thread.
    """

    def __init__(self, handle: Callable[[T], None], slice_size: int = SLICE):
        self._handle = handle
        self._slice = slice_size
        self._lock = threading.Lock()
        self._items: deque[T] = deque()
        self._scheduled = False
        self.loop: asyncio.AbstractEventLoop | None = None
        self.wakeups = 0  # how many times a put woke the loop (a figure for benches)

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Hand the items to ``loop`` from now on."""
        self.loop = loop

    def put(self, item: T) -> None:
        loop = self.loop
        if loop is None or not loop.is_running():
            self._handle(item)
            return
        with self._lock:
            self._items.append(item)
            if self._scheduled:
                return
            self._scheduled = True
            self.wakeups += 1
        loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        with self._lock:
            batch = [self._items.popleft() for _ in range(min(self._slice, len(self._items)))]
            more = bool(self._items)
            if not more:
                self._scheduled = False
        for item in batch:
            try:
                self._handle(item)
            except Exception:  # as the loop does for a failing callback: logged, the others still run
                log.exception("handing %r to the loop failed", item)
        if more:
            assert self.loop is not None
            self.loop.call_soon(self._drain)
