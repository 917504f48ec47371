"""Fresh installs from a folder: one ``helmdeck reconcile --once`` of N new Packages vs sequential ``helm install``.

In one run against one local cluster (issue 36, goal 3: at most 0.5x sequential helm install at 100):

- helmdeck: a fresh ``helmdeck reconcile --once`` process over a folder of N Packages (default 100) of a
  one-ConfigMap chart from a folder, none installed yet; the time from launch until it exits with every
  release installed, its CPU seconds and its helm children's (a ``--helm`` wrapper counts the helm processes
  by subcommand, dry runs apart: the goal is one helm process per install); then (not the goal's figure)
  another fresh run after every Package's values changed: each is rendered to decide (a change that renders
  the same manifest makes no revision), then upgraded;
- helm: ``helm install`` of the same chart and values, one release after the other, as a script without
  helmdeck runs it; its time and CPU seconds.

The machine's load average is printed with each figure: on a shared machine the wall times swing with it; CPU
seconds are the steadier figure. ``HELMDECK_BENCH_SIZES=100`` picks the sizes (each in a fresh namespace);
``HELMDECK_BENCH_BASELINE=DIR`` also runs the helmdeck of the source checkout in DIR (another commit: before and
after in the same run). Run: ``python -m bench.install_fresh [--cluster-dir DIR]``.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from kubernetes import client

from bench.noop_fresh import children_cpu
from bench.service_common import Bench, run
from testkit.packages import write_package

SIZES = tuple(int(n) for n in os.environ.get("HELMDECK_BENCH_SIZES", "100").split(","))
BASELINE = Path(os.environ["HELMDECK_BENCH_BASELINE"]) if os.environ.get("HELMDECK_BENCH_BASELINE") else None


def helm_counter(work: Path, helm: str) -> tuple[Path, Path]:
    """A helm wrapper logging each command line (then running the real one in its place); returns (wrapper, log)."""
    log = work / "helm-commands.log"
    log.touch()
    wrapper = work / "helm-counted"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> {shlex.quote(str(log))}\nexec {shlex.quote(helm)} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper, log


def kinds(lines: Sequence[str]) -> Counter[str]:
    """helm commands by subcommand, a dry run counted apart (``upgrade --dry-run``)."""
    out: Counter[str] = Counter()
    for line in lines:
        words = line.split()
        if words:
            out[words[0] + (" --dry-run" if any(w.startswith("--dry-run") for w in words) else "")] += 1
    return out


def fresh_namespace(bench: Bench) -> str:
    name = f"bench-{uuid.uuid4().hex[:6]}"
    bench.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    return name


def write_folder(folder: Path, namespace: str, chart: Path, size: int, value: str = "v") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(size):
        write_package(folder, f"p{i:04d}", namespace, chart=chart, values={"value": f"{value}{i}"}, timeout="1m")


def reconcile_once(bench: Bench, namespace: str, folder: Path, wrapper: Path, log: Path,
                   source: Path | None) -> dict[str, float | str]:
    """One fresh ``reconcile --once`` of ``folder``: wall and CPU seconds (with its children's), the load
    before and after, and the helm processes it ran by subcommand."""
    before = len(log.read_text().splitlines())
    load = os.getloadavg()[0]
    args = [sys.executable, "-m", "helmdeck", "reconcile", "--once", "--no-lease", "--kubeconfig",
            str(bench.target.kubeconfig), "--helm", str(wrapper), "-n", namespace, "--packages", str(folder),
            "--log-file", str(bench.folder / f"{namespace}.log")]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # as installed: bytecode cached
    start, cpu = time.perf_counter(), children_cpu()
    proc = subprocess.run(args, capture_output=True, text=True, timeout=3600, check=False, cwd=source,
                          env={**env, **bench.helm.env})
    elapsed, cpu = time.perf_counter() - start, children_cpu() - cpu
    if proc.returncode != 0:
        raise RuntimeError(f"reconcile --once exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    spawned = kinds(log.read_text().splitlines()[before:])
    return {"wall_s": elapsed, "cpu_s": cpu, "load_before": load, "load_after": os.getloadavg()[0],
            "spawned": sum(n for k, n in spawned.items() if k != "version"),
            "helm": ", ".join(f"{k} {n}" for k, n in spawned.most_common())}


def helmdeck_installs(bench: Bench, size: int, chart: Path, wrapper: Path, log: Path,
                      source: Path | None = None) -> tuple[dict[str, float | str], dict[str, float | str]]:
    """A fresh ``reconcile --once`` installing ``size`` new Packages in a new namespace (``source``: the helmdeck
    of that checkout), then another after every Package's values changed (each renders to decide, then
    upgrades); each one's figures (:func:`reconcile_once`) with the helm processes per release."""
    namespace = fresh_namespace(bench)
    folder = bench.folder / f"packages-{namespace}"
    write_folder(folder, namespace, chart, size)
    installs = reconcile_once(bench, namespace, folder, wrapper, log, source)
    releases = len(bench.core.list_namespaced_secret(namespace, label_selector="owner=helm").items)
    if releases != size:
        raise RuntimeError(f"{releases} releases stored, {size} wanted")
    write_folder(folder, namespace, chart, size, value="changed-")
    upgrades = reconcile_once(bench, namespace, folder, wrapper, log, source)
    releases = len(bench.core.list_namespaced_secret(namespace, label_selector="owner=helm").items)
    if releases != 2 * size:
        raise RuntimeError(f"{releases} revisions stored, {2 * size} wanted")
    bench.core.delete_namespace(namespace, propagation_policy="Background")
    for figures in (installs, upgrades):
        figures["helm_per_release"] = float(figures["spawned"]) / size
    return installs, upgrades


def helm_installs(bench: Bench, size: int, chart: Path) -> dict[str, float]:
    """``helm install`` of the same chart, ``size`` releases one after the other, in a new namespace."""
    namespace = fresh_namespace(bench)
    assert bench.target.kubeconfig is not None
    load = os.getloadavg()[0]
    start, cpu = time.perf_counter(), children_cpu()
    for i in range(size):
        subprocess.run([bench.helm.binary, "install", f"h{i:04d}", str(chart), "-n", namespace, "--kubeconfig",
                        str(bench.target.kubeconfig), "--set", f"value=v{i}"], capture_output=True, check=True,
                       env={**os.environ, **bench.helm.env}, timeout=300)
    elapsed, cpu = time.perf_counter() - start, children_cpu() - cpu
    bench.core.delete_namespace(namespace, propagation_policy="Background")
    return {"wall_s": elapsed, "cpu_s": cpu, "load_before": load, "load_after": os.getloadavg()[0]}


def line(name: str, ours: dict[str, float | str], theirs: dict[str, float]) -> str:
    wall, cpu = float(ours["wall_s"]), float(ours["cpu_s"])
    return (f"  {name}: {wall:.1f} s, {cpu:.1f} CPU s (helmdeck and its helm processes; load {ours['load_before']:.1f}"
            f" -> {ours['load_after']:.1f}); {float(ours['helm_per_release']):.2f} helm processes per release "
            f"({ours['helm']}); vs sequential helm install: {wall / theirs['wall_s']:.2f}x in time, "
            f"{cpu / theirs['cpu_s']:.2f}x in CPU")


async def main_async(bench: Bench) -> None:
    chart = bench.chart()
    wrapper, log = helm_counter(bench.folder, bench.helm.binary)
    for size in SIZES:
        print(f"{size} new Packages of a one-ConfigMap chart from a folder ({os.cpu_count()} CPUs)", flush=True)
        theirs = helm_installs(bench, size, chart)
        print(f"  sequential helm install: {theirs['wall_s']:.1f} s, {theirs['cpu_s']:.1f} CPU s "
              f"({theirs['wall_s'] / size:.2f} s each; load {theirs['load_before']:.1f} -> "
              f"{theirs['load_after']:.1f})", flush=True)
        ours, upgraded = helmdeck_installs(bench, size, chart, wrapper, log)
        print(line("helmdeck reconcile --once, installs", ours, theirs), flush=True)
        print(line("helmdeck reconcile --once, then every values changed (upgrades)", upgraded, theirs), flush=True)
        if BASELINE:
            prior, prior_upgraded = helmdeck_installs(bench, size, chart, wrapper, log, BASELINE)
            print(line(f"the same from {BASELINE}, installs", prior, theirs), flush=True)
            print(line(f"the same from {BASELINE}, upgrades", prior_upgraded, theirs), flush=True)
        again = helm_installs(bench, size, chart)  # helm again after: the load may have changed meanwhile
        print(f"  sequential helm install, again: {again['wall_s']:.1f} s, {again['cpu_s']:.1f} CPU s (load "
              f"{again['load_before']:.1f} -> {again['load_after']:.1f}); helmdeck vs the mean of both: "
              f"{float(ours['wall_s']) * 2 / (theirs['wall_s'] + again['wall_s']):.2f}x in time, "
              f"{float(ours['cpu_s']) * 2 / (theirs['cpu_s'] + again['cpu_s']):.2f}x in CPU", flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    run(__doc__ or "", main_async, argv)


if __name__ == "__main__":
    main()
