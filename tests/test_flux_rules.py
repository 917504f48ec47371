"""HelmRelease documents reconciled by Flux's helm-controller's rules (issue 34's numbered behaviours), each on
the local cluster with real helm, each citing the file and function of helm-controller v1.6.3 it follows."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine.helm import Helm
from engine.kube.client import KubeTarget
from engine.reconcile import state as st
from engine.runtime import Engine
from engine.runtime.assemble import build_engine
from tests.chart_sources import ChartRepoServer, package_chart, publish_http, write
from tests.conftest import run_helm
from tests.test_values_from import until

pytestmark = pytest.mark.cluster


def repository(namespace: str, url: str) -> str:
    return f"""apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmRepository
metadata: {{name: charts, namespace: {namespace}}}
spec: {{interval: 1m, url: "{url}"}}
"""


def helm_release(namespace: str, spec: str = "", values: str = "{replicas: 1}") -> str:
    """The HelmRelease ``web`` of the repository's chart; ``spec`` holds more spec lines (indented two)."""
    return f"""apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {{name: web, namespace: {namespace}}}
spec:
  interval: 10m
  timeout: 60s
  chart:
    spec: {{chart: web, version: "1.x", sourceRef: {{kind: HelmRepository, name: charts}}}}
  values: {values}
{spec}"""


@pytest.fixture
def flux_folder(helm: Helm, namespace: str, tmp_path: Path, repo: ChartRepoServer) -> Path:
    """A Flux repository's folder: the HelmRepository (its own file) serving the chart ``web`` 1.0.0."""
    publish_http(helm.binary, package_chart(helm.binary, tmp_path, "1.0.0"), repo)
    pkgs = tmp_path / "flux"
    write(pkgs, "repository.yaml", repository(namespace, repo.url))
    return pkgs


def releases(helm: Helm, namespace: str) -> list[str]:
    return [r["name"] for r in json.loads(run_helm(helm, "list", "-n", namespace, "-o", "json"))]


@pytest.fixture
async def pruning(kube_target: KubeTarget, helm: Helm, namespace: str, flux_folder: Path) -> AsyncIterator[Engine]:
    """An engine watching ``flux_folder`` that prunes what leaves it (``reconcile --prune``)."""
    engine = build_engine(kube_target, helm, flux_folder, namespaces=[namespace], prune=True)
    await engine.start()
    try:
        yield engine
    finally:
        await engine.stop()


async def test_a_suspended_helmrelease_pruned_from_the_folder_keeps_its_release(
    helm: Helm, namespace: str, flux_folder: Path, pruning: Engine,
) -> None:
    """Behaviour 13: helm-controller uninstalls a deleted HelmRelease's release only when it is not suspended
    (internal/controller/helmrelease_controller.go, ``reconcileDelete``: ``if !obj.Spec.Suspend``)."""
    key = (namespace, "web")
    write(flux_folder, "web.yaml", helm_release(namespace))
    await until(lambda: (v := pruning.release(key)) is not None and v.state == st.IN_SYNC, 90)
    write(flux_folder, "web.yaml", helm_release(namespace, "  suspend: true\n"))
    await until(lambda: pruning.book.suspended(key))
    (flux_folder / "web.yaml").unlink()
    await until(lambda: any("the package was suspended" in e.message for e in pruning.events(key)))
    assert releases(helm, namespace) == ["web"]
    # Not suspended: the prune uninstalls, as Flux's reconcileReleaseDeletion does.
    write(flux_folder, "web.yaml", helm_release(namespace))
    await until(lambda: (v := pruning.release(key)) is not None and v.state == st.IN_SYNC, 90)
    (flux_folder / "web.yaml").unlink()
    await until(lambda: releases(helm, namespace) == [], 60)
