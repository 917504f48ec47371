"""A changed release target (issue 34, behaviour 8): a chart of another name, a release name or namespace, a
storage namespace. helm-controller v1.6.3 uninstalls the release, then installs it (for a chart name unless
``upgrade.chartNameChangeStrategy`` is ``InPlaceUpdate``); on the local cluster with real helm, each test citing
the file and function it follows."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client

from engine.helm import Helm
from engine.kube.client import KubeTarget
from engine.reconcile import conditions as cond
from engine.reconcile import state as st
from helmdeck.cli import EXIT_STALLED
from testkit.chart_sources import ChartRepoServer, package_chart, publish_http, write
from tests.cli.test_cli import cluster_args, helmdeck
from tests.engine.package.test_flux_storage import helm_records, target
from tests.engine.reconcile.test_flux_rules import Passes, flux_folder, helm_release, passes

__all__ = ["flux_folder", "passes", "target"]  # the fixtures

pytestmark = pytest.mark.cluster


def _stored(p: Passes) -> list[tuple[int, str, str]]:
    """(revision, status, chart) of each record of release ``web`` in helm's storage (as observed), oldest first."""
    return sorted((o.version, o.status, f"{o.chart_name}-{o.chart_version}")
                  for o in p.engine.history((p.namespace, "web")))


def _web(p: Passes, chart: str, spec: str = "") -> None:
    write(p.folder, "web.yaml", helm_release(p.namespace, spec, chart=chart))
    p.engine.load_packages()


@pytest.fixture
def renamed(helm: Helm, tmp_path: Path, repo: ChartRepoServer, flux_folder: Path) -> None:
    """The repository also serves the web chart under the name ``webnext`` (same templates)."""
    publish_http(helm.binary, package_chart(helm.binary, tmp_path, "1.0.0", name="webnext"), repo)


async def test_a_chart_name_change_uninstalls_then_installs(passes: Passes, helm: Helm, renamed: None) -> None:
    """helm-controller internal/action/verify.go ``ReleaseTargetChanged`` finds the chart name of the history's
    latest snapshot differing, and internal/controller/helmrelease_controller.go ``reconcileRelease`` (with
    api/v2 ``Upgrade.GetChartNameChangeStrategy``'s default ``Reinstall``) uninstalls that release, clears the
    history and failure counters and requeues; the next reconcile installs. ``plan`` says the same first."""
    p, key = passes, (passes.namespace, "web")
    _web(p, "web")
    first = await p.engine.controller.run_pass(key)
    assert [(o.action, o.ok) for o in first.outcomes] == [("install", True)], first
    _web(p, "webnext")
    plan = next(x for x in (await p.engine.plan()).packages if x.release == "web")
    assert (plan.state, plan.action) == (st.TARGET_CHANGED, "uninstall"), plan
    assert "uninstall, then install" in plan.reasons[0]
    assert plan.removed and plan.added, plan  # the old release's objects go, the new release's come
    uninstalled = await p.engine.controller.run_pass(key)
    assert [(o.action, o.ok) for o in uninstalled.outcomes] == [("uninstall", True)], uninstalled
    assert uninstalled.next == "now" and _stored(p) == []
    installed = await p.engine.controller.run_pass(key)
    assert [(o.action, o.ok) for o in installed.outcomes] == [("install", True)], installed
    assert _stored(p) == [(1, "deployed", "webnext-1.0.0")]
    status = p.engine.status(key)
    assert status is not None and [s.chart_name for s in status.history] == ["webnext"]
    assert (await p.engine.controller.run_pass(key)).outcomes == ()  # in sync


async def test_in_place_update_upgrades_to_the_new_chart(passes: Passes, helm: Helm, renamed: None) -> None:
    """``chartNameChangeStrategy: InPlaceUpdate`` (api/v2 ``ChartNameChangeStrategyInPlaceUpdate``): the release
    target is kept (internal/controller/helmrelease_controller.go ``reconcileRelease`` skips the uninstall for a
    chart name change alone), and the new chart is an upgrade. The web chart's selector holds its name (immutable
    in a Deployment), so that upgrade fails here: what the Reinstall default avoids."""
    p, key = passes, (passes.namespace, "web")
    in_place = "  upgrade: {chartNameChangeStrategy: InPlaceUpdate}\n"
    _web(p, "web", in_place)
    await p.engine.controller.run_pass(key)
    _web(p, "webnext", in_place)
    upgraded = await p.engine.controller.run_pass(key)
    assert [o.action for o in upgraded.outcomes] == ["upgrade"], upgraded
    assert "field is immutable" in upgraded.outcomes[0].message
    assert _stored(p) == [(1, "deployed", "web-1.0.0"), (2, "failed", "webnext-1.0.0")]


async def test_a_release_name_change_uninstalls_the_old_release_then_installs(passes: Passes) -> None:
    """helm-controller internal/action/verify.go ``ReleaseTargetChanged`` compares the HelmRelease's release
    namespace and name with its history's latest snapshot; when they changed, internal/controller/
    helmrelease_controller.go ``reconcileRelease`` uninstalls the old release (with the object's uninstall
    settings), clears the history and requeues, and the next reconcile installs under the new name. helmdeck
    reads the package's previous release from the status it left there. ``plan`` says the same first, and does
    not list the old release again as an orphan."""
    p = passes
    _web(p, "web")
    assert [o.action for o in (await p.engine.controller.run_pass((p.namespace, "web"))).outcomes] == ["install"]
    _web(p, "web", "  releaseName: web-next\n")
    key = (p.namespace, "web-next")
    plan = [x for x in (await p.engine.plan()).packages if x.namespace == p.namespace]
    assert [(x.release, x.state, x.action) for x in plan] == [("web-next", st.TARGET_CHANGED, "uninstall")], plan
    assert plan[0].reasons == (f"release name changed from {p.namespace}/web to {p.namespace}/web-next: "
                               f"uninstall {p.namespace}/web, then install",)
    assert plan[0].removed and plan[0].added
    moved = await p.engine.controller.run_pass(key)
    assert [(o.action, o.ok) for o in moved.outcomes] == [("uninstall", True)] and moved.next == "now", moved
    assert _stored(p) == []  # release web is gone
    installed = await p.engine.controller.run_pass(key)
    assert [(o.action, o.ok) for o in installed.outcomes] == [("install", True)], installed
    assert [(o.version, o.status) for o in p.engine.history(key)] == [(1, "deployed")]
    assert p.engine.status((p.namespace, "web")) is None
    assert (await p.engine.controller.run_pass(key)).outcomes == ()


def _status_objects(core_api: client.CoreV1Api, namespace: str) -> list[str]:
    """The names of helmdeck's status ConfigMaps in ``namespace``."""
    names = [str(c.metadata.name) for c in core_api.list_namespaced_config_map(namespace).items if c.metadata]
    return [n for n in names if n.startswith("helmdeck.status.")]


async def test_a_storage_namespace_change_uninstalls_the_release_from_its_old_storage(
    passes: Passes, target: str, core_api: client.CoreV1Api,
) -> None:
    """helm-controller internal/action/verify.go ``ReleaseTargetChanged`` compares ``GetStorageNamespace`` with
    the recorded ``status.storageNamespace`` first; when it changed, internal/controller/helmrelease_controller.go
    ``reconcileRelease`` uninstalls the history's latest release from the old storage (``reconcileUninstall``),
    clears the history and requeues, and the next reconcile installs into the new storage. Here the new storage
    (the HelmRelease's namespace, ``storageNamespace`` removed) is apart from the release's namespace: the old
    release is uninstalled as Flux's, and the install that Flux would make there is refused by name (helm's CLI
    keeps a release in its ``--namespace``), writing nothing. The first screen, ``plan`` and the pass say the
    same."""
    p = passes
    key = (target, f"{target}-web")
    _web(p, "web", f"  targetNamespace: {target}\n  storageNamespace: {target}\n")
    first = await p.engine.controller.run_pass(key)
    assert [(o.action, o.ok) for o in first.outcomes] == [("install", True)], first
    status = p.engine.status(key)
    assert status is not None and status.storage_namespace == target  # Flux's status.storageNamespace
    _web(p, "web", f"  targetNamespace: {target}\n")  # stored in the HelmRelease's namespace now
    view = p.engine.release(key)
    assert view is not None and view.state == st.TARGET_CHANGED  # before the pass, as the pass decides
    why = (f"storage namespace changed from {target} to {p.namespace}: uninstall {key[0]}/{key[1]} (stored in "
           f"{target}), then install")
    plan = next(x for x in (await p.engine.plan()).packages if x.release == key[1])
    assert (plan.state, plan.action, plan.reasons[0]) == (st.TARGET_CHANGED, "uninstall", why), plan
    assert plan.reasons[1].startswith(f"install refused: release {key[0]}/{key[1]} is stored in namespace "
                                      f"{p.namespace}"), plan.reasons
    moved = await p.engine.controller.run_pass(key)
    assert [(o.action, o.ok) for o in moved.outcomes] == [("uninstall", True)] and moved.next == "now", moved
    assert moved.message == f"{why}: release {key[0]}/{key[1]} uninstalled"
    assert helm_records(core_api, target, key[1]) == [] and _status_objects(core_api, target) == []
    refused = await p.engine.controller.run_pass(key)
    assert (refused.state, refused.outcomes) == (st.STALLED, ()), refused
    assert refused.message.startswith(f"install refused: release {key[0]}/{key[1]} is stored in namespace "
                                      f"{p.namespace}"), refused
    status = p.engine.status(key)
    assert status is not None and [c.reason for c in status.conditions if c.type == cond.STALLED] == \
        [cond.STORAGE_APART]
    assert helm_records(core_api, p.namespace, key[1]) == []  # nothing stored beside another's objects


async def test_the_first_screen_says_a_changed_release_name_before_its_pass(passes: Passes) -> None:
    """The app's rows before a pass decides (the book's quick state) ask the pass's rule
    (internal/action/verify.go ``ReleaseTargetChanged``, read from the status the package left): the renamed
    release's row says TargetChanged, not Absent, until its pass uninstalls the old release."""
    p = passes
    _web(p, "web")
    assert [o.action for o in (await p.engine.controller.run_pass((p.namespace, "web"))).outcomes] == ["install"]
    _web(p, "web", "  releaseName: web-next\n")
    view = p.engine.release((p.namespace, "web-next"))
    assert view is not None and view.state == st.TARGET_CHANGED, view


def test_reconcile_once_after_a_storage_namespace_change_uninstalls_from_the_old_storage(
    helm: Helm, kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str, target: str,
    flux_folder: Path, tmp_path: Path,
) -> None:
    """The same rule (internal/action/verify.go ``ReleaseTargetChanged``) across runs, as a CI job runs
    ``reconcile --once`` after each commit: the run after the change reads the status in the old storage (the
    release's namespace, watched with the document's) and uninstalls the release there; the install the new
    storage asks is refused by name."""
    release = f"{target}-web"
    args = cluster_args(helm, kube_target, namespace, flux_folder, tmp_path / "log")
    write(flux_folder, "web.yaml", helm_release(namespace, f"  targetNamespace: {target}\n  storageNamespace: "
                                                           f"{target}\n"))
    installed = helmdeck("reconcile", "--once", "--no-lease", *args)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert len(helm_records(core_api, target, release)) == 1
    write(flux_folder, "web.yaml", helm_release(namespace, f"  targetNamespace: {target}\n"))
    moved = helmdeck("reconcile", "--once", "--no-lease", *args)
    said = moved.stdout + moved.stderr
    assert moved.returncode == EXIT_STALLED, said
    assert f"storage namespace changed from {target} to {namespace}" in said
    assert f"install refused: release {target}/{release} is stored in namespace {namespace}" in said
    assert helm_records(core_api, target, release) == [] and helm_records(core_api, namespace, release) == []
