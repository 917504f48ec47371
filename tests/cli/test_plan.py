"""``helmdeck plan`` on the local cluster: exit codes 0/2/1, dependency order, reasons, nothing secret printed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from kubernetes import client

from engine.helm import Helm
from engine.kube.client import KubeTarget
from helmdeck.cli import EXIT_CHANGES, EXIT_FAILED, EXIT_NO_CHANGES
from tests.cli.test_cli import cluster_args, helmdeck
from tests.conftest import run_helm
from tests.engine.runtime.test_depends import EXAMPLES, package

pytestmark = pytest.mark.cluster


def test_plan_exit_codes_order_and_reasons(helm: Helm, kube_target: KubeTarget, namespace: str,
                                           tmp_path: Path) -> None:
    chart = tmp_path / "flaky"
    shutil.copytree(EXAMPLES / "charts" / "flaky", chart)
    pkgs = tmp_path / "p"
    # "a-app" sorts first but depends on "z-base": the plan prints z-base first.
    package(pkgs, "z-base", namespace, "{message: one, password: hunter2}")
    package(pkgs, "a-app", namespace, "{message: one}", depends=("z-base",))
    for name in ("z-base", "a-app"):
        path = pkgs / f"{name}.yaml"
        path.write_text(path.read_text().replace(str(EXAMPLES / "charts" / "flaky"), str(chart)))
    args = cluster_args(helm, kube_target, namespace, pkgs, tmp_path / "log")

    def plan(*extra: str) -> tuple[int, str]:
        proc = helmdeck("plan", *args, *extra)
        assert "hunter2" not in proc.stdout + proc.stderr
        return proc.returncode, proc.stdout + proc.stderr

    code, out = plan()
    assert code == EXIT_CHANGES, out
    assert out.index(f"{namespace}/z-base") < out.index(f"{namespace}/a-app")
    assert f"{namespace}/z-base (z-base.yaml)  Absent → install" in out
    assert f"{namespace}/a-app (a-app.yaml)  Absent → wait" in out
    assert f"waiting for {namespace}/z-base" in out
    assert "+3 added ~0 changed -0 removed" in out  # ConfigMap, Deployment and the test hook Helm records

    assert helmdeck("reconcile", "--once", "--no-lease", *args).returncode == 0
    code, out = plan()
    assert code == EXIT_NO_CHANGES, out
    assert "0 of 2 packages would change" in out

    (chart / "Chart.yaml").write_text((chart / "Chart.yaml").read_text().replace("0.1.0", "0.2.0"))
    code, out = plan("-o", "json")
    assert code == EXIT_CHANGES, out
    doc = json.loads(out)
    assert [p["release"] for p in doc["packages"]] == ["z-base", "a-app"]
    base, app = doc["packages"]
    assert (base["state"], base["action"], base["changes"]) == ("OutOfSync", "upgrade", True)
    assert "chart 0.1.0 → 0.2.0" in base["reasons"]
    # The chart's templates do not show its version: an upgrade changes no object.
    assert (base["added"], base["changed"], base["removed"], base["rendered"]) == ([], [], [], True)
    assert (app["action"], app["changes"]) == ("upgrade", True)  # its chart is the same copy
    code, out = plan()
    assert "    no object would change" in out and "2 of 2 packages would change" in out

    # A values change: the plan shows the values diff (a password masked) and the manifest diff, the revision
    # it replaces; markdown is a PR comment: a summary table, then a collapsed section per release.
    for name in ("z-base", "a-app"):
        path = pkgs / f"{name}.yaml"
        path.write_text(path.read_text().replace("message: one", "message: two"))
    code, out = plan("-o", "json")
    assert code == EXIT_CHANGES, out
    base = json.loads(out)["packages"][0]
    assert base["revision"] == 1 and "values changed" in base["reasons"]
    assert "-message: one" in base["values_diff"] and "+message: two" in base["values_diff"]
    assert "password: '••••••" in base["values_diff"]  # a secret key's value, masked
    assert base["manifest_diff"].startswith("--- ") and "two" in base["manifest_diff"]
    code, out = plan("-o", "markdown")
    assert code == EXIT_CHANGES, out
    head, table = out.splitlines()[0], out.splitlines()[2:5]
    assert head == "### helmdeck plan: 2 of 2 releases would change"
    assert table[0] == "| Release | Action | Why | Replaces revision |" and table[1] == "|---|---|---|---|"
    assert table[2].startswith(f"| `{namespace}/z-base` | upgrade | ") and table[2].endswith(" | 1 |")
    assert out.count("<details>") == 2 and out.count("</details>") == 2 and "```diff\n" in out

    (pkgs / "bad.yaml").write_text(package(tmp_path / "q", "bad", namespace, "{}").joinpath("bad.yaml")
                                   .read_text() + "  bogus: 1\n")
    code, out = plan()
    assert code == EXIT_FAILED, out
    assert "bad.yaml:10: spec.bogus: unknown field" in out


def test_plan_says_how_many_objects_drifted(helm: Helm, kube_target: KubeTarget, core_api: client.CoreV1Api,
                                            namespace: str, tmp_path: Path) -> None:
    pkgs = package(tmp_path / "p", "app", namespace, "{message: one}")
    path = pkgs / "app.yaml"
    path.write_text(path.read_text() + "  driftDetection: {mode: enabled}\n")
    args = cluster_args(helm, kube_target, namespace, pkgs, tmp_path / "log")
    assert helmdeck("reconcile", "--once", "--no-lease", *args).returncode == 0
    assert helmdeck("plan", *args).returncode == EXIT_NO_CHANGES
    core_api.patch_namespaced_config_map("app", namespace, {"data": {"message": "edited by hand"}})
    proc = helmdeck("plan", *args)
    assert proc.returncode == EXIT_CHANGES, proc.stdout + proc.stderr
    assert f"{namespace}/app (app.yaml)  Drifted → correct-drift" in proc.stdout
    assert "    1 object drifted\n    drifted: ConfigMap/" in proc.stdout


def test_a_package_gone_before_the_run_is_planned_as_uninstall_and_pruned(
        helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path) -> None:
    pkgs = package(tmp_path / "p", "keep", namespace, "{message: one}")
    package(pkgs, "gone", namespace, "{message: two}")
    args = cluster_args(helm, kube_target, namespace, pkgs, tmp_path / "log")
    assert helmdeck("reconcile", "--once", "--no-lease", *args).returncode == 0
    (pkgs / "gone.yaml").unlink()  # removed while no helmdeck ran: no folder event will ever say so
    proc = helmdeck("plan", *args, "-o", "json")
    assert proc.returncode == EXIT_CHANGES, proc.stdout + proc.stderr
    lines = {p["release"]: p for p in json.loads(proc.stdout)["packages"]}
    assert lines["keep"]["action"] is None
    gone = lines["gone"]
    assert (gone["action"], gone["state"], gone["changes"]) == ("uninstall", "Orphaned", True)
    assert gone["removed"] and gone["error"] == ""  # the objects of its deployed manifest
    # A bad file might be the package of a release that looks removed: nothing is pruned then.
    (pkgs / "bad.yaml").write_text("apiVersion: helmdeck.dev/v1alpha1\nkind: Package\nmetadata: {name: [x]}\n")
    proc = helmdeck("reconcile", "--once", "--prune", "--no-lease", *args)
    assert proc.returncode == EXIT_FAILED and "prune skipped: 1 package file(s) have errors (bad.yaml)" in proc.stderr
    # Nor cleaned up, nor listed as removable: cleanup's list, even a dry run's, named the bad file's release
    # (a typo in a package file uninstalled its release with cleanup --yes).
    for dry in (["--dry-run"], ["--yes"]):
        proc = helmdeck("cleanup", *dry, *args)
        assert proc.returncode == EXIT_FAILED and "have errors (bad.yaml)" in proc.stderr, proc.stdout + proc.stderr
        assert "remove" not in proc.stdout, proc.stdout
    proc = helmdeck("plan", *args, "-o", "json")
    assert [p["release"] for p in json.loads(proc.stdout)["packages"] if p["action"] == "uninstall"] == []
    assert releases(helm, namespace) == ["gone", "keep"]
    (pkgs / "bad.yaml").unlink()
    proc = helmdeck("reconcile", "--once", "--prune", "--no-lease", *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{namespace}/gone: prune removed" in proc.stdout
    assert releases(helm, namespace) == ["keep"]
    assert helmdeck("plan", *args).returncode == EXIT_NO_CHANGES


def releases(helm: Helm, namespace: str) -> list[str]:
    return sorted(r["name"] for r in json.loads(run_helm(helm, "list", "-n", namespace, "-o", "json")))


def test_a_package_with_no_retries_left_is_planned_as_stalled(
        helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path) -> None:
    # plan said "Failed → stalled" where status and the app say Stalled.
    pkgs = package(tmp_path / "p", "app", namespace, "{message: one}")
    args = cluster_args(helm, kube_target, namespace, pkgs, tmp_path / "log")
    assert helmdeck("reconcile", "--once", "--no-lease", *args).returncode == 0
    package(pkgs, "app", namespace, "{message: two, fail: true}")  # its upgrade fails; no retries allowed
    helmdeck("reconcile", "--once", "--no-lease", *args)
    proc = helmdeck("plan", *args, "-o", "json")
    [app] = json.loads(proc.stdout)["packages"]
    assert (app["state"], app["action"], app["changes"]) == ("Stalled", "stalled", False), app
