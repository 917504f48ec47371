"""``spec.waitStrategy`` is read, not refused (issue 34 behaviour 3): helm-controller v1.6.3
internal/action/wait.go ``getWaitStrategy`` gives the Helm SDK ``legacy`` when asked, else its kstatus watcher
(Flux's poller), for install, upgrade, rollback and uninstall alike; helm 4's CLI has the same choice as
``--wait=legacy`` and ``--wait`` (watcher)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.helm import Helm
from engine.helm.cli import _option_flags
from engine.kube.client import KubeTarget
from engine.package.load import load_package
from engine.reconcile.options import install_options, rollback_options, uninstall_options, upgrade_options
from testkit.chart_sources import ChartRepoServer, CmdlineWatch, package_chart, publish_http, write
from tests.cli.test_cli import helmdeck
from tests.engine.runtime.test_flux_owns import document


@pytest.mark.cluster
def test_a_legacy_wait_strategy_installs_with_helms_legacy_wait(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path, repo: ChartRepoServer,
) -> None:
    """wait.go getWaitStrategy: waitStrategy legacy is the Helm SDK's LegacyStrategy (helm 4: --wait=legacy)."""
    publish_http(helm.binary, package_chart(helm.binary, tmp_path, "1.0.0"), repo)
    pkgs = tmp_path / "flux-repository"
    write(pkgs, "web.yaml", document(namespace, repo.url, 1).replace(
        "  interval: 10m\n", "  interval: 10m\n  waitStrategy: {name: legacy}\n"))
    with CmdlineWatch("no-such-needle") as watch:
        ran = helmdeck("reconcile", "--once", "--no-lease", "--kubeconfig", str(kube_target.kubeconfig), "--helm",
                       helm.binary, "-n", namespace, "--packages", str(pkgs), "--log-file", str(tmp_path / "log"))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    [install] = [c for c in watch.helm_commands if c[0] == "install"]
    assert "--wait=legacy" in install and "--wait" not in install


def test_each_action_waits_as_the_strategy_says(tmp_path: Path) -> None:
    """wait.go getWaitStrategy: legacy when asked, the watcher otherwise; helm 3 has only its own wait."""
    (tmp_path / "chart").mkdir()
    (tmp_path / "chart" / "Chart.yaml").write_text("apiVersion: v2\nname: web\nversion: 1.0.0\n")
    for strategy, helm4 in (("", "--wait"), ("  waitStrategy: {name: poller}\n", "--wait"),
                            ("  waitStrategy: {name: legacy}\n", "--wait=legacy")):
        write(tmp_path, "web.yaml", "apiVersion: helmdeck.dev/v1alpha1\nkind: Package\nmetadata: {name: web}\n"
              f"spec:\n  chart: chart\n{strategy}")
        spec = load_package(tmp_path / "web.yaml")
        for opts in (install_options(spec, labels={}, post_renderer=None),
                     upgrade_options(spec, labels={}, post_renderer=None), rollback_options(spec),
                     uninstall_options(spec)):
            assert helm4 in _option_flags(opts, 4) and "--wait" in _option_flags(opts, 3), (strategy, opts)
