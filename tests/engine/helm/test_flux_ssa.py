"""Server-side apply as Flux's helm-controller uses it with helm 4 (issue 34 behaviour 5): conflicts with other
field managers are always forced, and ``upgrade.force`` (a replacement) is ignored, when the release applies
server-side (helm-controller v1.6.3 internal/action/install.go ``Install``, upgrade.go ``Upgrade``: the
"auto" method resolved from the last release, ``ForceConflicts = serverSideApply``,
``ForceReplace = Force && !serverSideApply``)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from kubernetes import client

from engine.helm import Helm
from engine.helm.cli import ActionOptions, _option_flags
from engine.helm.errors import HelmTooOld
from engine.kube.client import KubeTarget, api_client
from engine.package.load import load_package
from engine.reconcile.options import install_options, rollback_options, upgrade_options
from engine.reconcile.status import ActionOutcome
from engine.runtime.assemble import build_engine
from engine.storage.codec import decode_payload
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
    ssa = _option_flags(upgrade_options(spec, labels={}, post_renderer=None, method="ssa"), 4)
    assert "--force-conflicts" in ssa and "--force-replace" not in ssa
    csa = _option_flags(upgrade_options(spec, labels={}, post_renderer=None, method="csa"), 4)
    assert "--force-conflicts" not in csa and "--force-replace" in csa


def _apply_methods(core: client.CoreV1Api, namespace: str) -> dict[int, str]:
    """Each stored revision of ``web``'s ``apply_method`` (helm 4's release field: ssa or csa)."""
    out = {}
    for secret in core.list_namespaced_secret(namespace, label_selector="owner=helm,name=web").items:
        assert secret.data is not None and secret.metadata is not None
        release = decode_payload(base64.b64decode(secret.data["release"]), secret.metadata.name or "")
        out[int(release["version"])] = str(release.get("apply_method", ""))
    return out


def _take_replicas(kube_target: KubeTarget, namespace: str) -> client.AppsV1Api:
    """Another field manager takes ``spec.replicas`` of the Deployment ``web`` (a server-side apply, forced)."""
    apps = client.AppsV1Api(api_client(kube_target))
    theirs = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 3}}
    apps.patch_namespaced_deployment("web", namespace, theirs, field_manager="someone-else", force=True,
                                     _content_type="application/apply-patch+yaml")
    return apps


@pytest.mark.cluster
@pytest.mark.parametrize(("install", "upgrade", "methods"), [
    ("{serverSideApply: false}", "{serverSideApply: enabled}", {1: "csa", 2: "ssa"}),
    ("{}", "{serverSideApply: disabled}", {1: "ssa", 2: "csa"}),
    ("{serverSideApply: false}", "{}", {1: "csa", 2: "csa"}),  # auto: as the latest revision
])
def test_install_and_upgrade_apply_as_their_server_side_apply_fields(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path, repo: ChartRepoServer,
    core_api: client.CoreV1Api, install: str, upgrade: str, methods: dict[int, str],
) -> None:
    """install.go newInstall: ``install.serverSideApply`` (default true); upgrade.go newUpgrade and Upgrade:
    ``upgrade.serverSideApply`` enabled, disabled or auto (the latest release's apply method), conflicts forced
    when it applies server-side: a field another manager took goes back to the chart's value either way (helm's
    three-way merge client-side)."""
    publish_http(helm.binary, package_chart(helm.binary, tmp_path, "1.0.0"), repo)
    pkgs = tmp_path / "flux-repository"
    args = ["reconcile", "--once", "--no-lease", "--kubeconfig", str(kube_target.kubeconfig), "--helm", helm.binary,
            "-n", namespace, "--packages", str(pkgs), "--log-file", str(tmp_path / "log")]
    write(pkgs, "web.yaml", document(namespace, repo.url, 1, f"  install: {install}\n"))
    first = helmdeck(*args)
    assert first.returncode == 0, first.stdout + first.stderr
    apps = _take_replicas(kube_target, namespace)
    write(pkgs, "web.yaml", document(namespace, repo.url, 2, f"  install: {install}\n  upgrade: {upgrade}\n"))
    second = helmdeck(*args)
    assert second.returncode == 0, second.stdout + second.stderr
    assert _apply_methods(core_api, namespace) == methods
    spec = apps.read_namespaced_deployment("web", namespace).spec
    assert spec is not None and spec.replicas == 2


@pytest.mark.cluster
@pytest.mark.parametrize(("rollback", "method"), [("{}", "ssa"), ("{serverSideApply: disabled}", "csa")])
async def test_a_rollback_applied_server_side_forces_conflicts(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path, repo: ChartRepoServer,
    core_api: client.CoreV1Api, rollback: str, method: str,
) -> None:
    """rollback.go newRollback and Rollback: ``rollback.serverSideApply``, "auto" (the default) resolved from the
    revision rolled back to (here applied server-side), then ``ForceConflicts = serverSideApply``: the field
    another manager took goes back to the revision's value, where helm 4 alone fails on the conflict; disabled,
    the rollback applies client-side (helm's three-way merge takes the field back too)."""
    publish_http(helm.binary, package_chart(helm.binary, tmp_path, "1.0.0"), repo)
    pkgs = tmp_path / "flux-repository"
    write(pkgs, "web.yaml", document(namespace, repo.url, 1, f"  rollback: {rollback}\n"))
    engine = build_engine(kube_target, helm, pkgs, namespaces=[namespace], watch_packages=False)
    await engine.start(reconcile=False)
    key = (namespace, "web")
    try:
        assert (await engine.controller.run_pass(key)).outcomes[0].ok
        write(pkgs, "web.yaml", document(namespace, repo.url, 2, f"  rollback: {rollback}\n"))
        engine.load_packages()
        assert (await engine.controller.run_pass(key)).outcomes[0].ok
        apps = _take_replicas(kube_target, namespace)
        rolled = await engine.rollback(key, 1)
        assert isinstance(rolled, ActionOutcome) and rolled.ok, rolled
    finally:
        await engine.stop()
    assert _apply_methods(core_api, namespace) == {1: "ssa", 2: "ssa", 3: method}
    spec = apps.read_namespaced_deployment("web", namespace).spec
    assert spec is not None and spec.replicas == 1


@pytest.mark.parametrize(("field", "action"), [
    ("install: {serverSideApply: true}", "install"), ("upgrade: {serverSideApply: enabled}", "upgrade"),
    ("rollback: {serverSideApply: enabled}", "rollback")])
def test_server_side_apply_asked_of_helm_3_is_refused_by_name(tmp_path: Path, field: str, action: str) -> None:
    """helm 3 has no server-side apply (Flux v1.6.3 embeds helm 4 only): an action whose field asks for it fails
    under helm 3 naming the field, rather than apply client-side; left unset, helm 3 applies client-side, as
    Flux with its UseHelm3Defaults gate (internal/action/install.go newInstall)."""
    write(tmp_path, "web.yaml", "apiVersion: helmdeck.dev/v1alpha1\nkind: Package\nmetadata: {name: web}\n"
          f"spec:\n  chart: chart\n  {field}\n")
    (tmp_path / "chart").mkdir()
    (tmp_path / "chart" / "Chart.yaml").write_text("apiVersion: v2\nname: web\nversion: 1.0.0\n")
    spec = load_package(tmp_path / "web.yaml")
    opts: ActionOptions = rollback_options(spec, method="csa")
    if action == "install":
        opts = install_options(spec, labels={}, post_renderer=None)
    elif action == "upgrade":
        opts = upgrade_options(spec, labels={}, post_renderer=None, method="csa")
    assert "--server-side=true" in _option_flags(opts, 4) and "--force-conflicts" in _option_flags(opts, 4)
    with pytest.raises(HelmTooOld, match=f"spec.{action}.serverSideApply"):
        _option_flags(opts, 3)
    plain = load_package(_rewrite(tmp_path / "web.yaml", field, ""))
    assert "--server-side" not in " ".join(_option_flags(install_options(plain, labels={}, post_renderer=None), 3))


def _rewrite(path: Path, old: str, new: str) -> Path:
    path.write_text(path.read_text().replace(old, new))
    return path
