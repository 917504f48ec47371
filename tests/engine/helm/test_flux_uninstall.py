"""``spec.uninstall.deletionPropagation`` is read, not refused (issue 34 behaviour 3): helm uninstall's
``--cascade``, as helm-controller v1.6.3 internal/action/uninstall.go ``newUninstall`` sets the Helm SDK's
DeletionPropagation from ``GetUninstall().GetDeletionPropagation()`` (default background)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client

from engine.helm import Helm
from engine.helm.cli import _option_flags
from engine.kube.client import KubeTarget, api_client
from engine.package.load import load_package
from engine.reconcile.options import uninstall_options
from engine.runtime.assemble import build_engine
from testkit.chart_sources import ChartRepoServer, package_chart, publish_http, write
from tests.cli.test_cli import helmdeck
from tests.engine.runtime.test_flux_owns import document


@pytest.mark.cluster
async def test_an_orphan_deletion_propagation_leaves_the_dependents(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path, repo: ChartRepoServer,
) -> None:
    """uninstall.go newUninstall: deletionPropagation orphan keeps the Deployment's ReplicaSet, its owner
    reference taken off by the garbage collector, where helm's own background deletes it."""
    publish_http(helm.binary, package_chart(helm.binary, tmp_path, "1.0.0"), repo)
    pkgs = tmp_path / "flux-repository"
    write(pkgs, "web.yaml", document(namespace, repo.url, 1).replace(
        "  interval: 10m\n", "  interval: 10m\n  uninstall: {deletionPropagation: orphan}\n"))
    ran = helmdeck("reconcile", "--once", "--no-lease", "--kubeconfig", str(kube_target.kubeconfig), "--helm",
                   helm.binary, "-n", namespace, "--packages", str(pkgs), "--log-file", str(tmp_path / "log"))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    apps = client.AppsV1Api(api_client(kube_target))
    engine = build_engine(kube_target, helm, pkgs, namespaces=[namespace])
    await engine.start(reconcile=False)
    try:
        assert (await engine.uninstall((namespace, "web"))).ok
    finally:
        await engine.stop()
    assert apps.list_namespaced_deployment(namespace).items == []
    [replica_set] = apps.list_namespaced_replica_set(namespace).items
    assert replica_set.metadata is not None and not replica_set.metadata.owner_references


def test_deletion_propagation_is_helms_cascade(tmp_path: Path) -> None:
    """uninstall.go newUninstall: the propagation asked, background when unset."""
    (tmp_path / "chart").mkdir()
    (tmp_path / "chart" / "Chart.yaml").write_text("apiVersion: v2\nname: web\nversion: 1.0.0\n")
    for spec_text, cascade in (("", "background"), ("  uninstall: {deletionPropagation: foreground}\n",
                                                     "foreground")):
        write(tmp_path, "web.yaml", "apiVersion: helmdeck.dev/v1alpha1\nkind: Package\nmetadata: {name: web}\n"
              f"spec:\n  chart: chart\n{spec_text}")
        flags = _option_flags(uninstall_options(load_package(tmp_path / "web.yaml")), 4)
        assert flags[flags.index("--cascade") + 1] == cascade
