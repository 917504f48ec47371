"""A long-running ``reconcile --prune`` sweeps at start what no folder event will ever say: the releases of this
package set whose package files went while no helmdeck ran, as ``reconcile --once --prune`` does after its pass
(tests/cli/test_plan.py), with the same rule: nothing while a package file has errors."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from engine.helm import Helm
from engine.kube.client import KubeTarget
from engine.runtime.assemble import build_engine
from engine.runtime.engine import ActionRefused
from tests.cli.test_cli import cluster_args, helmdeck
from tests.cli.test_plan import releases
from tests.engine.runtime.test_depends import lines_of, package

pytestmark = pytest.mark.cluster

BAD = "apiVersion: helmdeck.dev/v1alpha1\nkind: Package\nmetadata: {name: [x]}\n"


def test_a_long_running_prune_uninstalls_releases_whose_files_went_before_it_started(
        helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path) -> None:
    pkgs = package(tmp_path / "p", "keep", namespace, "{message: one}")
    package(pkgs, "gone", namespace, "{message: two}")
    log = tmp_path / "log"
    args = cluster_args(helm, kube_target, namespace, pkgs, log)
    assert helmdeck("reconcile", "--once", "--no-lease", *args).returncode == 0
    (pkgs / "gone.yaml").unlink()  # removed while no helmdeck ran
    (pkgs / "bad.yaml").write_text(BAD)  # ... and a bad file: it might be gone's package, so nothing is pruned
    command = [sys.executable, "-m", "helmdeck", "reconcile", "--no-lease", "--json", "--prune", *args]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    try:
        deadline = time.monotonic() + 60
        skipped = "prune at start skipped: 1 package file(s) have errors (bad.yaml)"
        while skipped not in (log.read_text() if log.exists() else ""):
            assert proc.poll() is None and time.monotonic() < deadline, "no word of the skipped prune"
            time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    assert releases(helm, namespace) == ["gone", "keep"]
    (pkgs / "bad.yaml").unlink()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    watchdog = threading.Timer(60, proc.terminate)  # ends the stream, so a missing prune fails, never hangs
    watchdog.start()
    try:
        pruned = next((e for e in lines_of(proc.stdout) if e.get("action") == "prune"), {})
    finally:
        watchdog.cancel()
        proc.terminate()
        proc.wait(timeout=60)
    assert (pruned.get("release"), pruned.get("outcome"), pruned.get("message")) == (
        "gone", "succeeded", "prune removed the release")
    assert releases(helm, namespace) == ["keep"]


async def test_prune_without_a_packages_folder_removes_nothing(helm: Helm, kube_target: KubeTarget,
                                                               namespace: str) -> None:
    # Without a package set every release helmdeck manages would look removed: the app with --prune and no
    # --packages must not sweep them.
    engine = build_engine(kube_target, helm, None, namespaces=[namespace], prune=True, monitors=False)
    with pytest.raises(ActionRefused, match="prune needs a packages folder"):
        await engine.prune_removed()
