"""The release service's upgrade (maintenance's way in and out) forces conflicts by the one rule of install and
upgrade (engine.reconcile.options.server_side, as helm-controller v1.6.3 internal/action/upgrade.go ``Upgrade``:
``ForceConflicts = serverSideApply``, "auto" resolved from the latest release's apply method), not by whether
it leaves maintenance."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client

from engine.helm import Helm
from engine.kube.client import KubeTarget, api_client
from engine.package.schema import NO_RESOURCE_RECONCILIATION
from engine.reconcile.atomic import PassResult
from engine.runtime.assemble import build_engine
from testkit.chart_sources import WEB_CHART
from testkit.packages import write_package

pytestmark = pytest.mark.cluster


async def test_entering_maintenance_forces_conflicts_under_server_side_apply(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path,
) -> None:
    """A release applied server-side (helm 4's default) whose spec.replicas another field manager took: the
    upgrade that enters maintenance (the service's, stamping the maintenance label) forces the conflict, as any
    upgrade under server-side apply does, and the chart's value is back (not forced, the other manager's value
    stayed)."""
    folder = tmp_path / "packages"
    write_package(folder, "web", namespace, chart=str(WEB_CHART), timeout="60s", values={"replicas": 2})
    engine = build_engine(kube_target, helm, folder, namespaces=[namespace], watch_packages=False)
    await engine.start(reconcile=False)
    key = (namespace, "web")
    try:
        assert (await engine.controller.run_pass(key)).outcomes[0].ok
        apps = client.AppsV1Api(api_client(kube_target))
        theirs = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                  "spec": {"replicas": 3}}
        apps.patch_namespaced_deployment("web", namespace, theirs, field_manager="someone-else", force=True,
                                         _content_type="application/apply-patch+yaml")
        entered = await engine.set_maintenance(key, NO_RESOURCE_RECONCILIATION)
        assert isinstance(entered, PassResult) and all(o.ok for o in entered.outcomes), entered
        assert [o.version for o in engine.history(key)] == [2, 1]
    finally:
        await engine.stop()
    spec = apps.read_namespaced_deployment("web", namespace).spec
    assert spec is not None and spec.replicas == 2
