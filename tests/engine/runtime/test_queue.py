"""Unit tests of the reconcile work queue (no cluster; short real delays)."""

from __future__ import annotations

import asyncio
import random

import pytest

from engine.runtime.drive.queue import RunResult, WorkQueue


async def test_dedup_and_one_run_per_key_at_a_time() -> None:
    active: set[str] = set()
    overlaps: list[str] = []
    runs: list[str] = []

    async def handler(key: str, force: bool) -> RunResult:
        if key in active:
            overlaps.append(key)
        active.add(key)
        await asyncio.sleep(0.05)
        active.discard(key)
        runs.append(key)
        return RunResult("stop")

    q: WorkQueue[str] = WorkQueue(handler, concurrency=2)
    q.start()
    for _ in range(5):
        q.add("a")
        q.add("b")
    await asyncio.sleep(0.01)
    q.add("a")  # added while running: runs once more afterwards
    q.add("a")
    await q.idle()
    await q.stop()
    assert overlaps == []
    assert sorted(runs) == ["a", "a", "b"]


async def test_concurrency_is_bounded() -> None:
    active = 0
    peak = 0

    async def handler(key: int, force: bool) -> RunResult:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.03)
        active -= 1
        return RunResult("stop")

    q: WorkQueue[int] = WorkQueue(handler, concurrency=3)
    q.start()
    for i in range(10):
        q.add(i)
    await q.idle()
    await q.stop()
    assert peak == 3 and q.runs == 10


async def test_requeue_now_interval_and_backoff() -> None:
    seen: list[tuple[str, float]] = []
    loop = asyncio.get_running_loop()
    start = loop.time()
    plan = {"now": [RunResult("now"), RunResult("stop")],
            "err": [RunResult("error"), RunResult("error"), RunResult("stop")],
            "int": [RunResult("interval", 0.2), RunResult("stop")]}

    async def handler(key: str, force: bool) -> RunResult:
        seen.append((key, loop.time() - start))
        return plan[key].pop(0)

    q: WorkQueue[str] = WorkQueue(handler, backoff_base=0.05, backoff_cap=0.08, jitter=0.0)
    q.start()
    for k in plan:
        q.add(k)
    await asyncio.sleep(0.5)
    await q.stop()
    times = {k: [t for kk, t in seen if kk == k] for k in plan}
    assert len(times["now"]) == 2 and times["now"][1] - times["now"][0] < 0.05
    assert len(times["err"]) == 3
    assert 0.04 <= times["err"][1] - times["err"][0] < 0.15  # base backoff
    assert 0.07 <= times["err"][2] - times["err"][1] < 0.2   # doubled, capped at 0.08
    assert len(times["int"]) == 2 and times["int"][1] - times["int"][0] >= 0.19


async def test_interval_requeue_is_jittered() -> None:
    async def handler(key: int, force: bool) -> RunResult:
        return RunResult("interval", 100.0)

    q: WorkQueue[int] = WorkQueue(handler, jitter=0.1, rng=random.Random(7))
    q.start()
    for i in range(20):
        q.add(i)
    await q.idle()
    now = asyncio.get_running_loop().time()
    delays = [due - now for due in q.queued().values()]
    await q.stop()
    assert len(delays) == 20
    assert all(89.0 <= d <= 110.0 for d in delays)
    assert max(delays) - min(delays) > 5  # spread out, not all at once


async def test_suspended_keys_are_skipped_unless_forced() -> None:
    runs: list[tuple[str, bool]] = []

    async def handler(key: str, force: bool) -> RunResult:
        runs.append((key, force))
        return RunResult("stop")

    q: WorkQueue[str] = WorkQueue(handler, is_suspended=lambda k: k == "s")
    q.start()
    q.add("s")
    q.add("x")
    await q.idle()
    q.add("s", force=True)
    await q.idle()
    await q.stop()
    assert runs == [("x", False), ("s", True)]


async def test_earlier_due_time_wins_and_force_sticks() -> None:
    runs: list[bool] = []

    async def handler(key: str, force: bool) -> RunResult:
        runs.append(force)
        return RunResult("stop")

    q: WorkQueue[str] = WorkQueue(handler)
    q.add("a", 10.0, force=True)
    q.add("a", 0.0)
    assert list(q.queued()) == ["a"]
    q.start()
    await q.idle()
    await q.stop()
    assert runs == [True]


async def test_stop_waits_for_running_then_cancels() -> None:
    finished: list[str] = []

    async def handler(key: str, force: bool) -> RunResult:
        await asyncio.sleep(0.05 if key == "quick" else 5)
        finished.append(key)
        return RunResult("stop")

    q: WorkQueue[str] = WorkQueue(handler)
    q.start()
    q.add("quick")
    q.add("slow")
    await asyncio.sleep(0.01)
    all_done = await q.stop(deadline=0.2)
    assert finished == ["quick"] and not all_done


def test_bad_concurrency() -> None:
    async def handler(key: str, force: bool) -> RunResult:
        return RunResult()

    with pytest.raises(ValueError):
        WorkQueue(handler, concurrency=0)


async def test_the_depth_counts_only_work_due_now_and_the_waiting_apart() -> None:
    """An idle controller with 2 packages waiting for their interval read helmdeck_queue_depth 2; the depth
    counts what is ready to run, as controller-runtime's workqueue_depth (client-go's delaying queue keeps an
    AddAfter item apart until its time), and the waiting are counted apart. A running key is in neither."""
    release = asyncio.Event()

    async def handler(key: str, force: bool) -> RunResult:
        await release.wait()
        return RunResult("interval", interval=600)

    q: WorkQueue[str] = WorkQueue(handler, concurrency=1, jitter=0)
    q.start()
    for key in ("a", "b", "c"):
        q.add(key)
    await asyncio.sleep(0.05)  # "a" runs; "b" and "c" are due, waiting for the one slot
    assert q.depth() == (2, 0)
    release.set()
    await q.idle()
    assert q.depth() == (0, 3)  # each waits for its interval: nothing is ready
    depth = await asyncio.to_thread(q.depth)  # as the metrics server reads it
    assert depth == (0, 3)
    await q.stop()
