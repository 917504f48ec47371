"""The detail screen's Resources tab: each expected object, present or absent, ready or not, live."""

from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import DataTable, Label

from engine.monitor.status import MonitorStatus
from engine.runtime.state import ReleaseKey
from tui.engine_client import EngineClient, ObjectRef
from tui.format import monitor_text, ready_text
from tui.widgets.row_table import RowTable

COLUMNS = (("resource", "RESOURCE"), ("present", "PRESENT"), ("ready", "READY"), ("reason", "REASON"))


class ObjectTable(RowTable):
    """The objects; ``enter`` (named in the footer) opens the highlighted one's drill-down."""

    BINDINGS = [Binding("enter", "select_cursor", "Open")]


class ResourcesPane(Vertical):
    """Rows from the monitor; without monitor data, the manifest's objects marked "not monitored"."""

    def __init__(self, client: EngineClient, key: ReleaseKey, *, id: str | None = None):
        super().__init__(id=id)
        self._client = client
        self._key = key
        self._shown: tuple[MonitorStatus, int | None] | None = None
        self._refs: dict[str, ObjectRef] = {}  # row key -> the object it shows

    def compose(self) -> ComposeResult:
        yield Label(classes="pane-status")
        yield ObjectTable(cursor_type="row", zebra_stripes=True)

    class Open(Message):
        """The operator asked for the drill-down of one object (``enter`` on its row)."""

        def __init__(self, ref: ObjectRef):
            super().__init__()
            self.ref = ref

    @on(DataTable.RowSelected)
    def _open(self, event: DataTable.RowSelected) -> None:
        ref = self._refs.get(str(event.row_key.value))
        if ref is not None:
            self.post_message(self.Open(ref))

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
            status.update(summary + (f" · {monitor.problem}" if monitor.problem else
                                     " · live readiness from the monitor"))
            # A manifest listing still reading would add its rows over these (DuplicateKey): it is dropped.
            self.workers.cancel_group(self, "resources")
            table.clear()
            self._refs = {r.ref: (r.api_version, r.kind, r.namespace, r.name) for r in monitor.resources}
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
            table.clear()
            table.add_row(Text("-"), Text("-"), Text("-"), Text(f"cannot read the manifest: {exc}"))
            return
        table.clear()  # rows added while this read ran are replaced, not doubled
        self._refs = {o.ref: (o.api_version, o.kind, o.namespace, o.name) for o in found}
        for o in found:
            table.add_row(Text(o.ref), Text("?"), Text("-"), Text("not monitored"), key=o.ref)
