"""The reconcile work queue: one run at a time per package, bounded concurrency.

Semantics (after controller-runtime's work queue, which Flux runs on):

- ``add(key, delay)`` schedules a run; a key already queued is not queued
  twice — the earlier due time wins and a forced request stays forced.
- At most ``concurrency`` runs at once and never two for the same key; a key
  added while it runs is run again once the current run ends.
- The handler's :class:`RunResult` decides what follows: requeue now, after
  an error (exponential backoff from ``backoff_base`` doubling up to
  ``backoff_cap`` seconds, reset by the next success), or after the
  package's interval with ±``jitter`` (a fraction) so packages spread out.
- Suspended keys are skipped (a forced run still runs).

Times are seconds of the event loop's monotonic clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import random
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class RunResult:
    """What a handler asks for after a run.

    ``next``: "interval" (requeue after ``interval`` seconds ± jitter), "now"
    (requeue at once: the loop has more work), "error" (requeue with backoff),
    "stop" (do not requeue; a later ``add`` or a change does).
    """

    next: Literal["interval", "now", "error", "stop"] = "interval"
    interval: float = 600.0


Handler = Callable[[K, bool], Awaitable[RunResult]]


@dataclass
class _Entry:
    due: float
    force: bool


class WorkQueue(Generic[K]):
    """Schedules ``handler(key, force)`` runs; see the module docstring."""

    def __init__(
        self,
        handler: Handler[K],
        *,
        concurrency: int = 4,
        backoff_base: float = 2.0,
        backoff_cap: float = 300.0,
        jitter: float = 0.1,
        is_suspended: Callable[[K], bool] = lambda _k: False,
        rng: random.Random | None = None,
    ):
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self._handler = handler
        self._concurrency = concurrency
        self._backoff_base = backoff_base
        self._backoff_cap = backoff_cap
        self._jitter = jitter
        self._is_suspended = is_suspended
        self._rng = rng or random.Random()
        self._queued: dict[K, _Entry] = {}
        self._heap: list[tuple[float, int, K]] = []
        self._seq = itertools.count()
        self._running: set[K] = set()
        self._again: dict[K, bool] = {}  # added while running -> force flag
        self._failures: dict[K, int] = {}
        self._wake = asyncio.Event()
        self._progress = asyncio.Event()
        self._slots = asyncio.Semaphore(concurrency)
        self._tasks: set[asyncio.Task[None]] = set()
        self._dispatcher: asyncio.Task[None] | None = None
        self._closed = False
        self._clock: Callable[[], float] = time.monotonic  # the event loop's clock once started (the same, by default)
        self.runs = 0  # completed runs, for tests and status

    # -- scheduling ------------------------------------------------------------
    def add(self, key: K, delay: float = 0.0, *, force: bool = False) -> None:
        """Schedule a run of ``key`` in ``delay`` seconds (deduplicated, see module docstring)."""
        if self._closed:
            return
        if key in self._running:
            self._again[key] = self._again.get(key, False) or force
            return
        due = self._now() + max(0.0, delay)
        cur = self._queued.get(key)
        if cur is not None and cur.due <= due:
            cur.force = cur.force or force
            return
        self._queued[key] = _Entry(due, force or bool(cur and cur.force))
        heapq.heappush(self._heap, (due, next(self._seq), key))
        self._wake.set()

    def forget(self, key: K) -> None:
        """Drop any queued run and the backoff state of ``key`` (a running one finishes)."""
        self._queued.pop(key, None)
        self._again.pop(key, None)
        self._failures.pop(key, None)

    def queued(self) -> dict[K, float]:
        """Queued keys and their due times."""
        return {k: e.due for k, e in self._queued.items()}

    def depth(self) -> tuple[int, int]:
        """``(ready, waiting)``: the queued keys due now, and those due later (their interval or an error's
        backoff). Only the first is the queue's depth, as controller-runtime's ``workqueue_depth`` counts it:
        client-go's delaying queue keeps an item added with a delay apart until its time
        (``util/workqueue/delaying_queue.go``, ``AddAfter``). A running key is in neither. Safe to call from
        another thread (the metrics server's)."""
        now = self._clock()
        dues = [e.due for e in list(self._queued.values())]  # one copy: the loop may change the dict meanwhile
        ready = sum(due <= now for due in dues)
        return ready, len(dues) - ready

    def is_running(self, key: K) -> bool:
        return key in self._running

    def backoff(self, key: K) -> float:
        """The delay the next error of ``key`` would get."""
        n = self._failures.get(key, 0)
        return float(min(self._backoff_cap, self._backoff_base * (2 ** n)))

    # -- lifecycle -------------------------------------------------------------
    def start(self) -> None:
        self._clock = asyncio.get_running_loop().time  # what due times are read against, from any thread
        if self._dispatcher is None:
            self._dispatcher = asyncio.create_task(self._dispatch(), name="workqueue-dispatch")

    async def stop(self, deadline: float | None = None) -> bool:
        """Stop dispatching; wait up to ``deadline`` seconds for running runs, then cancel them.

        Returns True when every run finished on its own.
        """
        self._closed = True
        if self._dispatcher is not None:
            self._dispatcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._dispatcher
        pending = set(self._tasks)
        if not pending:
            return True
        _done, still = await asyncio.wait(pending, timeout=deadline)
        for task in still:
            task.cancel()
        for task in still:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        return not still

    async def idle(self) -> None:
        """Wait until nothing runs and nothing is due now (for tests and ``--once``)."""
        while self._running or any(e.due <= self._now() for e in self._queued.values()):
            self._progress.clear()
            with contextlib.suppress(TimeoutError):
                # A run ending sets the event; the timeout re-checks queued due times.
                await asyncio.wait_for(self._progress.wait(), 0.05)

    # -- internals ---------------------------------------------------------------
    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    def _pop_due(self) -> tuple[K, bool] | None:
        now = self._now()
        while self._heap:
            due, _, key = self._heap[0]
            entry = self._queued.get(key)
            if entry is None or entry.due != due:
                heapq.heappop(self._heap)  # superseded or forgotten
                continue
            if due > now:
                return None
            heapq.heappop(self._heap)
            del self._queued[key]
            return key, entry.force
        return None

    def _next_due(self) -> float | None:
        while self._heap:
            due, _, key = self._heap[0]
            entry = self._queued.get(key)
            if entry is not None and entry.due == due:
                return due
            heapq.heappop(self._heap)
        return None

    async def _dispatch(self) -> None:
        while True:
            await self._slots.acquire()
            item = self._pop_due()
            while item is None:
                self._wake.clear()
                nxt = self._next_due()
                timeout = None if nxt is None else max(0.0, nxt - self._now())
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout)
                item = self._pop_due()
            key, force = item
            if not force and self._is_suspended(key):
                self._slots.release()
                continue
            self._running.add(key)
            task = asyncio.create_task(self._run(key, force), name=f"reconcile-{key}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _run(self, key: K, force: bool) -> None:
        result = RunResult("error")
        try:
            result = await self._handler(key, force)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("reconcile of %s failed", key)
        finally:
            self._running.discard(key)
            self._slots.release()
            self.runs += 1
            self._progress.set()
        if self._closed:
            return
        if result.next == "error":
            delay = self.backoff(key)
            self._failures[key] = self._failures.get(key, 0) + 1
        else:
            self._failures.pop(key, None)
            delay = 0.0 if result.next == "now" else result.interval * (
                1 + self._rng.uniform(-self._jitter, self._jitter))
        again = self._again.pop(key, None)
        if again is not None:
            self.add(key, 0.0, force=again)
        elif result.next != "stop":
            self.add(key, delay)
