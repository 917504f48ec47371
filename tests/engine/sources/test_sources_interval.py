"""A repository is looked at on its own ``interval``, not the package's: a running ``helmdeck reconcile``
upgrades packages when their HTTP repository (interval 2s) offers a newer matching version, though their own
interval is an hour; a version outside the range changes nothing; the index is asked for at most once per
interval (conditionally)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.helm import Helm
from engine.kube.client import KubeTarget
from testkit.chart_sources import ChartRepoServer, package_chart, publish_http, write
from testkit.packages import package_yaml
from tests.conftest import run_helm

pytestmark = pytest.mark.cluster
INTERVAL = 2.0


def charts(helm: Helm, namespace: str) -> dict[str, str]:
    return {r["name"]: r["chart"] for r in json.loads(run_helm(helm, "list", "-n", namespace, "-o", "json"))}


def wait_for(helm: Helm, namespace: str, want: dict[str, str], timeout: float, log: Path) -> float:
    """Seconds until ``helm list`` shows ``want``; fails with the engine's output after ``timeout``."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if charts(helm, namespace) == want:
            return time.monotonic() - start
        time.sleep(0.5)
    raise AssertionError(f"not {want} after {timeout}s: {charts(helm, namespace)}\n{log.read_text()[-3000:]}")


def test_repository_interval_upgrades_packages_without_their_own_interval(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path, repo: ChartRepoServer,
) -> None:
    h = helm.binary
    for version in ("1.0.0", "2.0.0"):
        publish_http(h, package_chart(h, tmp_path, version), repo)
    pkgs = tmp_path / "packages"
    head = "apiVersion: helmdeck.dev/v1alpha1\n"
    write(pkgs, "charts.yaml", head + f"kind: HelmRepository\nmetadata: {{name: charts, namespace: {namespace}}}\n"
          f"spec: {{url: '{repo.url}', interval: {INTERVAL:g}s}}\n")
    for name in ("one", "two"):
        write(pkgs, f"{name}.yaml", package_yaml(
            name, namespace, interval="1h", timeout="1m",
            chart={"spec": {"chart": "web", "version": "~1.0",
                            "sourceRef": {"kind": "HelmRepository", "name": "charts"}}}))
    out = tmp_path / "reconcile.out"
    with out.open("w") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "helmdeck", "reconcile", "--json", "--no-lease", "--kubeconfig",
             str(kube_target.kubeconfig), "--helm", h, "-n", namespace, "--packages", str(pkgs),
             "--log-file", str(tmp_path / "helmdeck.log")], stdout=sink, stderr=subprocess.STDOUT)
    try:
        wait_for(helm, namespace, {"one": "web-1.0.0", "two": "web-1.0.0"}, 120, out)
        before = sum(p.startswith("/index.yaml") for p in repo.requests)
        began = time.monotonic()
        publish_http(h, package_chart(h, tmp_path, "1.0.3"), repo)
        took = wait_for(helm, namespace, {"one": "web-1.0.3", "two": "web-1.0.3"}, 60, out)
        # Outside '~1.0': three intervals later both stay at 1.0.3.
        publish_http(h, package_chart(h, tmp_path, "1.1.0"), repo)
        time.sleep(3 * INTERVAL + 1)
        assert charts(helm, namespace) == {"one": "web-1.0.3", "two": "web-1.0.3"}
        elapsed = time.monotonic() - began
        asked = sum(p.startswith("/index.yaml") for p in repo.requests) - before
        assert 2 <= asked <= elapsed / INTERVAL + 2, (asked, elapsed)
        assert repo.not_modified >= 1  # conditional requests kept
        assert proc.poll() is None, out.read_text()
        events = [json.loads(line) for line in out.read_text().splitlines() if line.startswith("{")]
        assert any(e.get("action") == "source" and "offers a new chart" in e.get("message", "") for e in events)
        print(f"new version seen and both packages upgraded in {took:.1f}s (interval {INTERVAL:g}s); "
              f"{asked} index requests in {elapsed:.1f}s")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
