"""Background tasks of one engine: spawned on its event loop, cancelled together when it stops; calls from other
threads handed to that loop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any

log = logging.getLogger(__name__)


def _report_failure(task: asyncio.Task[Any]) -> None:
    """Log the exception a task ended with, when it ends: unlogged, a dead watcher would show only as asyncio's
    "Task exception was never retrieved" at exit, long after every later change went unseen."""
    if not task.cancelled() and task.exception() is not None:
        log.error("background task %s failed", task.get_coro(), exc_info=task.exception())


class Background:
    """A set of fire-and-forget tasks; :meth:`cancel` ends those still running."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """The engine's loop, once it starts: :meth:`on_loop` hands calls to it from then on."""
        self._loop = loop

    def on_loop(self, call: Callable[..., None], *args: Any) -> None:
        """Run ``call`` on the engine's loop once started (before: at once, e.g. records fed offline)."""
        if self._loop is not None and self._loop.is_running():
            self._loop.call_soon_threadsafe(call, *args)
        else:
            call(*args)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any] | None:
        """Run ``coro`` as a task; without a running event loop it is closed unrun and None returned
        (an engine that was never started, e.g. a fixture, has nothing to do in the background)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            coro.close()
            return None
        task = loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(_report_failure)
        return task

    async def cancel(self) -> None:
        """Cancel every task still running and wait for them to end."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
