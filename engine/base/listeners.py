"""Callbacks of one kind, as the storage observer, the watches and the release book keep them.

Thread-safe: a callback may be added or removed from any thread while
another emits. :meth:`Listeners.emit` calls each callback in the emitting
thread, outside the lock (a callback may add or remove callbacks); one that
raises is logged and the others are still called.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Generic, ParamSpec

log = logging.getLogger(__name__)

P = ParamSpec("P")


class Listeners(Generic[P]):
    """An ordered list of callbacks; ``what`` names them in the log line of a failing one."""

    def __init__(self, what: str):
        self._what = what
        self._lock = threading.Lock()
        self._items: list[Callable[P, None]] = []

    def add(self, callback: Callable[P, None]) -> Callable[[], None]:
        """Add ``callback``; returns a function that removes it."""
        with self._lock:
            self._items.append(callback)

        def unsubscribe() -> None:
            self.remove(callback)

        return unsubscribe

    def remove(self, callback: Callable[P, None]) -> int:
        """Remove ``callback`` (nothing when it is not there); returns how many are left."""
        with self._lock:
            with contextlib.suppress(ValueError):
                self._items.remove(callback)
            return len(self._items)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def emit(self, *args: P.args, **kwargs: P.kwargs) -> None:
        """Call every callback with the arguments, in the order they were added."""
        with self._lock:
            items = list(self._items)
        for callback in items:
            try:
                callback(*args, **kwargs)
            except Exception:
                log.exception("%s failed", self._what)
