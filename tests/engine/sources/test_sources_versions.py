"""``helmdeck versions PACKAGE`` on the local cluster: the versions an HTTP repository and the local OCI
registry offer, newest first, marking the deployed one and the range; exit 1 for a local chart and for a
repository that cannot be reached."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from engine.helm import Helm
from engine.kube.client import KubeTarget
from localcluster.cluster import LocalCluster
from localcluster.process import free_port
from testkit.chart_sources import ChartRepoServer, package_chart, publish_http, push_oci, write
from tests.cli.test_cli import helmdeck

pytestmark = pytest.mark.cluster
HEAD = "apiVersion: helmdeck.dev/v1alpha1\n"


def test_versions_lists_newest_first_marking_deployed_and_range(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path, repo: ChartRepoServer,
    local_cluster: LocalCluster, helm_home: dict[str, str],
) -> None:
    h = helm.binary
    base = f"{local_cluster.registry}/v-{uuid.uuid4().hex[:8]}"
    for version in ("1.0.0", "1.0.5", "2.0.0"):
        publish_http(h, package_chart(h, tmp_path, version), repo)
    for version in ("1.0.0", "1.1.0", "2.0.0"):
        push_oci(h, package_chart(h, tmp_path, version, marker="oci"), base, env=helm_home)
    pkgs = tmp_path / "packages"
    write(pkgs, "gone.yaml", HEAD + f"kind: HelmRepository\nmetadata: {{name: gone, namespace: {namespace}}}\n"
          f"spec: {{url: 'http://127.0.0.1:{free_port()}', timeout: 5s}}\n")
    write(pkgs, "web-oci-source.yaml", HEAD + f"kind: OCIRepository\nmetadata: {{name: web, namespace: {namespace}}}\n"
          f"spec: {{url: 'oci://{base}/web', ref: {{semver: '^1.0.0'}}, insecure: true}}\n")
    # One file holds web-http and its HelmRepository.
    write(pkgs, "web-http.yaml", HEAD + f"kind: HelmRepository\nmetadata: {{name: charts, namespace: {namespace}}}\n"
          f"spec: {{url: '{repo.url}'}}\n---\n"
          + HEAD + f"kind: Package\nmetadata: {{name: web-http, namespace: {namespace}}}\n"
          "spec:\n  chart:\n    spec: {chart: web, version: '~1.0', sourceRef: {kind: HelmRepository, name: charts}}\n")
    write(pkgs, "web-oci.yaml", HEAD + f"kind: Package\nmetadata: {{name: web-oci, namespace: {namespace}}}\n"
          "spec:\n  chartRef: {kind: OCIRepository, name: web}\n")
    write(pkgs, "broken.yaml", HEAD + f"kind: Package\nmetadata: {{name: broken, namespace: {namespace}}}\n"
          "spec:\n  chart:\n    spec: {chart: web, sourceRef: {kind: HelmRepository, name: gone}}\n")
    local = package_chart(h, tmp_path, "0.1.0", name="plain")
    write(pkgs, "plain.yaml", HEAD + f"kind: Package\nmetadata: {{name: plain, namespace: {namespace}}}\n"
          f"spec: {{chart: '{local}'}}\n")
    common = ["--kubeconfig", str(kube_target.kubeconfig), "--helm", h, "-n", namespace, "--packages", str(pkgs),
              "--log-file", str(tmp_path / "log")]
    before = json.loads(helmdeck("versions", *common, "web-http", "-o", "json").stdout)
    assert before["deployed"] is None and before["range"] == "~1.0"
    assert [v["version"] for v in before["versions"]] == ["2.0.0", "1.0.5", "1.0.0"]
    assert [v["inRange"] for v in before["versions"]] == [False, True, True]
    assert not any(v["deployed"] for v in before["versions"])
    done = helmdeck("reconcile", "--once", "--no-lease", *common[:-4], "--packages", str(pkgs),
                    "--log-file", str(tmp_path / "log"), timeout=300)
    assert "web-http: InSync" in done.stdout and "web-oci: InSync" in done.stdout, done.stdout + done.stderr
    http = helmdeck("versions", *common, str(pkgs / "web-http.yaml"), "-o", "json")
    assert http.returncode == 0, http.stderr
    rows = {v["version"]: v for v in json.loads(http.stdout)["versions"]}
    assert rows["1.0.5"]["deployed"] and not rows["1.0.0"]["deployed"] and rows["1.0.5"]["created"]
    assert json.loads(http.stdout)["deployed"] == "1.0.5"
    oci = helmdeck("versions", *common, "web-oci", "-o", "json")
    assert oci.returncode == 0, oci.stderr
    listed = json.loads(oci.stdout)["versions"]
    assert [(v["version"], v["inRange"], v["deployed"]) for v in listed] == [
        ("2.0.0", False, False), ("1.1.0", True, True), ("1.0.0", True, False)]
    text = helmdeck("versions", *common, "web-http")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[1].split()[:2] == ["VERSION", "APP"] and lines[3].split()[-1] == "*" and "1.0.5" in lines[3]
    plain = helmdeck("versions", *common, "plain")
    assert plain.returncode == 1 and "local chart" in plain.stderr
    gone = helmdeck("versions", *common, "broken")
    assert gone.returncode == 1 and f"HelmRepository {namespace}/gone" in gone.stderr, gone.stderr
    assert "cannot reach" in gone.stderr
