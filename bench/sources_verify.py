"""No-op passes over packages whose charts are verified (Helm provenance), against the same passes without
verification, and against verifying each chart with the helm CLI.

One HTTP chart repository serves a ConfigMap chart (kwok-friendly) signed with ``helm package --sign`` by
a key the real gpg made; a Secret holds its ``pubring.gpg``. In one run, with an engine in this process
(``--concurrency`` passes at once) and its own empty chart cache, N packages (default 100) verify the chart
(``spec.chart.spec.verify: {provider: helm, ...}``) and N others take the same chart unverified:

- first reconcile of every package (install; each distinct chart verified once);
- no-op passes, alternating the verified and the unverified packages (``--rounds`` each, default 5):
  the median of each, the ``helm pull --verify`` runs (0) and pulls (0) they made, and their ratio
  (issue 23 asks for at most 1.10);
- ``helm pull --verify --keyring`` of the chart, ``--helm-runs`` times (default 20), as a script checking
  each release's chart would: the time per chart and for N.

With ``--interval 1s`` every no-op pass asks the index again (a conditional request) and reads the keyring
Secret once (shared by every package naming it): the worst case of a pass after the interval.

Run: ``python -m bench.sources_verify [--packages 100] [--rounds 5] [--concurrency 4] [--interval 1m]
[--cluster-dir DIR]``
(DIR: reuse and keep that local cluster; needs ``make build``).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from kubernetes import client

from bench.service_common import CHART, Bench, bench_setup
from bench.sources_reconcile import revisions
from engine.runtime.assemble import build_engine
from engine.runtime.drive.controller import PackageController
from localcluster.chartrepo import ChartRepoServer
from testkit.chart_sources import GpgSigner, helm_run
from testkit.packages import write_package


def publish_signed(bench: Bench, signer: GpgSigner, repo: ChartRepoServer) -> None:
    """The bench chart at 1.0.0, signed (``.prov`` beside it), indexed in ``repo``."""
    src = bench.folder / "chart-signed" / "bench"
    for rel, text in CHART.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text.replace("version: 0.1.0", "version: 1.0.0"))
    helm_run(bench.helm.binary, "package", str(src), "-d", str(repo.folder), "--sign", "--key", signer.name,
             "--keyring", str(signer.secring), env=bench.helm.env)
    helm_run(bench.helm.binary, "repo", "index", str(repo.folder), "--url", repo.url, env=bench.helm.env)


def write_packages(bench: Bench, folder: Path, n: int, repo: ChartRepoServer, interval: str) -> None:
    folder.mkdir()
    ns = bench.namespace
    (folder / "repository.yaml").write_text(json.dumps({
        "apiVersion": "helmdeck.dev/v1alpha1", "kind": "HelmRepository",
        "metadata": {"name": "signed", "namespace": ns}, "spec": {"url": repo.url, "interval": interval}}))
    for verified in (True, False):
        for i in range(n):
            name = f"{'verified' if verified else 'plain'}-{i:03d}"
            chart = {"chart": "bench", "version": "1.0.0", "sourceRef": {"kind": "HelmRepository", "name": "signed"}}
            if verified:
                chart["verify"] = {"provider": "helm", "secretRef": {"name": "chart-keys"}}
            write_package(folder, name, ns, chart={"spec": chart}, values={"value": name}, timeout="1m")


async def settle(ctl: PackageController, keys: list[tuple[str, str]], what: str) -> tuple[float, int, int]:
    """One settle of ``keys``: seconds, ``helm pull --verify`` runs and pulls it made. Raises when one fails."""
    charts = ctl.charts
    runs, pulls = charts.verifications.runs, charts.pulls
    start = time.perf_counter()
    results = await ctl.settle(keys, 3600)
    took = time.perf_counter() - start
    failed = {k: r.message for k, r in results.items() if r.state != "InSync"}
    if failed or len(results) != len(keys):
        raise RuntimeError(f"{what}: {len(failed)} not InSync, e.g. {next(iter(failed.items()), None)}")
    return took, charts.verifications.runs - runs, charts.pulls - pulls


async def passes(bench: Bench, ctl: PackageController, rounds: int,
                 tool: str) -> tuple[float, int, float, float, int, int, int]:
    """The first reconcile of the ``verified-*`` and ``plain-*`` packages, then ``rounds`` no-op passes of each,
    alternating (so that a slower moment of the machine hits both): the first's seconds and checks run, the
    median no-op pass of each, and the checks (``tool`` runs), pulls and revisions the no-op passes made."""
    verified = sorted(k for k in ctl.book.packages if k[1].startswith("verified-"))
    plain = sorted(k for k in ctl.book.packages if k[1].startswith("plain-"))
    first, first_runs, first_pulls = await settle(ctl, verified + plain, "first reconcile")
    print(f"first reconcile of {len(verified) + len(plain)} packages ({len(verified)} verified): {first:.1f}s; "
          f"{first_runs} {tool}, {first_pulls} pulls", flush=True)
    before = revisions(bench)
    times: dict[str, list[float]] = {"verified": [], "plain": []}
    verify_runs = pulls = 0
    for _ in range(rounds):
        for name, keys in (("verified", verified), ("plain", plain)):
            took, r, p = await settle(ctl, keys, f"no-op pass ({name})")
            times[name].append(took)
            verify_runs, pulls = verify_runs + r, pulls + p
    made = revisions(bench) - before
    return (first, first_runs, statistics.median(times["verified"]), statistics.median(times["plain"]), verify_runs,
            pulls, made)


def helm_verify_each(bench: Bench, signer: GpgSigner, repo: ChartRepoServer, runs: int) -> float:
    """Seconds per ``helm pull --verify --keyring`` of the chart (into a fresh folder each time)."""
    start = time.perf_counter()
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as out:
            proc = subprocess.run([bench.helm.binary, "pull", "bench", "--repo", repo.url, "--version", "1.0.0",
                                   "--verify", "--keyring", str(signer.pubring), "-d", out],
                                  capture_output=True, text=True, timeout=120, check=False,
                                  env={**os.environ, **bench.helm.env})
            if proc.returncode != 0:
                raise RuntimeError(f"helm pull --verify failed: {proc.stderr[-1500:]}")
    return (time.perf_counter() - start) / runs


async def main_async(bench: Bench, n: int, rounds: int, concurrency: int, helm_runs: int, interval: str) -> None:
    signer = GpgSigner(bench.folder / "signer")
    repo = ChartRepoServer(bench.folder / "repo")
    try:
        publish_signed(bench, signer, repo)
        bench.core.create_namespaced_secret(bench.namespace, client.V1Secret(
            metadata=client.V1ObjectMeta(name="chart-keys"),
            data={"pubring.gpg": base64.b64encode(signer.pubring.read_bytes()).decode()}))
        folder = bench.folder / "packages"
        write_packages(bench, folder, n, repo, interval)
        os.environ["HELMDECK_CACHE"] = str(bench.folder / "cache")  # an empty chart cache (helm is resolved)
        engine = build_engine(bench.target, bench.helm, folder, namespaces=[bench.namespace], concurrency=concurrency,
                        watch_packages=False, monitors=False)
        await engine.start(reconcile=False)
        try:
            first, first_runs, mine, theirs, verify_runs, pulls, made = await passes(
                bench, engine.controller, rounds, "helm pull --verify")
        finally:
            await engine.stop()
        print(f"no-op pass over {n} verified packages: {mine:.3f}s (median of {rounds}); without verification: "
              f"{theirs:.3f}s; {verify_runs} helm pull --verify runs, {pulls} pulls, {made} revisions", flush=True)
        per = helm_verify_each(bench, signer, repo, helm_runs)
        print(f"helm pull --verify --keyring of the chart: {per * 1000:.0f} ms each ({helm_runs} runs); "
              f"{per * n:.1f}s for {n}")
        print(json.dumps({"packages": n, "first_s": round(first, 1), "first_verify_runs": first_runs,
                          "noop_verified_s": round(mine, 3), "noop_plain_s": round(theirs, 3),
                          "noop_verify_runs": verify_runs, "noop_pulls": pulls, "noop_revisions": made,
                          "helm_verify_ms": round(per * 1000)}))
        print(f"verified/unverified no-op {mine / theirs:.3f} (at most 1.10 asked); "
              f"helm verify of each/verified no-op {per * n / mine:.1f}x")
    finally:
        repo.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--packages", type=int, default=100, help="verified packages, and as many unverified")
    parser.add_argument("--rounds", type=int, default=5, help="no-op passes of each kind (default 5)")
    parser.add_argument("--concurrency", type=int, default=4, help="passes at once (default 4)")
    parser.add_argument("--helm-runs", type=int, default=20, help="helm pull --verify runs timed (default 20)")
    parser.add_argument("--interval", default="1m", help="the repository's interval (default 1m; 1s: every pass "
                        "asks the index again and reads the keyring Secret once, shared by all packages)")
    parser.add_argument("--cluster-dir", type=Path, help="reuse (and keep) the local cluster in this directory")
    args = parser.parse_args()
    with bench_setup(args.cluster_dir) as bench:
        asyncio.run(main_async(bench, args.packages, args.rounds, args.concurrency, args.helm_runs, args.interval))


if __name__ == "__main__":
    main()
