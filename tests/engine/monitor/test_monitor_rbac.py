"""A monitor watch refused by RBAC is said on the release (monitor status, Overview, event log, status JSON),
not silently left unmonitored; granting the right clears it. On the local cluster, real RBAC."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest
from kubernetes import client

from engine.helm import Helm
from engine.kube.client import KubeTarget, api_client
from engine.kube.discovery import ResourceType
from engine.monitor.monitor import ExpectedObject, ReleaseMonitor
from engine.monitor.status import MonitorStatus
from engine.monitor.watch import WatchHub
from engine.runtime.assemble import build_engine
from localcluster.cluster import LocalCluster
from tests.engine.helm.test_identity import write_package
from tests.engine.resolve.test_values_from import until
from tests.engine.storage.test_observer_rbac import service_account_target
from tui.format import monitor_text

pytestmark = pytest.mark.cluster

CONFIGMAPS = ResourceType("", "v1", "ConfigMap", "configmaps", True)


def role(rbac: client.RbacAuthorizationV1Api, namespace: str, name: str, account: str,
         rules: list[client.V1PolicyRule]) -> None:
    """Role ``name`` with ``rules``, bound to ServiceAccount ``namespace/account``."""
    rbac.create_namespaced_role(namespace, client.V1Role(metadata=client.V1ObjectMeta(name=name), rules=rules))
    rbac.create_namespaced_role_binding(namespace, client.V1RoleBinding(
        metadata=client.V1ObjectMeta(name=name),
        role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name=name),
        subjects=[client.RbacV1Subject(kind="ServiceAccount", name=account, namespace=namespace)]))


def test_a_refused_watch_is_the_monitors_problem_until_granted(
    local_cluster: LocalCluster, core_api: client.CoreV1Api, kube_target: KubeTarget, namespace: str,
    tmp_path: Path,
) -> None:
    rbac = client.RbacAuthorizationV1Api(api_client(kube_target))
    target = service_account_target(local_cluster, core_api, rbac, namespace, "blind", ["list"], tmp_path)
    hub = WatchHub(api_client(target))
    changes: list[str] = []
    changed = threading.Event()

    def on_change(mon: ReleaseMonitor) -> None:
        changes.append(mon.problem())
        changed.set()

    mon = ReleaseMonitor((namespace, "r"), [ExpectedObject("v1", "ConfigMap", namespace, "c", CONFIGMAPS)],
                         hub, on_change)
    try:
        mon.start()
        assert changed.wait(10), "a refused watch told nobody"
        user = f"system:serviceaccount:{namespace}:blind"
        assert changes[0].startswith(f"cannot watch configmaps/{namespace}: ") and "forbidden" in changes[0]
        assert user in changes[0] and "(403)" in changes[0], changes[0]
        (status,) = mon.resources()
        assert status.ready is None and status.present and mon.absent() == ()  # unknown, not absent
        changed.clear()
        role(rbac, namespace, "blind-configmaps", "blind", [client.V1PolicyRule(
            api_groups=[""], resources=["configmaps"], verbs=["list", "watch"])])
        assert changed.wait(15) and changes[-1] == "" and mon.synced  # the retry lists: the problem is gone
        assert [r.reason for r in mon.resources()] == ["absent"]
    finally:
        mon.close()
        assert hub.stop(5)


def test_a_release_shows_that_its_monitor_cannot_watch(
    helm: Helm, kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str, tmp_path: Path,
) -> None:
    # The ServiceAccount may install (helm stores in Secrets, writes the ConfigMap and Deployment), but not
    # list or watch ConfigMaps: the monitor, reading as it, cannot watch the release's ConfigMap.
    core_api.create_namespaced_service_account(namespace, client.V1ServiceAccount(
        metadata=client.V1ObjectMeta(name="deployer")))
    rbac = client.RbacAuthorizationV1Api(core_api.api_client)
    role(rbac, namespace, "deployer", "deployer", [
        client.V1PolicyRule(api_groups=["", "apps"], resources=["secrets", "deployments", "replicasets", "pods",
                                                                "events"], verbs=["*"]),
        client.V1PolicyRule(api_groups=[""], resources=["configmaps"],
                            verbs=["get", "create", "update", "patch", "delete"])])
    pkgs = write_package(tmp_path / "p", namespace,
                         "  serviceAccountName: deployer\n  install: {disableWait: true}\n")
    key = (namespace, "app")

    async def scenario() -> None:
        engine = build_engine(kube_target, helm, pkgs, namespaces=[namespace])
        await engine.start()
        try:
            await until(lambda: (view := engine.release(key)) is not None and bool(view.monitor.problem), 60)
            view = engine.release(key)
            assert view is not None
            mon: MonitorStatus = view.monitor
            assert mon.state == "active" and mon.summary() == "cannot watch"
            assert monitor_text(mon) == ("! cannot watch", "bad")  # the table's MONITOR cell and the Overview
            assert f"configmaps/{namespace}" in mon.problem and "system:serviceaccount" in mon.problem
            assert "cannot list resource" in mon.problem and "deployer" in mon.problem, mon.problem
            failed = [e for e in engine.events(key) if e.action == "monitor" and e.outcome == "failed"]
            assert len(failed) == 1 and mon.problem in failed[0].message
        finally:
            await engine.stop()

    asyncio.run(scenario())
    from tests.cli.test_cli import cluster_args, helmdeck

    status = helmdeck("status", "-o", "json", *cluster_args(helm, kube_target, namespace, pkgs, tmp_path / "log"))
    row = next(r for r in json.loads(status.stdout) if r["name"] == "app")
    assert "cannot list resource" in (row["monitor"]["problem"] or ""), row
    table = helmdeck("status", *cluster_args(helm, kube_target, namespace, pkgs, tmp_path / "log"))
    assert "cannot watch" in table.stdout, table.stdout
