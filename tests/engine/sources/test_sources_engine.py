"""Packages whose charts come from an HTTP repository and from the local OCI registry, reconciled by
``helmdeck reconcile --once`` on the local cluster: install from a range, upgrade when a newer matching
version appears (not for one outside the range), and a repository that cannot be reached fails only its
own package, with Flux's reason."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest
from kubernetes import client

from engine.helm import Helm
from engine.kube.client import KubeTarget
from localcluster.cluster import LocalCluster
from localcluster.process import free_port
from testkit.chart_sources import (
    ChartRepoServer,
    CmdlineWatch,
    package_chart,
    publish_http,
    push_oci,
    write,
)
from testkit.packages import package_yaml
from tests.cli.test_cli import helmdeck
from tests.conftest import run_helm

pytestmark = pytest.mark.cluster


def chart_versions(helm: Helm, namespace: str) -> dict[str, str]:
    rows = json.loads(run_helm(helm, "list", "-n", namespace, "-o", "json"))
    return {r["name"]: r["chart"] for r in rows}


def test_http_and_oci_packages_install_and_upgrade_within_their_range(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path, repo: ChartRepoServer,
    local_cluster: LocalCluster, helm_home: dict[str, str],
) -> None:
    h = helm.binary
    base = f"{local_cluster.registry}/t-{uuid.uuid4().hex[:8]}"
    for version in ("1.0.0", "2.0.0"):
        publish_http(h, package_chart(h, tmp_path, version), repo)
        push_oci(h, package_chart(h, tmp_path, version, marker="oci"), base, env=helm_home)
    pkgs = tmp_path / "packages"
    head = "apiVersion: helmdeck.dev/v1alpha1\n"
    write(pkgs, "charts.yaml", head + f"kind: HelmRepository\nmetadata: {{name: charts, namespace: {namespace}}}\n"
          f"spec: {{url: '{repo.url}', interval: 1s}}\n")
    write(pkgs, "web-oci-source.yaml", head + f"kind: OCIRepository\nmetadata: {{name: web, namespace: {namespace}}}\n"
          f"spec: {{url: 'oci://{base}/web', ref: {{semver: '^1.0.0'}}, insecure: true, interval: 1s}}\n")
    charts = {"kind": "HelmRepository", "name": "charts"}
    write(pkgs, "web-http.yaml", package_yaml(
        "web-http", namespace, chart={"spec": {"chart": "web", "version": "~1.0", "sourceRef": charts}}))
    write(pkgs, "web-oci.yaml", package_yaml("web-oci", namespace, chartRef={"kind": "OCIRepository", "name": "web"}))
    log = tmp_path / "helmdeck.log"
    args = ["reconcile", "--once", "--json", "--no-lease", "--kubeconfig", str(kube_target.kubeconfig),
            "--helm", h, "-n", namespace, "--packages", str(pkgs), "--log-file", str(log)]
    first = helmdeck(*args, timeout=300)
    assert first.returncode == 0, first.stdout + first.stderr
    versions = chart_versions(helm, namespace)
    # an OCI chart is installed as <version>+<manifest digest[:12]> (Flux's mutateChartWithSourceRevision)
    assert versions["web-http"] == "web-1.0.0" and re.fullmatch(r"web-1\.0\.0\+[0-9a-f]{12}", versions["web-oci"])
    located = {e["release"]: e["message"] for e in map(json.loads, first.stdout.splitlines())
               if e["type"] == "event" and e["action"] == "source"}
    assert located["web-http"].startswith(f"chart web 1.0.0 from HelmRepository {namespace}/charts")
    assert located["web-oci"].startswith(f"chart oci://{base}/web@sha256:") and "(revision 1.0.0+" in located["web-oci"]
    # Newer versions: 1.0.5 is inside web-http's ~1.0, 1.1.0 only inside web-oci's ^1.0.0; 3.0.0 in neither.
    publish_http(h, package_chart(h, tmp_path, "1.0.5"), repo)
    publish_http(h, package_chart(h, tmp_path, "1.1.0"), repo)
    push_oci(h, package_chart(h, tmp_path, "1.1.0", marker="oci"), base, env=helm_home)
    push_oci(h, package_chart(h, tmp_path, "3.0.0", marker="oci"), base, env=helm_home)
    second = helmdeck(*args, timeout=300)
    assert second.returncode == 0, second.stdout + second.stderr
    versions = chart_versions(helm, namespace)
    assert versions["web-http"] == "web-1.0.5" and re.fullmatch(r"web-1\.1\.0\+[0-9a-f]{12}", versions["web-oci"])
    # Re-pushing web-oci's tag with new content upgrades it (a new digest), at the same version: the release's
    # chart version says the new digest.
    pushed = push_oci(h, package_chart(h, tmp_path, "1.1.0", marker="again"), base, env=helm_home)
    third = helmdeck(*args, timeout=300)
    assert third.returncode == 0, third.stdout + third.stderr
    revisions = {r["name"]: r["revision"] for r in json.loads(run_helm(helm, "list", "-n", namespace, "-o", "json"))}
    assert revisions == {"web-http": "2", "web-oci": "3"}
    assert chart_versions(helm, namespace)["web-oci"] == f"web-1.1.0+{pushed.removeprefix('sha256:')[:12]}"


def test_unreachable_repository_fails_only_its_package(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path, repo: ChartRepoServer,
) -> None:
    h = helm.binary
    publish_http(h, package_chart(h, tmp_path, "1.0.0"), repo)
    pkgs = tmp_path / "packages"
    head = "apiVersion: helmdeck.dev/v1alpha1\n"
    write(pkgs, "charts.yaml", head + f"kind: HelmRepository\nmetadata: {{name: charts, namespace: {namespace}}}\n"
          f"spec: {{url: '{repo.url}'}}\n")
    write(pkgs, "gone.yaml", head + f"kind: HelmRepository\nmetadata: {{name: gone, namespace: {namespace}}}\n"
          f"spec: {{url: 'http://127.0.0.1:{free_port()}', timeout: 5s}}\n")
    for name, source in (("ok", "charts"), ("broken", "gone")):
        write(pkgs, f"{name}.yaml", package_yaml(
            name, namespace, chart={"spec": {"chart": "web", "version": "^1", "sourceRef": {"name": source}}}))
    common = ["--kubeconfig", str(kube_target.kubeconfig), "--helm", h, "-n", namespace, "--packages", str(pkgs),
              "--log-file", str(tmp_path / "log")]
    # render pulls what it needs, before any reconcile; an unreachable source is a clear error.
    rendered = helmdeck("render", "--no-lease", *common, "ok")
    assert rendered.returncode == 0 and "kind: Deployment" in rendered.stdout, rendered.stderr
    refused = helmdeck("render", "--no-lease", *common, "broken")
    assert refused.returncode == 1 and "spec.chart" in refused.stderr and "cannot reach" in refused.stderr
    proc = helmdeck("reconcile", "--once", "--json", "--no-lease", *common, timeout=300)
    assert proc.returncode != 0
    assert chart_versions(helm, namespace) == {"ok": "web-1.0.0"}
    results = {r["release"]: r for r in map(json.loads, proc.stdout.splitlines()) if r["type"] == "result"}
    assert results["ok"]["state"] == "InSync" and results["broken"]["state"] == "Failed"
    message = results["broken"]["message"]
    assert f"HelmRepository {namespace}/gone" in message and "cannot reach" in message and "'^1'" in message


def test_private_repository_credentials_reach_no_argument_and_no_log(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path, core_api: client.CoreV1Api,
) -> None:
    password = "pw-" + uuid.uuid4().hex
    repo = ChartRepoServer(tmp_path / "private", auth=("reader", password))
    try:
        publish_http(helm.binary, package_chart(helm.binary, tmp_path, "1.0.0"), repo)
        core_api.create_namespaced_secret(namespace, client.V1Secret(
            metadata=client.V1ObjectMeta(name="repo-auth"), string_data={"username": "reader", "password": password}))
        pkgs = tmp_path / "packages"
        head = "apiVersion: helmdeck.dev/v1alpha1\n"
        write(pkgs, "charts.yaml", head + f"kind: HelmRepository\nmetadata: {{name: charts, namespace: {namespace}}}\n"
              f"spec: {{url: '{repo.url}', secretRef: {{name: repo-auth}}}}\n")
        write(pkgs, "web.yaml", package_yaml("web", namespace, chart={"spec": {
            "chart": "web", "sourceRef": {"kind": "HelmRepository", "name": "charts"}}}))
        log = tmp_path / "helmdeck.log"
        with CmdlineWatch(password) as watch:
            proc = helmdeck("reconcile", "--once", "--json", "--no-lease", "--kubeconfig", str(kube_target.kubeconfig),
                            "--helm", helm.binary, "-n", namespace, "--packages", str(pkgs), "--log-file", str(log),
                            "--log-level", "debug", timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert chart_versions(helm, namespace) == {"web": "web-1.0.0"}
        assert "pull" in watch.helm_runs and watch.leaks == []
        assert password not in log.read_text() and password not in proc.stdout + proc.stderr
    finally:
        repo.stop()
