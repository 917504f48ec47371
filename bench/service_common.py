"""Shared setup for the release service benchmarks: a local cluster, helm 4, a small chart.

Run a benchmark with ``python -m bench.service_noop [--cluster-dir DIR]``; the
cluster in DIR (default: a fresh temporary one) is started if needed and left
running when DIR was given, stopped otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import statistics
import uuid
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client

from bench.storage_common import private_cluster
from engine.helm import Helm
from engine.kube.client import KubeTarget, api_client
from engine.package.load import load_package
from engine.package.model import PackageSpec
from localcluster import build
from testkit.packages import write_package

CHART = {
    "Chart.yaml": "apiVersion: v2\nname: bench\nversion: 0.1.0\n",
    "values.yaml": "value: one\n",
    "templates/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n"
                                "data:\n  value: {{ .Values.value | quote }}\n",
}


@dataclass
class Bench:
    """What a benchmark works with; ``folder`` holds the chart and package files."""

    target: KubeTarget
    api: client.ApiClient
    core: client.CoreV1Api
    helm: Helm
    folder: Path
    namespace: str
    registry: str | None = None  # host:port of the local cluster's OCI registry

    def chart(self) -> Path:
        root = self.folder / "chart"
        for rel, text in CHART.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        return root

    def package(self, name: str, chart: Path) -> PackageSpec:
        return load_package(write_package(self.folder, name, self.namespace, chart=chart, values={"value": name},
                                          timeout="1m"))


def run(
    description: str, main_async: Callable[[Bench], Coroutine[Any, Any, None]], argv: Sequence[str] | None = None,
) -> None:
    """A benchmark's command line: ``--cluster-dir`` to reuse a cluster, then ``main_async`` on a fresh bench."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--cluster-dir", type=Path, help="reuse (and keep) the local cluster in this directory")
    args = parser.parse_args(argv)
    with bench_setup(args.cluster_dir) as bench:
        asyncio.run(main_async(bench))


@contextlib.contextmanager
def bench_setup(cluster_dir: Path | None) -> Iterator[Bench]:
    """A running local cluster and a fresh namespace (deleted afterwards)."""
    with private_cluster(cluster_dir, progress=print) as (cluster, tmp):
        target = KubeTarget(cluster.kubeconfig)
        api = api_client(target)
        core = client.CoreV1Api(api)
        namespace = f"bench-{uuid.uuid4().hex[:6]}"
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
        home = tmp / "helm-home"
        env = {"HELM_CONFIG_HOME": str(home / "config"), "HELM_CACHE_HOME": str(home / "cache"),
               "HELM_DATA_HOME": str(home / "data")}
        helm = Helm(build.binary("helm4"), target, env)
        try:
            yield Bench(target, api, core, helm, tmp, namespace, cluster.registry)
        finally:
            core.delete_namespace(namespace, propagation_policy="Background")


def percentile(values: Sequence[float], pct: float) -> float:
    """The ``pct`` percentile (0–100) of ``values``, nearest-rank on the sorted samples."""
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def describe(values: Sequence[float]) -> str:
    """``p50 … p99 … max …`` in milliseconds."""
    return (f"p50 {percentile(values, 50) * 1000:.1f} ms, p99 {percentile(values, 99) * 1000:.1f} ms, "
            f"mean {statistics.fmean(values) * 1000:.1f} ms, max {max(values) * 1000:.1f} ms")
