"""A hard kill (SIGKILL of helmdeck and its helm) at several points; the next start converges."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kubernetes import client

from engine.helm import Helm
from engine.kube.client import KubeTarget
from tests.cli.test_cli import cluster_args, flaky, helmdeck
from tests.engine.runtime.test_stop import wait_status

pytestmark = pytest.mark.cluster


def versions(core: client.CoreV1Api, ns: str) -> dict[int, str]:
    out = {}
    for s in core.list_namespaced_secret(ns, label_selector="owner=helm,name=app").items:
        labels = (s.metadata.labels or {}) if s.metadata else {}
        out[int(labels["version"])] = labels["status"]
    return out


@pytest.mark.parametrize("point", ["at-start", "pending", "after-failure"])
def test_kill_9_then_the_next_start_converges(
    point: str, helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path, core_api: client.CoreV1Api,
) -> None:
    log = tmp_path / "log"
    pkgs = flaky(tmp_path / "p", namespace, "{message: one}")
    args = cluster_args(helm, kube_target, namespace, pkgs, log)
    first = helmdeck("reconcile", "--once", "--no-lease", *args)
    assert first.returncode == 0, first.stdout + first.stderr + log.read_text()[-3000:]
    flaky(pkgs.parent / "p", namespace, "{message: two, hang: true}")
    (pkgs / "app.yaml").write_text((pkgs / "app.yaml").read_text().replace("timeout: 20s", "timeout: 3s"))
    proc = subprocess.Popen([sys.executable, "-m", "helmdeck", "reconcile", "--no-lease", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        if point == "at-start":
            time.sleep(0.5)
        elif point == "pending":
            wait_status(core_api, namespace, {"pending-upgrade"})
        else:
            wait_status(core_api, namespace, {"failed"})
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    before = versions(core_api, namespace)
    flaky(pkgs.parent / "p", namespace, "{message: three}")
    done = helmdeck("reconcile", "--once", "--no-lease", *args)
    assert done.returncode == 0, done.stdout + done.stderr + log.read_text()[-3000:]
    after = versions(core_api, namespace)
    # No lost history: every revision that existed is still there, numbered without gaps.
    assert set(before) <= set(after)
    assert sorted(after) == list(range(1, max(after) + 1))
    latest = max(after)
    assert after[latest] == "deployed"
    assert all(status != "deployed" for v, status in after.items() if v != latest)
    status = helmdeck("status", "-o", "json", *args)
    row = __import__("json").loads(status.stdout)[0]
    assert (row["revision"], row["state"], row["ready"]) == (latest, "InSync", True)
