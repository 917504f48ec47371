"""Packages from repositories reconciled on the local cluster: N from one HTTP chart repository and N from
the local cluster's OCI registry (default 200 + 200), against ``helm upgrade --install`` of each.

A ConfigMap chart (kwok-friendly) is published at ``--versions`` versions (default 10) to both
sources; package ``i`` of each source pins version ``1.<i mod versions>.0``, so pulls are per version.
In one run, with an engine in this process (``--concurrency`` passes at once) and its own empty chart cache:

- first reconcile (install of every package): time, ``helm pull`` runs vs distinct versions (each
  version of each source pulled once), repository requests;
- a no-op pass over every package: time, pulls (0), revisions made (0);
- ``helm upgrade --install`` of each release from its repository (``--repo`` / ``oci://``, helm
  pulling each time), one after another, as a script without helmdeck would;

then the ratios. Run: ``python -m bench.sources_reconcile [--packages 200] [--versions 10]
[--concurrency 4] [--cluster-dir DIR]`` (DIR: reuse and keep that local cluster; needs ``make build``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import time
import uuid
from pathlib import Path

from bench.service_common import CHART, Bench, bench_setup
from engine.runtime.assemble import build_engine
from engine.runtime.drive.controller import PackageController
from localcluster.chartrepo import ChartRepoServer
from testkit.packages import write_package


def publish(bench: Bench, versions: int, repo: ChartRepoServer, oci: str) -> list[str]:
    """The bench chart packaged at each version, indexed in ``repo`` and pushed to ``oci``; the versions."""
    made = []
    for v in range(versions):
        version = f"1.{v}.0"
        # Other content per source (a description): each source's archives are pulled on their own.
        http_archive, oci_archive = (package(bench, version, where) for where in ("http", "oci"))
        (repo.folder / http_archive.name).write_bytes(http_archive.read_bytes())
        helm(bench, "push", str(oci_archive), f"oci://{oci}", "--plain-http")
        made.append(version)
    helm(bench, "repo", "index", str(repo.folder))
    return made


def package(bench: Bench, version: str, where: str) -> Path:
    src = bench.folder / f"chart-{where}" / "bench"
    for rel, text in CHART.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text.replace("version: 0.1.0", f"version: {version}\ndescription: from {where}"))
    out = bench.folder / f"packaged-{where}"
    helm(bench, "package", str(src), "-d", str(out))
    return out / f"bench-{version}.tgz"


def helm(bench: Bench, *args: str) -> None:
    proc = subprocess.run([bench.helm.binary, *args], capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, **bench.helm.env})
    if proc.returncode != 0:
        raise RuntimeError(f"helm {' '.join(args[:2])} failed: {proc.stderr[-1500:]}")


def write_packages(bench: Bench, folder: Path, n: int, versions: list[str], repo: ChartRepoServer, oci: str) -> None:
    folder.mkdir()
    ns = bench.namespace
    sources = [
        {"kind": "HelmRepository", "metadata": {"name": "http", "namespace": ns}, "spec": {"url": repo.url}},
        {"kind": "HelmRepository", "metadata": {"name": "oci", "namespace": ns},
         "spec": {"url": f"oci://{oci}", "type": "oci", "insecure": True}},
    ]
    (folder / "repositories.yaml").write_text("---\n".join(
        json.dumps({"apiVersion": "helmdeck.dev/v1alpha1", **s}) + "\n" for s in sources))
    for source in ("http", "oci"):
        for i in range(n):
            name = f"{source}-{i:03d}"
            write_package(folder, name, ns, chart={"spec": {"chart": "bench", "version": versions[i % len(versions)],
                                                            "sourceRef": {"kind": "HelmRepository", "name": source}}},
                          values={"value": name}, timeout="1m")


def revisions(bench: Bench) -> int:
    return len(bench.core.list_namespaced_secret(bench.namespace, label_selector="owner=helm").items)


async def reconcile_all(ctl: PackageController, what: str) -> tuple[float, int, int]:
    """One settle of every package: seconds, pulls and repository requests it made. Raises when one fails."""
    charts = ctl.charts
    pulls, requests = charts.pulls, charts.requests
    start = time.perf_counter()
    results = await ctl.settle(sorted(ctl.book.packages), 3600)
    took = time.perf_counter() - start
    failed = {k: r.message for k, r in results.items() if r.state != "InSync"}
    if failed or len(results) != len(ctl.book.packages):
        raise RuntimeError(f"{what}: {len(failed)} not InSync, e.g. {next(iter(failed.items()), None)}")
    return took, charts.pulls - pulls, charts.requests - requests


def helm_each(bench: Bench, n: int, versions: list[str], repo: ChartRepoServer, oci: str) -> float:
    start = time.perf_counter()
    for i in range(n):
        version = versions[i % len(versions)]
        for source, ref in (("http", ["bench", "--repo", repo.url]), ("oci", [f"oci://{oci}/bench", "--plain-http"])):
            name = f"{source}-{i:03d}"
            helm(bench, "upgrade", "--install", name, *ref, "--version", version, "-n", bench.namespace,
                 "--kubeconfig", str(bench.target.kubeconfig), "--set", f"value={name}")
    return time.perf_counter() - start


async def main_async(bench: Bench, n: int, n_versions: int, concurrency: int) -> None:
    assert bench.registry is not None
    oci = f"{bench.registry}/bench-{uuid.uuid4().hex[:6]}"
    repo = ChartRepoServer(bench.folder / "repo")
    try:
        started = time.perf_counter()
        versions = publish(bench, n_versions, repo, oci)
        print(f"published bench 1.0.0..1.{n_versions - 1}.0 to {repo.url} and oci://{oci} "
              f"in {time.perf_counter() - started:.1f}s", flush=True)
        folder = bench.folder / "packages"
        write_packages(bench, folder, n, versions, repo, oci)
        os.environ["HELMDECK_CACHE"] = str(bench.folder / "cache")  # an empty chart cache (helm is resolved)
        engine = build_engine(bench.target, bench.helm, folder, namespaces=[bench.namespace], concurrency=concurrency,
                        watch_packages=False, monitors=False)
        await engine.start(reconcile=False)
        try:
            ctl = engine.controller
            distinct = 2 * min(n, len(versions))
            first, pulls, reqs = await reconcile_all(ctl, "first reconcile")
            print(f"first reconcile of {2 * n} packages: {first:.1f}s; {pulls} pulls for {distinct} distinct "
                  f"versions (2 sources x {min(n, len(versions))}), {reqs} repository requests", flush=True)
            before = revisions(bench)
            noop, noop_pulls, noop_reqs = await reconcile_all(ctl, "no-op pass")
            made = revisions(bench) - before
            print(f"no-op pass: {noop:.2f}s; {noop_pulls} pulls, {noop_reqs} repository requests, {made} revisions",
                  flush=True)
        finally:
            await engine.stop()
        theirs = helm_each(bench, n, versions, repo, oci)
        print(f"helm upgrade --install of each ({2 * n}, pulling from its repository): {theirs:.1f}s "
              f"({theirs / (2 * n) * 1000:.0f} ms per release)")
        print(json.dumps({"packages": 2 * n, "versions": distinct, "first_s": round(first, 1), "first_pulls": pulls,
                          "noop_s": round(noop, 2), "noop_pulls": noop_pulls, "noop_revisions": made,
                          "helm_s": round(theirs, 1)}))
        print(f"helm/first reconcile {theirs / first:.1f}x, helm/no-op pass {theirs / noop:.1f}x")
    finally:
        repo.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--packages", type=int, default=200, help="packages per source (default 200)")
    parser.add_argument("--versions", type=int, default=10, help="chart versions per source (default 10)")
    parser.add_argument("--concurrency", type=int, default=4, help="passes at once (default 4)")
    parser.add_argument("--cluster-dir", type=Path, help="reuse (and keep) the local cluster in this directory")
    args = parser.parse_args()
    with bench_setup(args.cluster_dir) as bench:
        asyncio.run(main_async(bench, args.packages, args.versions, args.concurrency))


if __name__ == "__main__":
    main()
