"""Fresh-process no-op reconcile: ``helmdeck reconcile --once`` vs ``helm upgrade --install`` of each.

For 50 and then 200 unchanged packages (installed first, not timed), in the
same run against the same local cluster:

- helmdeck: a fresh ``helmdeck reconcile --once`` process over the package
  folder (start-up, storage sync, resolution, decision; nothing rendered or
  upgraded when nothing changed) — the median of five runs;
- helm: ``helm upgrade --install`` of each package in turn with the same
  chart and values (what a script without helmdeck runs; a revision each).

Prints the times, checks that helmdeck made no revision, and prints helm's
time over helmdeck's (issue 24 asks for at least 20x at 50). First, a headless
command with nothing to do: ``helmdeck reconcile --once`` on an empty folder
(issue 24 asks for at most 0.3 s), beside its floor: a process that only imports
asyncio and the kubernetes package's kubeconfig loader, which helmdeck keeps.
``HELMDECK_BENCH_SIZES=50`` picks other sizes; ``HELMDECK_BENCH_BASELINE=DIR`` also times the no-op
from the helmdeck source checkout in DIR (another commit: before/after in the same run);
``HELMDECK_BENCH_PROFILE=1`` prints a cProfile of one more fresh run at the largest size.
"""

from __future__ import annotations

import json
import os
import pstats
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from bench.service_common import Bench, run
from engine.helm import UpgradeOptions
from engine.resolve.release import resolve

SIZES = tuple(int(n) for n in os.environ.get("HELMDECK_BENCH_SIZES", "50,200").split(","))
RUNS = 5
BASELINE = Path(os.environ["HELMDECK_BENCH_BASELINE"]) if os.environ.get("HELMDECK_BENCH_BASELINE") else None


def reconcile_once(bench: Bench, packages: Path, log: Path, profile: Path | None = None,
                   source: Path | None = None) -> tuple[float, float]:
    """Seconds one fresh ``helmdeck reconcile --once`` takes, wall and CPU (user + system of the process and
    its children); raises when it does not converge.
    ``profile``: run it under cProfile, writing the statistics there; ``source``: run helmdeck from this
    source checkout (another commit, for a before/after in the same run)."""
    prefix = ["-m", "cProfile", "-o", str(profile)] if profile else []
    # One package set for both folders: the larger one holds the smaller one's releases.
    args = [sys.executable, *prefix, "-m", "helmdeck", "reconcile", "--once", "--no-lease", "--kubeconfig",
            str(bench.target.kubeconfig), "--helm", bench.helm.binary, "-n", bench.namespace,
            "--packages", str(packages), "--package-set", "bench", "--log-file", str(log)]
    start, cpu = time.perf_counter(), children_cpu()
    # As an installed helmdeck starts: with its bytecode cache (an environment without one compiles every module).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.run(args, capture_output=True, text=True, timeout=1800, check=False, cwd=source,
                          env={**env, **bench.helm.env})
    elapsed, cpu = time.perf_counter() - start, children_cpu() - cpu
    if proc.returncode != 0:
        unsettled = "\n".join(line for line in proc.stdout.splitlines() if not line.endswith(": InSync"))
        raise RuntimeError(f"reconcile --once exited {proc.returncode}:\n{unsettled[-3000:]}\n{proc.stderr[-2000:]}")
    return elapsed, cpu


def children_cpu() -> float:
    """CPU seconds (user + system) of every child process waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def revision_count(bench: Bench) -> int:
    secrets = bench.core.list_namespaced_secret(bench.namespace, label_selector="owner=helm")
    return len(secrets.items)


# What every helmdeck command imports before its own modules: asyncio, then (the cycle collector paused, as
# helmdeck's main pauses it) the kubernetes package's kubeconfig loader with its __init__ deferred, as helmdeck
# does, hence pydantic, requests, oauthlib, dateutil, urllib3.
FLOOR = ("import asyncio, gc; gc.disable(); import yaml; from engine.kube.deferred import defer; defer(); "
         "import kubernetes.config, kubernetes.client.rest")


def empty_folder(bench: Bench) -> None:
    """Time a fresh ``reconcile --once`` of an empty folder (every namespace, its Lease taken and let go, as
    the command is run by hand) and the floor process, interleaved, median of RUNS; prints both."""
    empty = bench.folder / "empty"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # from the bytecode cache
    commands = {
        "reconcile --once, empty folder": [
            sys.executable, "-m", "helmdeck", "reconcile", "--once", "--kubeconfig", str(bench.target.kubeconfig),
            "--helm", bench.helm.binary, "--packages", str(empty), "--log-file", str(bench.folder / "empty.log")],
        "its floor: python, asyncio, the kubeconfig loader": [sys.executable, "-c", FLOOR],
    }
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(RUNS):
        for name, args in commands.items():
            start, cpu = time.perf_counter(), children_cpu()
            subprocess.run(args, capture_output=True, timeout=120, check=True, env=env)
            times[name].append((time.perf_counter() - start, children_cpu() - cpu))
    for name, runs in times.items():
        print(f"{name}, median of {RUNS}: {statistics.median(t for t, _ in runs):.3f} s, "
              f"{statistics.median(c for _, c in runs):.3f} s CPU (load average {os.getloadavg()[0]:.1f})",
              flush=True)


async def main_async(bench: Bench) -> None:
    empty_folder(bench)
    chart = bench.chart()
    results: list[tuple[int, float, float, float, float]] = []
    done = 0
    for size in SIZES:
        folder = bench.folder / f"packages-{size}"
        folder.mkdir()
        specs = []
        for i in range(done, size):  # the larger set includes the smaller one's packages
            specs.append(bench.package(f"pkg-{i:03d}", chart))
        for spec in [*specs]:
            spec.file.rename(folder / spec.file.name)
        if done:
            for old in (bench.folder / f"packages-{SIZES[SIZES.index(size) - 1]}").glob("*.yaml"):
                (folder / old.name).write_text(old.read_text())
        packages = sorted(folder.glob("*.yaml"))
        print(f"{size} packages: installing (not timed) ...", flush=True)
        first, _ = reconcile_once(bench, folder, bench.folder / "install.log")
        print(f"  install of {size - done} new packages by reconcile --once: {first:.1f} s", flush=True)
        before = revision_count(bench)
        runs = [reconcile_once(bench, folder, bench.folder / "noop.log") for _ in range(RUNS)]
        if revision_count(bench) != before:
            raise RuntimeError("a no-op reconcile made a revision")
        ours, ours_cpu = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
        print(f"  helmdeck reconcile --once (fresh process), median of {RUNS}: {ours:.2f} s, {ours_cpu:.2f} s CPU "
              f"(runs: {', '.join(f'{t:.2f}' for t, _ in runs)}; load average {os.getloadavg()[0]:.1f})", flush=True)
        if BASELINE:
            prior = [reconcile_once(bench, folder, bench.folder / "noop.log", source=BASELINE) for _ in range(RUNS)]
            old_wall, old_cpu = statistics.median(r[0] for r in prior), statistics.median(r[1] for r in prior)
            print(f"  the same from {BASELINE}, median of {RUNS}: {old_wall:.2f} s, {old_cpu:.2f} s CPU "
                  f"({old_wall / ours:.1f}x this one's wall time, {old_cpu / ours_cpu:.1f}x its CPU)", flush=True)
        if os.environ.get("HELMDECK_BENCH_PROFILE") and size == SIZES[-1]:  # before helm changes them all
            stats_file = bench.folder / "noop.prof"
            reconcile_once(bench, folder, bench.folder / "noop.log", stats_file)
            pstats.Stats(str(stats_file)).sort_stats("cumulative").print_stats(35)
        opts = UpgradeOptions(install=True, timeout=60, wait=False)
        from engine.package.load import load_package

        start, cpu = time.perf_counter(), children_cpu()
        for path in packages:
            spec = load_package(path)
            await bench.helm.upgrade(spec.release_name, bench.namespace, chart, dict(resolve(spec).values), opts)
        theirs, theirs_cpu = time.perf_counter() - start, children_cpu() - cpu
        print(f"  helm upgrade --install of each: {theirs:.2f} s, {theirs_cpu:.2f} s CPU "
              f"({theirs / size * 1000:.0f} ms per package; load average {os.getloadavg()[0]:.1f})", flush=True)
        results.append((size, ours, theirs, ours_cpu, theirs_cpu))
        done = size
    print()
    print(json.dumps([{"packages": n, "helmdeck_s": round(a, 2), "helm_s": round(b, 2), "ratio": round(b / a, 1),
                       "helmdeck_cpu_s": round(c, 2), "helm_cpu_s": round(d, 2), "cpu_ratio": round(d / c, 1)}
                      for n, a, b, c, d in results]))
    # On a shared machine wall times swing with the load; CPU time (the client processes' own, not the API
    # server's) is the steadier figure.
    for n, a, b, c, d in results:
        print(f"{n:4d} unchanged packages: helmdeck {a:6.2f} s, helm {b:7.2f} s, helm/helmdeck {b / a:5.1f}x; "
              f"CPU {c:.2f} s vs {d:.2f} s, {d / c:5.1f}x")


def main(argv: Sequence[str] | None = None) -> None:
    run(__doc__ or "", main_async, argv)


if __name__ == "__main__":
    main()
