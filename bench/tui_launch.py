"""Launch → the first screen whose visible rows all show their records, through a terminal: ``helmdeck -n NS``
started in tmux, as a user starts it (issue 36, goal 1).

The releases are created directly in helm's storage, all in one namespace (Secrets, one revision each:
``bench.storage_common.seed_namespace``, ``rel-0`` .. in ``bench-releases-N``, the namespace
``bench/empty_folder.py`` uses too; made once, kept for the next run). Each run starts a fresh ``helmdeck``
process (``python -m helmdeck --kubeconfig FILE -n NS --packages DIR --helm HELM``, with its bytecode cache, as
an installed helmdeck starts; an empty packages folder unless ``--packages``) in the pane of a detached tmux
session of a fixed size (160 × 50) on a private socket, and reads the pane (``tmux capture-pane -p``) every
few milliseconds until the screen shows the first full table with its records. Times run from just before
the spawn (``tmux respawn-pane``; the tmux server is started beforehand), so they include the interpreter's
start, every import, the engine, the storage reads and the first frames. The app is then quit with ``q``
(its engine releases the lease) before the next run.

The first full table is the first screen on which, at once:

* the header says ``N releases (N shown)``, N being every release ``helm list -n NS --max 0`` lists;
* the lines between the column header and the footer hold exactly the first releases in the
  table's default order (namespace, then name, digit runs compared as numbers), one per line, as
  many as fit (all N when fewer), each with its revision and Helm status; no line missing, none out of
  order.

The goal's figure is the first full table whose visible rows also show their records: every one of those
rows shows the chart (``name-version``), the app version, the revision and the status that ``helm list``
gives for it (cells read at the column header's offsets, a cell cut with ``…`` matching its start); storage
labels alone give only the revision and status, so a row listed from them says ``…`` for its chart.

What the app lists to show that screen (engine/storage/observer.py ``LabelsAhead``): one metadata-only list of
storage's labels (``PartialObjectMetadataList``, ``owner=helm,status!=superseded``, pages of 10,000: names, helm's
name/status/version labels, no payload), sent as soon as the kubeconfig is read, before the engine's modules and
Textual import; then one list of the records of the rows its first screen shows (``name in (...)``, every
revision of each); every other record is listed and decoded after that screen is drawn. ``helm list`` lists and
decodes every record of the namespace (``owner=helm``).

Also printed: the first frame (the first screen with the app's header), the first full table (labels
only), the app process's CPU time (user + system, every thread, from /proc; steadier than wall time on a
loaded machine) when each table was seen; against, in the same run, ``helm list -n NS --max 0 -o json`` (the
goal's yardstick: ≤ 1.0× at 10,000 releases; ≤ 0.5 s at 300) and ``helm list -n NS -o json`` on the same
releases, ``helmdeck --version`` (process start and the command line; it also runs ``helm version``), the
interpreter alone (``python -c pass``) and ``import textual.app`` alone. Medians of ``--runs`` (5), the
load average with each run. ``--baseline DIR`` also runs helmdeck from the source checkout in DIR (another
commit), interleaved run by run with this one. ``--keep`` leaves the tmux server running
(``tmux -L NAME attach``).

    .venv/bin/python -m bench.tui_launch [--releases 300] [--runs 5] [--packages DIR] [--baseline DIR]
        [--kubeconfig FILE | --cluster-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.storage_common import add_cluster_args, bench_cluster, releases_namespace, seed_namespace
from engine.kube.client import KubeTarget
from localcluster import build
from tui.model import natural_key

SIZE = (160, 50)
POLL = 0.003  # seconds between two reads of the pane (a read itself takes a few ms: a tmux client process)
TIMEOUT = 60.0
ROOT = Path(__file__).resolve().parent.parent  # this checkout
# The columns a row is checked in, by their header's words (the app's tui.model.COLUMNS titles).
CHECKED = ("NAMESPACE", "NAME", "CHART", "APP", "REV", "HELM STATUS")


@dataclass(frozen=True)
class Row:
    """A release as ``helm list -o json`` gives it: what its row must show."""

    namespace: str
    name: str
    chart: str
    app_version: str
    revision: int
    status: str


@dataclass
class Launch:
    """One run's marks, in seconds from just before the spawn (None: not seen)."""

    first_frame: float | None = None
    full: float | None = None
    decoded: float | None = None
    full_cpu: float | None = None  # the app process's CPU seconds (user + system, all threads) when seen full
    decoded_cpu: float | None = None
    reads: int = 0  # pane reads until the table was full and decoded
    screen: str = ""  # the last screen read


@dataclass
class Variant:
    """A helmdeck to launch: this checkout or ``--baseline``'s."""

    name: str
    source: Path
    runs: list[Launch] = field(default_factory=list)


def helm_list(target: KubeTarget, namespace: str, every: bool = True) -> list[str]:
    """``helm list -n NS -o json`` (helm 4: every status), with ``--max 0`` (every release) when ``every``."""
    return [str(build.binary("helm4")), "list", "-n", namespace, *(["--max", "0"] if every else []), "-o", "json",
            *target.helm_args()]


def release_order(target: KubeTarget, namespace: str) -> list[Row]:
    """Every release helm lists in ``namespace`` in the app's default order: sorted by namespace, then name,
    digit runs as numbers (tui.model.natural_key)."""
    out = subprocess.run(helm_list(target, namespace), check=True, capture_output=True, text=True).stdout
    rows = [Row(r["namespace"], r["name"], r["chart"], r.get("app_version") or "", int(r["revision"]), r["status"])
            for r in json.loads(out)]
    return sorted(rows, key=lambda r: (natural_key(r.namespace), natural_key(r.name)))


def _cell_matches(drawn: str, want: str) -> bool:
    """A drawn cell shows ``want``, maybe cut to the column's width and ended with ``…`` (a lone ``…`` is a
    cell not known yet)."""
    return drawn == want or (len(drawn) > 1 and drawn.endswith("…") and want.startswith(drawn[:-1]))


def _cells(line: str, starts: list[int]) -> list[str]:
    """The cells of ``line`` cut at the column offsets ``starts`` (the last runs to the next column's start
    or the line's end), stripped."""
    ends = [*starts[1:], None]
    return [line[a:b].strip() for a, b in zip(starts, ends, strict=True)]


def screen_state(screen: str, expected: Sequence[Row]) -> tuple[bool, bool, bool]:
    """``(app shown, full table, full table with its records)`` of one pane read (see the module docstring)."""
    lines = screen.split("\n")[:SIZE[1]]
    shown = any("helmdeck" in line and "context" in line for line in lines[:3])
    if not shown or not any(f"{len(expected)} releases ({len(expected)} shown)" in line for line in lines[:6]):
        return shown, False, False
    head = next((i for i, line in enumerate(lines) if line.startswith("NAMESPACE")), None)
    if head is None:
        return shown, False, False
    header = lines[head]
    starts = [header.find(f"{title} ") if title != "NAMESPACE" else 0 for title in CHECKED]
    if any(at < 0 for at in starts) or starts != sorted(starts):
        return shown, False, False
    starts.append(header.find("STATE", starts[-1]))  # the status column ends where the next one starts
    if starts[-1] < 0:
        return shown, False, False
    rows = lines[head + 1:SIZE[1] - 1]  # down to the footer, the screen's last line
    fit = min(len(expected), len(rows))
    decoded = True
    for line, want in zip(rows[:fit], expected, strict=False):
        ns, name, chart, app, rev, status = _cells(line, starts)[:len(CHECKED)]
        if not (_cell_matches(ns, want.namespace) and _cell_matches(name, want.name)) or rev != str(want.revision) \
                or want.status not in status:
            return shown, False, False
        app_shown = _cell_matches(app, want.app_version) if want.app_version else not app
        # The app writes a chart NAME@VERSION, helm list NAME-VERSION.
        if not (_cell_matches(chart.replace("@", "-", 1), want.chart) and app_shown):
            decoded = False  # a row listed from storage's labels: its chart and app version say "…"
    full = all(not line.strip() for line in rows[fit:])  # nothing but blank lines below the last release
    return shown, full, full and decoded


class Terminal:
    """A tmux server on a private socket with one session of :data:`SIZE`, its pane kept when its
    process ends (``remain-on-exit``), so a run is a ``respawn-pane`` of an existing pane."""

    def __init__(self, name: str, env: dict[str, str]):
        self.name = name
        self.env = env
        self._tmux(["-f", "/dev/null", "new-session", "-d", "-s", "launch", "-x", str(SIZE[0]), "-y",
                    str(SIZE[1]), "sleep 86400"])
        self._tmux(["set-option", "-g", "remain-on-exit", "on"])
        self._tmux(["set-option", "-g", "status", "off"])  # the whole window is the pane
        self._tmux(["set-option", "-g", "default-terminal", "tmux-256color"])
        self.socket = Path(self._tmux(["display-message", "-p", "#{socket_path}"], capture=True).strip())

    def _tmux(self, args: list[str], capture: bool = False) -> str:
        proc = subprocess.run(["tmux", "-L", self.name, *args], check=True, env=self.env, text=True,
                              capture_output=capture)
        return proc.stdout if capture else ""

    def spawn(self, argv: list[str], cwd: Path) -> None:
        self._tmux(["respawn-pane", "-k", "-t", "launch", "-c", str(cwd), *argv])

    def read(self) -> str:
        return self._tmux(["capture-pane", "-p", "-t", "launch"], capture=True)

    def pid(self) -> int:
        """The pane's process (the app: started without a shell)."""
        return int(self._tmux(["display-message", "-p", "-t", "launch", "#{pane_pid}"], capture=True))

    def dead(self) -> bool:
        return self._tmux(["display-message", "-p", "-t", "launch", "#{pane_dead}"], capture=True).strip() == "1"

    def quit_app(self) -> bool:
        """Press ``q`` and wait up to 30 s for the app to end (running helm actions may finish first);
        True when it ended by itself."""
        self._tmux(["send-keys", "-t", "launch", "q"])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.dead():
                return True
            time.sleep(0.05)
        return False

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.name, "kill-server"], check=False, env=self.env)
        self.socket.unlink(missing_ok=True)  # a killed server leaves its socket file


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` so far (/proc/PID/stat, in clock ticks), None when gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: fields 14 and 15


def launch(term: Terminal, argv: list[str], cwd: Path, expected: Sequence[Row]) -> Launch:
    """One timed start: spawn, read the pane until the full table shows its records, quit."""
    run = Launch()
    start = time.perf_counter()
    term.spawn(argv, cwd)
    pid = term.pid()
    while time.perf_counter() - start < TIMEOUT:
        screen = term.read()
        at = time.perf_counter() - start
        run.reads += 1
        run.screen = screen
        shown, full, decoded = screen_state(screen, expected)
        if shown and run.first_frame is None:
            run.first_frame = at
        if full and run.full is None:
            run.full, run.full_cpu = at, cpu_seconds(pid)
        if decoded:
            run.decoded, run.decoded_cpu = at, cpu_seconds(pid)
            break
        time.sleep(POLL)
    if not term.quit_app():
        print("  (the app did not quit within 30 s of q: killed)", flush=True)
    return run


def command_seconds(argv: list[str], cwd: Path, env: dict[str, str], runs: int) -> float:
    """Median wall time of ``argv`` run to its end (output captured)."""
    took = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, cwd=cwd, env=env, check=True, capture_output=True)
        took.append(time.perf_counter() - start)
    return statistics.median(took)


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if len(known) == len(values) and known else None


def _ms(value: float | None) -> str:
    return "never" if value is None else f"{value * 1000:.0f} ms"


def measure(target: KubeTarget, args: argparse.Namespace, namespace: str, work: Path) -> None:
    expected = release_order(target, namespace)
    if len(expected) != args.releases:
        print(f"({namespace} holds {len(expected)} releases, not {args.releases}: the table is of all of them)")
    packages = args.packages or work / "packages"
    packages.mkdir(exist_ok=True)
    # As an installed helmdeck starts: with its bytecode cache (this machine's environment may forbid writing
    # one, which would compile every module on every start). Settings and logs in the bench's own folders.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env |= {"XDG_CONFIG_HOME": str(work / "config"), "XDG_STATE_HOME": str(work / "state"),
            "COLORTERM": "truecolor", "TERM": "tmux-256color"}
    helm = str(build.binary("helm4"))
    argv = [sys.executable, "-m", "helmdeck", "--kubeconfig", str(target.kubeconfig), "-n", namespace,
            "--packages", str(packages), "--helm", helm]
    variants = [Variant("this checkout", ROOT)]
    if args.baseline:
        variants.append(Variant(f"baseline {args.baseline}", args.baseline.resolve()))
    term = Terminal(f"helmdeck-launch-{os.getpid()}", env)
    every, first_page = helm_list(target, namespace), helm_list(target, namespace, every=False)
    helm_runs: list[float] = []
    try:
        for v in variants:  # not timed: bytecode written, files in the page cache
            launch(term, argv, v.source, expected)
        for i in range(args.runs):
            for v in variants if i % 2 == 0 else variants[::-1]:
                run = launch(term, argv, v.source, expected)
                v.runs.append(run)
                print(f"  {v.name}: first frame {_ms(run.first_frame)}, full table {_ms(run.full)} (CPU "
                      f"{_ms(run.full_cpu)}), with records {_ms(run.decoded)} (CPU {_ms(run.decoded_cpu)}) "
                      f"({run.reads} pane reads; load average {os.getloadavg()[0]:.1f})", flush=True)
                if run.decoded is None:
                    print("  the last screen read:\n" + run.screen, flush=True)
            helm_runs.append(command_seconds(every, ROOT, env, 1))  # the yardstick, between the launches
    finally:
        if args.keep:
            print(f"tmux server kept: tmux -L {term.name} attach")
        else:
            term.close()
    helm_every = f"helm list -n {namespace} --max 0 -o json"
    measured = {helm_every: statistics.median(helm_runs)}
    floors: list[tuple[str, Callable[[], float]]] = [
        (f"helm list -n {namespace} -o json (its first 256)",
         lambda: command_seconds(first_page, ROOT, env, args.runs)),
        *((f"helmdeck --version ({v.name})",
           lambda v=v: command_seconds([*argv[:3], "--helm", helm, "--version"], v.source, env, args.runs))
          for v in variants),
        ("python -c pass (the interpreter)", lambda: command_seconds([sys.executable, "-c", "pass"], ROOT, env,
                                                                       args.runs)),
        ("python -c 'import textual.app'", lambda: command_seconds([sys.executable, "-c", "import textual.app"],
                                                                     ROOT, env, args.runs)),
    ]
    measured |= {name: took() for name, took in floors}
    goal = "≤ 1.0x helm list --max 0" if len(expected) >= 10_000 else "≤ 500 ms" if len(expected) <= 300 else "-"
    print(f"== launch → first full table with its records, {len(expected)} releases in {namespace}, through tmux "
          f"{SIZE[0]}x{SIZE[1]}, median of {args.runs} (load average "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())})")
    print("  the app lists first: storage's labels (metadata only, one list), then the records of the rows on its "
          "first screen (one list by their names); every other record after that screen")
    yardstick = measured[helm_every]
    for v in variants:
        full, decoded = _median([r.full for r in v.runs]), _median([r.decoded for r in v.runs])
        ratios = [r.decoded / h for r, h in zip(v.runs, helm_runs, strict=True) if r.decoded is not None]
        ratio = (f"; {decoded / yardstick:.2f}x helm list --max 0 (median of the runs' own ratios "
                 f"{statistics.median(ratios):.2f}x)" if decoded is not None and len(ratios) == len(v.runs) else "")
        print(f"  {v.name}: with records {_ms(decoded)}{ratio} (goal {goal}); first frame "
              f"{_ms(_median([r.first_frame for r in v.runs]))}, full table (labels) {_ms(full)}; the app's CPU "
              f"then {_ms(_median([r.decoded_cpu for r in v.runs]))} and {_ms(_median([r.full_cpu for r in v.runs]))}")
    if len(variants) == 2:
        this, base = (_median([r.decoded for r in v.runs]) for v in variants)
        if this and base:
            print(f"  baseline / this checkout (with records): {base / this:.2f}x")
    for name, took in measured.items():
        print(f"  {name}: {took * 1000:.0f} ms")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--releases", type=int, default=300, help="releases in the one namespace")
    parser.add_argument("--runs", type=int, default=5, help="timed launches of each helmdeck (median)")
    parser.add_argument("--packages", type=Path, help="the app's packages folder (default: an empty one)")
    parser.add_argument("--baseline", type=Path, help="also launch helmdeck from this source checkout, interleaved")
    parser.add_argument("--keep", action="store_true", help="leave the tmux server running")
    add_cluster_args(parser)
    args = parser.parse_args(argv)
    if args.packages is not None and not args.packages.is_dir():
        parser.error(f"--packages {args.packages} is not a directory")
    if args.baseline is not None and not (args.baseline / "helmdeck" / "__main__.py").is_file():
        parser.error(f"--baseline {args.baseline} is not a helmdeck source checkout (no helmdeck/__main__.py)")
    with bench_cluster(args) as target, tempfile.TemporaryDirectory(prefix="helmdeck-launch-") as work:
        namespace = releases_namespace(args.releases)
        seed_namespace(target, namespace, args.releases)
        measure(target, args, namespace, Path(work))


if __name__ == "__main__":
    main()
