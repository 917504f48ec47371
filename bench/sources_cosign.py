"""No-op passes over packages whose OCI charts are verified with cosign, against the same passes without
verification, and against running ``cosign verify`` for each chart.

The local cluster's OCI registry holds a ConfigMap chart (kwok-friendly), signed by the real cosign with a key
pair it made (``--tlog-upload=false``); a Secret holds the public key. In one run, with an engine in this
process (``--concurrency`` passes at once) and its own empty chart cache, N packages (default 100) take the
chart through an OCIRepository with ``spec.verify: {provider: cosign, ...}`` and N others through one without:

- first reconcile of every package (install; the chart verified once);
- no-op passes, alternating the verified and the unverified packages (``--rounds`` each, default 5): the median
  of each, the cosign runs (0) and pulls (0) they made, and their ratio (issue 23 asks for at most 1.10);
- ``cosign verify --key`` of the chart, ``--cosign-runs`` times (default 20), as a script checking each
  release's chart would: the time per chart and for N.

Run: ``python -m bench.sources_cosign [--packages 100] [--rounds 5] [--concurrency 4] [--cluster-dir DIR]``
(DIR: reuse and keep that local cluster; needs ``make build`` and cosign, built here on first need).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import subprocess
import time
from pathlib import Path

from kubernetes import client

from bench.service_common import CHART, Bench, bench_setup
from bench.sources_verify import passes
from engine.runtime.assemble import build_engine
from engine.sources.cosign import EMPTY_ROOT
from localcluster import build
from testkit.chart_sources import CosignSigner, helm_run, push_oci
from testkit.packages import write_package


def push_signed(bench: Bench, signer: CosignSigner) -> str:
    """The bench chart at 1.0.0 pushed to ``<registry>/bench-cosign/bench`` and signed; returns its reference
    (``host/repository@digest``)."""
    src = bench.folder / "chart-oci" / "bench"
    for rel, text in CHART.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text.replace("version: 0.1.0", "version: 1.0.0"))
    helm_run(bench.helm.binary, "package", str(src), "-d", str(bench.folder), env=bench.helm.env)
    base = f"{bench.registry}/{bench.namespace}"
    digest = push_oci(bench.helm.binary, bench.folder / "bench-1.0.0.tgz", base, env=bench.helm.env)
    image = f"{base}/bench@{digest}"
    signer.sign(image)
    return image


def write_packages(bench: Bench, folder: Path, n: int) -> None:
    folder.mkdir()
    ns = bench.namespace
    for verified in (True, False):
        name = "signed" if verified else "plain"
        spec: dict[str, object] = {"url": f"oci://{bench.registry}/{ns}/bench", "insecure": True,
                                   "ref": {"tag": "1.0.0"}}
        if verified:
            spec["verify"] = {"provider": "cosign", "secretRef": {"name": "cosign-keys"}}
        (folder / f"{name}-source.yaml").write_text(json.dumps({
            "apiVersion": "helmdeck.dev/v1alpha1", "kind": "OCIRepository",
            "metadata": {"name": name, "namespace": ns}, "spec": spec}))
        for i in range(n):
            package = f"{'verified' if verified else 'plain'}-{i:03d}"
            write_package(folder, package, ns, chartRef={"kind": "OCIRepository", "name": name},
                          values={"value": package}, timeout="1m")


def cosign_verify_each(signer: CosignSigner, image: str, runs: int) -> float:
    """Seconds per ``cosign verify --key`` of the chart (offline, the transparency log skipped, an empty trusted
    root: as helmdeck runs it)."""
    root = signer.work / "trusted_root.json"
    root.write_text(EMPTY_ROOT)
    start = time.perf_counter()
    for _ in range(runs):
        proc = subprocess.run([str(signer.cosign), "verify", "--key", str(signer.pub), "--insecure-ignore-tlog=true",
                               "--offline=true", "--trusted-root", str(root), "--allow-http-registry", image],
                              capture_output=True, text=True, timeout=120, check=False, env=signer.env)
        if proc.returncode != 0:
            raise RuntimeError(f"cosign verify failed: {proc.stderr[-1500:]}")
    return (time.perf_counter() - start) / runs


async def main_async(bench: Bench, n: int, rounds: int, concurrency: int, cosign_runs: int) -> None:
    cosign = build.build(build.COMPONENTS["cosign"]) / "cosign"
    signer = CosignSigner(cosign, bench.folder / "signer")
    image = push_signed(bench, signer)
    bench.core.create_namespaced_secret(bench.namespace, client.V1Secret(
        metadata=client.V1ObjectMeta(name="cosign-keys"),
        data={"cosign.pub": base64.b64encode(signer.pub.read_bytes()).decode()}))
    folder = bench.folder / "packages"
    write_packages(bench, folder, n)
    os.environ["HELMDECK_CACHE"] = str(bench.folder / "cache")  # an empty chart cache (helm is resolved)
    os.environ["HELMDECK_COSIGN"] = str(cosign)  # the build's, whatever the cache
    engine = build_engine(bench.target, bench.helm, folder, namespaces=[bench.namespace], concurrency=concurrency,
                    watch_packages=False, monitors=False)
    await engine.start(reconcile=False)
    try:
        first, first_runs, mine, theirs, verify_runs, pulls, made = await passes(
            bench, engine.controller, rounds, "cosign verify")
    finally:
        await engine.stop()
    print(f"no-op pass over {n} cosign-verified packages: {mine:.3f}s (median of {rounds}); without verification: "
          f"{theirs:.3f}s; {verify_runs} cosign verify runs, {pulls} pulls, {made} revisions", flush=True)
    per = cosign_verify_each(signer, image, cosign_runs)
    print(f"cosign verify --key of the chart: {per * 1000:.0f} ms each ({cosign_runs} runs); {per * n:.1f}s for {n}")
    print(json.dumps({"packages": n, "first_s": round(first, 1), "first_verify_runs": first_runs,
                      "noop_verified_s": round(mine, 3), "noop_plain_s": round(theirs, 3),
                      "noop_verify_runs": verify_runs, "noop_pulls": pulls, "noop_revisions": made,
                      "cosign_verify_ms": round(per * 1000)}))
    print(f"verified/unverified no-op {mine / theirs:.3f} (at most 1.10 asked); "
          f"cosign verify of each/verified no-op {per * n / mine:.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--packages", type=int, default=100, help="verified packages, and as many unverified")
    parser.add_argument("--rounds", type=int, default=5, help="no-op passes of each kind (default 5)")
    parser.add_argument("--concurrency", type=int, default=4, help="passes at once (default 4)")
    parser.add_argument("--cosign-runs", type=int, default=20, help="cosign verify runs timed (default 20)")
    parser.add_argument("--cluster-dir", type=Path, help="reuse (and keep) the local cluster in this directory")
    args = parser.parse_args()
    with bench_setup(args.cluster_dir) as bench:
        asyncio.run(main_async(bench, args.packages, args.rounds, args.concurrency, args.cosign_runs))


if __name__ == "__main__":
    main()
