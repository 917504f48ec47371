"""Who acts on a HelmRelease document's release, decided from the cluster: Flux when the cluster serves Flux's
HelmRelease API and a HelmRelease of that name exists there (helmdeck then leaves the release alone), helmdeck
otherwise, rendering it as Flux's helm-controller would (Flux's origin labels on every object)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from engine.helm import Helm
from engine.kube.client import KubeTarget, api_client
from testkit.chart_sources import ChartRepoServer, package_chart, publish_http, write
from tests.cli.test_cli import helmdeck
from tests.conftest import run_helm
from tests.tui.test_app_pilot_actions import install_flux_crd

pytestmark = pytest.mark.cluster

GROUP, VERSION, PLURAL = "helm.toolkit.fluxcd.io", "v2", "helmreleases"


@pytest.fixture
def helmrelease_api(kube_target: KubeTarget) -> client.CustomObjectsApi:
    """The cluster serves Flux's HelmRelease API (a schema-less CRD, left for the session as the app's test
    leaves it)."""
    return install_flux_crd(api_client(kube_target))


def document(namespace: str, url: str, replicas: int, extra: str = "") -> str:
    """A Flux repository's file: a HelmRepository at ``url`` and the HelmRelease ``web`` of its chart; ``extra``:
    more ``spec`` fields as YAML lines indented 2 spaces."""
    return f"""apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmRepository
metadata: {{name: charts, namespace: {namespace}}}
spec: {{interval: 1m, url: "{url}"}}
---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {{name: web, namespace: {namespace}}}
spec:
  interval: 10m
  timeout: 60s
{extra}  chart:
    spec: {{chart: web, version: "1.x", sourceRef: {{kind: HelmRepository, name: charts}}}}
  values: {{replicas: {replicas}}}
"""


def test_flux_owns_the_release_of_an_existing_helmrelease_else_helmdeck_acts(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path, repo: ChartRepoServer,
    helmrelease_api: client.CustomObjectsApi,
) -> None:
    publish_http(helm.binary, package_chart(helm.binary, tmp_path, "1.0.0"), repo)
    pkgs = tmp_path / "flux-repository"
    write(pkgs, "web.yaml", document(namespace, repo.url, 1))
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "HelmRelease", "metadata": {"name": "web"},
            "spec": {"interval": "10m"}}
    helmrelease_api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    args = ["reconcile", "--once", "--no-lease", "--kubeconfig", str(kube_target.kubeconfig), "--helm", helm.binary,
            "-n", namespace, "--packages", str(pkgs), "--log-file", str(tmp_path / "log")]
    planned = helmdeck("plan", *args[3:], "-o", "json")
    assert planned.returncode == 2, planned.stdout + planned.stderr  # Flux would install it: still a change
    [web] = json.loads(planned.stdout)["packages"]
    assert web["action"] == "install" and web["reasons"][0].startswith(f"Flux owns it: HelmRelease {namespace}/web")
    owned = helmdeck(*args)
    assert owned.returncode == 0, owned.stdout + owned.stderr  # Flux's to converge: no failure
    assert f"{namespace}/web: FluxOwned" in owned.stdout
    assert json.loads(run_helm(helm, "list", "-n", namespace, "-o", "json")) == []  # helmdeck did not act
    helmrelease_api.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "web")
    acted = helmdeck(*args)
    assert acted.returncode == 0, acted.stdout + acted.stderr
    [release] = json.loads(run_helm(helm, "list", "-n", namespace, "-o", "json"))
    assert release["name"] == "web"
    # rendered as Flux's helm-controller renders it: its origin labels on every object, not helmdeck's
    objects = [d for d in yaml.safe_load_all(run_helm(helm, "get", "manifest", "web", "-n", namespace)) if d]
    assert [o["kind"] for o in objects] == ["Service", "Deployment"]
    for obj in objects:
        found = obj["metadata"]["labels"]
        assert (found["helm.toolkit.fluxcd.io/name"], found["helm.toolkit.fluxcd.io/namespace"]) == ("web", namespace)
        assert "helmdeck.dev/package-name" not in found
