"""A row table whose every row is one line and every column a fixed width: where a line is, is an index.

DataTable finds the row of a screen line, a row's y and the fixed offset from its list of every row,
remade (every row: ~4 ms at 1,000) after each cell update, so each frame after an engine event paid for
the whole table. Here each is a lookup by index.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.style import Style
from textual import events
from textual.coordinate import Coordinate
from textual.geometry import Region, Spacing
from textual.widgets.data_table import RowKey

from tui.widgets.row_table import RowTable


class LineTable(RowTable):
    """A :class:`RowTable` of one-line rows (``height=1``, the default) and fixed column widths."""

    @property
    def _y_offsets(self) -> list[tuple[RowKey, int]]:
        return []  # not kept: _get_offsets and _total_row_height look up by index

    @property
    def _total_row_height(self) -> int:
        return self.row_count

    def _get_offsets(self, y: int) -> tuple[RowKey, int]:
        """The row shown on line ``y`` of the table (the header's first) and the line within it (0)."""
        if self.show_header:
            if y < self.header_height:
                return self._header_row_key, y
            y -= self.header_height
        key = self._row_locations.get_key(y) if y >= 0 else None
        if key is None:
            raise LookupError(f"no row on line {y}")
        return key, 0

    def _get_fixed_offset(self) -> Spacing:
        top = self.header_height if self.show_header else 0
        return Spacing(top + self.fixed_rows, 0, 0, self._row_label_column_width + sum(
            c.get_render_width(self) for c in self.ordered_columns[: self.fixed_columns]))

    def _get_cell_region(self, coordinate: Coordinate) -> Region:
        if not self.is_valid_coordinate(coordinate):
            return Region(0, 0, 0, 0)
        row_index, column_index = coordinate
        columns = self.ordered_columns
        x = sum(c.get_render_width(self) for c in columns[:column_index]) + self._row_label_column_width
        return Region(x, self._row_y(row_index), columns[column_index].get_render_width(self), 1)

    def _get_row_region(self, row_index: int) -> Region:
        if not self.is_valid_row_index(row_index):
            return Region(0, 0, 0, 0)
        width = sum(c.get_render_width(self) for c in self.columns.values()) + self._row_label_column_width
        return Region(0, self._row_y(row_index), max(self.size.width, width), 1)

    def _row_y(self, row_index: int) -> int:
        return row_index + (self.header_height if self.show_header else 0)

    # Mouse: the row under the pointer is its line. A subclass may share rendered cells between equal
    # cells of different rows (ReleaseTable), whose segments then name the row that rendered them first.
    def _point(self, event: events.MouseEvent) -> None:
        meta = event.style.meta
        if meta.get("row", -1) >= 0:
            row = event.y + int(self.scroll_y) - (self.header_height if self.show_header else 0)
            if row != meta["row"]:
                event.style = event.style + Style.from_meta({"row": row})

    # Textual calls each class's own _on_ handler, this one before DataTable's: they only correct the event.
    def _on_click(self, event: events.Click) -> None:  # type: ignore[override]
        self._point(event)

    def _on_mouse_move(self, event: events.MouseMove) -> None:
        self._point(event)

    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        # Fixed widths and one line per row: nothing to measure. DataTable would measure every cell of
        # every new row (4,500 measurements for 300 rows at start-up).
        super()._update_dimensions(())
