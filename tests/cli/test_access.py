"""Missing permissions do not look like "no releases": a namespace-scoped ServiceAccount on the local cluster.

The ServiceAccount may list and watch Secrets in one namespace only. Headless commands name the refused
permission on stderr and exit non-zero; without ``-n`` they fall back to the kubeconfig context's
namespace and say so; the app keeps the refused permission (and the note) in its header.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from kubernetes import client

from engine.helm import Helm
from engine.kube.client import KubeTarget
from helmdeck import builder
from helmdeck.cli import build_parser
from localcluster.cluster import LocalCluster
from testkit.packages import package_yaml
from tests.cli.test_cli import helmdeck
from tests.conftest import EXAMPLES, run_helm
from tests.engine.storage.test_observer_rbac import rbac_api, service_account_target
from tui.app import HelmdeckApp
from tui.widgets.header_bar import HeaderBar

pytestmark = pytest.mark.cluster
__all__ = ["rbac_api"]  # a fixture used here


def with_namespace(target: KubeTarget, namespace: str | None) -> Path:
    """The ServiceAccount's kubeconfig, its context naming ``namespace`` (None: none)."""
    assert target.kubeconfig is not None
    config = json.loads(target.kubeconfig.read_text())
    if namespace is not None:
        config["contexts"][0]["context"]["namespace"] = namespace
    path = target.kubeconfig.with_name(f"ns-{namespace}.kubeconfig")
    path.write_text(json.dumps(config))
    return path


@pytest.fixture
def viewer(local_cluster: LocalCluster, core_api: client.CoreV1Api, rbac_api: client.RbacAuthorizationV1Api,
           namespace: str, helm: Helm, tmp_path: Path) -> KubeTarget:
    """A ServiceAccount allowed to list and watch Secrets in ``namespace`` only, which holds release ``cfg``."""
    run_helm(helm, "install", "cfg", str(EXAMPLES / "charts" / "settings"), "-n", namespace)
    return service_account_target(local_cluster, core_api, rbac_api, namespace, "viewer", ["list", "watch"],
                                  tmp_path)


def status(kubeconfig: Path, tmp_path: Path, *extra: str) -> tuple[int, list[dict[str, object]], str]:
    proc = helmdeck("status", "-o", "json", "--kubeconfig", str(kubeconfig), "--log-file",
                    str(tmp_path / "log"), *extra)
    return proc.returncode, json.loads(proc.stdout or "[]"), proc.stderr


def test_status_falls_back_to_the_context_namespace(viewer: KubeTarget, namespace: str, tmp_path: Path) -> None:
    code, rows, err = status(with_namespace(viewer, namespace), tmp_path)
    assert code == 0, err
    assert [(r["namespace"], r["name"]) for r in rows] == [(namespace, "cfg")]
    assert ("note: cannot list and watch secrets across all namespaces (missing RBAC permission); "
            f'showing namespace "{namespace}" only, the kubeconfig context\'s namespace') in err


def test_status_names_a_refused_permission(viewer: KubeTarget, namespace: str, tmp_path: Path) -> None:
    code, rows, err = status(with_namespace(viewer, namespace), tmp_path, "-n", "kube-system")
    assert code != 0 and rows == []
    assert 'error: missing RBAC permission: list secrets in namespace "kube-system"' in err
    assert "cannot list resource" in err  # the API server's own words follow
    # No namespace in the context: the fall-back is "default", which it may not read either.
    code, rows, err = status(with_namespace(viewer, None), tmp_path)
    assert code != 0 and rows == []
    assert 'showing namespace "default" only' in err
    assert 'error: missing RBAC permission: list secrets in namespace "default"' in err


def test_diff_refuses_when_storage_cannot_be_read(viewer: KubeTarget, tmp_path: Path) -> None:
    pkg = tmp_path / "pkgs" / "cfg.yaml"
    pkg.parent.mkdir()
    pkg.write_text(package_yaml("cfg", "kube-system", chart=EXAMPLES / "charts" / "settings"))
    proc = helmdeck("diff", str(pkg), "--kubeconfig", str(viewer.kubeconfig), "--log-file", str(tmp_path / "log"))
    assert proc.returncode == 1 and proc.stdout == ""  # not 2: nothing is known to change
    assert 'missing RBAC permission: list secrets in namespace "kube-system"' in proc.stderr


async def test_app_keeps_the_refused_permission_in_view(viewer: KubeTarget, tmp_path: Path) -> None:
    args = build_parser().parse_args(["--kubeconfig", str(with_namespace(viewer, None)),
                                      "--log-file", str(tmp_path / "log")])
    engine = builder.engine(args)  # as `helmdeck` builds it: falls back to "default", which is refused
    assert engine.namespaces == ["default"]
    app = HelmdeckApp(engine, context="viewer")
    async with app.run_test(size=(160, 30)) as pilot:
        header = app.screen.query_one(HeaderBar)
        for _ in range(300):
            if len(header.access) == 2:
                break
            await asyncio.sleep(0.1)
        text = "\n".join(header.access)
        assert 'missing RBAC permission: list secrets in namespace "default"' in text
        assert 'note: cannot list and watch secrets across all namespaces' in text
        assert 'missing RBAC permission' in str(header.render())
        await pilot.pause()
        assert any("missing RBAC permission" in str(n.message) for n in app._notifications)


def test_cleanup_and_reconcile_say_a_refused_permission(viewer: KubeTarget, tmp_path: Path) -> None:
    pkgs = tmp_path / "pkgs"
    pkgs.mkdir()
    base = ["--kubeconfig", str(with_namespace(viewer, None)), "--packages", str(pkgs), "--log-file",
            str(tmp_path / "log")]
    # "default" (the fall-back) cannot be read: cleanup would miss its releases, so it refuses.
    proc = helmdeck("cleanup", "--dry-run", *base)
    assert proc.returncode == 1 and "nothing to clean up" not in proc.stdout
    assert 'error: missing RBAC permission: list secrets in namespace "default"' in proc.stderr
    assert "cannot clean up" in proc.stderr
    # reconcile --once reads the storage of its packages' releases only (an empty folder's none: issue 36)
    (pkgs / "web.yaml").write_text(package_yaml("web", chart=str(EXAMPLES / "charts" / "web")))
    proc = helmdeck("reconcile", "--once", "--no-lease", *base)
    assert proc.returncode == 1  # the storage its package's release is kept in is refused
    assert 'error: missing RBAC permission: list secrets in namespace "default"' in proc.stderr
    assert 'note: cannot list and watch secrets across all namespaces' in proc.stderr
