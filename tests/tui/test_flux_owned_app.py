"""The app and the gate on a release Flux owns, on the real local cluster (the HelmRelease CRD applied, no Flux
running: the object's existence is what decides): the row says Flux owns it and how it stands against the
document, the actions Flux would undo are refused saying what Flux offers, an edit of the document is judged
again, and ``status`` shows the FluxOwned condition."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from engine.helm import Helm
from engine.kube import rest
from engine.kube.client import KubeTarget
from engine.runtime.assemble import build_engine
from testkit.chart_sources import ChartRepoServer, package_chart, publish_http, write
from tests.cli.test_cli import cluster_args, helmdeck
from tests.conftest import run_helm
from tests.engine.runtime.test_flux_owns import GROUP, PLURAL, VERSION, document, helmrelease_api  # noqa: F401  (a fixture)
from tests.tui.test_app_pilot import SIZE, cell, make_app, row, select, stored, wait_for
from tui.screens.confirm import ConfirmScreen

pytestmark = pytest.mark.cluster


async def test_a_flux_owned_release_shows_as_fluxs_and_manual_actions_point_to_f(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path, repo: ChartRepoServer,
    core_api: client.CoreV1Api, helmrelease_api: client.CustomObjectsApi,  # noqa: F811
) -> None:
    archive = package_chart(helm.binary, tmp_path, "1.0.0")
    publish_http(helm.binary, archive, repo)
    run_helm(helm, "install", "web", str(archive), "-n", namespace, "--set", "replicas=1")  # as Flux deployed it
    helmrelease_api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "HelmRelease", "metadata": {"name": "web"},
        "spec": {"interval": "10m"}})
    pkgs = tmp_path / "flux-repository"
    write(pkgs, "web.yaml", document(namespace, repo.url, 2))
    key = (namespace, "web")
    app = make_app(kube_target, helm, namespace, pkgs)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: cell(app, key, "owner") == "flux" and cell(app, key, "state") == "⚑ OutOfSync",
                       seen=lambda: {**row(app, key), "state": cell(app, key, "state")})
        why = app.client.why_not("rollback", key)
        assert why is not None and f"HelmRelease {namespace}/web" in why and "Flux rolls back only" in why
        await select(app, key)
        await pilot.press("r")
        await wait_for(lambda: "Flux rolls back only" in (row(app, key)["notifications"] or ""),
                       seen=lambda: row(app, key))
        await pilot.press("u")  # Flux's forced reconcile, on the HelmRelease the document names
        await wait_for(lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.pause()
        await pilot.press("y")

        def forced() -> bool:
            got: Any = helmrelease_api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "web")
            notes = got["metadata"].get("annotations") or {}
            return bool(notes) and notes.get("reconcile.fluxcd.io/forceAt") == notes.get(
                "reconcile.fluxcd.io/requestedAt")

        await wait_for(forced, seen=lambda: row(app, key))
        write(pkgs, "web.yaml", document(namespace, repo.url, 1))  # the document now says what is deployed
        await wait_for(lambda: cell(app, key, "state") == "⚑ InSync", timeout=30,
                       seen=lambda: {**row(app, key), "state": cell(app, key, "state")})
        assert cell(app, key, "owner") == "flux"
    assert stored(core_api, namespace, "web") == [(1, "deployed")]  # helmdeck acted on nothing
    write(pkgs, "web.yaml", document(namespace, repo.url, 3))
    shown = helmdeck("status", "-o", "json", *cluster_args(helm, kube_target, namespace, pkgs, tmp_path / "log"))
    assert shown.returncode == 0, shown.stderr
    [web] = json.loads(shown.stdout)
    assert web["state"] == "OutOfSync" and web["ready"] is None
    assert web["conditions"][0]["reason"] == "FluxOwned" and web["conditions"][0]["status"] == "Unknown"
    assert f"HelmRelease {namespace}/web exists in the cluster" in web["conditions"][0]["message"]
    # plan reads it as the app does (Flux's state detection): what Flux's next reconcile would change, no
    # false change against what Flux deployed
    planned = helmdeck("plan", "-o", "json", *cluster_args(helm, kube_target, namespace, pkgs, tmp_path / "log"))
    assert planned.returncode == 2, planned.stdout + planned.stderr
    [line] = json.loads(planned.stdout)["packages"]
    assert (line["state"], line["action"], line["revision"]) == ("OutOfSync", "upgrade", 1)
    assert line["reasons"][0].startswith("Flux owns it") and line["reasons"][1:] == ["values changed"]
    assert "-replicas: 1" in line["values_diff"] and "+replicas: 3" in line["values_diff"]
    write(pkgs, "web.yaml", document(namespace, repo.url, 1))
    same = helmdeck("plan", "-o", "json", *cluster_args(helm, kube_target, namespace, pkgs, tmp_path / "log"))
    assert same.returncode == 0, same.stdout + same.stderr
    [line] = json.loads(same.stdout)["packages"]
    assert (line["state"], line["action"], line["changes"]) == ("InSync", None, False)


async def test_fluxs_api_is_discovered_once_for_every_document(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    helmrelease_api: client.CustomObjectsApi,  # noqa: F811
) -> None:
    # The API server answers; the test only counts the requests helmdeck makes (one discovery for all, one
    # GET per document), through the one function that sends them.
    pkgs = tmp_path / "flux-repository"
    docs = [document(namespace, "https://charts.example.com", 1).replace("name: web", f"name: web{i}")
            .replace("name: charts", f"name: charts{i}") for i in range(3)]
    write(pkgs, "webs.yaml", "---\n".join(docs))
    helmrelease_api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "HelmRelease", "metadata": {"name": "web1"}, "spec": {}})
    asked: list[str] = []
    real = rest.get_json

    def counting(api: Any, path: str, *args: Any, **kwargs: Any) -> Any:
        asked.append(path)
        return real(api, path, *args, **kwargs)

    monkeypatch.setattr(rest, "get_json", counting)
    engine = build_engine(kube_target, helm, pkgs, namespaces=[namespace], readonly=True, monitors=False)
    await engine.start(reconcile=False)
    try:
        flux = [p for p in asked if p.startswith(f"/apis/{GROUP}/")]
        assert flux.count(f"/apis/{GROUP}/{VERSION}") == 1, flux
        assert sorted(p.rsplit("/", 1)[1] for p in flux if p.endswith(("web0", "web1", "web2"))) == [
            "web0", "web1", "web2"]
        owned = {k[1]: engine.release(k).flux_owned for k in engine.packages}  # type: ignore[union-attr]
        assert owned == {"web0": False, "web1": True, "web2": False}
    finally:
        await engine.stop()
