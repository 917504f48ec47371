"""An engine's background tasks (engine.runtime.ledger.tasks.Background)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from engine.runtime.ledger.tasks import Background


async def test_a_failed_task_is_logged_when_it_ends_and_a_cancelled_one_is_not(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A background task's failure (the packages folder's watcher, say) was seen only as asyncio's "Task
    # exception was never retrieved" when the process ended; every later change went unseen meanwhile.
    tasks = Background()

    async def watch() -> None:
        raise RuntimeError("Symlink loop from 'loop.yaml'")

    caplog.set_level(logging.ERROR, "engine.runtime.ledger.tasks")
    failed = tasks.spawn(watch())
    waiting = tasks.spawn(asyncio.Event().wait())
    assert failed is not None and waiting is not None
    await asyncio.wait([failed])
    await asyncio.sleep(0)  # done callbacks run on the next turn of the loop
    records = [r for r in caplog.records if r.name == "engine.runtime.ledger.tasks"]
    assert len(records) == 1 and "watch" in records[0].getMessage()
    assert records[0].exc_info is not None and "Symlink loop" in str(records[0].exc_info[1])
    await tasks.cancel()
    assert waiting.cancelled()
    assert len([r for r in caplog.records if r.name == "engine.runtime.ledger.tasks"]) == 1
