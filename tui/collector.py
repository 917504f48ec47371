"""Python's cyclic garbage collector kept off the app's event loop.

While the engine starts, the collector is paused (:meth:`Collector.pause`): start-up makes objects that
live as long as the app (10,000 releases' views and rows) and little garbage, and as the heap grew the
collector walked all of it again at each quarter grown (four to five full passes of 60-130 ms each before
the first table at 10,000 releases, bench/tui_bench.py). One pass at the end takes the start's garbage.

A full collection walks every object the collector tracks: ~0.15 s at 1,000 releases (views, the
table's rows, cached renders), a stalled frame under an event storm. Start-up's objects are frozen
(``gc.freeze``: kept out of every collection) once the engine has started, and the survivors of each
full collection after that too, so a full collection walks only what was made since the last one.
Frozen objects still go when nothing refers to them; only garbage in reference cycles (a closed
screen's widgets) waits for :meth:`Collector.reclaim`, a whole collection the app runs while the
operator is idle, at most every :data:`RECLAIM_INTERVAL` seconds.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

RECLAIM_INTERVAL = 600.0  # seconds between whole collections (frozen objects included), at most
IDLE_BEFORE_RECLAIM = 30.0  # seconds without a key or click before a whole collection may run


class Collector:
    """Freezes the survivors of each full collection; :meth:`reclaim` collects everything once in a while.

    ``clock`` gives monotonic seconds (tests). :meth:`stop` restores the collector as it was (unfrozen).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._started = False
        self._paused = False
        self._last_reclaim = 0.0
        self.last_input = 0.0

    def pause(self) -> None:
        """No collection until :meth:`start` (or :meth:`stop`): the engine is starting. Nothing when the
        collector is off already (the command line pauses it for its own start)."""
        if not self._started and not self._paused and gc.isenabled():
            self._paused = True
            gc.disable()

    def start(self) -> None:
        """Freeze what exists now and every full collection's survivors from now on (after a :meth:`pause`,
        one whole collection first takes what the start left as garbage)."""
        if self._started:
            return
        self._started = True
        self._last_reclaim = self._clock()
        if self._paused:
            self._paused = False
            gc.collect()
            gc.enable()
        gc.freeze()
        gc.callbacks.append(self._collected)

    def stop(self) -> None:
        """Restore the collector as it was: unfrozen, running again after a :meth:`pause`."""
        if self._paused:
            self._paused = False
            gc.enable()
        if not self._started:
            return
        self._started = False
        gc.callbacks.remove(self._collected)
        gc.unfreeze()

    def _collected(self, phase: str, info: dict[str, int]) -> None:
        # Whatever a full collection left is reachable now: frozen, the next one does not walk it again.
        if phase == "stop" and info["generation"] == 2:
            gc.freeze()

    def input_seen(self) -> None:
        """The operator pressed a key or clicked (a whole collection waits for them to be idle)."""
        self.last_input = self._clock()

    def reclaim(self) -> bool:
        """Collect everything, frozen objects included, when the operator has been idle for
        :data:`IDLE_BEFORE_RECLAIM` seconds and the last whole collection is :data:`RECLAIM_INTERVAL`
        seconds old; True when it ran."""
        now = self._clock()
        if (not self._started or now - self.last_input < IDLE_BEFORE_RECLAIM
                or now - self._last_reclaim < RECLAIM_INTERVAL):
            return False
        self._last_reclaim = now
        gc.unfreeze()
        gc.collect()  # its survivors are frozen again by _collected
        return True
