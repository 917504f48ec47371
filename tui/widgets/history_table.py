"""The detail screen's History tab: every stored revision, newest first."""

from __future__ import annotations

from rich.text import Text
from textual.message import Message
from textual.widgets import DataTable

from engine.storage.observation import Observation
from tui.format import helm_time_text, status_symbol
from tui.widgets.row_table import RowTable

COLUMNS = (("revision", "REV"), ("updated", "UPDATED (UTC)"), ("status", "STATUS"), ("chart", "CHART"),
           ("app_version", "APP VER"), ("description", "DESCRIPTION"))


class HistoryTable(RowTable):
    """Rows keyed by revision number; enter shows that revision in the Values and Manifest tabs."""

    class RevisionChosen(Message):
        """The operator picked ``revision`` (enter) to look at."""

        def __init__(self, revision: int):
            super().__init__()
            self.revision = revision

    def __init__(self, *, id: str | None = None):
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self._shown: list[Observation] = []

    def on_mount(self) -> None:
        for key, label in COLUMNS:
            self.add_column(label, key=key)

    def show(self, history: list[Observation]) -> None:
        """Show ``history`` (newest first), keeping the cursor on the same revision."""
        if history == self._shown:
            return
        selected = self.highlighted_revision()
        self._shown = list(history)
        self.clear()
        for obs in history:
            self.add_row(
                Text(str(obs.version)), Text(helm_time_text(obs.last_deployed)),
                Text(f"{status_symbol(obs.status)} {obs.status}"),
                Text(f"{obs.chart_name}@{obs.chart_version}"), Text(obs.app_version or "-"),
                Text(obs.description, no_wrap=True, overflow="ellipsis"), key=str(obs.version),
            )
        if selected is not None and str(selected) in self.rows:
            self.move_cursor(row=self.get_row_index(str(selected)))

    def highlighted_revision(self) -> int | None:
        """The revision under the cursor (None when there is none)."""
        if self.row_count == 0:
            return None
        return int(str(self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.post_message(self.RevisionChosen(int(str(event.row_key.value))))
