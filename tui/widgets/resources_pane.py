"""The detail screen's Resources tab: each expected object, present or absent, ready or not, live."""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Label

from engine.monitor.status import MonitorStatus
from engine.runtime.state import ReleaseKey
from tui.engine_client import EngineClient
from tui.format import monitor_text, ready_text

COLUMNS = (("resource", "RESOURCE"), ("present", "PRESENT"), ("ready", "READY"), ("reason", "REASON"))


class ResourcesPane(Vertical):
    """Rows from the monitor; without monitor data, the manifest's objects marked "not monitored"."""

    def __init__(self, client: EngineClient, key: ReleaseKey, *, id: str | None = None):
        super().__init__(id=id)
        self._client = client
        self._key = key
        self._shown: tuple[MonitorStatus, int | None] | None = None

    def compose(self) -> ComposeResult:
        yield Label(classes="pane-status")
        yield DataTable[Text](cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for key, label in COLUMNS:
            table.add_column(label, key=key)

    def show(self, monitor: MonitorStatus, revision: int | None) -> None:
        """Show the monitor's report (live), or list the manifest of ``revision`` when it has none."""
        if self._shown == (monitor, revision):
            return
        self._shown = (monitor, revision)
        status = self.query_one(".pane-status", Label)
        table = self.query_one(DataTable)
        summary = f"monitor {monitor_text(monitor)[0]} · pause counter {monitor.paused}"
        if monitor.resources:
            status.update(summary + " · live readiness from the monitor")
            table.clear()
            for r in monitor.resources:
                table.add_row(Text(r.ref), Text("✔ yes" if r.present else "✖ no"), Text(ready_text(r.ready)[0]),
                              Text(r.reason), key=r.ref)
            return
        reason = self._client.why_not("monitor", self._key)
        why = f"the engine reports no monitor ({reason})" if reason else "the monitor reports no resources"
        status.update(f"{summary} · {why}: objects listed from the manifest, readiness not monitored")
        self._list_manifest(revision)

    @work(exclusive=True, group="resources")
    async def _list_manifest(self, revision: int | None) -> None:
        table = self.query_one(DataTable)
        table.clear()
        if revision is None:
            return
        try:
            found = await self._client.objects(self._key, revision)
        except Exception as exc:  # any failure is shown in place; the app goes on
            table.add_row(Text("-"), Text("-"), Text("-"), Text(f"cannot read the manifest: {exc}"))
            return
        for o in found:
            table.add_row(Text(o.ref), Text("?"), Text("-"), Text("not monitored"), key=o.ref)
