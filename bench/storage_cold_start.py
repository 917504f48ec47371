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
import subprocess
import sys
import tempfile
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
    status_kib,
)
from engine.kube.client import KubeTarget, api_client
from engine.storage.observer import Observer
from localcluster import build

NAMESPACES = 10
GNU_TIME = "/usr/bin/time"


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
    start = time.perf_counter()
    observer = Observer(api_client(KubeTarget(kubeconfig)), None, driver="secret")
    setup = time.perf_counter() - start  # mostly importing the client's API module
    base_rss = status_kib("VmRSS")  # the client is loaded: what follows is the observer's own
    observer.start()
    synced = observer.wait_synced(600)
    seconds = time.perf_counter() - start
    held = len(observer.observations())
    synced_rss = status_kib("VmRSS")
    observer.stop()
    print(json.dumps({"seconds": seconds, "setup": setup, "synced": synced, "records": held,
                      "releases": len(observer.releases()), "base_rss_kib": base_rss, "synced_rss_kib": synced_rss,
                      "peak_rss_kib": status_kib("VmHWM")}))
    if held != expected:
        sys.exit(f"observer holds {held} records, expected {expected}")


def run_measured(cmd: list[str], capture: bool = False) -> tuple[int, int | None, bytes]:
    """Run ``cmd``; return (exit status, its own peak RSS in KiB or None, stdout if ``capture``).

    The peak comes from GNU time (``/usr/bin/time``) when installed: a child
    forked from this (large) Python process would report our RSS as its peak.
    """
    with tempfile.NamedTemporaryFile() as report:
        prefix = [GNU_TIME, "-f", "%M", "-o", report.name] if Path(GNU_TIME).exists() else []
        proc = subprocess.run([*prefix, *cmd], stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, check=False)
        text = Path(report.name).read_text().strip()
    return proc.returncode, int(text.splitlines()[-1]) if prefix and text else None, proc.stdout or b""


def helm_cli(helm: Path, kubeconfig: Path, releases: int) -> tuple[float, int | None]:
    """``helm list -A --max 0`` + ``helm history`` per release; returns (seconds, max peak RSS KiB)."""
    env_args = ["--kubeconfig", str(kubeconfig)]
    start = time.perf_counter()
    code, peak, out = run_measured([str(helm), "list", "-A", "--max", "0", "-o", "json", *env_args], capture=True)
    listed = json.loads(out) if code == 0 else []
    if len(listed) != releases:
        sys.exit(f"helm list found {len(listed)} releases, expected {releases}")
    for item in listed:
        code, rss, _ = run_measured([str(helm), "history", item["name"], "-n", item["namespace"], "-o", "json",
                                     *env_args])
        if code != 0:
            sys.exit(f"helm history {item['name']} failed")
        peak = max(peak, rss) if peak is not None and rss is not None else None
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
    print(f"observer cold start: {obs['seconds']:.2f} s for {obs['records']} records of {obs['releases']} releases"
          f" ({obs['setup']:.2f} s of it loading the Kubernetes client, {obs['seconds'] - obs['setup']:.2f} s"
          " listing and decoding)")
    print(f"  RSS with the client loaded {obs['base_rss_kib'] / 1024:.0f} MiB, holding everything"
          f" {obs['synced_rss_kib'] / 1024:.0f} MiB (+{(obs['synced_rss_kib'] - obs['base_rss_kib']) / 1024:.0f} MiB),"
          f" peak {obs['peak_rss_kib'] / 1024:.0f} MiB")
    peak = f"{helm_rss / 1024:.0f} MiB" if helm_rss is not None else f"n/a ({GNU_TIME} not installed)"
    print(f"helm list -A --max 0 + {args.releases} x helm history: {helm_seconds:.2f} s"
          f" (peak RSS of the largest helm process: {peak})")
    print(f"ratio helm / observer: {helm_seconds / obs['seconds']:.1f}x")


if __name__ == "__main__":
    main()
