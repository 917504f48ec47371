"""The engine status on the local cluster: removed with its release (prune, cleanup), a leftover ignored (and
`status -o json` says so), the status of an install that stalled after its uninstall remediations kept, and a
failed install into a namespace that does not exist yet kept where `status` reads it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from engine.helm import Helm
from engine.kube.client import KubeTarget
from engine.reconcile import conditions as cond
from engine.reconcile import state as st
from engine.reconcile.status import EngineStatus
from engine.reconcile.store import DATA_KEY, home_name, object_name
from engine.runtime import Engine
from engine.runtime.assemble import build_engine
from helmdeck.cli import EXIT_STALLED
from testkit.packages import write_package
from tests.cli.test_cli import cluster_args, helmdeck
from tests.engine.resolve.test_values_from import until
from tests.reconcile_harness import EXAMPLES

pytestmark = pytest.mark.cluster


def package(folder: Path, namespace: str, extra: str = "") -> Path:
    return write_package(folder, "app", namespace, chart=EXAMPLES / "charts" / "settings", timeout="20s",
                         values={"settings": {"a": "b"}}, **(yaml.safe_load(extra) or {}))


def status_exists(core: client.CoreV1Api, namespace: str, name: str) -> bool:
    try:
        core.read_namespaced_config_map(name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def versions(engine: Engine, key: tuple[str, str]) -> list[int]:
    return sorted(o.version for o in engine.operations().history(key))


async def installed(engine: Engine, key: tuple[str, str]) -> None:
    await until(lambda: (v := engine.release(key)) is not None and v.state == st.IN_SYNC)


async def test_prune_removes_the_status_and_re_adding_installs_once(
    helm: Helm, kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str, tmp_path: Path,
) -> None:
    file = package(tmp_path / "p", namespace)
    key = (namespace, "app")
    engine = build_engine(kube_target, helm, tmp_path / "p", namespaces=[namespace], prune=True)
    await engine.start()
    try:
        await installed(engine, key)
        await until(lambda: status_exists(core_api, namespace, object_name("app")))  # persisted after the pass
        text = file.read_text()
        file.unlink()
        await until(lambda: not versions(engine, key) and not status_exists(core_api, namespace, object_name("app")))
        file.write_text(text)
        await until(lambda: versions(engine, key) == [1])
        await installed(engine, key)
        await asyncio.sleep(3)  # a stale status made an upgrade right after the install
        assert versions(engine, key) == [1]
    finally:
        await engine.stop()


async def test_a_leftover_status_that_does_not_match_the_history_is_ignored(
    helm: Helm, kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str, tmp_path: Path,
) -> None:
    pkgs = tmp_path / "p"
    file = package(pkgs, namespace)
    key = (namespace, "app")
    engine = build_engine(kube_target, helm, pkgs, namespaces=[namespace])
    await engine.start()
    try:
        await installed(engine, key)
    finally:
        await engine.stop()
    leftover = core_api.read_namespaced_config_map(object_name("app"), namespace)
    assert leftover.metadata is not None
    leftover.metadata = client.V1ObjectMeta(name=leftover.metadata.name, labels=leftover.metadata.labels)
    text = file.read_text()
    file.unlink()
    proc = await asyncio.to_thread(helmdeck, "cleanup", "--yes", *cluster_args(
        helm, kube_target, namespace, pkgs, tmp_path / "log"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not status_exists(core_api, namespace, object_name("app"))  # removed with the release
    # As an older helmdeck left it: the status claims a revision 1 that is gone.
    core_api.create_namespaced_config_map(namespace, leftover)
    file.write_text(text)
    viewer = build_engine(kube_target, helm, pkgs, namespaces=[namespace], readonly=True)
    await viewer.start(reconcile=False)
    try:
        assert viewer.book.status(key) is None  # its history is not the release's: ignored
    finally:
        await viewer.stop()
    # Not silently: status -o json names the status it did not take and why.
    proc = await asyncio.to_thread(helmdeck, "status", "-o", "json", *cluster_args(
        helm, kube_target, namespace, pkgs, tmp_path / "log"))
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)[0]
    assert row["droppedStatus"]["object"] == f"{namespace}/{object_name('app')}", row
    assert "uninstalled outside helmdeck" in row["droppedStatus"]["reason"], row
    engine = build_engine(kube_target, helm, pkgs, namespaces=[namespace])
    await engine.start()
    try:
        await until(lambda: versions(engine, key) == [1])
        await installed(engine, key)
        await asyncio.sleep(3)
        assert versions(engine, key) == [1]
    finally:
        await engine.stop()


def test_an_install_stalled_after_its_uninstall_remediations_keeps_its_status(
    helm: Helm, kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str, tmp_path: Path,
) -> None:
    # The status's newest history entry is the revision the remediation uninstalled: it was dropped on load as
    # a leftover, so status said Absent with no failures and a restart installed twice more. The last failure
    # is remediated too (remediateLastFailure; Flux's default keeps it failed, issue 34).
    chart = tmp_path / "bad"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: bad\nversion: 0.1.0\n")
    (chart / "templates" / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Bad_Name\ndata:\n  a: b\n")  # refused by the API
    pkgs = tmp_path / "p"
    pkgs.mkdir()
    write_package(pkgs, "app", namespace, chart=chart, timeout="20s",
                  install={"createNamespace": True, "remediation": {"retries": 1, "remediateLastFailure": True}})
    args = cluster_args(helm, kube_target, namespace, pkgs, tmp_path / "log")
    proc = helmdeck("reconcile", "--once", "--no-lease", *args)
    assert proc.returncode == EXIT_STALLED, proc.stdout + proc.stderr
    data = core_api.read_namespaced_config_map(object_name("app"), namespace).data
    assert data is not None
    stored = EngineStatus.from_json(data[DATA_KEY])
    assert stored.failures.install == 2 and cond.is_true(stored.conditions, cond.STALLED), stored

    proc = helmdeck("status", "-o", "json", *args)
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)[0]
    assert row["state"] == "Stalled", row
    assert row["failures"] == {"install": 2, "upgrade": 0, "total": 2}, row
    assert row["ready"] is False, row
    stalled = next(c for c in row["conditions"] if c["type"] == "Stalled")
    assert stalled["status"] == "True" and stalled["reason"] == cond.RETRIES_EXCEEDED, stalled
    assert "install retries exhausted" in stalled["message"], stalled
    assert row["lastAction"]["action"] == "uninstall-remediation", row
    assert row["droppedStatus"] is None, row

    # Restarted, the engine keeps the stall: no install runs (its retries are spent).
    proc = helmdeck("reconcile", "--once", "--no-lease", "--json", *args)
    assert proc.returncode == EXIT_STALLED, proc.stdout + proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert not [e for e in events if e["type"] == "event" and e["action"] == "install"], events


async def test_a_failed_install_into_a_new_namespace_is_kept_for_status(
    helm: Helm, kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str, tmp_path: Path,
) -> None:
    target = f"{namespace}-new"
    pkgs = tmp_path / "p"
    (pkgs).mkdir()
    write_package(pkgs, "app", namespace, chart=EXAMPLES / "charts" / "flaky", targetNamespace=target,
                  releaseName="app", timeout="20s", install={"createNamespace": True}, values={"renderError": True})
    key = (target, "app")
    engine = build_engine(kube_target, helm, pkgs, namespaces=[namespace, target])
    await engine.start()
    try:
        await until(lambda: (v := engine.release(key)) is not None and v.ready is False)
    finally:
        await engine.stop()
    assert status_exists(core_api, "default", home_name(target, "app"))
    viewer = build_engine(kube_target, helm, pkgs, namespaces=[namespace, target], readonly=True)
    await viewer.start(reconcile=False)
    try:
        view = viewer.release(key)
        assert view is not None and view.ready is False
        ready = next(c for c in view.conditions if c.type == "Ready")
        assert "renderError was set on purpose" in ready.message
    finally:
        await viewer.stop()
    core_api.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=target)))
    try:
        (pkgs / "app.yaml").write_text((pkgs / "app.yaml").read_text().replace("renderError: true", "message: hi"))
        engine = build_engine(kube_target, helm, pkgs, namespaces=[namespace, target])
        await engine.start()
        try:
            await until(lambda: versions(engine, key) == [1])
            await until(lambda: not status_exists(core_api, "default", home_name(target, "app")))
            assert status_exists(core_api, target, object_name("app"))
        finally:
            await engine.stop()
    finally:
        core_api.delete_namespace(target, propagation_policy="Background")
