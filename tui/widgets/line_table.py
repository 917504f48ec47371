"""A row table whose every row is one line and every column a fixed width, its rows kept outside the widget.

DataTable keeps per row a Row, a dict of cells and an entry in its row-location map, made one row at a
time by ``add_row`` (~0.3 ms each: 3 s for 10,000 rows) and remade on removal and sorting. Here the
rows are an ordered list of keys the subclass sets in one call (:meth:`LineTable.set_rows`); DataTable
reads rows, cells and locations through views over that list, and a row's cells are made only when a
line of it is drawn. Where a line is, is an index: the row of a screen line, a row's y and the fixed
offset are lookups, not walks over every row.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence

from rich.style import Style
from rich.text import Text
from textual import events
from textual.cache import LRUCache
from textual.coordinate import Coordinate
from textual.geometry import Region, Spacing
from textual.strip import Strip
from textual.widgets.data_table import ColumnKey, Row, RowKey, StringKey

from tui.widgets.row_table import RowTable

DRAWN_LINES = 2_000  # drawn row lines kept by what they show (a screen shows ~50; a filter flips between sets)


def _plain(key: object) -> str:
    return str(key.value) if isinstance(key, StringKey) else str(key)


class _Order:
    """DataTable's row-location map (key <-> index) as a view over the ordered keys."""

    def __init__(self, keys: Sequence[str], positions: Mapping[str, int]):
        self._keys, self._positions = keys, positions

    def get(self, key: RowKey | str) -> int | None:
        return self._positions.get(_plain(key))

    def get_key(self, index: int) -> RowKey | None:
        return RowKey(self._keys[index]) if 0 <= index < len(self._keys) else None

    def contains_value(self, index: int) -> bool:
        return 0 <= index < len(self._keys)

    def __contains__(self, key: object) -> bool:
        return _plain(key) in self._positions

    def __iter__(self) -> Iterator[RowKey]:
        return (RowKey(key) for key in self._keys)

    def __len__(self) -> int:
        return len(self._keys)


class _Rows(Mapping[RowKey, Row]):
    """DataTable's rows (one line each, no labels) as a view over the ordered keys."""

    def __init__(self, positions: Mapping[str, int]):
        self._positions = positions

    def __getitem__(self, key: RowKey) -> Row:
        if _plain(key) not in self._positions:
            raise KeyError(key)
        return Row(RowKey(_plain(key)), 1)

    def __contains__(self, key: object) -> bool:
        return _plain(key) in self._positions

    def __iter__(self) -> Iterator[RowKey]:
        return (RowKey(key) for key in self._positions)

    def __len__(self) -> int:
        return len(self._positions)

    def clear(self) -> None:
        """DataTable.clear's call: the rows go with :meth:`LineTable.set_rows`."""


class _Cells(Mapping[RowKey, dict[ColumnKey, Text]]):
    """DataTable's cells by row, made when asked (a row's line is drawn)."""

    def __init__(self, table: LineTable):
        self._table = table

    def __getitem__(self, key: RowKey) -> dict[ColumnKey, Text]:
        if _plain(key) not in self._table._positions:
            raise KeyError(key)
        return self._table.row_texts(_plain(key))

    def __iter__(self) -> Iterator[RowKey]:
        return iter(self._table.rows)

    def __len__(self) -> int:
        return len(self._table._positions)

    def clear(self) -> None:
        """DataTable.clear's call: the rows go with :meth:`LineTable.set_rows`."""


class LineTable(RowTable):
    """A :class:`RowTable` of one-line rows and fixed column widths whose rows are set as one ordered list
    of keys (:meth:`set_rows`); a subclass gives a row's cells (:meth:`row_texts`). ``add_row`` and
    ``remove_row`` are not used: a change of rows is a new list.
    """

    def __init__(self, **kwargs: object) -> None:
        # Drawn lines by what they show, not by where: DataTable keys its lines by screen line and an update
        # count every change of rows bumps, so each filter keystroke drew every line on screen anew.
        self._drawn: LRUCache[tuple[object, ...], Strip] = LRUCache(DRAWN_LINES)
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._keys: list[str] = []
        self._positions: dict[str, int] = {}
        self._bind()

    def _bind(self) -> None:
        self._row_locations = _Order(self._keys, self._positions)  # type: ignore[assignment]
        self.rows = _Rows(self._positions)  # type: ignore[assignment]
        self._data = _Cells(self)  # type: ignore[assignment]

    def row_texts(self, key: str) -> dict[ColumnKey, Text]:
        """The cells of row ``key``, by column (a subclass gives them)."""
        raise NotImplementedError

    def row_signature(self, key: str) -> Hashable:
        """What row ``key`` is drawn from: rows of equal signatures draw equal lines (a subclass gives it)."""
        raise NotImplementedError

    @property
    def row_keys(self) -> list[str]:
        """The rows' keys, in their order (the table's own list: do not change it)."""
        return self._keys

    def set_rows(self, keys: Iterable[str]) -> None:
        """Show these rows (unique keys), in this order: one call whatever their number, no row drawn
        until it is on screen. The cursor keeps its index (clamped)."""
        self._keys = list(keys)
        self._positions = {key: i for i, key in enumerate(self._keys)}
        self._bind()
        self._update_count += 1  # DataTable's caches are keyed by it: no need to empty them
        self._require_update_dimensions = True
        self.cursor_coordinate = self.cursor_coordinate  # clamped to the rows there are
        self.check_idle()
        self.refresh()

    def refresh_row(self, row_index: int) -> LineTable:
        """Redraw row ``row_index`` from its cells now (:meth:`row_texts`): a row changes here without
        DataTable's mutators (``update_cell``), so the lines DataTable cached, keyed by its update count,
        are dropped first; otherwise the row would be drawn as it was when first drawn."""
        self._update_count += 1
        super().refresh_row(row_index)
        return self

    def clear(self, columns: bool = False) -> LineTable:
        self._keys, self._positions = [], {}
        super().clear(columns)
        self._bind()
        return self

    def add_row(self, *cells: object, **kwargs: object) -> RowKey:
        raise NotImplementedError("a LineTable's rows are set with set_rows")

    def remove_row(self, row_key: RowKey | str) -> None:
        raise NotImplementedError("a LineTable's rows are set with set_rows")

    def _clear_caches(self) -> None:
        super()._clear_caches()
        self._drawn.clear()

    def notify_style_update(self) -> None:
        self._drawn.clear()
        super().notify_style_update()

    def _render_line(self, y: int, x1: int, x2: int, base_style: Style) -> Strip:
        try:
            row_key, _line = self._get_offsets(y)
        except LookupError:
            row_key = None
        if row_key is None or row_key is self._header_row_key:
            return super()._render_line(y, x1, x2, base_style)
        key = _plain(row_key)
        index = self._positions[key]
        cursor, hover, column = self.cursor_coordinate, self.hover_coordinate, self.cursor_type == "column"
        # The row's place matters only through the zebra stripe and the cursor and hover on it; the index the
        # segments name is put right on a click (_point).
        drawn = (key, self.row_signature(key), index % 2, x1, x2, self.size.width, base_style,
                 cursor if column or cursor.row == index else None, hover if column or hover.row == index else None,
                 self.cursor_type, self.show_cursor, self._show_hover_cursor, self._pseudo_class_state)
        strip = self._drawn.get(drawn)
        if strip is None:
            strip = self._drawn[drawn] = super()._render_line(y, x1, x2, base_style)
        return strip

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
        # every new row.
        super()._update_dimensions(())
