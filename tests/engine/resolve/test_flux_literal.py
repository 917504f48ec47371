"""``valuesFrom[].literal`` of a HelmRelease (issue 34 behaviour 3): with ``targetPath``, the referenced content
is set verbatim, one string, as fluxcd/pkg chartutil values.go ``ChartValuesFromReferences`` sets it through
``ReplacePathLiteralValue`` (the chartutil helm-controller v1.6.3 builds with; the field is
fluxcd/pkg/apis/meta ``ValuesReference.Literal``). The differential test against Flux's own code is
tests/engine/package/test_flux_oracle.py's values composition."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from kubernetes import client

from engine.helm import Helm
from engine.kube.client import KubeTarget
from testkit.chart_sources import ChartRepoServer, package_chart, publish_http, write
from tests.cli.test_cli import helmdeck
from tests.conftest import run_helm
from tests.engine.reconcile.test_flux_rules import helm_release, repository

pytestmark = pytest.mark.cluster

# helm's --set reads this as three keys and a list; Flux's literal mode keeps every character.
CONFIG = "brokers: [kafka01.net:9092,kafka02.net:9092]\nlimits={cpu=1}\\n\n"


@pytest.mark.parametrize("literal", [True, False])
def test_a_literal_value_is_set_verbatim_at_its_target_path(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path, repo: ChartRepoServer,
    core_api: client.CoreV1Api, literal: bool,
) -> None:
    """literal: true puts the ConfigMap key's text at targetPath as it is; without it, helm's --set syntax
    reads the same text and cannot set it (Flux's ErrValueMerge), and the release is not installed."""
    publish_http(helm.binary, package_chart(helm.binary, tmp_path, "1.0.0"), repo)
    core_api.create_namespaced_config_map(namespace, client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="app-config"), data={"application.yml": CONFIG}))
    folder = tmp_path / "flux"
    write(folder, "repository.yaml", repository(namespace, repo.url))
    entry = ("  valuesFrom:\n  - {kind: ConfigMap, name: app-config, valuesKey: application.yml, "
             f"targetPath: 'config.application\\.yml', literal: {str(literal).lower()}}}\n")
    write(folder, "web.yaml", helm_release(namespace, entry))
    ran = helmdeck("reconcile", "--once", "--no-lease", "--kubeconfig", str(kube_target.kubeconfig), "--helm",
                   helm.binary, "-n", namespace, "--packages", str(folder), "--log-file", str(tmp_path / "log"))
    if not literal:
        assert ran.returncode != 0 and "literal: true" in ran.stdout + ran.stderr, ran.stdout + ran.stderr
        return
    assert ran.returncode == 0, ran.stdout + ran.stderr
    values = yaml.safe_load(run_helm(helm, "get", "values", "web", "-n", namespace, "-o", "yaml"))
    assert values == {"replicas": 1, "config": {"application.yml": CONFIG}}
