"""Server-side apply as Flux's helm-controller uses it with helm 4 (issue 34 behaviour 5): conflicts with other
field managers are always forced, and ``upgrade.force`` (a replacement) is ignored, when the release applies
server-side (helm-controller v1.6.3 internal/action/install.go ``Install``, upgrade.go ``Upgrade``: the
"auto" method resolved from the last release, ``ForceConflicts = serverSideApply``,
``ForceReplace = Force && !serverSideApply``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client

from engine.helm import Helm
from engine.helm.cli import _option_flags
from engine.kube.client import KubeTarget, api_client
from engine.package.load import load_package
from engine.reconcile.options import install_options, upgrade_options
from testkit.chart_sources import ChartRepoServer, package_chart, publish_http, write
from tests.cli.test_cli import helmdeck
from tests.engine.runtime.test_flux_owns import document


@pytest.mark.cluster
@pytest.mark.parametrize("force", [False, True])
def test_an_upgrade_forces_conflicts_with_another_field_manager(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path, repo: ChartRepoServer, force: bool,
) -> None:
    """upgrade.go Upgrade: a release applied server-side (helm 4) is upgraded with ForceConflicts, so a field
    another manager took over (here by a server-side apply of its own) goes back to the chart's value; with
    upgrade.force too, which server-side apply ignores (helm 4 refuses a replacement with it)."""
    publish_http(helm.binary, package_chart(helm.binary, tmp_path, "1.0.0"), repo)
    pkgs = tmp_path / "flux-repository"
    args = ["reconcile", "--once", "--no-lease", "--kubeconfig", str(kube_target.kubeconfig), "--helm", helm.binary,
            "-n", namespace, "--packages", str(pkgs), "--log-file", str(tmp_path / "log")]
    write(pkgs, "web.yaml", document(namespace, repo.url, 1))
    first = helmdeck(*args)
    assert first.returncode == 0, first.stdout + first.stderr
    apps = client.AppsV1Api(api_client(kube_target))
    theirs = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 3}}
    apps.patch_namespaced_deployment("web", namespace, theirs, field_manager="someone-else", force=True,
                                     _content_type="application/apply-patch+yaml")
    forced = "  upgrade: {force: true}\n" if force else ""
    write(pkgs, "web.yaml", document(namespace, repo.url, 2).replace("  interval: 10m\n", f"  interval: 10m\n{forced}"))
    second = helmdeck(*args)
    assert second.returncode == 0, second.stdout + second.stderr
    spec = apps.read_namespaced_deployment("web", namespace).spec
    assert spec is not None and spec.replicas == 2


def test_force_conflicts_under_server_side_apply_and_no_replacement(tmp_path: Path) -> None:
    """install.go Install: ForceConflicts = ServerSideApply (helm 4 installs server-side); upgrade.go Upgrade:
    ForceConflicts only when the last release applied server-side, ForceReplace = Force && !serverSideApply."""
    write(tmp_path, "web.yaml", "apiVersion: helmdeck.dev/v1alpha1\nkind: Package\nmetadata: {name: web}\n"
          "spec:\n  chart: chart\n  upgrade: {force: true}\n")
    (tmp_path / "chart").mkdir()
    (tmp_path / "chart" / "Chart.yaml").write_text("apiVersion: v2\nname: web\nversion: 1.0.0\n")
    spec = load_package(tmp_path / "web.yaml")
    assert "--force-conflicts" in _option_flags(install_options(spec, labels={}, post_renderer=None), 4)
    assert "--force-conflicts" not in _option_flags(install_options(spec, labels={}, post_renderer=None), 3)
    ssa = _option_flags(upgrade_options(spec, labels={}, post_renderer=None, server_side=True), 4)
    assert "--force-conflicts" in ssa and "--force-replace" not in ssa
    csa = _option_flags(upgrade_options(spec, labels={}, post_renderer=None, server_side=False), 4)
    assert "--force-conflicts" not in csa and "--force-replace" in csa
