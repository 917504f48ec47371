"""A Flux repository laid out as fluxcd/flux2-kustomize-helm-example lays out its apps, setting the same Flux
fields (tests/data/flux-helm-example: ``install.strategy`` and ``upgrade.strategy`` RetryOnFailure, a chart
version range with pre-releases, ``test.enable``, a values patch per overlay), on the local cluster (issue 34's
done-criterion): its ``apps/staging`` loads with no ``--allow-unsupported``, installs, plans 0, and an edit of the
overlay plans exactly that release."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from engine.helm import Helm
from engine.kube.client import KubeTarget
from helmdeck.cli import EXIT_CHANGES, EXIT_NO_CHANGES
from testkit.chart_sources import ChartRepoServer, helm_run, publish_http
from tests.cli.test_cli import helmdeck
from tests.conftest import run_helm

pytestmark = pytest.mark.cluster

DATA = Path(__file__).resolve().parents[2] / "data"
REPO = DATA / "flux-helm-example"
PODINFO = DATA / "charts" / "podinfo"


def test_the_example_layout_installs_plans_nothing_and_an_overlay_edit_plans_its_release(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path, repo: ChartRepoServer,
) -> None:
    for version in ("6.9.1", "6.9.2"):
        helm_run(helm.binary, "package", str(PODINFO), "--version", version, "-d", str(tmp_path / "packaged"))
        publish_http(helm.binary, tmp_path / "packaged" / f"podinfo-{version}.tgz", repo)
    checkout = tmp_path / "flux-helm-example"
    shutil.copytree(REPO, checkout)
    staging = checkout / "apps" / "staging"
    args = ["--kubeconfig", str(kube_target.kubeconfig), "--helm", helm.binary, "-n", namespace,
            "--kustomize", str(staging), "--log-file", str(tmp_path / "log"),
            "--var", f"namespace={namespace}", "--var", f"http_url={repo.url}"]

    done = helmdeck("reconcile", "--once", "--no-lease", *args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "does not implement" not in done.stdout + done.stderr and "left out" not in done.stdout + done.stderr
    assert "skipped 1 object helmdeck does not read: Namespace (1)" in done.stderr
    [release] = json.loads(run_helm(helm, "list", "-n", namespace, "-o", "json"))
    assert (release["name"], release["status"], release["chart"]) == ("podinfo", "deployed", "podinfo-6.9.2")
    values = json.loads(run_helm(helm, "get", "values", "podinfo", "-n", namespace, "-o", "json"))
    assert values["httpRoute"]["hostnames"] == ["podinfo.staging.test"] and values["redis"]["tag"] == "7.4"

    planned = helmdeck("plan", *args)
    assert planned.returncode == EXIT_NO_CHANGES, planned.stdout + planned.stderr
    assert "0 of 1 package would change" in planned.stdout

    overlay = staging / "podinfo-values.yaml"
    overlay.write_text(overlay.read_text().replace("podinfo.staging.test", "podinfo.next.test"))
    planned = helmdeck("plan", *args, "-o", "json")
    assert planned.returncode == EXIT_CHANGES, planned.stdout + planned.stderr
    doc = json.loads(planned.stdout)
    assert doc["warnings"] == [] and doc["errors"] == []
    changed = [p for p in doc["packages"] if p["changes"]]
    assert [(p["namespace"], p["release"], p["action"]) for p in changed] == [(namespace, "podinfo", "upgrade")]
    [podinfo] = changed
    assert podinfo["file"].endswith("apps/base/podinfo/release.yaml") and "values changed" in podinfo["reasons"]
    assert "-  - podinfo.staging.test" in podinfo["values_diff"] and "+  - podinfo.next.test" in podinfo["values_diff"]
