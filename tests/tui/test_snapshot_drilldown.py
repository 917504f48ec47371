"""Snapshot tests of the resource drill-down (enter in the Resources tab), over fixed live objects."""

from __future__ import annotations

from typing import Any, cast

from textual.pilot import Pilot

from engine.monitor.inspect import PodRow, pod_rows
from testkit.fixtures import WEB
from tests.tui.test_snapshots import TALL, app
from tui.app import HelmdeckApp
from tui.widgets.release_table import ReleaseTable

DEPLOYMENT = {
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "helmdeck-demo", "resourceVersion": "812",
                 "managedFields": [{"manager": "helm", "operation": "Update"}],
                 "annotations": {"meta.helm.sh/release-name": "web"}},
    "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
             "template": {"spec": {"nodeSelector": {"disk": "ssd"},
                                   "containers": [{"name": "web", "image": "nginx:1.27"}]}}},
    "status": {"replicas": 2, "availableReplicas": 1},
}
SECRET = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
          "metadata": {"name": "web-auth", "namespace": "helmdeck-demo"}, "data": {"password": "aHVudGVyMg=="}}
PODS = [
    {"metadata": {"name": "web-5d8f7c9b4-ab12c"}, "spec": {"containers": [{"name": "web"}]},
     "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
    {"metadata": {"name": "web-5d8f7c9b4-x2x5q"}, "spec": {"containers": [{"name": "web"}]},
     "status": {"phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}},
]


class FixedInspector:
    """Answers as :class:`engine.monitor.inspect.Inspector` from the objects above."""

    async def get(self, _api_version: str, kind: str, _namespace: str, name: str) -> dict[str, Any]:
        return {"Deployment": DEPLOYMENT, "Secret": SECRET}[kind]

    async def pods(self, obj: dict[str, Any]) -> list[PodRow] | None:
        return pod_rows(PODS) if obj["kind"] == "Deployment" else None

    async def logs(self, _namespace: str, pod: str, _container: str) -> str:
        if pod.endswith("x2x5q"):
            raise RuntimeError("logs not served: 400 Bad Request (the pod has no node)")
        return "127.0.0.1 - - GET / 200\n127.0.0.1 - - GET /health 200\n"


def drill_app() -> HelmdeckApp:
    deck = app()
    cast(Any, deck.client.engine)._inspector = FixedInspector()
    return deck


def _open(row_down: int) -> Any:
    async def open_object(pilot: Pilot[None]) -> None:
        await pilot.pause()
        pilot.app.query_one(ReleaseTable).select(WEB)
        await pilot.press("enter", "6")
        await pilot.pause(0.3)
        await pilot.press(*["down"] * row_down, "enter")
        await pilot.pause(0.5)

    return open_object


def test_drilldown_of_a_workload(snap_compare: Any) -> None:
    """web's Deployment: a running and an unschedulable pod, its FailedScheduling event, logs, live YAML."""
    assert snap_compare(drill_app(), terminal_size=TALL, run_before=_open(2))


def test_drilldown_of_a_secret_masks_its_data(snap_compare: Any) -> None:
    assert snap_compare(drill_app(), terminal_size=TALL, run_before=_open(0))
