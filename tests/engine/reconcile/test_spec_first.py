"""Deciding without rendering, on the local cluster with real helm (issue 11, items 1-3).

A chart whose render differs every time (uuidv4, randAlphaNum) must not make a
revision per fresh process; a real values change makes exactly one. Bad inputs
(an alias bomb, an oversized values file) are refused while a good package converges.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.base import wire
from engine.helm import Helm
from engine.kube.client import KubeTarget
from helmdeck.cli import EXIT_CONVERGED, EXIT_FAILED
from testkit.packages import write_package
from tests.reconcile_harness import EXAMPLES, Scenario

pytestmark = pytest.mark.cluster

RANDOM = EXAMPLES / "charts" / "random"


def package(folder: Path, namespace: str, greeting: str, name: str = "app") -> Path:
    return write_package(folder, name, namespace, chart=RANDOM, timeout="30s", values={"greeting": greeting})


def reconcile_once(helm: Helm, target: KubeTarget, namespace: str, packages: Path,
                   log: Path) -> subprocess.CompletedProcess[str]:
    """A fresh `helmdeck reconcile --once` process, as an operator (or cron) runs it."""
    return subprocess.run(
        [sys.executable, "-m", "helmdeck", "reconcile", "--once", "--no-lease", "--kubeconfig",
         str(target.kubeconfig), "--helm", helm.binary, "-n", namespace, "--packages", str(packages),
         "--log-file", str(log)],
        capture_output=True, text=True, timeout=180, check=False, env={**os.environ, **helm.env},
    )


def revisions(helm: Helm, target: KubeTarget, namespace: str, release: str = "app") -> list[int]:
    proc = subprocess.run([helm.binary, "history", release, "-n", namespace, "-o", "json", *target.helm_args()],
                          capture_output=True, text=True, env={**helm.env}, timeout=60, check=True)
    return [int(r["revision"]) for r in json.loads(proc.stdout)]


def test_random_chart_three_fresh_runs_one_revision_then_one_per_real_change(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path,
) -> None:
    pkgs = tmp_path / "packages"
    package(pkgs, namespace, "hello")
    log = tmp_path / "helmdeck.log"
    for run in range(3):
        proc = reconcile_once(helm, kube_target, namespace, pkgs, log)
        assert proc.returncode == EXIT_CONVERGED, (run, proc.stdout, proc.stderr)
        assert revisions(helm, kube_target, namespace) == [1], run
    package(pkgs, namespace, "bonjour")
    for _ in range(2):
        proc = reconcile_once(helm, kube_target, namespace, pkgs, log)
        assert proc.returncode == EXIT_CONVERGED, (proc.stdout, proc.stderr)
        assert revisions(helm, kube_target, namespace) == [1, 2]


async def test_engine_restarts_leave_revision_one(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path,
) -> None:
    s = Scenario(helm, kube_target, namespace, tmp_path, chart="random")
    s.write("{greeting: hello}")
    await s.start()
    try:
        assert [r.state for r in await s.converge()][-1] == "InSync"
        for _ in range(2):  # as an app restart: a new engine, status read back from the cluster
            await s.restart()
            assert (await s.run()).state == "InSync"
            assert s.revisions() == [(1, "deployed")]
        latest = s.latest()
        assert latest is not None and len(latest.label_map[wire.SPEC_DIGEST]) == 32
    finally:
        await s.stop()


async def test_output_neutral_spec_change_is_adopted_without_a_revision(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path,
) -> None:
    s = Scenario(helm, kube_target, namespace, tmp_path, chart="settings")
    s.write("{settings: {a: '1'}}")
    await s.start()
    try:
        await s.converge()
        assert s.revisions() == [(1, "deployed")]
        s.write("{settings: {a: '1'}, unused: true}")  # the chart ignores it: same manifest
        result = await s.run()
        assert (result.state, s.revisions()) == ("InSync", [(1, "deployed")])
        assert s.engine is not None
        status = s.engine.status(s.key)
        assert status is not None and status.adopted_revision == 1
        await s.restart()
        assert (await s.run()).state == "InSync" and s.revisions() == [(1, "deployed")]
    finally:
        await s.stop()


def test_bad_inputs_are_refused_while_a_good_package_converges(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path,
) -> None:
    pkgs = tmp_path / "packages"
    package(pkgs, namespace, "hello", name="good")
    levels = ['    l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n']
    levels += [f"    l{i}: &l{i} [{','.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 9)]
    (pkgs / "bomb.yaml").write_text(
        f"apiVersion: helmdeck.dev/v1alpha1\nkind: Package\nmetadata:\n  name: bomb\n  namespace: {namespace}\n"
        f"spec:\n  chart: {RANDOM}\n  values:\n" + "".join(levels))
    big = tmp_path / "big-values.yaml"
    with big.open("w") as fh:
        row = "  key-{0:07d}: " + "v" * 60 + "\n"
        fh.write("items:\n")
        for i in range(20 * 1024 * 1024 // 80):
            fh.write(row.format(i))
    (pkgs / "huge.yaml").write_text(
        f"apiVersion: helmdeck.dev/v1alpha1\nkind: Package\nmetadata:\n  name: huge\n  namespace: {namespace}\n"
        f"spec:\n  chart: {RANDOM}\n  valuesFiles: [{big}]\n")
    start = time.monotonic()
    proc = reconcile_once(helm, kube_target, namespace, pkgs, tmp_path / "log")
    elapsed = time.monotonic() - start
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"bad inputs beside a good package: {elapsed:.1f}s, peak RSS of children {peak_mb:.0f} MB")
    assert proc.returncode == EXIT_FAILED, proc.stdout + proc.stderr
    assert "aliases expand past" in proc.stderr and "bomb.yaml:" in proc.stderr
    assert "big-values.yaml" in proc.stdout + proc.stderr and "over the limit" in proc.stdout + proc.stderr
    assert f"{namespace}/good: InSync" in proc.stdout
    assert revisions(helm, kube_target, namespace, "good") == [1]
    assert peak_mb < 600
    assert elapsed < 60
