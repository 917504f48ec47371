"""Cold start: 1,000 releases x 10 revisions in storage; the observer vs the helm CLI.

Writes generated release records straight to storage (no helm runs), then
times, in the same run, (a) a fresh observer listing and decoding all of
them, in a child process that also reports its peak RSS, and (b) the helm
CLI: ``helm list -A --max 0`` plus ``helm history`` of every release, run one
after the other as a user would. Prints both figures and their ratio.

    python -m bench.storage_cold_start [--releases 1000] [--revisions 10] [--helm PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.storage_common import (
    add_cluster_args,
    bench_cluster,
    core_api,
    ensure_namespace,
    release_record,
    secret_body,
)
from engine.kube import KubeTarget, api_client
from engine.storage.observer import Observer
from localcluster import build

NAMESPACES = 10


def write_records(target: KubeTarget, releases: int, revisions: int) -> float:
    """Create ``releases`` x ``revisions`` records over 10 namespaces; returns seconds taken."""
    core = core_api(target)
    for i in range(NAMESPACES):
        ensure_namespace(core, f"bench-{i}")
    jobs = [(f"rel-{r:04d}", f"bench-{r % NAMESPACES}", v)
            for r in range(releases) for v in range(1, revisions + 1)]
    start = time.perf_counter()

    def create(job: tuple[str, str, int]) -> None:
        name, ns, version = job
        core.create_namespaced_secret(ns, secret_body(release_record(name, ns, version, revisions)))

    with ThreadPoolExecutor(8) as pool:
        for _ in pool.map(create, jobs):
            pass
    return time.perf_counter() - start


def observe(kubeconfig: Path, expected: int) -> None:
    """Child process: time a fresh observer until it holds ``expected`` records; print JSON."""
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    observer = Observer(api_client(KubeTarget(kubeconfig)), None, driver="secret")
    observer.start()
    synced = observer.wait_synced(600)
    seconds = time.perf_counter() - start
    held = len(observer.observations())
    observer.stop()
    print(json.dumps({"seconds": seconds, "synced": synced, "records": held, "releases": len(observer.releases()),
                      "base_rss_kib": base_rss, "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
    if held != expected:
        sys.exit(f"observer holds {held} records, expected {expected}")


def run_measured(cmd: list[str], stdout: int | None = subprocess.DEVNULL) -> tuple[int, int, bytes]:
    """Run ``cmd``; return (exit status, peak RSS in KiB of that process alone, stdout)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE if stdout is None else stdout, stderr=subprocess.DEVNULL)
    out = proc.stdout.read() if proc.stdout is not None else b""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_maxrss, out


def helm_cli(helm: Path, kubeconfig: Path, releases: int) -> tuple[float, int]:
    """``helm list -A --max 0`` + ``helm history`` per release; returns (seconds, max peak RSS KiB)."""
    env_args = ["--kubeconfig", str(kubeconfig)]
    start = time.perf_counter()
    code, peak, out = run_measured([str(helm), "list", "-A", "--max", "0", "-o", "json", *env_args], stdout=None)
    listed = json.loads(out) if code == 0 else []
    if len(listed) != releases:
        sys.exit(f"helm list found {len(listed)} releases, expected {releases}")
    for item in listed:
        code, rss, _ = run_measured([str(helm), "history", item["name"], "-n", item["namespace"], "-o", "json",
                                     *env_args])
        if code != 0:
            sys.exit(f"helm history {item['name']} failed")
        peak = max(peak, rss)
    return time.perf_counter() - start, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--releases", type=int, default=1000)
    parser.add_argument("--revisions", type=int, default=10)
    parser.add_argument("--helm", type=Path, help="helm binary (default: the cached helm 4)")
    parser.add_argument("--observe", type=Path, help=argparse.SUPPRESS)  # child mode: kubeconfig
    add_cluster_args(parser)
    args = parser.parse_args()
    total = args.releases * args.revisions
    if args.observe:
        observe(args.observe, total)
        return
    helm = args.helm or build.binary("helm4")
    with bench_cluster(args) as target:
        assert target.kubeconfig is not None
        print(f"writing {args.releases} releases x {args.revisions} revisions = {total} records ...", flush=True)
        print(f"  written in {write_records(target, args.releases, args.revisions):.1f} s", flush=True)
        child = subprocess.run(
            [sys.executable, "-m", "bench.storage_cold_start", "--observe", str(target.kubeconfig),
             "--releases", str(args.releases), "--revisions", str(args.revisions)],
            capture_output=True, text=True, check=True,
        )
        obs = json.loads(child.stdout)
        print(f"helm CLI ({helm}): list -A + {args.releases} x history ...", flush=True)
        helm_seconds, helm_rss = helm_cli(helm, target.kubeconfig, args.releases)
    print()
    print(f"observer cold start: {obs['seconds']:.2f} s for {obs['records']} records of {obs['releases']} releases")
    print(f"  peak RSS {obs['peak_rss_kib'] / 1024:.0f} MiB (process before starting: {obs['base_rss_kib'] / 1024:.0f}"
          f" MiB; observer share {(obs['peak_rss_kib'] - obs['base_rss_kib']) / 1024:.0f} MiB)")
    print(f"helm list -A --max 0 + {args.releases} x helm history: {helm_seconds:.2f} s"
          f" (peak RSS of one helm process {helm_rss / 1024:.0f} MiB)")
    print(f"ratio helm / observer: {helm_seconds / obs['seconds']:.1f}x")


if __name__ == "__main__":
    main()
