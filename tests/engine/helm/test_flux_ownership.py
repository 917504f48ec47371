"""Existing objects helm does not own are taken over on install and upgrade, as Flux's helm-controller does
unless ``disableTakeOwnership`` (issue 34 behaviours 3 and 4: helm-controller v1.6.3 internal/action/install.go
``NewInstall`` and upgrade.go ``NewUpgrade`` set ``TakeOwnership = !DisableTakeOwnership``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client

from engine.helm import Helm
from engine.helm.cli import _option_flags
from engine.kube.client import KubeTarget
from engine.package.load import load_package
from engine.reconcile.options import install_options, upgrade_options
from testkit.chart_sources import ChartRepoServer, package_chart, publish_http, write
from tests.cli.test_cli import helmdeck
from tests.engine.runtime.test_flux_owns import document


@pytest.mark.cluster
@pytest.mark.parametrize("disabled", [False, True])
def test_an_existing_object_is_taken_over_unless_disable_take_ownership(
    any_helm: Helm, kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str, tmp_path: Path,
    repo: ChartRepoServer, disabled: bool,
) -> None:
    """internal/action/install.go NewInstall: install.TakeOwnership = !DisableTakeOwnership. A Service of the
    chart's name made by hand is adopted by the install (helm's ownership annotations on it), its fields set by
    another manager forced under helm 4's server-side apply (issue 34 behaviour 5: install.go Install forces
    conflicts on server-side apply); with install.disableTakeOwnership helm refuses it, as Flux's install then
    fails."""
    helm = any_helm
    publish_http(helm.binary, package_chart(helm.binary, tmp_path, "1.0.0"), repo)
    core_api.create_namespaced_service(namespace, client.V1Service(
        metadata=client.V1ObjectMeta(name="web"),
        spec=client.V1ServiceSpec(selector={"app": "web"}, ports=[client.V1ServicePort(port=80)])))
    text = document(namespace, repo.url, 1)
    if disabled:
        text = text.replace("  interval: 10m\n", "  interval: 10m\n  install: {disableTakeOwnership: true}\n")
    pkgs = tmp_path / "flux-repository"
    write(pkgs, "web.yaml", text)
    ran = helmdeck("reconcile", "--once", "--no-lease", "--kubeconfig", str(kube_target.kubeconfig), "--helm",
                   helm.binary, "-n", namespace, "--packages", str(pkgs), "--log-file", str(tmp_path / "log"))
    said = ran.stdout + ran.stderr
    meta = core_api.read_namespaced_service("web", namespace).metadata
    annotations = (meta.annotations if meta is not None else None) or {}
    if disabled:
        assert ran.returncode != 0 and "exists and cannot be imported" in said, said
        assert "meta.helm.sh/release-name" not in annotations
    else:
        assert ran.returncode == 0, said
        assert annotations.get("meta.helm.sh/release-name") == "web"


def test_take_ownership_is_passed_unless_disabled_for_each_action(tmp_path: Path) -> None:
    """internal/action/install.go NewInstall and upgrade.go NewUpgrade: each action's own
    disableTakeOwnership (an upgrade --install of an absent release is an install)."""
    def flags(spec_text: str, *, upgrade: bool, install: bool = False) -> list[str]:
        write(tmp_path, "web.yaml", "apiVersion: helmdeck.dev/v1alpha1\nkind: Package\nmetadata: {name: web}\n"
              f"spec:\n  chart: chart\n{spec_text}")
        (tmp_path / "chart").mkdir(exist_ok=True)
        (tmp_path / "chart" / "Chart.yaml").write_text("apiVersion: v2\nname: web\nversion: 1.0.0\n")
        spec = load_package(tmp_path / "web.yaml")
        opts = (upgrade_options(spec, labels={}, post_renderer=None, install=install) if upgrade
                else install_options(spec, labels={}, post_renderer=None))
        return _option_flags(opts, 4)

    assert "--take-ownership" in flags("", upgrade=False) and "--take-ownership" in flags("", upgrade=True)
    no_install = "  install: {disableTakeOwnership: true}\n"
    assert "--take-ownership" not in flags(no_install, upgrade=False)
    assert "--take-ownership" not in flags(no_install, upgrade=True, install=True)
    assert "--take-ownership" in flags(no_install, upgrade=True)
    assert "--take-ownership" not in flags("  upgrade: {disableTakeOwnership: true}\n", upgrade=True)
