"""The app under load over a fixed engine (no cluster): 1,000 releases and a stream of engine events.

``python -m bench.tui_bench --fixed`` runs this; the default bench runs on the real local cluster.
Runs the real app headless (Textual's test driver renders every frame, it
only skips writing to a terminal) over a fixed engine (testkit/fixtures.py),
pushes ReleaseUpdated events at a fixed rate through the engine's own
refresh, presses keys meanwhile, and prints:

* event → table: from the engine emitting an update to the row's cells being written
  (rows are redrawn at most every 0.05 s, see ReleaseTable.upsert);
* key → frame: from a key press to the first frame showing the moved cursor;
* frame time: how long composing one frame takes, and frames per second;
* loop lag: how late a 5 ms timer fires on the app's event loop;
* filter key → table: from a keystroke in the filter to the refiltered table's first frame;
* gc pause: how long each of Python's cyclic collections took during the events (full ones apart).

    .venv/bin/python -m bench.tui_bench --fixed [--releases 1000] [--rate 100] [--seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

from engine.runtime.state import ActionOutcome, EngineSignal, ReleaseKey, ReleaseUpdated, RunningAction
from testkit.fixtures import bulk_engine, set_engine_status
from tui.app import HelmdeckApp
from tui.widgets.release_table import ReleaseTable


@dataclasses.dataclass
class Samples:
    """Durations in seconds, reported in milliseconds."""

    name: str
    values: list[float] = dataclasses.field(default_factory=list)

    def line(self) -> str:
        if not self.values:
            return f"{self.name:<22} no samples"
        ms = sorted(v * 1000 for v in self.values)
        p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
        return (f"{self.name:<22} n={len(ms):<6} p50={statistics.median(ms):7.2f} ms  p99={p99:7.2f} ms  "
                f"max={ms[-1]:7.2f} ms")


class GcPauses:
    """A ``gc.callbacks`` entry: each collection's duration, full (generation 2) and young apart."""

    def __init__(self, full: Samples, young: Samples):
        self.full, self.young, self.began = full, young, 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self.began = time.perf_counter()
        else:
            (self.full if info["generation"] == 2 else self.young).values.append(time.perf_counter() - self.began)


def _timed(target: Any, method: str, sink: Callable[[float, float], None]) -> None:
    """Wrap ``target.method`` (an instance attribute shadows the class's) to report (start, duration)."""
    original = getattr(target, method)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            sink(start, time.perf_counter() - start)

    setattr(target, method, wrapper)


async def measure(releases: int, rate: float, seconds: float) -> dict[str, Samples]:
    """Run one storm; returns every sample set by name."""
    engine = bulk_engine(releases)
    keys: list[ReleaseKey] = [v.key for v in engine.releases()]
    app = HelmdeckApp(engine, context="bench", start_engine=False)
    out = {name: Samples(name) for name in ("startup", "event → table", "upsert", "key → frame", "frame time",
                                            "loop lag", "filter key → table", "gc pause (full)",
                                            "gc pause (young)")}
    emitted: dict[int, float] = {}

    def on_event(event: EngineSignal) -> None:
        if isinstance(event, ReleaseUpdated):
            emitted[id(event.view)] = time.perf_counter()

    engine.subscribe(on_event)
    started = time.perf_counter()
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        out["startup"].values.append(time.perf_counter() - started)
        # As the app does once its engine has started (not here: the engine is fixed): start-up's objects frozen,
        # out of every full collection's walk (tui/collector.py).
        app._collector.start()
        table = app.query_one(ReleaseTable)
        assert table.row_count == releases, table.row_count
        screen = app.screen
        frame_count = 0
        waiting_key: list[tuple[float, int]] = []  # at most one (pressed at, expected cursor row)
        key_shown = asyncio.Event()

        def frame(start: float, took: float) -> None:
            nonlocal frame_count
            frame_count += 1
            out["frame time"].values.append(took)
            if waiting_key and table.cursor_row == waiting_key[0][1]:
                out["key → frame"].values.append(start + took - waiting_key.pop()[0])
                key_shown.set()

        _timed(screen, "_compositor_refresh", frame)
        original_upsert, original_flush = table.upsert, table.flush

        def upsert(view: Any) -> None:
            start = time.perf_counter()
            original_upsert(view)
            out["upsert"].values.append(time.perf_counter() - start)

        def flush() -> None:
            # The views about to be drawn; older snapshots of the same release are never drawn.
            drawn = [id(table._views[rid]) for rid in table._dirty if rid in table._views]
            original_flush()
            now = time.perf_counter()
            for ident in drawn:
                sent = emitted.pop(ident, None)
                if sent is not None:
                    out["event → table"].values.append(now - sent)

        table.upsert = upsert  # type: ignore[method-assign]
        table.flush = flush  # type: ignore[method-assign]

        running = True

        async def lag() -> None:
            while running:
                t = time.perf_counter()
                await asyncio.sleep(0.005)
                out["loop lag"].values.append(time.perf_counter() - t - 0.005)

        async def storm() -> int:
            sent = 0
            begin = time.perf_counter()
            while (elapsed := time.perf_counter() - begin) < seconds:
                while sent < elapsed * rate:
                    key = keys[(sent * 7919) % len(keys)]  # scattered over the table
                    view = engine.release(key)
                    assert view is not None
                    if sent % 2:
                        set_engine_status(engine, key, running=RunningAction("upgrade", time.time(), 300),
                                          ready=None)
                    else:
                        set_engine_status(engine, key, running=None, ready=not view.ready,
                                          last=ActionOutcome("upgrade", sent % 3 != 0, "bench", at=time.time()))
                    sent += 1
                await asyncio.sleep(0.002)
            return sent

        async def typist() -> None:
            while running:
                await asyncio.sleep(0.2)
                row = table.cursor_row + 1 if table.cursor_row < 30 else 0
                key_shown.clear()
                waiting_key.append((time.perf_counter(), row))
                app.simulate_key("down" if row else "home")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(key_shown.wait(), 2.0)
                waiting_key.clear()

        lag_task = asyncio.create_task(lag())
        typist_task = asyncio.create_task(typist())
        frames_before = frame_count
        t0 = time.perf_counter()
        collections = GcPauses(out["gc pause (full)"], out["gc pause (young)"])
        gc.callbacks.append(collections)
        sent = await storm()
        gc.callbacks.remove(collections)
        running = False
        await asyncio.gather(lag_task, typist_task)
        await pilot.pause()
        # Filter keystrokes (after the storm): from the key to the first frame of the refiltered table.
        rebuilt = asyncio.Event()
        _timed(table, "_refill", lambda _s, _t: rebuilt.set())
        await pilot.press("slash")
        for key in [*"rel-1", *["backspace"] * 5]:
            rebuilt.clear()
            pressed = time.perf_counter()
            app.simulate_key(key)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(rebuilt.wait(), 2.0)
                await pilot.pause()
                out["filter key → table"].values.append(time.perf_counter() - pressed)
        duration = time.perf_counter() - t0
        table.flush()
        print(f"{releases} releases, {sent} events in {seconds:.0f}s ({sent / seconds:.0f}/s), "
              f"{(frame_count - frames_before) / duration:.1f} frames/s")
    return out


def main(args: argparse.Namespace) -> None:
    print("== fixed engine, idle (no events)")
    idle = asyncio.run(measure(args.releases, 0.0, min(args.seconds, 5.0)))
    for s in idle.values():
        print("  " + s.line())
    print(f"== fixed engine, storm ({args.rate:.0f} events/s)")
    busy = asyncio.run(measure(args.releases, args.rate, args.seconds))
    for s in busy.values():
        print("  " + s.line())
    for name in ("key → frame", "loop lag"):
        if idle[name].values and busy[name].values:
            ratio = statistics.median(busy[name].values) / max(statistics.median(idle[name].values), 1e-6)
            print(f"  {name}: storm/idle p50 ratio {ratio:.1f}")
