"""The chart version a release records: ``<version>+<manifest digest[:12]>`` only for a chart from an
OCIRepository, the chart's own version for a HelmRepository, of type oci too (issue 34 behaviour 9;
helm-controller v1.6.3 internal/controller/helmrelease_controller.go ``mutateChartWithSourceRevision`` and
``isSourceWithRevisionDigest``)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from engine.helm import Helm
from engine.kube.client import KubeTarget
from localcluster.cluster import LocalCluster
from testkit.chart_sources import package_chart, push_oci, write
from tests.cli.test_cli import helmdeck
from tests.conftest import run_helm


def flux_repository(namespace: str, base: str) -> str:
    """A HelmRepository of type oci and an OCIRepository on the same registry path, and a HelmRelease of each."""
    return f"""apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmRepository
metadata: {{name: charts, namespace: {namespace}}}
spec: {{type: oci, url: "oci://{base}", insecure: true, interval: 1m}}
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata: {{name: web, namespace: {namespace}}}
spec: {{url: "oci://{base}/web", ref: {{tag: "1.0.0"}}, insecure: true, interval: 1m}}
---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {{name: from-helmrepository, namespace: {namespace}}}
spec:
  interval: 10m
  chart:
    spec: {{chart: web, version: "1.0.0", sourceRef: {{kind: HelmRepository, name: charts}}}}
---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {{name: from-ocirepository, namespace: {namespace}}}
spec:
  interval: 10m
  chartRef: {{kind: OCIRepository, name: web}}
"""


@pytest.mark.cluster
def test_only_an_ocirepositorys_chart_version_carries_the_digest(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path, local_cluster: LocalCluster,
    helm_home: dict[str, str],
) -> None:
    """helmrelease_controller.go isSourceWithRevisionDigest: true for an OCIRepository (and an ExternalArtifact
    with a digest revision), false for a HelmRepository whatever its type, so mutateChartWithSourceRevision
    leaves the chart version of a HelmRepository of type oci as the chart has it."""
    base = f"{local_cluster.registry}/t-{uuid.uuid4().hex[:8]}"
    pushed = push_oci(helm.binary, package_chart(helm.binary, tmp_path, "1.0.0"), base, env=helm_home)
    pkgs = tmp_path / "flux-repository"
    write(pkgs, "web.yaml", flux_repository(namespace, base))
    ran = helmdeck("reconcile", "--once", "--no-lease", "--kubeconfig", str(kube_target.kubeconfig), "--helm",
                   helm.binary, "-n", namespace, "--packages", str(pkgs), "--log-file", str(tmp_path / "log"),
                   timeout=300)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    charts = {r["name"]: r["chart"] for r in json.loads(run_helm(helm, "list", "-n", namespace, "-o", "json"))}
    assert charts == {"from-helmrepository": "web-1.0.0",
                      "from-ocirepository": f"web-1.0.0+{pushed.removeprefix('sha256:')[:12]}"}
    planned = helmdeck("plan", "--kubeconfig", str(kube_target.kubeconfig), "--helm", helm.binary, "-n", namespace,
                       "--packages", str(pkgs), "--log-file", str(tmp_path / "log"))
    assert planned.returncode == 0, planned.stdout + planned.stderr  # each compares like with like: in sync
