"""The release table: one row per release, updated cell by cell from engine events."""

from __future__ import annotations

from textual.widgets import DataTable
from textual.widgets.data_table import RowKey

from engine.runtime.state import ReleaseKey, ReleaseView
from tui.format import action_text, helm_time, status_text

COLUMNS: tuple[tuple[str, str], ...] = (
    ("namespace", "NAMESPACE"),
    ("name", "NAME"),
    ("chart", "CHART"),
    ("app_version", "APP VERSION"),
    ("revision", "REVISION"),
    ("status", "STATUS"),
    ("updated", "UPDATED (UTC)"),
    ("package", "PACKAGE"),
    ("action", "LAST ACTION"),
)


def row_key(key: ReleaseKey) -> str:
    return f"{key[0]}/{key[1]}"


def cells(state: ReleaseView) -> dict[str, str]:
    """The text of every column for one release."""
    obs = state.observation
    return {
        "namespace": state.namespace,
        "name": state.name,
        "chart": f"{obs.chart_name}@{obs.chart_version}" if obs else "-",
        "app_version": (obs.app_version or "-") if obs else "-",
        "revision": str(obs.version) if obs else "-",
        "status": status_text(state),
        "updated": helm_time(obs.last_deployed) if obs else "-",
        "package": state.package.name if state.package else "-",
        "action": action_text(state),
    }


class ReleaseTable(DataTable[str]):
    """Rows keyed ``namespace/name``, kept sorted by namespace and name."""

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.zebra_stripes = True
        for key, label in COLUMNS:
            self.add_column(label, key=key)

    def upsert(self, state: ReleaseView) -> None:
        """Add the release's row or change only the cells that differ."""
        rk = row_key(state.key)
        new = cells(state)
        if rk in self.rows:
            for col, value in new.items():
                if self.get_cell(rk, col) != value:
                    self.update_cell(rk, col, value, update_width=True)
            return
        self.add_row(*(new[c] for c, _ in COLUMNS), key=rk)
        self.sort("namespace", "name")

    def remove_release(self, key: ReleaseKey) -> None:
        rk = row_key(key)
        if rk in self.rows:
            self.remove_row(rk)

    def selected_key(self) -> ReleaseKey | None:
        """``(namespace, name)`` of the row under the cursor, or None when empty."""
        if self.row_count == 0:
            return None
        rk: RowKey = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        ns, _, name = str(rk.value).partition("/")
        return (ns, name)
