"""Chart sources at scale: 200 chart versions from one HTTP repository and 200 from an OCI registry.

Prints, in one run: the first resolution of all 400 (each version pulled once, by
``helm pull``), a no-op pass inside the interval (0 pulls, 0 requests), a pass after
the interval (conditional requests only, 0 pulls), and ``helm pull`` of each
version run directly, as a user would.

Run: ``python -m bench.sources_pull [--charts 20] [--versions 10] [--parallel 4]``.
Needs the Go-built registry and helm 4 (``make build``); everything listens on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import tempfile
import time
from pathlib import Path

from engine.helm import Helm
from engine.sources.repository import ChartRequest, HelmRepositorySpec
from engine.sources.source import ChartSource
from localcluster import build
from localcluster import registry as local_registry
from localcluster.process import free_port
from testkit.chart_sources import ChartRepoServer, helm_run, package_chart, push_oci

FILE = Path("bench.yaml")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def _pass(source: ChartSource, requests: list[ChartRequest], parallel: int) -> float:
    gate = asyncio.Semaphore(parallel)

    async def one(req: ChartRequest) -> None:
        async with gate:
            await source.pull(req)

    started = time.perf_counter()
    await asyncio.gather(*(one(r) for r in requests))
    return time.perf_counter() - started


def _helm_pulls(helm: str, work: Path, repo_url: str, oci: str, names: list[tuple[str, str]]) -> float:
    out = work / "direct"
    out.mkdir()
    env = {"HELM_CONFIG_HOME": str(work / "hc"), "HELM_CACHE_HOME": str(work / "hcache"),
           "HELM_DATA_HOME": str(work / "hd")}
    started = time.perf_counter()
    for name, version in names:
        helm_run(helm, "pull", name, "--repo", repo_url, "--version", version, "-d", str(out), env=env)
        helm_run(helm, "pull", f"oci://{oci}/{name}", "--version", version, "--plain-http", "-d", str(out), env=env)
    return time.perf_counter() - started


async def _passes(source: ChartSource, clock: Clock, requests: list[ChartRequest], parallel: int,
                  repo: ChartRepoServer) -> float:
    first = await _pass(source, requests, parallel)
    print(f"first pass:  {len(requests)} resolved in {first:.2f}s, {source.pulls} pulls, {source.requests} requests")
    pulls, reqs = source.pulls, source.requests
    noop = await _pass(source, requests, parallel)
    print(f"no-op pass:  {noop * 1000:.1f} ms, {source.pulls - pulls} pulls, {source.requests - reqs} requests")
    clock.now += 3600
    pulls, reqs = source.pulls, source.requests
    later = await _pass(source, requests, parallel)
    print(f"after the interval: {later:.2f}s, {source.pulls - pulls} pulls, {source.requests - reqs} "
          f"requests ({repo.not_modified} index answers were 304)")
    return first


def main(charts: int, versions: int, parallel: int) -> None:
    helm = str(build.build(build.COMPONENTS["helm4"], progress=lambda _m: None) / "helm")
    build.build(build.COMPONENTS["registry"], progress=lambda _m: None)
    with tempfile.TemporaryDirectory(prefix="bench-sources-") as tmp:
        work = Path(tmp)
        port = free_port()
        config = local_registry.write_config(work / "registry.yml", port=port, storage=work / "registry")
        proc = subprocess.Popen(local_registry.command(config), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        repo = ChartRepoServer(work / "repo")
        try:
            while not local_registry.ping(port):
                time.sleep(0.05)
            oci = f"127.0.0.1:{port}/charts"
            names = [(f"chart{c}", f"1.{v}.0") for c in range(charts) for v in range(versions)]
            started = time.perf_counter()
            for name, version in names:
                archive = package_chart(helm, work, version, name=name)
                (repo.folder / archive.name).write_bytes(archive.read_bytes())
                # Other content in the registry: each repository's archives are pulled on their own.
                push_oci(helm, package_chart(helm, work, version, name=name, marker="oci"), oci)
            helm_run(helm, "repo", "index", str(repo.folder), "--url", repo.url)
            print(f"published {len(names)} versions to each repository in {time.perf_counter() - started:.1f}s")
            http_spec = HelmRepositorySpec(FILE, "http", "bench", repo.url)
            oci_spec = HelmRepositorySpec(FILE, "oci", "bench", f"oci://{oci}", type="oci", insecure=True)
            requests = [ChartRequest(s, n, v) for s in (http_spec, oci_spec) for n, v in names]
            clock = Clock()
            source = ChartSource(Helm(helm), work / "cache", clock=clock)
            first = asyncio.run(_passes(source, clock, requests, parallel, repo))
            direct = _helm_pulls(helm, work, repo.url, oci, names)
            print(f"helm pull of each ({len(requests)}, one after another): {direct:.2f}s; "
                  f"first pass / helm pulls = {first / direct:.2f}")
        finally:
            repo.stop()
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--charts", type=int, default=20)
    parser.add_argument("--versions", type=int, default=10)
    parser.add_argument("--parallel", type=int, default=4, help="resolutions at a time")
    args = parser.parse_args()
    main(args.charts, args.versions, args.parallel)
