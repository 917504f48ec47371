"""Release monitors and their policy: pause counters, deduplicated absence reports, status callbacks.

As Deckhouse's nelm Service: one monitor per release; ``pause`` adds one to
the release's pause counter, ``resume`` takes one away (never below zero)
and checks again when it reaches zero; a paused monitor reports nothing;
replacing a monitor (after an upgrade) keeps the count, since the counter
belongs to the release, not to the monitor object. helmdeck adds: absent
resources call ``on_absent(namespace, name)`` once per release until the
service's next upgrade of it consumes the report (one scheduled reconcile at
a time, not one per event), and every change of what a monitor shows calls
``on_status(namespace, name, MonitorStatus)``.

Callbacks run on the asyncio loop bound with :meth:`MonitorRegistry.bind_loop`
(handed over from watch threads with ``call_soon_threadsafe``), or directly
in the calling thread when no loop is bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from engine.monitor.monitor import ExpectedObject, ReleaseMonitor
from engine.monitor.status import MonitorStatus, ResourceStatus
from engine.monitor.watch import WatchHub

log = logging.getLogger(__name__)

Key = tuple[str, str]
AbsentCallback = Callable[[str, str], None]
StatusCallback = Callable[[str, str, MonitorStatus], None]


class MonitorRegistry:
    """The monitors of one release service, by ``(namespace, release name)``. Thread-safe.

    ``hub`` serves the monitors of helmdeck's own identity; ``hub_as(user)`` builds the hub of a
    monitor that reads as ``user`` (a package's ServiceAccount, impersonated), one per user, kept.
    """

    def __init__(
        self,
        hub: WatchHub,
        on_absent: AbsentCallback | None = None,
        on_status: StatusCallback | None = None,
        hub_as: Callable[[str], WatchHub] | None = None,
    ):
        self._hub = hub
        self._hubs: dict[str, WatchHub] = {"": hub}
        self._hub_as = hub_as
        self.on_absent = on_absent
        self._on_status = on_status
        self._lock = threading.RLock()
        self._monitors: dict[Key, ReleaseMonitor] = {}
        self._pauses: dict[Key, int] = {}
        self._reported: set[Key] = set()
        self._quiet: dict[Key, int] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    def bind_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Deliver callbacks on ``loop`` from now on."""
        self._loop = loop

    # -- monitors -------------------------------------------------------------------
    def has(self, key: Key) -> bool:
        with self._lock:
            return key in self._monitors

    def get(self, key: Key) -> ReleaseMonitor | None:
        with self._lock:
            return self._monitors.get(key)

    def replace(self, key: Key, objects: Sequence[ExpectedObject], user: str = "") -> ReleaseMonitor:
        """Start a monitor of ``objects`` for ``key``, replacing (and closing) any previous one; it
        reads as ``user`` when given (and a ``hub_as`` was), else as helmdeck.

        The new monitor joins its watches before the old one leaves them, so
        shared watches are not restarted in between. The pause count stays.
        """
        with self._lock:
            if user and self._hub_as is not None and user not in self._hubs:
                self._hubs[user] = self._hub_as(user)
            hub = self._hubs.get(user, self._hub)
        monitor = ReleaseMonitor(key, objects, hub, self._changed)
        with self._lock:
            old = self._monitors.get(key)
            self._monitors[key] = monitor
        monitor.start()
        if old is not None:
            old.close()
        return monitor

    def announce(self, key: Key) -> None:
        """Report ``key``'s current status (after a monitor was (re)built and synced: a shared
        watch that had already listed raises no change of its own)."""
        self._emit_status(key)

    def remove(self, key: Key) -> None:
        """Close and drop ``key``'s monitor and any pending absence report; no-op when there is none."""
        with self._lock:
            monitor = self._monitors.pop(key, None)
            self._reported.discard(key)
        if monitor is not None:
            monitor.close()
            self._emit_status(key)

    def stop(self, timeout: float = 5.0) -> bool:
        """Close every monitor and stop every watch thread; True when all threads ended."""
        with self._lock:
            monitors = list(self._monitors.values())
            self._monitors.clear()
            self._reported.clear()
        for monitor in monitors:
            monitor.close()
        with self._lock:
            hubs = list(self._hubs.values())
        return all([hub.stop(timeout) for hub in hubs])

    # -- pause counters -------------------------------------------------------------
    def pause(self, key: Key) -> int:
        """Add one to ``key``'s pause counter; returns the new count."""
        with self._lock:
            count = self._pauses.get(key, 0) + 1
            self._pauses[key] = count
        self._emit_status(key)
        return count

    def resume(self, key: Key) -> int:
        """Take one from ``key``'s pause counter (never below zero); at zero, check again and report."""
        with self._lock:
            count = max(0, self._pauses.get(key, 0) - 1)
            if count:
                self._pauses[key] = count
            else:
                self._pauses.pop(key, None)
            monitor = self._monitors.get(key)
        if count == 0 and monitor is not None:
            self._changed(monitor)
        else:
            self._emit_status(key)
        return count

    def paused(self, key: Key) -> int:
        with self._lock:
            return self._pauses.get(key, 0)

    # -- absence ---------------------------------------------------------------------
    def absent(self, key: Key) -> tuple[ResourceStatus, ...]:
        """Absent objects of an unpaused, synced monitor; () when paused, unsynced or none."""
        with self._lock:
            monitor = self._monitors.get(key)
            paused = self._pauses.get(key, 0) > 0
        if monitor is None or paused or not monitor.synced:
            return ()
        return monitor.absent()

    def take_report(self, key: Key) -> bool:
        """True when absence was reported for ``key`` since the last call; clears the report."""
        with self._lock:
            if key in self._reported:
                self._reported.discard(key)
                return True
            return False

    @contextlib.contextmanager
    def quiet(self, key: Key) -> Iterator[None]:
        """No absence reports for ``key`` inside (the service's own helm run changes its objects)."""
        with self._lock:
            self._quiet[key] = self._quiet.get(key, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._quiet[key] - 1
                if left:
                    self._quiet[key] = left
                else:
                    del self._quiet[key]

    # -- status ------------------------------------------------------------------------
    def status(self, key: Key) -> MonitorStatus:
        """What ``key``'s monitor shows now: off, paused (no resources), or active with resources."""
        with self._lock:
            monitor = self._monitors.get(key)
            paused = self._pauses.get(key, 0)
        if monitor is None:
            return MonitorStatus("off", paused)
        if paused:
            return MonitorStatus("paused", paused)
        problem = monitor.problem()
        return MonitorStatus("active", 0, monitor.resources() if monitor.synced or problem else (), problem)

    def _changed(self, monitor: ReleaseMonitor) -> None:
        key = monitor.key
        with self._lock:
            if self._monitors.get(key) is not monitor or self._pauses.get(key, 0) > 0:
                return  # a replaced or paused monitor reports nothing
        self._emit_status(key)
        if not monitor.synced or not monitor.absent():
            return
        with self._lock:
            if key in self._quiet or key in self._reported:
                return
            self._reported.add(key)
        if self.on_absent is not None:
            self._call(self.on_absent, *key)

    def _emit_status(self, key: Key) -> None:
        if self._on_status is not None:
            self._call(self._on_status, key[0], key[1], self.status(key))

    def _call(self, fn: Callable[..., None], *args: Any) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._safe, fn, *args)
        else:
            self._safe(fn, *args)

    @staticmethod
    def _safe(fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except Exception:
            log.exception("monitor callback failed")
