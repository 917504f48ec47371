"""Pilot test: Kubernetes Events of a release's objects in the Events tab, on the real local cluster."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from textual.widgets import DataTable, Static

from engine.helm import Helm
from engine.kube.client import KubeTarget
from localcluster.cluster import CONTAINER_LOG_LINES
from testkit.packages import write_package
from tests.tui.test_app_pilot import SIZE, cell, make_app, select, wait_for
from tui.screens.resource import ResourceScreen
from tui.widgets.event_log import EventLog
from tui.widgets.resources_pane import ResourcesPane
from tui.widgets.text_view import TextView

pytestmark = pytest.mark.cluster

UNSCHEDULABLE = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  replicas: 1
  selector:
    matchLabels: {app: {{ .Release.Name }}}
  template:
    metadata:
      labels: {app: {{ .Release.Name }}}
    spec:
      nodeSelector: {helmdeck.dev/no-such-node: "true"}
      containers:
        - name: app
          image: nginx:1.27
"""


RUNNING = UNSCHEDULABLE.replace('      nodeSelector: {helmdeck.dev/no-such-node: "true"}\n', "")


def one_deployment(tmp_path: Path, name: str, namespace: str, template: str, extra: str = "") -> Path:
    """A packages folder with one package ``name`` whose chart is ``template``; ``extra`` is more spec."""
    chart = tmp_path / name
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text(f"apiVersion: v2\nname: {name}\nversion: 0.1.0\n")
    (chart / "templates" / "deployment.yaml").write_text(template)
    packages = tmp_path / "packages"
    packages.mkdir()
    write_package(packages, name, namespace, chart=chart, **(yaml.safe_load(extra) or {}))
    return packages


async def test_the_drill_down_of_a_running_deployment_shows_its_container_logs(
    helm: Helm, namespace: str, kube_target: KubeTarget, tmp_path: Path
) -> None:
    app = make_app(kube_target, helm, namespace, one_deployment(tmp_path, "talker", namespace, RUNNING))
    key = (namespace, "talker")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: cell(app, key, "status") == "✔ deployed", 120, seen=lambda: cell(app, key, "status"))
        await select(app, key)
        await pilot.press("enter", "6")
        await wait_for(lambda: app.screen.query_one(ResourcesPane).query_one(DataTable).row_count > 0, 30)
        await pilot.press("enter")
        await wait_for(lambda: isinstance(app.screen, ResourceScreen), 10)

        def drill() -> str:
            return str(app.screen.query_one(TextView).query_one(".text-body", Static).render())

        # kwok serves the cluster's ClusterLogs file as every container's log (pods/log through the API server).
        await wait_for(lambda: CONTAINER_LOG_LINES[0] in drill(), 30, seen=drill)
        assert "Running" in drill() and "Logs talker-" in drill() and "logs not served" not in drill()


async def test_a_deployment_that_cannot_schedule_shows_failed_scheduling_in_events(
    helm: Helm, namespace: str, kube_target: KubeTarget, tmp_path: Path
) -> None:
    packages = one_deployment(tmp_path, "stuck", namespace, UNSCHEDULABLE, extra="  install:\n    disableWait: true\n")
    app = make_app(kube_target, helm, namespace, packages)
    key = (namespace, "stuck")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: cell(app, key, "revision") == "1", 120, seen=lambda: cell(app, key, "status"))
        await select(app, key)
        await pilot.press("enter", "7")
        await pilot.pause()
        log = app.screen.query_one(EventLog)

        def text() -> str:
            return "\n".join(line.text for line in log.lines)

        # The scheduler's Warning on the Deployment's Pod (a child named after it), live from the watch.
        await wait_for(lambda: "FailedScheduling" in text() and log.warnings > 0, 60, seen=text)
        assert "Pod/stuck-" in text()

        # Drill-down: enter on the Deployment in Resources shows its pod, the pod's events and its live YAML.
        await pilot.press("6")
        await wait_for(lambda: app.screen.query_one(ResourcesPane).query_one(DataTable).row_count > 0, 30)
        await pilot.press("enter")
        await wait_for(lambda: isinstance(app.screen, ResourceScreen), 10)

        def drill() -> str:
            return str(app.screen.query_one(TextView).query_one(".text-body", Static).render())

        await wait_for(lambda: "Pods (1)" in drill() and "FailedScheduling" in drill(), 30, seen=drill)
        assert "Pending" in drill() and "PodScheduled=False (Unschedulable)" in drill()
        assert "kind: Deployment" in drill() and "managedFields:" not in drill()
        assert "Logs stuck-" in drill() and "(no log lines)" in drill()  # a pod never scheduled has none
        await pilot.press("escape", "escape")
        await wait_for(lambda: (cell(app, key, "warnings") or "").startswith("⚠"), 30,
                       seen=lambda: cell(app, key, "warnings"))
