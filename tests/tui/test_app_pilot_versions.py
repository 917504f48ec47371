"""Pilot test of the version picker (v) on the real local cluster, real helm and a real HTTP chart repository:
a package deployed at 0.1.0 from its range is pinned to 0.2.0 (outside the range) from the app; and the
engine side for a chart from the local OCI registry."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from kubernetes import client

from engine.helm import Helm
from engine.kube.client import KubeTarget
from engine.runtime.assemble import build_engine
from engine.runtime.state import ActionOutcome
from engine.sources.updates import ChartUpdate
from localcluster.cluster import LocalCluster
from testkit.chart_sources import ChartRepoServer, oci_folder, package_chart, publish_http, push_oci, write
from tests.tui.test_app_pilot import SIZE, cell, make_app, row, select, stored, wait_for
from tui.app import HelmdeckApp
from tui.screens.confirm import ConfirmScreen
from tui.screens.picker import PickerScreen

pytestmark = pytest.mark.cluster

PACKAGE = """# The shop front, from the team's repository.
apiVersion: helmdeck.dev/v1alpha1
kind: HelmRepository
metadata: {{name: charts, namespace: {ns}}}
spec:
  url: {url}   # served by the test
  interval: 1s
---
apiVersion: helmdeck.dev/v1alpha1
kind: Package
metadata:
  name: web   # the shop front
  namespace: {ns}
spec:
  chart:
    spec:
      chart: web
      version: "~0.1"   # patch releases only
      sourceRef: {{kind: HelmRepository, name: charts}}
  timeout: 1m
  values:
    replicas: 1   # one is enough here
"""


async def test_version_picker_pins_a_version_outside_the_range_and_the_release_follows(
    helm: Helm, namespace: str, kube_target: KubeTarget, core_api: client.CoreV1Api, tmp_path: Path,
    repo: ChartRepoServer,
) -> None:
    for version in ("0.1.0", "0.2.0"):
        publish_http(helm.binary, package_chart(helm.binary, tmp_path, version, marker=f"m-{version}"), repo)
    pkgs = tmp_path / "packages"
    text = PACKAGE.format(ns=namespace, url=repo.url)
    write(pkgs, "web.yaml", text)
    app = make_app(kube_target, helm, namespace, pkgs)
    key = (namespace, "web")

    def chart() -> str | None:
        return cell(app, key, "chart")

    async with app.run_test(size=SIZE) as pilot:
        # Installed from the range; the row says 0.2.0 exists, outside the range.
        await wait_for(lambda: chart() == "web@0.1.0 ⇡0.2.0"
                       and cell(app, key, "status") == "✔ deployed", 60, seen=chart)
        assert stored(core_api, namespace, "web") == [(1, "deployed")]
        # A newer version published while the app runs: the repository's refresh marks the row.
        publish_http(helm.binary, package_chart(helm.binary, tmp_path, "0.3.0", marker="m-0.3.0"), repo)
        await wait_for(lambda: chart() == "web@0.1.0 ⇡0.3.0", 30, seen=chart)
        await select(app, key)
        await pilot.press("v")
        await wait_for(lambda: isinstance(app.screen, PickerScreen), 30)
        await pilot.pause()
        assert isinstance(app.screen, PickerScreen)
        labels = [label for label, _ in app.screen._choices]
        assert [label.split()[0] for label in labels] == ["0.3.0", "0.2.0", "●"]
        assert labels[1].split()[:2] == ["0.2.0", "app-0.2.0"] and "out of range" in labels[1]
        assert labels[2].startswith("● 0.1.0") and labels[2].endswith("deployed")
        await pilot.press("up", "enter")  # the picker starts on the deployed version
        await wait_for(lambda: isinstance(app.screen, ConfirmScreen), 60)
        assert isinstance(app.screen, ConfirmScreen)
        dialog = app.screen.confirmation
        assert "spec.chart.spec.version: ~0.1 → 0.2.0" in dialog.body and "outside the range" in dialog.body
        assert dialog.details is not None and "+  marker: 'm-0.2.0'" in dialog.details.text  # rendered from 0.2.0
        await pilot.pause()
        await pilot.press("y")
        await wait_for(lambda: chart() == "web@0.2.0 ⇡0.3.0"
                       and cell(app, key, "status") == "✔ deployed"
                       and cell(app, key, "revision") == "2" and cell(app, key, "action") == "✔ upgrade", 60,
                       seen=lambda: row(app, key))
    assert stored(core_api, namespace, "web") == [(1, "superseded"), (2, "deployed")]
    # One value changed in place: the comments and the layout stay.
    assert (pkgs / "web.yaml").read_text() == text.replace('"~0.1"', '"0.2.0"')


async def test_oci_versions_diff_and_pin_through_the_engine(
    helm: Helm, namespace: str, kube_target: KubeTarget, tmp_path: Path, local_cluster: LocalCluster,
    helm_home: dict[str, str],
) -> None:
    """The picker's engine side for an OCIRepository: the tags listed and marked, a version's diff rendered
    from its tag, the pin written to the OCIRepository's ref.semver, and the release following it."""
    h = helm.binary
    base = f"{local_cluster.registry}/pin-{uuid.uuid4().hex[:8]}"
    pushed = {version: push_oci(h, package_chart(h, tmp_path, version, marker=f"o-{version}"), base, env=helm_home)
              for version in ("1.0.0", "1.0.1", "2.0.0")}
    pkgs = tmp_path / "packages"
    source = oci_folder(pkgs, namespace, base, "    semver: '~1.0'   # patches\n")
    engine = build_engine(kube_target, helm, pkgs, namespaces=[namespace])
    key = (namespace, "web")
    await engine.start(reconcile=False)
    try:
        first = await engine.reconcile(key)
        assert isinstance(first, ActionOutcome) and first.ok, first
        view = engine.release(key)  # the tag list the pass resolved ~1.0 from also marks the row
        assert view is not None and view.chart_update == ChartUpdate("2.0.0", False, "")
        listed = await engine.chart_versions(key)
        assert [(r.version, r.in_range, r.deployed) for r in listed.rows] == [
            ("2.0.0", False, False), ("1.0.1", True, True), ("1.0.0", True, False)]
        diff = await engine.version_diff(key, "2.0.0")
        assert "-  marker: 'o-1.0.1'" in diff and "+  marker: 'o-2.0.0'" in diff
        pinned = await engine.pin(key, "2.0.0")
        assert (pinned.file.name, pinned.field, pinned.before) == ("source.yaml", "spec.ref.semver", "~1.0")
        assert (pkgs / "source.yaml").read_text() == source.replace("'~1.0'", "'2.0.0'")
        done = await engine.reconcile(key)
        assert isinstance(done, ActionOutcome) and done.ok, done
        obs = engine.observer.latest(*key)
        digest12 = pushed["2.0.0"].removeprefix("sha256:")[:12]  # as Flux's mutateChartWithSourceRevision
        assert obs is not None and (obs.version, obs.chart_version) == (2, f"2.0.0+{digest12}")
    finally:
        await engine.stop()


async def test_a_read_only_app_marks_newer_versions_and_refuses_v(
    helm: Helm, namespace: str, kube_target: KubeTarget, tmp_path: Path, repo: ChartRepoServer,
) -> None:
    for version in ("0.1.0", "0.2.0"):
        publish_http(helm.binary, package_chart(helm.binary, tmp_path, version), repo)
    pkgs = tmp_path / "packages"
    write(pkgs, "web.yaml", PACKAGE.format(ns=namespace, url=repo.url))
    installer = build_engine(kube_target, helm, pkgs, namespaces=[namespace])
    await installer.start(reconcile=False)
    try:
        done = await installer.reconcile((namespace, "web"))
        assert isinstance(done, ActionOutcome) and done.ok, done
    finally:
        await installer.stop()
    app = HelmdeckApp(build_engine(kube_target, helm, pkgs, namespaces=[namespace], readonly=True), context="test")
    key = (namespace, "web")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: cell(app, key, "chart") == "web@0.1.0 ⇡0.2.0", 30, seen=lambda: cell(app, key, "chart"))
        await select(app, key)
        await pilot.press("v")
        await pilot.pause()
        assert [str(n.message) for n in app._notifications] == [
            "Version: helmdeck runs read-only: actions are disabled"]
        assert not isinstance(app.screen, PickerScreen)
