"""Shared by the storage benchmarks: a cluster to run on and generated release records."""

from __future__ import annotations

import argparse
import base64
import contextlib
import shutil
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kubernetes import client

from engine.kube.client import KubeTarget, api_client
from engine.storage.codec import encode_payload, record_name
from localcluster.cluster import ClusterError, LocalCluster

_TEMPLATE = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  a: {{ .Values.a }}\n"


def add_cluster_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", type=Path, help="use this cluster (default: start a private local one)")
    parser.add_argument("--cluster-dir", type=Path, help="state directory of the private local cluster")


@contextlib.contextmanager
def bench_cluster(args: argparse.Namespace) -> Iterator[KubeTarget]:
    """The cluster named by ``--kubeconfig``, else a private local cluster stopped afterwards."""
    if args.kubeconfig:
        yield KubeTarget(args.kubeconfig)
        return
    with private_cluster(args.cluster_dir) as (cluster, _tmp):
        yield KubeTarget(cluster.kubeconfig)


@contextlib.contextmanager
def private_cluster(cluster_dir: Path | None, progress: Callable[[str], None] | None = None,
                    ) -> Iterator[tuple[LocalCluster, Path]]:
    """A bench's local cluster (in ``cluster_dir``, kept running, or in a temporary directory, stopped
    and removed afterwards) and a temporary directory for the bench's files. A start that fails keeps
    the directory: the error names a log in it."""
    tmp = Path(tempfile.mkdtemp(prefix="helmdeck-bench-"))
    cluster = LocalCluster(cluster_dir or tmp / "cluster")
    try:
        cluster.up(progress=progress or (lambda m: print(f"  cluster: {m}", flush=True)))
    except ClusterError:
        print(f"  cluster: start failed; its logs are kept in {cluster.logs_dir}", flush=True)
        raise
    try:
        yield cluster, tmp
    finally:
        if cluster_dir is None:
            cluster.down()
        shutil.rmtree(tmp, ignore_errors=True)


def core_api(target: KubeTarget, pool: int = 16) -> client.CoreV1Api:
    api = api_client(target)
    api.rest_client.pool_manager.connection_pool_kw["maxsize"] = pool
    return client.CoreV1Api(api)


def release_record(name: str, namespace: str, version: int, latest: int) -> dict[str, Any]:
    """A small chart's release as helm 3 stores it: revision ``version`` of ``latest``."""
    status = "deployed" if version == latest else "superseded"
    rel = {
        "name": name, "namespace": namespace, "version": version,
        "info": {"first_deployed": "2026-11-30T00:00:00Z",
                 "last_deployed": f"2026-11-30T{version // 3600 % 24:02d}:{version // 60 % 60:02d}:{version % 60:02d}Z",
                 "deleted": "", "description": "Upgrade complete" if version > 1 else "Install complete",
                 "status": status, "notes": f"{name} is ready.\n"},
        "chart": {"metadata": {"name": "small", "version": "1.0.0", "appVersion": "1.0", "apiVersion": "v2",
                               "description": "A small chart"},
                  "lock": None,
                  "templates": [{"name": "templates/cm.yaml", "data": base64.b64encode(_TEMPLATE).decode()}],
                  "values": {"a": 1}, "schema": None, "files": []},
        "config": {"a": version},
        "manifest": f"---\n# Source: small/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n"
                    f"  name: {name}\ndata:\n  a: {version}\n",
        "hooks": [],
    }
    return rel


def secret_body(rel: dict[str, Any]) -> client.V1Secret:
    """The Secret helm's secrets driver creates for ``rel``."""
    payload = encode_payload(rel)
    return client.V1Secret(
        metadata=client.V1ObjectMeta(
            name=record_name(rel["name"], rel["version"]),
            labels={"name": rel["name"], "owner": "helm", "status": rel["info"]["status"],
                    "version": str(rel["version"]), "modifiedAt": "1796040000"},
        ),
        type="helm.sh/release.v1",
        data={"release": base64.b64encode(payload.encode()).decode()},
    )


def ensure_namespace(core: client.CoreV1Api, name: str) -> None:
    with contextlib.suppress(client.ApiException):
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))


def releases_namespace(count: int) -> str:
    """The namespace that holds ``count`` releases for the benches timing commands over one namespace
    (bench/tui_launch.py, bench/empty_folder.py): one per count, so a 10,000-release namespace made once serves
    both."""
    return f"bench-releases-{count}"


def seed_namespace(target: KubeTarget, namespace: str, count: int) -> None:
    """``rel-0`` .. ``rel-<count-1>`` in ``namespace``, one revision each (:func:`release_record`); only the
    missing ones are made. Raises RuntimeError when the namespace is being deleted (its releases would go)."""
    core = core_api(target)
    ensure_namespace(core, namespace)
    status = core.read_namespace(namespace).status
    phase = status.phase if status else None
    if phase != "Active":
        raise RuntimeError(f"namespace {namespace} is {phase}: wait for its deletion to finish")
    have = {((s.metadata.labels or {}).get("name")) for s in
            core.list_namespaced_secret(namespace, label_selector="owner=helm").items if s.metadata}
    missing = [f"rel-{i}" for i in range(count) if f"rel-{i}" not in have]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda n: core.create_namespaced_secret(
            namespace, secret_body(release_record(n, namespace, 1, 1))), missing))


def percentile(values: list[float], p: float) -> float:
    """The ``p``-th percentile (0-100) by nearest rank."""
    ordered = sorted(values)
    rank = max(1, round(p / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def status_kib(field: str) -> int:
    """A memory field of /proc/self/status in KiB: ``VmRSS`` (now) or ``VmHWM`` (peak).

    Not ``getrusage``: its peak includes the parent's RSS at fork time.
    """
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0
