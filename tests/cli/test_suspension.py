"""Suspension on every path: ``reconcile --once`` and ``plan`` honour ``spec.suspend`` and the operator's
suspension (an uninstall with ``D``) as the running engine does (the action gate's one check)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.helm import Helm
from engine.kube.client import KubeTarget
from engine.runtime.assemble import build_engine
from helmdeck.cli import EXIT_CONVERGED, EXIT_NO_CHANGES
from tests.cli.test_cli import cluster_args, flaky, helmdeck
from tests.conftest import run_helm

pytestmark = pytest.mark.cluster


def history(helm: Helm, namespace: str) -> list[tuple[int, str]]:
    out = run_helm(helm, "history", "app", "-n", namespace, "-o", "json")
    return [(r["revision"], r["status"]) for r in json.loads(out)]


def test_a_suspended_package_with_a_values_change_is_not_upgraded_by_once_nor_planned(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path,
) -> None:
    pkgs = flaky(tmp_path / "p", namespace, "{message: one}", "60s")  # 60 s on a loaded machine
    args = cluster_args(helm, kube_target, namespace, pkgs, tmp_path / "log")
    first = helmdeck("reconcile", "--once", "--no-lease", *args)
    assert first.returncode == EXIT_CONVERGED, first.stdout + first.stderr
    assert history(helm, namespace) == [(1, "deployed")]
    app = pkgs / "app.yaml"
    app.write_text(app.read_text().replace("{message: one}", "{message: two}") + "  suspend: true\n")

    once = helmdeck("reconcile", "--once", "--no-lease", "--json", *args)
    assert once.returncode == EXIT_CONVERGED, once.stdout + once.stderr
    result = next(json.loads(line) for line in once.stdout.splitlines() if '"result"' in line)
    assert (result["state"], result["suspended"], result["converged"]) == ("Suspended", True, False)
    assert "spec.suspend: true in app.yaml" in result["message"]
    assert history(helm, namespace) == [(1, "deployed")]  # the values change was not applied

    plan = helmdeck("plan", *args)
    assert plan.returncode == EXIT_NO_CHANGES, plan.stdout + plan.stderr
    assert f"{namespace}/app (app.yaml)  Suspended → nothing to do" in plan.stdout
    assert "0 of 1 package would change" in plan.stdout
    doc = json.loads(helmdeck("plan", "-o", "json", *args).stdout)
    assert (doc["packages"][0]["state"], doc["packages"][0]["action"], doc["changes"]) == ("Suspended", None, False)

    app.write_text(app.read_text().replace("  suspend: true\n", ""))  # resumed: the change applies
    assert helmdeck("plan", *args).returncode != EXIT_NO_CHANGES
    assert helmdeck("reconcile", "--once", "--no-lease", *args).returncode == EXIT_CONVERGED
    assert history(helm, namespace)[-1] == (2, "deployed")


async def test_a_release_uninstalled_with_d_is_not_reinstalled_by_the_next_once(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path,
) -> None:
    pkgs = flaky(tmp_path / "p", namespace, "{message: one}", "60s")  # 60 s on a loaded machine
    args = cluster_args(helm, kube_target, namespace, pkgs, tmp_path / "log")
    assert helmdeck("reconcile", "--once", "--no-lease", *args).returncode == EXIT_CONVERGED
    key = (namespace, "app")
    engine = build_engine(kube_target, helm, pkgs, namespaces=[namespace])
    await engine.start(reconcile=False)
    try:
        assert (await engine.uninstall(key)).ok  # what the app's D runs
    finally:
        await engine.stop()

    once = helmdeck("reconcile", "--once", "--no-lease", *args)
    assert once.returncode == EXIT_CONVERGED, once.stdout + once.stderr
    assert f"{namespace}/app: Suspended: {namespace}/app is suspended by the operator" in once.stdout
    assert "app" not in run_helm(helm, "list", "-n", namespace, "-q").split()  # not reinstalled
    plan = helmdeck("plan", *args)
    assert plan.returncode == EXIT_NO_CHANGES, plan.stdout + plan.stderr
    assert f"{namespace}/app (app.yaml)  Suspended → nothing to do" in plan.stdout
