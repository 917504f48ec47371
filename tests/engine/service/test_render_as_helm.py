"""Renders made as helm would act: an install dry run before install (``.Release.IsInstall`` true), an upgrade
dry run after, on the server so ``lookup`` sees the live objects (a chart keeping a generated password, as
bitnami's do); the render cache keys install vs upgrade, server vs offline."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from kubernetes import client

from engine.helm import Helm, HelmError
from engine.kube.client import KubeTarget, api_client
from engine.package.load import load_package
from engine.service import ReleaseService
from engine.service.render import RenderKey
from helmdeck.cli import EXIT_CHANGES, EXIT_CONVERGED
from tests.cli.test_cli import cluster_args, helmdeck
from tests.conftest import run_helm
from tests.engine.service.test_comparison import chart_package

pytestmark = pytest.mark.cluster

CHART = Path(__file__).parents[2] / "data" / "charts" / "keeps-password"


def _package(folder: Path, namespace: str, values: str) -> Path:
    return chart_package(folder, namespace, values, CHART)


def _password(core_api: client.CoreV1Api, namespace: str) -> str:
    data = core_api.read_namespaced_secret("app-password", namespace).data or {}
    return base64.b64decode(data["password"]).decode()


def test_a_chart_keeping_its_password_through_lookup_renders_diffs_and_plans_as_helm_acts(
    any_helm: Helm, kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str, tmp_path: Path,
) -> None:
    pkgs = _package(tmp_path / "p", namespace, "{message: one}")
    app = pkgs / "app.yaml"
    args = cluster_args(any_helm, kube_target, namespace, pkgs, tmp_path / "log")

    # Not installed: an install dry run (an offline upgrade render failed here with PASSWORDS ERROR).
    render = helmdeck("render", str(app), *args)
    assert render.returncode == 0, render.stderr
    assert "kind: Secret" in render.stdout and "rendered offline" not in render.stdout
    plan = helmdeck("plan", *args)
    assert plan.returncode == EXIT_CHANGES, plan.stdout + plan.stderr
    assert f"{namespace}/app (app.yaml)  Absent → install" in plan.stdout and "+2 added" in plan.stdout

    assert helmdeck("reconcile", "--once", "--no-lease", *args).returncode == EXIT_CONVERGED
    password = _password(core_api, namespace)

    # Installed: an upgrade dry run whose lookup finds the live password, so the Secret does not change.
    app.write_text(app.read_text().replace("{message: one}", "{message: two}"))
    diff = helmdeck("diff", str(app), "--show-secrets", *args)
    assert diff.returncode == EXIT_CHANGES, diff.stdout + diff.stderr
    assert "ConfigMap" in diff.stdout and "Secret" not in diff.stdout
    plan = helmdeck("plan", "-o", "json", *args)
    assert plan.returncode == EXIT_CHANGES, plan.stdout + plan.stderr
    assert json.loads(plan.stdout)["packages"][0]["changed"] == ["ConfigMap/app"]
    assert helmdeck("reconcile", "--once", "--no-lease", *args).returncode == EXIT_CONVERGED
    history = json.loads(run_helm(any_helm, "history", "app", "-n", namespace, "-o", "json"))
    assert [r["revision"] for r in history] == [1, 2]
    assert _password(core_api, namespace) == password  # helm kept it, as the render said


async def test_the_render_cache_keys_install_upgrade_and_offline(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path,
) -> None:
    spec = load_package(_package(tmp_path / "p", namespace, "{message: one}") / "app.yaml")
    api = api_client(kube_target)
    online = ReleaseService(helm, api)
    first = await online.render(namespace, spec)
    assert "password:" in first and online.render_cache.misses == 1
    assert await online.render(namespace, spec) == first and online.render_cache.hits == 1  # fresh: reused
    keys: list[RenderKey] = online.render_cache.held()
    assert (keys[0].upgrade_of, keys[0].server) == (None, True)  # an install, on the server

    offline = ReleaseService(helm, api, server_render=False)
    text = await offline.render(namespace, spec)
    assert text.startswith("# helmdeck: rendered offline (helm template, no cluster)")
    run_helm(helm, "install", "app", str(CHART), "-n", namespace)
    # Offline, an upgrade's lookup finds nothing: the chart's PASSWORDS ERROR (line 4 is its fail).
    with pytest.raises(HelmError, match=r"execution error at \(keeps-password/templates/secret.yaml:4"):
        await offline.render(namespace, spec)
    upgrade = await online.render(namespace, spec)  # the same spec, now an upgrade of revision 1: a new key
    assert online.render_cache.misses == 2
    assert [k.upgrade_of for k in online.render_cache.held()] == [None, 1]
    assert upgrade.count("password:") == 1
