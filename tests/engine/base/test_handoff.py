"""Items from threads reach the loop in order, in batches: one wake-up per burst."""

from __future__ import annotations

import asyncio
import threading

from engine.base.handoff import LoopHandoff


def test_a_burst_from_a_thread_wakes_the_loop_once_and_keeps_order() -> None:
    seen: list[tuple[int, bool]] = []
    between: list[int] = []

    async def run() -> LoopHandoff[int]:
        loop_thread = threading.get_ident()
        done = asyncio.Event()

        def handle(i: int) -> None:
            seen.append((i, threading.get_ident() == loop_thread))
            if len(seen) == 1000:
                done.set()

        handoff: LoopHandoff[int] = LoopHandoff(handle, slice_size=100)
        handoff.loop = asyncio.get_running_loop()
        def write() -> None:
            for i in range(1000):
                handoff.put(i)

        writer = threading.Thread(target=write)
        writer.start()
        writer.join()  # the loop is blocked meanwhile: every put after the first joins the queue
        asyncio.get_running_loop().call_soon(lambda: between.append(len(seen)))
        await asyncio.wait_for(done.wait(), 10)
        return handoff

    handoff = asyncio.run(run())
    assert [i for i, _ in seen] == list(range(1000))
    assert all(on_loop for _, on_loop in seen)
    assert handoff.wakeups == 1
    assert between and between[0] < 1000  # the loop's other callbacks ran between slices


def test_before_the_loop_runs_items_are_handled_at_once_and_a_failure_spares_the_rest() -> None:
    seen: list[int] = []

    async def run() -> None:
        done = asyncio.Event()

        def handle(i: int) -> None:
            if i == 1:
                raise ValueError("bad item")
            seen.append(i)
            if i == 3:
                done.set()

        handoff: LoopHandoff[int] = LoopHandoff(handle)
        handoff.put(0)  # no loop yet: at once
        assert seen == [0]
        handoff.loop = asyncio.get_running_loop()
        for i in (1, 2, 3):
            await asyncio.to_thread(handoff.put, i)
        await asyncio.wait_for(done.wait(), 10)

    asyncio.run(run())
    assert seen == [0, 2, 3]
