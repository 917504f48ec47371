"""The app on the real local cluster: 300 and 1,000 releases, 100 storage writes per second.

Release records are created directly as Secrets (as the storage benches do, bench/storage_common.py);
the app runs headless over a real engine (Textual's test driver renders every frame, it only skips
writing to a terminal). Prints p50/p99 of:

* first full table: from building the engine to the first frame of the whole sorted table, at 300
  and 1,000 releases, with where the time goes (storage listed and decoded, views made, rows in the
  table, sorted and drawn); against ``helm list -n NS`` on the same releases in the same run;
* storage write → row drawn: a writer process creates new revisions (100/s, half of them of rows on
  screen); from the write's start to the first frame whose row, as drawn, shows that revision (or a later one);
  write → table: the same to the engine's view reaching the table, for every row;
* key → frame: a cursor key to the first frame showing the moved cursor, during the writes;
* loop lag: how late a 5 ms timer fires on the app's event loop, during the writes;
* gc pause: how long each of Python's cyclic collections took during the writes (full ones apart),
  and the UI thread's CPU time per second of writes;
* filter keystroke → table: a keystroke in the ``/`` line to the first frame of the refiltered table.

    .venv/bin/python -m bench.tui_bench [--releases 1000] [--startup-releases 300] [--rate 100]
        [--seconds 10] [--kubeconfig FILE | --cluster-dir DIR] [--fixed] [--history 10]

``--fixed`` runs the older bench over a fixed engine without a cluster (bench/tui_fixed.py). ``--history N``
gives every release N revisions and measures only the app's memory (resident set, now and peak) at
``--releases``, after every record is decoded.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench import tui_fixed
from bench.storage_common import (
    add_cluster_args,
    bench_cluster,
    core_api,
    ensure_namespace,
    release_record,
    secret_body,
    status_kib,
)
from bench.tui_fixed import GcPauses, Samples, _timed
from engine.helm import Helm
from engine.kube.client import KubeTarget
from engine.runtime.assemble import build_engine
from engine.runtime.state import ReleaseView
from localcluster import build
from tui.app import HelmdeckApp
from tui.widgets.release_table import ReleaseTable

# Every bench release is in this one namespace, the only one the engine watches (``-n``): releases elsewhere
# in the cluster (other benches', other tests') are not the bench's rows.
NAMESPACE = "bench-tui"
SIZE = (160, 50)
ON_SCREEN = 30  # rows at the top of the table that half of the writes go to
WRITER_WARMUP = 8.0  # seconds for the writer process to start and encode its Secrets before the first write

Rid = str  # "namespace/name", the table's row key


def names(count: int) -> list[tuple[str, str]]:
    """The bench's releases: ``rel-<i>`` in :data:`NAMESPACE`."""
    return [(NAMESPACE, f"rel-{i}") for i in range(count)]


def seed(target: KubeTarget, count: int) -> dict[Rid, int]:
    """Create the first ``count`` releases that are missing (one revision each); return every bench
    release's latest stored revision by row key."""
    core = core_api(target)
    latest: dict[Rid, int] = {}
    ensure_namespace(core, NAMESPACE)
    for s in core.list_namespaced_secret(NAMESPACE, label_selector="owner=helm").items:
        labels = (s.metadata.labels if s.metadata else None) or {}
        rid = f"{NAMESPACE}/{labels.get('name')}"
        latest[rid] = max(latest.get(rid, 0), int(labels.get("version", "0")))
    missing = [(ns, name) for ns, name in names(count) if f"{ns}/{name}" not in latest]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda k: core.create_namespaced_secret(k[0], secret_body(release_record(k[1], k[0], 1, 1))),
                      missing))
    latest.update({f"{ns}/{name}": 1 for ns, name in missing})
    return latest


def seed_history(target: KubeTarget, latest: dict[Rid, int], count: int, revisions: int) -> None:
    """Give each of the first ``count`` bench releases the revisions up to ``revisions`` it lacks."""
    core = core_api(target)
    missing = [(ns, name, v) for ns, name in names(count) for v in range(latest[f"{ns}/{name}"] + 1, revisions + 1)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda k: core.create_namespaced_secret(
            k[0], secret_body(release_record(k[1], k[0], k[2], k[2]))), missing))


def helm_list_seconds(target: KubeTarget, runs: int = 3, every: bool = True) -> float:
    """Median wall time of ``helm list -n NS --max 0`` (every release, helm 4), or of ``helm list -n NS`` (its
    default first 256 releases) when not ``every``."""
    cmd = [str(build.binary("helm4")), "list", "-n", NAMESPACE, *(["--max", "0"] if every else []), "-o", "json",
           *target.helm_args()]
    took = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        took.append(time.perf_counter() - start)
    return statistics.median(took)


def _writer(kubeconfig: Path, rate: float, start_at: float) -> None:
    """``--write-plan`` (a process of its own, as helm is): create each revision the JSON plan on stdin names
    (``[namespace, name, revision]``) at ``rate`` per second from monotonic time ``start_at``; print
    ``[namespace, name, revision, monotonic start]`` of each write as JSON. The Secrets are encoded before
    ``start_at`` and responses are not decoded, so the writer's own CPU use stays small."""
    plan = json.load(sys.stdin)
    core = core_api(KubeTarget(kubeconfig))
    sanitize = core.api_client.sanitize_for_serialization
    bodies = [(ns, name, version, sanitize(secret_body(release_record(name, ns, version, version))))
              for ns, name, version in plan]
    done: list[tuple[str, str, int, float]] = []

    def write(item: tuple[int, tuple[str, str, int, Any]]) -> None:
        i, (ns, name, version, body) = item
        delay = start_at + i / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        start = time.monotonic()
        resp: Any = core.create_namespaced_secret(ns, body, _preload_content=False)
        resp.drain_conn()  # read, not decoded, before the connection goes back to the pool
        resp.release_conn()
        done.append((ns, name, version, start))

    with ThreadPoolExecutor(8) as pool:  # writes are scheduled, not sequential: one slow write delays none
        list(pool.map(write, enumerate(bodies)))
    json.dump(done, sys.stdout)


class Probe:
    """Hooks into the app: frames, upserts, and the first full sorted table."""

    def __init__(self, app: HelmdeckApp, table: ReleaseTable, expected: int, marks: Callable[[str], None]):
        self.table, self.expected, self.mark = table, expected, marks
        self.frames = 0
        self.full_at: float | None = None
        self.full = asyncio.Event()
        self.seen: dict[tuple[Rid, int], float] = {}  # (row, revision) -> when its view reached the table
        self.watch_rows: list[Rid] = []
        self.drawn: dict[Rid, list[tuple[int, float]]] = {}  # row -> (revision shown, frame end)
        self.on_frame: list[Callable[[float], None]] = []
        self.frame_times: list[float] = []
        _timed(app.screen, "_compositor_refresh", self._frame)
        upsert = table.upsert
        decoded: set[Rid] = set()

        def count(view: ReleaseView) -> None:
            obs = view.observation
            if obs is not None:
                self.seen.setdefault((f"{view.namespace}/{view.name}", obs.version), time.monotonic())
                if len(decoded) < expected:
                    decoded.add(f"{view.namespace}/{view.name}")
                    if len(decoded) == expected:
                        self.mark("every row's record decoded (chart and engine columns)")

        def seen(view: ReleaseView) -> None:
            self.mark("first view reached the table")
            count(view)
            upsert(view)

        upsert_many = table.upsert_many

        def listed(views: Iterable[ReleaseView]) -> None:  # storage's labels; the records of the rows on screen
            self.mark("first view reached the table")
            views = list(views)
            for view in views:
                count(view)
            upsert_many(views)

        table.upsert = seen  # type: ignore[method-assign]
        table.upsert_many = listed  # type: ignore[method-assign]

    def settled(self) -> bool:
        """Every expected row is in the table, sorted, nothing pending."""
        return settled(self.table, self.expected)

    def _frame(self, _start: float, took: float) -> None:
        end = time.monotonic()
        self.frames += 1
        self.frame_times.append(took)
        if self.table.row_count >= self.expected:
            self.mark("every row in the table (a frame)")
        if self.full_at is None and self.settled():
            self.full_at = end
            self.full.set()
        span = cell_span(self.table, "revision") if self.watch_rows else (0, 0)
        for rid in self.watch_rows:
            shown = drawn_cell(self.table, rid, span)
            if shown and shown.isdigit():
                history = self.drawn.setdefault(rid, [])
                if not history or history[-1][0] != int(shown):
                    history.append((int(shown), end))
        for hook in self.on_frame:
            hook(end)


def settled(table: ReleaseTable, expected: int) -> bool:
    """Every expected row is in ``table``, sorted, nothing pending."""
    return table.row_count >= expected and table._resort_timer is None and not table._dirty and not table.busy


def cell_span(table: ReleaseTable, column: str) -> tuple[int, int]:
    """Where ``column``'s cells are on a drawn line: (first character, width)."""
    at = table.get_column_index(column)
    columns = table.ordered_columns
    return sum(c.get_render_width(table) for c in columns[:at]), columns[at].get_render_width(table)


def drawn_cell(table: ReleaseTable, rid: Rid, span: tuple[int, int]) -> str | None:
    """The text of one cell (at ``span``, :func:`cell_span`) as the table draws its line now (None when the row
    is not on screen): what the terminal shows, not the table's kept cells. Read on every frame for the rows
    watched, so it costs a lookup of the line the table drew (its own cache), not a new one."""
    index = table._positions.get(rid)
    top = int(table.scroll_y)
    if index is None or not top <= index < top + table.size.height - table.header_height:
        return None
    x, width = span
    return table.render_line(index - top + table.header_height).text[x:x + width].strip()


def _key(rid: Rid) -> tuple[str, str]:
    ns, _, name = rid.partition("/")
    return ns, name


async def launch(target: KubeTarget, expected: int, timeout: float = 120,
                 ) -> tuple[HelmdeckApp, Probe, dict[str, float], Any]:
    """Build the engine and app and wait for the first full table; returns the phase times (seconds
    from the start) and the running test context (exit it to stop)."""
    marks: dict[str, float] = {}
    t0 = time.monotonic()
    engine = build_engine(target, Helm(str(build.binary("helm4")), target), None, namespaces=[NAMESPACE])

    def mark(name: str) -> Callable[[float, float], None]:
        def sink(_start: float, _took: float) -> None:
            marks.setdefault(name, time.monotonic() - t0)
        return sink

    _timed(engine.observer, "_list_labels", mark("storage labels listed (metadata only)"))
    _timed(engine.observer, "wait_synced", mark("storage listed and decoded"))
    _timed(engine.book, "refresh_all", mark("views made"))
    _timed(engine.book, "load_statuses", mark("engine statuses read"))
    marks["engine built"] = time.monotonic() - t0
    app = HelmdeckApp(engine, context="bench")
    # Storage's labels may be listed before the app is mounted, and the mount's first frame is then the full
    # table: it is timed here (the probe is made once the table exists).
    early: list[float] = []
    screen = app.get_default_screen()

    def early_frame(_start: float, _took: float) -> None:
        tables = screen.query(ReleaseTable)
        if not early and tables and settled(tables.first(), expected):
            early.append(time.monotonic())
    _timed(screen, "_compositor_refresh", early_frame)
    ctx = app.run_test(size=SIZE)
    await ctx.__aenter__()
    probe = Probe(app, app.query_one(ReleaseTable), expected, lambda name: mark(name)(0, 0))
    marks["app mounted"] = time.monotonic() - t0
    if early:
        probe.full_at = early[0]
        probe.full.set()
    try:
        await asyncio.wait_for(probe.full.wait(), timeout)
    except TimeoutError:
        table = probe.table
        state = (f"views {table.total}, shown {table.shown_count}, "
                 f"pending {len(table._dirty)}, engine {len(engine.releases())}, "
                 f"app queue {len(app._events)} posted {app._events_posted}")
        await ctx.__aexit__(None, None, None)
        raise RuntimeError(f"the table never showed {expected} rows (has {table.row_count}; {state})") from None
    assert probe.full_at is not None
    marks["full sorted table drawn"] = probe.full_at - t0
    # The table's own list of row keys: DataTable's ordered_rows would make (and cache) a Row per row, 10,000
    # objects that the garbage collector then walks during the writes.
    rows = list(probe.table.row_keys)
    if rows != sorted(rows, key=probe.table._sort_keys.__getitem__):
        await ctx.__aexit__(None, None, None)
        raise RuntimeError("the full table is not sorted")
    return app, probe, marks, ctx


def _print_marks(count: int, marks: dict[str, float], target: KubeTarget) -> None:
    full = marks["full sorted table drawn"]
    every, first = helm_list_seconds(target), helm_list_seconds(target, every=False)
    print(f"== first full table at {count} releases: {full * 1000:.0f} ms "
          f"(helm list -n {NAMESPACE} --max 0: {every * 1000:.0f} ms, ratio {full / every:.2f}; "
          f"helm list -n {NAMESPACE}: {first * 1000:.0f} ms, ratio {full / first:.2f})")
    for name, at in sorted(marks.items(), key=lambda kv: kv[1]):
        print(f"  {at * 1000:7.0f} ms  {name}")


async def storm(target: KubeTarget, latest: dict[Rid, int], releases: int, rate: float,
                seconds: float) -> dict[str, Samples]:
    """The app at ``releases`` under ``rate`` storage writes/s for ``seconds``; every sample set."""
    out = {n: Samples(n) for n in ("write → row drawn", "write → table", "key → frame", "frame time", "loop lag",
                                   "gc pause (full)", "gc pause (young)", "filter key → table")}
    app, probe, marks, ctx = await launch(target, releases)
    table = probe.table
    try:
        await started(app, marks)  # the live figures are measured once every record is decoded
        _print_marks(releases, marks, target)
        on_screen = table.row_keys[:ON_SCREEN]
        probe.watch_rows = on_screen
        every = [f"{ns}/{name}" for ns, name in names(releases)]
        versions = dict(latest)
        plan = []
        for i in range(int(rate * seconds)):
            rid = on_screen[(i // 2) % len(on_screen)] if i % 2 == 0 else every[(i * 7919) % len(every)]
            versions[rid] += 1
            plan.append((*_key(rid), versions[rid]))
        start_at = time.monotonic() + WRITER_WARMUP
        writer = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.tui_bench", "--write-plan", "--kubeconfig", str(target.kubeconfig),
            "--rate", str(rate), "--start-at", str(start_at), stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE)
        assert writer.stdin is not None
        writer.stdin.write(json.dumps(plan).encode())
        writer.stdin.close()
        await asyncio.sleep(max(0.0, start_at - time.monotonic()))  # measured from the first write on
        running = True

        async def lag() -> None:
            while running:
                t = time.perf_counter()
                await asyncio.sleep(0.005)
                out["loop lag"].values.append(time.perf_counter() - t - 0.005)

        async def typist() -> None:
            while running:
                await asyncio.sleep(0.2)
                row = table.cursor_row + 1 if table.cursor_row < ON_SCREEN else 0
                shown = asyncio.Event()
                pressed = time.monotonic()

                def check(end: float, row: int = row, shown: asyncio.Event = shown, pressed: float = pressed) -> None:
                    if not shown.is_set() and table.cursor_row == row:
                        out["key → frame"].values.append(end - pressed)
                        shown.set()

                probe.on_frame.append(check)
                app.simulate_key("down" if row else "home")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(shown.wait(), 2.0)
                probe.on_frame.remove(check)

        tasks = [asyncio.create_task(lag()), asyncio.create_task(typist())]
        probe.frame_times = out["frame time"].values  # frames during the writes
        collections = GcPauses(out["gc pause (full)"], out["gc pause (young)"])
        cpu, wall = time.thread_time(), time.monotonic()
        gc.callbacks.append(collections)
        stdout, _ = await writer.communicate()
        gc.callbacks.remove(collections)
        cpu, wall = time.thread_time() - cpu, time.monotonic() - wall
        done: list[tuple[str, str, int, float]] = json.loads(stdout)
        await asyncio.sleep(1.0)  # the last writes reach the screen
        probe.frame_times = []
        running = False
        await asyncio.gather(*tasks)
        seen: dict[Rid, list[tuple[int, float]]] = {}
        for (r, v), t in probe.seen.items():
            seen.setdefault(r, []).append((v, t))
        for ns, name, version, start in done:
            rid = f"{ns}/{name}"
            reached = [t for v, t in seen.get(rid, ()) if v >= version]
            if reached:
                out["write → table"].values.append(min(reached) - start)
            if rid in probe.drawn:
                frames = [t for v, t in probe.drawn[rid] if v >= version]
                if frames:
                    out["write → row drawn"].values.append(min(frames) - start)
        print(f"  {len(done)} writes in {seconds:.0f} s ({len(done) / seconds:.0f}/s), "
              f"{sum(1 for _ns, n, _v, _s in done if f'{_ns}/{n}' in on_screen)} of rows on screen; "
              f"UI thread CPU {cpu / wall * 100:.0f}% of one core")
        await filter_keys(app, probe, out["filter key → table"])
    finally:
        await ctx.__aexit__(None, None, None)
    return out


async def filter_keys(app: HelmdeckApp, probe: Probe, sink: Samples) -> None:
    """Type ``rel`` in the filter and erase it, then ``03``: each keystroke to the first frame showing the rows
    it keeps (the table's first step of rows; the rest follows between frames)."""
    table = probe.table
    app.simulate_key("slash")
    await asyncio.sleep(0.3)
    for key in [*"rel", *["backspace"] * 3, "0", "3", "backspace", "backspace"]:
        shown = asyncio.Event()
        before = table.applied
        pressed = time.monotonic()

        def check(end: float, before: object = before, shown: asyncio.Event = shown,
                  pressed: float = pressed) -> None:
            if not shown.is_set() and table.applied is not before and table.applied == table.row_filter:
                sink.values.append(end - pressed)
                shown.set()

        probe.on_frame.append(check)
        app.simulate_key(key)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(shown.wait(), 5.0)
        probe.on_frame.remove(check)
        await asyncio.sleep(0.1)


async def started(app: HelmdeckApp, marks: dict[str, float]) -> None:
    """Wait until the engine's start made every view (records decoded, statuses read; the first table may
    come before, from storage's labels) and the table took them."""
    made = asyncio.Event()
    _timed(app.engine.book, "refresh_all", lambda _start, _took: made.set())
    if "views made" not in marks:
        await asyncio.wait_for(made.wait(), 600)
    await asyncio.sleep(2.0)  # the table takes the views (a flush every 25 ms)


async def memory(target: KubeTarget, count: int) -> None:
    """The app's memory once every record of ``count`` releases is decoded and every view made: its
    resident set now and at its peak (the decode workers apart: they end with the list). Run in a fresh
    process (``--measure-memory``): the seeding's own memory would count."""
    app, _probe, marks, ctx = await launch(target, count, timeout=900)
    try:
        await started(app, marks)
        rss, peak = status_kib("VmRSS") / 1024, status_kib("VmHWM") / 1024
        records = len(app.engine.observer.observations())
    finally:
        await ctx.__aexit__(None, None, None)
    _print_marks(count, marks, target)
    print(f"== memory at {count} releases, {records} records: RSS {rss:.0f} MiB, peak {peak:.0f} MiB (goal < 600 MB)")


async def first_table(target: KubeTarget, count: int) -> None:
    _app, _probe, marks, ctx = await launch(target, count)
    await ctx.__aexit__(None, None, None)
    _print_marks(count, marks, target)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--releases", type=int, default=1000)
    parser.add_argument("--startup-releases", type=int, default=300)
    parser.add_argument("--rate", type=float, default=100.0, help="storage writes (engine events with --fixed) per s")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--history", type=int, default=1,
                        help="revisions per release: with more than 1, only the app's memory at --releases")
    parser.add_argument("--fixed", action="store_true", help="the older bench over a fixed engine, no cluster")
    parser.add_argument("--write-plan", action="store_true", help=argparse.SUPPRESS)  # the writer process
    parser.add_argument("--measure-memory", action="store_true", help=argparse.SUPPRESS)  # --history's app process
    parser.add_argument("--start-at", type=float, default=0.0, help=argparse.SUPPRESS)
    add_cluster_args(parser)
    args = parser.parse_args()
    if args.write_plan:
        _writer(args.kubeconfig, args.rate, args.start_at)
        return
    if args.fixed:
        tui_fixed.main(args)
        return
    if args.measure_memory:
        asyncio.run(memory(KubeTarget(args.kubeconfig), args.releases))
        return
    with bench_cluster(args) as target:
        if args.history > 1:
            seed_history(target, seed(target, args.releases), args.releases, args.history)
            subprocess.run([sys.executable, "-m", "bench.tui_bench", "--measure-memory", "--releases",
                            str(args.releases), "--kubeconfig", str(target.kubeconfig)], check=True)
            return
        latest = seed(target, args.startup_releases)
        if len(latest) <= args.startup_releases:  # a fresh cluster: only the first releases exist yet
            asyncio.run(first_table(target, args.startup_releases))
        else:
            print(f"(more than {args.startup_releases} bench releases exist already: no first-table figure at "
                  f"{args.startup_releases}; use a fresh --cluster-dir)")
        latest = seed(target, args.releases)
        busy = asyncio.run(storm(target, latest, args.releases, args.rate, args.seconds))
        print(f"== {args.releases} releases, {args.rate:.0f} storage writes/s")
        for s in busy.values():
            print("  " + s.line())


if __name__ == "__main__":
    main()
