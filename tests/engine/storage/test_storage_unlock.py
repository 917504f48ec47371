"""Unlock: a stale pending release marked failed reads back identically in helm 3 and helm 4."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from engine.helm import Helm
from engine.kube.client import KubeTarget, api_client
from engine.storage.codec import Driver, record_name
from engine.storage.observation import Observation
from engine.storage.observer import Observer
from engine.storage.writer import (
    RecordNotFoundError,
    ReleaseNotPendingError,
    StorageConflictError,
    unlock_description,
    unlock_release,
)
from tests.storage_cluster import helm_cli, wait_for
from tests.storage_records import write_chart

pytestmark = pytest.mark.cluster


def _labels(core: client.CoreV1Api, driver: Driver, namespace: str, name: str) -> dict[str, str]:
    read: Any = core.read_namespaced_secret if driver == "secret" else core.read_namespaced_config_map
    return dict(read(name, namespace).metadata.labels)


def _revision(observer: Observer, namespace: str, version: int, status: str = "") -> Observation | None:
    """The latest observation of ``probe`` if it is ``version`` (in ``status``), else None."""
    obs = observer.latest(namespace, "probe")
    ok = obs is not None and obs.version == version and (not status or obs.status == status)
    return obs if ok else None


def _resource_version(core: client.CoreV1Api, namespace: str, name: str) -> str:
    """The resourceVersion of a Secret now."""
    meta = core.read_namespaced_secret(name, namespace).metadata
    assert meta is not None
    return str(meta.resource_version)


@pytest.mark.parametrize("driver", ["secret", "configmap"])
def test_unlock_reads_back_identically_in_helm(
    any_helm: Helm, driver: Driver, namespace: str, kube_target: KubeTarget, tmp_path: Path,
    core_api: client.CoreV1Api,
) -> None:
    chart = write_chart(tmp_path)

    def helm(*args: str) -> str:
        return helm_cli(any_helm, *args, "-n", namespace, driver=driver)

    helm("install", "probe", str(chart), "--labels", "team=platform")
    observer = Observer(api_client(kube_target), [namespace], driver=driver)
    observer.start()
    # An upgrade that waits forever (a claim that never binds), killed mid-way: a stale pending-upgrade.
    stuck = subprocess.Popen(
        [any_helm.binary, "upgrade", "probe", str(chart), "-n", namespace, "--set", "stuck=true",
         "--wait", "--timeout", "10m", *any_helm.target.helm_args()],
        env={**os.environ, **any_helm.env, "HELM_DRIVER": driver},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        pending = wait_for(lambda: _revision(observer, namespace, 2), 60, "the pending-upgrade revision")
        assert pending.status == "pending-upgrade"
    finally:
        stuck.kill()
        stuck.wait()
    try:
        before_status = json.loads(helm("status", "probe", "-o", "json"))
        before_history = json.loads(helm("history", "probe", "-o", "json"))
        before_labels = _labels(core_api, driver, namespace, record_name("probe", 2))
        assert before_status["info"]["status"] == "pending-upgrade"
        with pytest.raises(AssertionError, match="another operation"):
            helm("upgrade", "probe", str(chart))

        api = api_client(kube_target)
        after = unlock_release(api, namespace, "probe", 2, driver=driver, detail="test", now=1_800_000_000,
                               resource_version=pending.resource_version)
        description = unlock_description("pending-upgrade", "test")
        assert description == "Release unlocked by helmdeck from stale 'pending-upgrade' state: test"
        assert (after.status, after.description, after.version) == ("failed", description, 2)

        # helm reads back exactly what it wrote, except the status and the description.
        expected = json.loads(json.dumps(before_status))
        expected["info"].update(status="failed", description=description)
        assert json.loads(helm("status", "probe", "-o", "json")) == expected
        for entry in before_history:
            if entry["revision"] == 2:
                entry.update(status="failed", description=description)
        assert json.loads(helm("history", "probe", "-o", "json")) == before_history
        assert _labels(core_api, driver, namespace, record_name("probe", 2)) == {
            **before_labels, "status": "failed", "modifiedAt": "1800000000"}
        seen = wait_for(lambda: _revision(observer, namespace, 2, "failed"), what="the unlocked revision")
        assert seen == after and seen.label_map == {"team": "platform"}

        with pytest.raises(ReleaseNotPendingError, match="is failed, not pending"):
            unlock_release(api, namespace, "probe", 2, driver=driver)
        with pytest.raises(RecordNotFoundError):
            unlock_release(api, namespace, "probe", 9, driver=driver)
        # helm is no longer blocked.
        helm("upgrade", "probe", str(chart), "--set", "stuck=false")
        assert json.loads(helm("status", "probe", "-o", "json"))["version"] == 3
    finally:
        observer.stop()


def test_unlock_refuses_a_record_changed_since_it_was_judged(
    helm: Helm, namespace: str, kube_target: KubeTarget, tmp_path: Path, core_api: client.CoreV1Api,
) -> None:
    chart = write_chart(tmp_path)
    helm_cli(helm, "install", "probe", str(chart), "-n", namespace)
    name = record_name("probe", 1)
    judged = _resource_version(core_api, namespace, name)
    core_api.patch_namespaced_secret(name, namespace, {"metadata": {"annotations": {"touched": "yes"}}})
    with pytest.raises(StorageConflictError, match="changed since it was judged stale"):
        unlock_release(api_client(kube_target), namespace, "probe", 1, driver="secret", resource_version=judged)
