"""Pilot test of the version picker (v) on the real local cluster, real helm and a real HTTP chart repository:
a package deployed at 0.1.0 from its range is pinned to 0.2.0 (outside the range) from the app."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client

from engine.helm import Helm
from engine.kube import KubeTarget
from tests.sources_fixtures import ChartRepoServer, package_chart, publish_http, write
from tests.test_app_pilot import SIZE, cell, make_app, row, select, stored, wait_for
from tui.screens.confirm import ConfirmScreen
from tui.screens.picker import PickerScreen

pytestmark = pytest.mark.cluster

PACKAGE = """# The shop front, from the team's repository.
apiVersion: helmdeck.dev/v1alpha1
kind: HelmRepository
metadata: {{name: charts, namespace: {ns}}}
spec:
  url: {url}   # served by the test
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
        await wait_for(lambda: chart() == "charts/web@0.1.0 ↑0.2.0 (out of range)"
                       and cell(app, key, "status") == "✔ deployed", 60, seen=chart)
        assert stored(core_api, namespace, "web") == [(1, "deployed")]
        await select(app, key)
        await pilot.press("v")
        await wait_for(lambda: isinstance(app.screen, PickerScreen), 30)
        await pilot.pause()
        assert isinstance(app.screen, PickerScreen)
        labels = [label for label, _ in app.screen._choices]
        assert labels[0].split()[:2] == ["0.2.0", "app-0.2.0"] and "out of range" in labels[0]
        assert labels[1].startswith("● 0.1.0") and labels[1].endswith("deployed")
        await pilot.press("up", "enter")  # the picker starts on the deployed version
        await wait_for(lambda: isinstance(app.screen, ConfirmScreen), 60)
        assert isinstance(app.screen, ConfirmScreen)
        dialog = app.screen.confirmation
        assert "spec.chart.spec.version: ~0.1 → 0.2.0" in dialog.body and "outside the range" in dialog.body
        assert dialog.details is not None and "+  marker: 'm-0.2.0'" in dialog.details.text  # rendered from 0.2.0
        await pilot.pause()
        await pilot.press("y")
        await wait_for(lambda: chart() == "charts/web@0.2.0" and cell(app, key, "status") == "✔ deployed"
                       and cell(app, key, "revision") == "2", 60, seen=lambda: row(app, key))
        assert cell(app, key, "action") == "✔ upgrade"
    assert stored(core_api, namespace, "web") == [(1, "superseded"), (2, "deployed")]
    # One value changed in place: the comments and the layout stay.
    assert (pkgs / "web.yaml").read_text() == text.replace('"~0.1"', '"0.2.0"')
