"""The demo's chart sources (helmdeck/demo.py) on the local cluster: the example charts published to its
OCI registry and to an HTTP chart repository (shown by ``helmdeck cluster status`` while served), the demo's
packages (two of them pulling from those) reconciled to Ready, and a second start publishing nothing and
upgrading nothing."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from engine.helm import Helm
from engine.kube.client import KubeTarget
from helmdeck.demo import NAMESPACE, NEWER, chart_dirs, oci_tags, published, start_sources
from localcluster.cluster import LocalCluster
from tests.cli.test_cli import helmdeck
from tests.conftest import EXAMPLES, run_helm

pytestmark = pytest.mark.cluster


def releases(helm: Helm) -> dict[str, tuple[str, str]]:
    rows = json.loads(run_helm(helm, "list", "-n", NAMESPACE, "-o", "json"))
    return {r["name"]: (r["chart"], r["revision"]) for r in rows}


def test_demo_publishes_the_examples_and_its_packages_become_ready(
    helm: Helm, kube_target: KubeTarget, local_cluster: LocalCluster, core_api: client.CoreV1Api, tmp_path: Path,
) -> None:
    assert local_cluster.registry is not None
    charts = {name: version for name, version, _ in chart_dirs(EXAMPLES / "charts")}
    assert {"settings", "web"} <= set(charts)
    state = tmp_path / "cluster"
    sources = start_sources(state, local_cluster.registry, helm.binary, EXAMPLES)
    try:
        # `helmdeck cluster status` names the HTTP repository while the demo serves it.
        shown = json.loads(helmdeck("cluster", "status", "-o", "json", "--cluster-dir", str(state)).stdout)
        assert shown["chartrepo"] == sources.charts_url
        # Both sources serve every example chart.
        with urllib.request.urlopen(f"{sources.charts_url}/index.yaml", timeout=10) as resp:
            index = yaml.safe_load(resp.read())
        served = {n: [e["version"] for e in v] for n, v in index["entries"].items()}
        newer = NEWER["web"][0]
        assert served == {n: [newer, v] if n == "web" else [v] for n, v in charts.items()}  # newest first
        with urllib.request.urlopen(f"{sources.charts_url}/{index['entries']['web'][0]['urls'][0]}") as resp:
            assert resp.status == 200 and resp.read()[:2] == b"\x1f\x8b"  # a gzip archive
        for name, version, _, _ in published(EXAMPLES / "charts"):
            assert version in oci_tags(local_cluster.registry, f"{NAMESPACE}/{name}")
        assert sorted(sources.packaged) == sorted([*(f"{n}-{v}" for n, v in charts.items()), f"web-{newer}"])
        repositories = (sources.packages / "repositories.yaml").read_text()
        assert f"url: '{sources.charts_url}'" in repositories
        assert f"oci://{local_cluster.registry}/{NAMESPACE}/web" in repositories

        args = ["reconcile", "--once", "--json", "--no-lease", "--kubeconfig", str(kube_target.kubeconfig),
                "--helm", helm.binary, "-n", NAMESPACE, "--packages", str(sources.packages),
                "--log-file", str(tmp_path / "log")]
        first = helmdeck(*args, timeout=300)
        assert first.returncode == 0, first.stdout + first.stderr
        lines = map(json.loads, first.stdout.splitlines())
        results = {r["release"]: r["state"] for r in lines if r["type"] == "result"}
        assert results == dict.fromkeys(("flaky", "settings", "web", "web-oci", "settings-http"), "InSync")
        deployed = releases(helm)
        # from OCI: <version>+<manifest digest[:12]>, as Flux's mutateChartWithSourceRevision
        assert re.fullmatch(rf"web-{re.escape(charts['web'])}\+[0-9a-f]{{12}}", deployed["web-oci"][0])
        assert deployed["settings-http"][0] == f"settings-{charts['settings']}"
        status = json.loads(helmdeck("status", "-o", "json", "--kubeconfig", str(kube_target.kubeconfig),
                                     "--packages", str(sources.packages), "-n", NAMESPACE).stdout)
        assert {r["name"]: r["ready"] for r in status if r["name"] in ("web-oci", "settings-http")} == \
            {"web-oci": True, "settings-http": True}
        # The newer web is outside web-oci's range ~0.2: offered (the row's marker, v), not installed.
        offered = json.loads(helmdeck("versions", "web-oci", "-o", "json", "--kubeconfig",
                                      str(kube_target.kubeconfig), "--helm", helm.binary, "-n", NAMESPACE,
                                      "--packages", str(sources.packages)).stdout)
        assert [(v["version"], v["appVersion"], v["inRange"], v["deployed"]) for v in offered["versions"]] == \
            [(newer, NEWER["web"][1], False, False), (charts["web"], "1.27", True, True)]
    finally:
        sources.stop()
    assert LocalCluster(state).status().chartrepo is None

    # A second start: nothing packaged or pushed, the same port, the same index; nothing upgrades.
    index_before = (state / "demo" / "repo" / "index.yaml").read_bytes()
    again = start_sources(state, local_cluster.registry, helm.binary, EXAMPLES)
    try:
        assert (again.packaged, again.pushed, again.charts_url) == ([], [], sources.charts_url)
        assert (state / "demo" / "repo" / "index.yaml").read_bytes() == index_before
        second = helmdeck(*args, timeout=300)
        assert second.returncode == 0, second.stdout + second.stderr
        assert releases(helm) == deployed
    finally:
        again.stop()
        core_api.delete_namespace(NAMESPACE)
