"""Flux fields read, not refused (issue 34 behaviour 3), where helm's CLI can do what Flux does: an
OCIRepository's ``spec.layerSelector`` selecting helm's chart layer with ``operation: copy`` (what helm pulls;
source-controller v1.7 api/v1 ociRepository ``OCILayerSelector``, its copy operation keeping the layer's tarball
as the artifact); another selection is refused by name, saying why."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from engine.base.fields import PackageError
from engine.helm import Helm
from engine.kube.client import KubeTarget
from engine.package.load import load_folder
from localcluster.cluster import LocalCluster
from testkit.chart_sources import package_chart, push_oci, write
from tests.cli.test_cli import helmdeck
from tests.conftest import run_helm
from tests.engine.sources.test_flux_digest import flux_repository

_COPY = "layerSelector: {mediaType: application/vnd.cncf.helm.chart.content.v1.tar+gzip, operation: copy}, "


@pytest.mark.cluster
def test_an_ocirepository_selecting_the_chart_layer_to_copy_installs(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path, local_cluster: LocalCluster,
    helm_home: dict[str, str],
) -> None:
    """The layerSelector Flux's docs give for a Helm chart in an OCIRepository loads with no
    --allow-unsupported and installs the chart."""
    base = f"{local_cluster.registry}/t-{uuid.uuid4().hex[:8]}"
    push_oci(helm.binary, package_chart(helm.binary, tmp_path, "1.0.0"), base, env=helm_home)
    pkgs = tmp_path / "flux-repository"
    write(pkgs, "web.yaml", flux_repository(namespace, base).replace('spec: {url: "oci://', f'spec: {{{_COPY}url: "oci://'))
    ran = helmdeck("reconcile", "--once", "--no-lease", "--kubeconfig", str(kube_target.kubeconfig), "--helm",
                   helm.binary, "-n", namespace, "--packages", str(pkgs), "--log-file", str(tmp_path / "log"),
                   timeout=300)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    names = {r["name"] for r in json.loads(run_helm(helm, "list", "-n", namespace, "-o", "json"))}
    assert names == {"from-helmrepository", "from-ocirepository"}


@pytest.mark.parametrize(("selector", "field", "problem"), [
    ("layerSelector: {mediaType: application/vnd.cncf.helm.chart.content.v1.tar+gzip}, ", "operation",
     "'extract' unpacks the chart's files"),
    ("layerSelector: {mediaType: application/vnd.cncf.helm.chart.content.v1.tar+gzip, operation: extract}, ",
     "operation", "'extract' unpacks the chart's files"),
    ("layerSelector: {mediaType: application/vnd.acme.manifests.tar+gzip, operation: copy}, ", "mediaType",
     "is not helm's chart layer"),
])
def test_another_layer_selection_is_refused_by_name(tmp_path: Path, selector: str, field: str, problem: str) -> None:
    write(tmp_path, "web.yaml", flux_repository("apps", "registry.test/charts").replace(
        "spec: {url: \"oci://", f"spec: {{{selector}url: \"oci://"))
    found = load_folder(tmp_path)
    errors: list[PackageError] = list(found.errors)
    # the OCIRepository's own error (the HelmRelease naming it is refused after it)
    assert errors[0].field == f"spec.layerSelector.{field}" and problem in str(errors[0])
    assert "operation: copy" in str(errors[0])
