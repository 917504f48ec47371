"""``spec.postRenderStrategy`` of a HelmRelease (issue 34 behaviour 3): which rendered manifests the
post-renderers get, as helm-controller v1.6.3 passes it to helm 4 (internal/action/install.go ``newInstall``,
upgrade.go ``newUpgrade``, post_render.go ``toHelmPostRenderStrategy``: unset is ``combined``) and helm 4 applies
it (pkg/action/action.go ``renderResources``). helm 4's CLI always sends one combined stream; helmdeck's
post-renderer splits it (engine.helm.postrender.render). helm 3 never sends hooks: a strategy that sends them is
refused there, naming the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from engine.helm import Helm
from engine.kube.client import KubeTarget
from testkit.chart_sources import ChartRepoServer, helm_run, publish_http, write
from tests.cli.test_cli import helmdeck
from tests.conftest import helm_binary, run_helm
from tests.engine.reconcile.test_flux_rules import helm_release, repository

pytestmark = pytest.mark.cluster

# One ConfigMap both as a template and as a hook: kustomize refuses the same object twice in one stream.
_CHART = {
    "Chart.yaml": "apiVersion: v2\nname: dup\nversion: 1.0.0\n",
    "templates/settings.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: b}\n",
    "templates/hook.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  annotations:\n"
                           "    helm.sh/hook: pre-install\n"
                           "    helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded\n"
                           "data: {a: hook}\n",
}
_PATCH = """  postRenderers:
  - kustomize:
      patches:
      - patch: |
          {apiVersion: v1, kind: ConfigMap, metadata: {name: settings, labels: {patched: "yes"}}}
"""


def _publish(helm: Helm, tmp_path: Path, repo: ChartRepoServer) -> None:
    src = tmp_path / "dup"
    for name, text in _CHART.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(text)
    helm_run(helm.binary, "package", str(src), "-d", str(tmp_path / "packaged"))
    publish_http(helm.binary, tmp_path / "packaged" / "dup-1.0.0.tgz", repo)


def _labels(manifest: str) -> list[dict[str, str]]:
    return [(d.get("metadata") or {}).get("labels") or {} for d in yaml.safe_load_all(manifest) if d]


@pytest.mark.parametrize(("strategy", "hook_patched"), [("separate", True), ("nohooks", False), ("", None),
                                                        ("combined", None)])
def test_hooks_reach_the_post_renderers_as_the_strategy_says(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path, repo: ChartRepoServer,
    strategy: str, hook_patched: bool | None,
) -> None:
    """separate: hooks and templates patched in two kustomize runs; nohooks: the hook passes untouched; combined
    (and unset, Flux's default): one run gets the ConfigMap twice and kustomize refuses it, as in Flux."""
    _publish(helm, tmp_path, repo)
    folder = tmp_path / "flux"
    write(folder, "repository.yaml", repository(namespace, repo.url))
    line = f"  postRenderStrategy: {strategy}\n" if strategy else ""
    write(folder, "dup.yaml", helm_release(namespace, _PATCH + line, "{}", chart="dup", name="dup"))
    ran = helmdeck("reconcile", "--once", "--no-lease", "--kubeconfig", str(kube_target.kubeconfig), "--helm",
                   helm.binary, "-n", namespace, "--packages", str(folder), "--log-file", str(tmp_path / "log"))
    if hook_patched is None:
        assert ran.returncode != 0 and "kustomize" in ran.stdout + ran.stderr, ran.stdout + ran.stderr
        return
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert [labels.get("patched") for labels in _labels(run_helm(helm, "get", "manifest", "dup", "-n", namespace))
            ] == ["yes"]
    hooks = _labels(run_helm(helm, "get", "hooks", "dup", "-n", namespace))
    assert [labels.get("patched") for labels in hooks] == ["yes" if hook_patched else None]


def test_a_strategy_sending_hooks_is_refused_under_helm_3(
    kube_target: KubeTarget, namespace: str, tmp_path: Path, repo: ChartRepoServer, helm_home: dict[str, str],
) -> None:
    """helm 3 never gives a post-renderer the hooks: separate cannot be done, and the install is refused naming
    the field; nohooks is what helm 3 does, and installs."""
    helm3 = Helm(helm_binary("helm3"), kube_target, helm_home)
    _publish(helm3, tmp_path, repo)
    folder = tmp_path / "flux"
    write(folder, "repository.yaml", repository(namespace, repo.url))
    args = ["reconcile", "--once", "--no-lease", "--kubeconfig", str(kube_target.kubeconfig), "--helm",
            helm3.binary, "-n", namespace, "--packages", str(folder), "--log-file", str(tmp_path / "log")]
    write(folder, "dup.yaml", helm_release(namespace, _PATCH + "  postRenderStrategy: separate\n", "{}",
                                           chart="dup", name="dup"))
    refused = helmdeck(*args)
    assert refused.returncode != 0, refused.stdout + refused.stderr
    assert "spec.postRenderStrategy: separate" in refused.stdout + refused.stderr, refused.stdout + refused.stderr
    assert json.loads(run_helm(helm3, "list", "-a", "-n", namespace, "-o", "json")) == []
    write(folder, "dup.yaml", helm_release(namespace, _PATCH + "  postRenderStrategy: nohooks\n", "{}",
                                           chart="dup", name="dup"))
    installed = helmdeck(*args)
    assert installed.returncode == 0, installed.stdout + installed.stderr
