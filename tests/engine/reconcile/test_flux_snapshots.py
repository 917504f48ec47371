"""``status.history`` as helm-controller v1.6.3 records it (issue 34), on the local cluster with real helm: the
snapshot of a release whose chart came from an OCIRepository carries ``ociDigest`` and hashes it into its digest
(internal/reconcile/release.go ``recordOnObject`` with ``mutateOCIDigest``; the digest checked against the oracle's
copy of internal/release/observation.go), each entry records the ``action`` that made it (``mutateAction``), times are
``metav1.Time``'s, and a release in sync keeps its history down to the rollback target
(internal/reconcile/atomic_release.go ``actionForState``: api/v2 ``Snapshots.Truncate``), not ``maxHistory``."""

from __future__ import annotations

import base64
import re
import uuid
from pathlib import Path

import pytest
from kubernetes import client

from engine.helm import Helm
from engine.kube.client import KubeTarget
from engine.reconcile.status import EngineStatus
from engine.reconcile.store import DATA_KEY, object_name
from engine.storage.codec import decode_payload
from localcluster.cluster import LocalCluster
from testkit.chart_sources import package_chart, push_oci, write
from tests.cli.test_cli import helmdeck
from tests.flux_oracle import Oracle

pytestmark = pytest.mark.binaries("oracle")

_METAV1 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def _documents(namespace: str, base: str, tag: str, replicas: int) -> str:
    return f"""apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata: {{name: web, namespace: {namespace}}}
spec: {{url: "oci://{base}/web", ref: {{tag: "{tag}"}}, insecure: true, interval: 1m}}
---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {{name: web, namespace: {namespace}}}
spec:
  interval: 10m
  maxHistory: 10
  chartRef: {{kind: OCIRepository, name: web}}
  values: {{replicaCount: {replicas}}}
"""


@pytest.mark.cluster
def test_history_of_an_ocirepository_release_is_fluxs(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path, local_cluster: LocalCluster,
    helm_home: dict[str, str], core_api: client.CoreV1Api, flux_oracle_process: Oracle,
) -> None:
    base = f"{local_cluster.registry}/t-{uuid.uuid4().hex[:8]}"
    pushed = {tag: push_oci(helm.binary, package_chart(helm.binary, tmp_path, tag), base, env=helm_home)
              for tag in ("1.0.0", "1.1.0")}
    pkgs = tmp_path / "flux"

    def reconcile(tag: str, replicas: int) -> EngineStatus:
        write(pkgs, "web.yaml", _documents(namespace, base, tag, replicas))
        ran = helmdeck("reconcile", "--once", "--no-lease", "--kubeconfig", str(kube_target.kubeconfig), "--helm",
                       helm.binary, "-n", namespace, "--packages", str(pkgs), "--log-file", str(tmp_path / "log"),
                       timeout=300)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        cm = core_api.read_namespaced_config_map(object_name("web"), namespace)
        return EngineStatus.from_json((cm.data or {})[DATA_KEY])

    def stored(version: int) -> dict[str, object]:
        secret = core_api.read_namespaced_secret(f"sh.helm.release.v1.web.v{version}", namespace)
        return decode_payload(base64.b64decode((secret.data or {})["release"]))

    def oracle_digest(version: int, oci: str) -> str:
        answer = flux_oracle_process.ask({"op": "observe", "object": stored(version), "ociDigest": oci})
        assert "error" not in answer, answer
        return str(answer["digest"])

    installed = reconcile("1.0.0", 1)
    assert installed.last_attempted_revision_digest == pushed["1.0.0"]
    [first] = installed.history
    assert (first.version, first.action, first.oci_digest) == (1, "install", pushed["1.0.0"])
    assert first.digest == oracle_digest(1, pushed["1.0.0"]) != oracle_digest(1, "")
    assert _METAV1.fullmatch(first.first_deployed) and _METAV1.fullmatch(first.last_deployed)
    assert first.deleted == ""

    upgraded = reconcile("1.1.0", 1)
    assert [(s.version, s.status, s.action, s.oci_digest) for s in upgraded.history] == [
        (2, "deployed", "upgrade", pushed["1.1.0"]), (1, "superseded", "", pushed["1.0.0"])]
    assert [s.digest for s in upgraded.history] == [
        oracle_digest(2, pushed["1.1.0"]), oracle_digest(1, pushed["1.0.0"])]

    # A third revision: in sync, Flux's Truncate keeps the latest and its rollback target (maxHistory 10 bounds
    # helm's storage, which keeps all three).
    again = reconcile("1.1.0", 2)
    assert [(s.version, s.action) for s in again.history] == [(3, "upgrade"), (2, "")]
    assert again.history[0].digest == oracle_digest(3, pushed["1.1.0"])
    assert stored(1)["version"] == 1
