"""A HelmRelease's ``spec.chart.spec.valuesFiles`` are the chart's default values, not user values (issue 34,
behaviour 16): source-controller packages the HelmChart with those files merged into its ``values.yaml``
(internal/helm/chart/builder_remote.go ``mergeChartValues``, then internal/helm/chart/metadata.go
``OverwriteChartDefaultValues``), so ``helm get values`` of the release does not show them and ``--all`` does.
On the local cluster with real helm."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from engine.helm import Helm
from engine.kube.client import KubeTarget
from engine.runtime.assemble import build_engine
from testkit.chart_sources import WEB_CHART, ChartRepoServer, helm_run, publish_http, write
from tests.conftest import run_helm
from tests.engine.reconcile.test_flux_rules import repository

pytestmark = pytest.mark.cluster


def _chart(helm: Helm, work: Path) -> Path:
    """The web chart 1.0.0 with a values file of its own, ``values-prod.yaml`` (three replicas, a tag)."""
    src = work / "src" / "web"
    shutil.copytree(WEB_CHART, src)
    (src / "values-prod.yaml").write_text("replicas: 3\nimage: {tag: prod}\n")
    helm_run(helm.binary, "package", str(src), "-d", str(work / "packaged"), "--version", "1.0.0")
    return work / "packaged" / "web-1.0.0.tgz"


async def test_chart_values_files_are_the_charts_defaults(
    kube_target: KubeTarget, helm: Helm, namespace: str, tmp_path: Path, repo: ChartRepoServer,
) -> None:
    publish_http(helm.binary, _chart(helm, tmp_path), repo)
    folder = tmp_path / "flux"
    write(folder, "repository.yaml", repository(namespace, repo.url))
    write(folder, "web.yaml", f"""apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {{name: web, namespace: {namespace}}}
spec:
  interval: 10m
  timeout: 60s
  chart:
    spec:
      chart: web
      version: "*"
      valuesFiles: [values.yaml, values-prod.yaml]
      sourceRef: {{kind: HelmRepository, name: charts}}
  values: {{service: {{port: 8080}}}}
""")
    engine = build_engine(kube_target, helm, folder, namespaces=[namespace], watch_packages=False)
    await engine.start(reconcile=False)
    try:
        result = await engine.controller.run_pass((namespace, "web"))
        assert [(o.action, o.ok) for o in result.outcomes] == [("install", True)], result
    finally:
        await engine.stop()
    user = yaml.safe_load(run_helm(helm, "get", "values", "web", "-n", namespace, "-o", "yaml"))
    assert user == {"service": {"port": 8080}}  # the document's values only
    computed = yaml.safe_load(run_helm(helm, "get", "values", "web", "-n", namespace, "-o", "yaml", "--all"))
    assert computed["replicas"] == 3 and computed["image"] == {"repository": "nginx", "tag": "prod"}
    assert computed["service"] == {"port": 8080}
    manifest = run_helm(helm, "get", "manifest", "web", "-n", namespace)
    assert "replicas: 3" in manifest and "nginx:prod" in manifest
