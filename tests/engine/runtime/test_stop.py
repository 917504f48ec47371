"""Graceful stop of a headless engine: ctrl+c lets running helm actions finish up to a deadline."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kubernetes import client

from engine.helm import Helm
from engine.kube.client import KubeTarget
from engine.storage.codec import record_name
from tests.cli.test_cli import cluster_args, flaky

pytestmark = pytest.mark.cluster


def wait_status(core: client.CoreV1Api, ns: str, want: set[str], timeout: float = 30.0) -> str:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        secrets = core.list_namespaced_secret(ns, label_selector="owner=helm,name=app").items
        statuses = {s.metadata.labels.get("status", "") for s in secrets if s.metadata and s.metadata.labels}
        hit = statuses & want
        if hit:
            return hit.pop()
        time.sleep(0.1)
    raise AssertionError(f"no release reached {want} in time")


def helm_children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


def start(helm: Helm, target: KubeTarget, ns: str, pkgs: Path, log: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "helmdeck", "reconcile", "--no-lease", *extra,
         *cluster_args(helm, target, ns, pkgs, log)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_ctrl_c_waits_for_the_running_helm_action(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path, core_api: client.CoreV1Api,
) -> None:
    pkgs = flaky(tmp_path / "p", namespace, "{hang: true}")
    (pkgs / "app.yaml").write_text((pkgs / "app.yaml").read_text().replace("timeout: 20s", "timeout: 4s"))
    proc = start(helm, kube_target, namespace, pkgs, tmp_path / "log")
    try:
        wait_status(core_api, namespace, {"pending-install"})
        interrupted = time.monotonic()
        proc.send_signal(signal.SIGINT)
        code = proc.wait(30)
        took = time.monotonic() - interrupted
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 0, proc.stdout.read() if proc.stdout else ""
    assert took < 15
    # helm finished on its own (its 4 s timeout): the release is failed, not left pending.
    secret = core_api.read_namespaced_secret(record_name("app", 1), namespace)
    assert secret.metadata is not None and secret.metadata.labels is not None
    assert secret.metadata.labels["status"] == "failed"


def test_a_short_deadline_stops_helm_too(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path, core_api: client.CoreV1Api,
) -> None:
    pkgs = flaky(tmp_path / "p", namespace, "{hang: true}")
    (pkgs / "app.yaml").write_text((pkgs / "app.yaml").read_text().replace("timeout: 20s", "timeout: 60s"))
    proc = start(helm, kube_target, namespace, pkgs, tmp_path / "log", "--stop-deadline", "1")
    try:
        wait_status(core_api, namespace, {"pending-install"})
        children = helm_children(proc.pid)
        assert children, "helm runs as a child of helmdeck"
        proc.send_signal(signal.SIGINT)
        code = proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code != 0  # not everything finished on its own
    for pid in children:  # no helm left behind
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]

