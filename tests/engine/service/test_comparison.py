"""The one comparison: ``diff``, ``plan`` and the smart upgrade agree, hooks named anew on each render included;
``plan`` of a stalled package whose spec changed reports the upgrade the next reconcile makes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.helm import Helm
from engine.kube.client import KubeTarget
from engine.monitor import comparison
from helmdeck.cli import EXIT_CHANGES, EXIT_CONVERGED, EXIT_NO_CHANGES, EXIT_STALLED
from tests.cli.test_cli import cluster_args, flaky, helmdeck
from tests.conftest import run_helm

CHART = Path(__file__).parents[2] / "data" / "charts" / "testhooks"

RENDER = """---
# Source: testhooks/templates/configmap.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: r
data:
  message: "hello"
---
# Source: testhooks/templates/tests/connection.yaml
apiVersion: v1
kind: Pod
metadata:
  name: r-test-{suffix}
  annotations:
    "helm.sh/hook": test
spec:
  containers:
    - name: check
      image: {image}
"""


def test_a_hook_is_compared_by_template_and_spec_not_by_its_generated_name() -> None:
    one, two = RENDER.format(suffix="ab3de", image="busybox:1.36"), RENDER.format(suffix="x9y8z", image="busybox:1.36")
    assert one != two
    assert comparison.changes(one, two) == ((), (), ())
    assert comparison.checksum(one) == comparison.checksum(two)
    newer = RENDER.format(suffix="qqqqq", image="busybox:1.37")
    assert comparison.changes(one, newer) == ((), ("Pod hook testhooks/templates/tests/connection.yaml",), ())
    assert comparison.checksum(one) != comparison.checksum(newer)
    assert set(comparison.normalised(one)) == {"ConfigMap/r", "Pod hook testhooks/templates/tests/connection.yaml"}


def test_a_stored_release_is_joined_as_a_render_prints_it() -> None:
    render = RENDER.format(suffix="ab3de", image="busybox:1.36")
    manifest, hook = render.split("---\n# Source: testhooks/templates/tests/connection.yaml\n")
    record = {"manifest": manifest, "hooks": [{"name": "r-test-zzzzz", "kind": "Pod", "manifest": hook,
                                               "path": "testhooks/templates/tests/connection.yaml"}]}
    assert comparison.changes(comparison.recorded_manifest(record), render) == ((), (), ())
    assert comparison.changes(comparison.recorded_manifest({"manifest": manifest}), render)[0] == (
        "Pod hook testhooks/templates/tests/connection.yaml",)  # a hook missing from the record is added


def test_hostile_documents_are_left_out_not_fatal() -> None:
    hostile = "---\n: [\n---\nplain text\n---\n- a list\n---\nkind: ConfigMap\nmetadata: 7\n"
    assert comparison.normalised(hostile) == {"ConfigMap/None": "kind: ConfigMap\nmetadata: 7\n"}
    assert len(comparison.checksum(hostile)) == 32


def chart_package(folder: Path, namespace: str, values: str, chart: Path = CHART) -> Path:
    """``folder`` with ``app.yaml``: package ``app`` of ``chart`` (60 s timeout: the machine may be loaded)."""
    folder.mkdir(exist_ok=True)
    (folder / "app.yaml").write_text(
        f"apiVersion: helmdeck.dev/v1alpha1\nkind: Package\nmetadata:\n  name: app\n  namespace: {namespace}\n"
        f"spec:\n  chart: {chart}\n  timeout: 60s\n  values: {values}\n")
    return folder


def _revisions(helm: Helm, namespace: str) -> list[int]:
    return [r["revision"] for r in json.loads(run_helm(helm, "history", "app", "-n", namespace, "-o", "json"))]


@pytest.mark.cluster
def test_diff_plan_and_the_reconcile_agree_on_a_chart_whose_test_hooks_get_random_names(
    any_helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path,
) -> None:
    pkgs = chart_package(tmp_path / "p", namespace, "{message: one}")
    args = cluster_args(any_helm, kube_target, namespace, pkgs, tmp_path / "log")
    app = pkgs / "app.yaml"
    assert helmdeck("reconcile", "--once", "--no-lease", *args).returncode == EXIT_CONVERGED
    assert _revisions(any_helm, namespace) == [1]

    # A value the chart ignores: nothing changes, by all three.
    app.write_text(app.read_text().replace("{message: one}", "{message: one, ignored: 1}"))
    diff = helmdeck("diff", str(app), *args)
    assert (diff.returncode, diff.stdout) == (EXIT_NO_CHANGES, ""), diff.stdout + diff.stderr
    plan = helmdeck("plan", *args)
    assert plan.returncode == EXIT_NO_CHANGES, plan.stdout + plan.stderr
    assert f"{namespace}/app (app.yaml)  InSync → nothing to do" in plan.stdout
    assert "renders the released manifest" in plan.stdout
    assert helmdeck("reconcile", "--once", "--no-lease", *args).returncode == EXIT_CONVERGED
    assert _revisions(any_helm, namespace) == [1]

    # The test hook's image: a change, by all three.
    app.write_text(app.read_text().replace("ignored: 1", "testImage: 'busybox:1.37'"))
    diff = helmdeck("diff", str(app), *args)
    assert diff.returncode == EXIT_CHANGES, diff.stdout + diff.stderr
    assert "Pod hook testhooks/templates/tests/connection.yaml" in diff.stdout
    assert "-    image: busybox:1.36" in diff.stdout and "+    image: busybox:1.37" in diff.stdout
    assert "ConfigMap" not in diff.stdout
    plan = helmdeck("plan", *args)
    assert plan.returncode == EXIT_CHANGES, plan.stdout + plan.stderr
    assert f"{namespace}/app (app.yaml)  OutOfSync → upgrade" in plan.stdout
    assert "+0 added ~1 changed -0 removed" in plan.stdout
    assert helmdeck("reconcile", "--once", "--no-lease", *args).returncode == EXIT_CONVERGED
    assert _revisions(any_helm, namespace) == [1, 2]
    assert helmdeck("diff", str(app), *args).returncode == EXIT_NO_CHANGES


@pytest.mark.cluster
def test_plan_reports_the_upgrade_of_a_stalled_package_whose_spec_changed(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path,
) -> None:
    pkgs = flaky(tmp_path / "p", namespace, "{fail: true}", "60s")
    args = cluster_args(helm, kube_target, namespace, pkgs, tmp_path / "log")
    assert helmdeck("reconcile", "--once", "--no-lease", *args).returncode == EXIT_STALLED
    plan = helmdeck("plan", *args)
    assert plan.returncode == EXIT_NO_CHANGES, plan.stdout + plan.stderr
    assert "→ stalled" in plan.stdout  # the same spec stays stalled

    app = pkgs / "app.yaml"
    app.write_text(app.read_text().replace("{fail: true}", "{message: fixed}"))
    plan = helmdeck("plan", *args)
    assert plan.returncode == EXIT_CHANGES, plan.stdout + plan.stderr
    assert f"{namespace}/app (app.yaml)  Failed → upgrade" in plan.stdout
    assert "1 of 1 package would change" in plan.stdout
    once = helmdeck("reconcile", "--once", "--no-lease", *args)
    assert once.returncode == EXIT_CONVERGED, once.stdout + once.stderr  # the upgrade the plan announced
