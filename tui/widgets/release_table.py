"""The release table: one row per release, updated cell by cell from engine events."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable

from rich.style import Style
from rich.text import Text
from textual._two_way_dict import TwoWayDict
from textual._types import SegmentLines
from textual.cache import LRUCache
from textual.message import Message
from textual.reactive import reactive
from textual.timer import Timer
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowKey

from engine.runtime.state import ReleaseKey, ReleaseView
from tui.format import Tone
from tui.layout import FULL, MARKER, ColumnLayout, fit, fit_text, header_label
from tui.model import Cell, RowFilter, SortOrder, cells, column, key_of, row_id, search_text
from tui.themes import tone_styles
from tui.widgets.line_table import LineTable

log = logging.getLogger(__name__)
# Re-sorting after a sort-column change waits this long, so a burst of events costs one sort.
RESORT_DELAY = 0.3
# Rows are redrawn at most this often: a burst of storage events costs one redraw, and a write still
# reaches the screen well within 0.2 s (bench/tui_bench.py).
FLUSH_INTERVAL = 0.05
# Rows added per step when the table is refilled (filter, namespace, quick filter, start-up): the first
# step, a screenful and more, is drawn at once; the rest follow between frames, so a keystroke's work
# does not grow with the number of releases.
FILL_STEP = 120
FILL_SLICE = 0.03
ON_SCREEN_MARGIN = 5  # rows above and below the visible ones that are kept up to date too
CELL_CACHE_SIZE = 20_000  # rendered cells kept (a screen shows a few hundred)


class ReleaseTable(LineTable):
    """Every release the engine reports, filtered by :attr:`row_filter`, sorted by :attr:`order`.

    Keeps every view it was given (shown or not) so a filter change needs no
    engine call; rows are keyed ``namespace/name``.
    """

    row_filter: reactive[RowFilter] = reactive(RowFilter, init=False)
    order: reactive[SortOrder] = reactive(SortOrder, init=False)

    class Changed(Message):
        """The shown rows or their order changed: the header recounts and names the order."""

    def __init__(self, clock: Callable[[], float], views: Iterable[ReleaseView], *, id: str | None = None):
        # No cell padding: each column's fixed width holds one trailing space (tui.model.COLUMNS).
        super().__init__(id=id, cursor_type="row", zebra_stripes=True, cell_padding=0)
        self._cursor_moved = False
        self._clock = clock
        self._views: dict[str, ReleaseView] = {}
        # Per release, made when its view changes: its cells, what the filter searches, its sort key.
        self._cells: dict[str, dict[str, Cell]] = {}
        self._search: dict[str, str] = {}
        self._sort_keys: dict[str, tuple[object, ...]] = {}
        self._shown: dict[str, dict[str, Cell]] = {}
        self._fill: list[str] = []  # rows still to add (sorted, reversed: the next one last)
        self._fill_set: set[str] = set()
        self._fill_joined = False  # rows joined the fill under way: they may belong above rows already added
        self.applied: RowFilter | None = None  # the filter whose first screenful of rows is in the table
        self._counts: Counter[str] = Counter()  # for the header: releases per state, kept per change
        self._counted: dict[str, str] = {}
        self._running_rids: set[str] = set()
        self._fill_timer: Timer | None = None
        for view in views:
            self._take(row_id(view.key), view, clock())
        self._styles: dict[Tone, Style] = {}
        self._resort_timer: Timer | None = None
        self._flush_timer: Timer | None = None
        self._dirty: set[str] = set()
        self._last_flush = 0.0
        # Rendered cells by what they show. DataTable keys its own cell cache by a counter every
        # update_cell bumps, so under an event storm each frame re-rendered every visible cell.
        self._cell_cache: LRUCache[tuple[object, ...], SegmentLines] = LRUCache(CELL_CACHE_SIZE)
        self.columns_fit = FULL  # the columns the width shows (tui.layout)
        self._widths = FULL.text_widths()  # per shown column, the cells its text may fill
        self._texts: LRUCache[tuple[Cell, int], Text] = LRUCache(CELL_CACHE_SIZE)

    @property
    def views(self) -> list[ReleaseView]:
        """Every release the table knows, shown or filtered out."""
        return list(self._views.values())

    @property
    def shown_count(self) -> int:
        return len(self._shown)

    @property
    def busy(self) -> bool:
        """Changes wait to be drawn (for benches and tests: the table is not yet what the views say)."""
        return bool(self._dirty or self._fill)

    def on_mount(self) -> None:
        self._styles = tone_styles(self.app.theme_variables)
        self._lay_out(FULL)
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.restyle())

    # -- feeding -----------------------------------------------------------------
    def upsert(self, view: ReleaseView) -> None:
        """Take a new snapshot of one release; its row is added, updated cell by cell, or hidden.

        Rows are redrawn at most every :data:`FLUSH_INTERVAL` seconds: DataTable
        re-renders every visible row after any cell change, so a burst of events
        costs one redraw, and key presses between redraws stay fast.
        """
        rid = row_id(view.key)
        self._views[rid] = view
        self._mark(rid)

    def remove_release(self, key: ReleaseKey) -> None:
        rid = row_id(key)
        self._views.pop(rid, None)
        self._mark(rid)

    def sync(self, views: Iterable[ReleaseView]) -> None:
        """Catch up with every view the engine holds now: what changed since the table was made is
        upserted, what is gone removed (one pass, at mount: an event said between the table's making and
        its screen's subscribing was not seen)."""
        now = {row_id(view.key): view for view in views}
        for rid, view in now.items():
            if self._views.get(rid) is not view:
                self.upsert(view)
        for rid in [rid for rid in self._views if rid not in now]:
            self.remove_release(key_of(rid))

    @property
    def total(self) -> int:
        """How many releases the table knows (shown or not)."""
        return len(self._views)

    @property
    def state_counts(self) -> Counter[str]:
        """Releases per engine state (``-``: none), as of the last flush; kept per change, not recounted."""
        return +self._counts

    def running(self) -> list[ReleaseView]:
        """The releases with an action running, as of the last flush."""
        return [self._views[rid] for rid in sorted(self._running_rids) if rid in self._views]

    def _count(self, rid: str, view: ReleaseView | None) -> None:
        old = self._counted.pop(rid, None)
        if old is not None:
            self._counts[old] -= 1
        self._running_rids.discard(rid)
        if view is not None:
            state = self._counted[rid] = view.state or "-"
            self._counts[state] += 1
            if view.running is not None:
                self._running_rids.add(rid)

    def _take(self, rid: str, view: ReleaseView, now: float) -> dict[str, Cell]:
        """Remember ``view``'s cells, search text and sort key (once per change, not per keystroke)."""
        self._views[rid] = view
        self._count(rid, view)
        row = self._cells[rid] = cells(view, now)
        self._search[rid] = search_text(row)
        self._sort_keys[rid] = self.order.key(view, now)
        return row

    def _forget(self, rid: str) -> None:
        for table in (self._cells, self._search, self._sort_keys):
            table.pop(rid, None)
        self._count(rid, None)

    def _take_dirty(self) -> set[str]:
        """Take every pending change's cells, search text and sort key; returns the rows taken."""
        dirty, self._dirty = self._dirty, set()
        now = self._clock()
        for rid in dirty:
            view = self._views.get(rid)
            if view is None:
                self._forget(rid)
            else:
                self._take(rid, view, now)
        return dirty

    def flush(self) -> None:
        """Apply every pending release change to the rows now."""
        if self._flush_timer is not None:
            self._flush_timer.stop()
            self._flush_timer = None
        self._last_flush = time.monotonic()
        dirty = self._take_dirty()
        shown = self.row_filter.matcher()
        new_rows = sum(1 for rid in dirty if rid in self._views and rid not in self._shown
                       and shown(self._views[rid], self._search[rid]))
        if new_rows > FILL_STEP and not self._fill:
            # Many releases at once (start-up, a context switch): one sorted fill; later bursts join it.
            self._refill()
            return
        added = False
        for rid in dirty:
            view = self._views.get(rid)
            if view is None:
                if rid in self._shown:
                    self._remove_row(rid)
                continue
            row = self._cells[rid]
            visible = shown(view, self._search[rid])
            if rid in self._shown:
                if visible:
                    if self._on_screen(rid):
                        self._update_row(rid, dict(row))
                    # else: drawn when it scrolls into view (see _draw_on_screen)
                else:
                    self._remove_row(rid)
            elif visible and rid not in self._fill_set:  # a row still to fill is added with its latest cells
                if self._fill:  # a fill is under way: the row joins it (sorted below, re-sorted at its end)
                    self._fill.append(rid)
                    self._fill_set.add(rid)
                    self._fill_joined = True
                else:
                    self._add_row(rid, dict(row))
                    added = True
        if self._fill_joined:
            self._fill.sort(key=self._sort_keys.__getitem__, reverse=not self.order.reverse)
        if added:  # new releases are rare after start-up; in place at once (kept keys: ~1 ms per 1,000 rows)
            self._resort()
        if dirty:
            self.post_message(self.Changed())

    def _mark(self, rid: str) -> None:
        self._dirty.add(rid)
        if self._flush_timer is not None:
            return
        wait = self._last_flush + FLUSH_INTERVAL - time.monotonic()
        if wait <= 0:
            try:
                self.flush()  # calm: show it at once
            except Exception:  # called from an engine signal, whose errors Textual drops without a word
                log.exception("release table: applying release changes failed")
                raise
        else:
            self._flush_timer = self.set_timer(wait, self.flush)

    def tick(self) -> None:
        """Refresh the time-dependent cells (ages, running-action progress) of the rows on screen."""
        now = self._clock()
        for rid in self._rows_on_screen():
            view = self._views.get(rid)
            if view is None:  # removed since; its row goes at the next flush
                continue
            new = cells(view, now)
            self._update_cells(rid, {k: new[k] for k in ("age", "action")})
            self._cells[rid] = new

    # -- reading -----------------------------------------------------------------
    def selected_key(self) -> ReleaseKey | None:
        """``(namespace, name)`` of the row under the cursor, or None when no row is shown."""
        if self.row_count == 0:
            return None
        rk = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        return key_of(str(rk.value))

    def select(self, key: ReleaseKey) -> bool:
        """Move the cursor to ``key``'s row; False when it is not shown."""
        rid = row_id(key)
        if rid not in self._shown:
            return False
        self.move_cursor(row=self.get_row_index(rid))
        return True

    def plain_cell(self, key: ReleaseKey, column: str) -> str | None:
        """The text of one shown cell (None when the row is not shown)."""
        shown = self._shown.get(row_id(key))
        return shown[column].text if shown is not None else None

    # -- rows off screen ------------------------------------------------------------
    # Any cell write makes DataTable redraw every visible row, so changes to rows
    # off screen are not written until they scroll into view: with 1,000 releases
    # most events touch rows nobody sees, and those then cost no redraw at all.

    def _rows_on_screen(self) -> list[str]:
        top = int(self.scroll_y)
        end = min(self.row_count, top + self.size.height + ON_SCREEN_MARGIN)
        # By index, not DataTable.ordered_rows: that list is remade (every row) after any cell update.
        keys = (self._row_locations.get_key(i) for i in range(max(0, top - ON_SCREEN_MARGIN), end))
        return [str(k.value) for k in keys if k is not None]

    def _on_screen(self, rid: str) -> bool:
        index = self.get_row_index(rid)
        top = int(self.scroll_y)
        return top - ON_SCREEN_MARGIN <= index < top + self.size.height + ON_SCREEN_MARGIN

    def _draw_on_screen(self) -> None:
        """Bring the rows now on screen up to date (only their differing cells are written)."""
        for rid in self._rows_on_screen():
            row = self._cells.get(rid)
            if row is not None and rid in self._shown:  # a removed release's row goes at the next flush
                self._update_row(rid, dict(row))

    def action_scroll_bottom(self) -> None:
        """End: the last row of the whole list, so the rows still to fill are added first."""
        while self._fill:
            if self._fill_timer is not None:
                self._fill_timer.stop()
            self._fill_step(None, first=False)
        super().action_scroll_bottom()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if self.has_focus and event.cursor_row != 0:
            self._cursor_moved = True

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if round(old_value) != round(new_value):
            self._draw_on_screen()

    def on_resize(self) -> None:
        layout = fit(self.size.width - self.styles.scrollbar_size_vertical)  # room kept for the scroll bar
        if layout != self.columns_fit:
            self._lay_out(layout)
        self._draw_on_screen()

    # -- reactive watchers -------------------------------------------------------
    def watch_row_filter(self) -> None:
        self._refill()

    def watch_order(self) -> None:
        for key, _width in self.columns_fit.widths:
            self.columns[ColumnKey(key)].label = Text(self._header(key))
        now, order = self._clock(), self.order
        self._sort_keys = {rid: order.key(view, now) for rid, view in self._views.items()}
        self._resort()
        self.post_message(self.Changed())  # the header names the sort order

    def restyle(self) -> None:
        """Re-colour every cell from the current theme."""
        self._styles = tone_styles(self.app.theme_variables)
        self._texts.clear()
        for rid, row in self._shown.items():
            for col, width in self._widths.items():
                self.update_cell(rid, col, self._text(row[col], width))

    # -- internals ---------------------------------------------------------------
    def _lay_out(self, layout: ColumnLayout) -> None:
        """Show the columns ``layout`` keeps, then a marker column when it leaves some out; rows are re-added."""
        selected = self.selected_key()
        self.columns_fit, self._widths = layout, layout.text_widths()
        self.clear(columns=True)
        for key, width in layout.widths:
            self.add_column(self._header(key), key=key, width=width)
        if layout.hidden:
            self.add_column(Text(layout.marker, style="reverse"), key=MARKER, width=len(layout.marker))
        self._refill(selected)

    def _header(self, key: str) -> str:
        arrow = ("▼" if self.order.reverse else "▲") if key == self.order.column else ""
        return header_label(column(key).label, arrow, self._widths[key])

    def _render_cell(self, row_index: int, column_index: int, base_style: Style, width: int,
                     cursor: bool = False, hover: bool = False) -> SegmentLines:
        if row_index < 0 or column_index < 0:  # header and labels: DataTable's own cache
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        row_key = self._row_locations.get_key(row_index)
        column_key = self._column_locations.get_key(column_index)
        row = self._shown.get(str(row_key.value)) if row_key is not None else None
        cell = row.get(str(column_key.value)) if row is not None and column_key is not None else None
        if cell is None:
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        # Not keyed by row: equal cells render alike wherever they are (base_style carries the zebra
        # stripe), so a re-sort or a scroll re-renders only what is new.
        key = (column_index, cell, self._styles.get(cell.tone), base_style, width, cursor, hover,
               self._show_hover_cursor, self._pseudo_class_state)
        lines = self._cell_cache.get(key)
        if lines is None:
            lines = super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
            self._cell_cache[key] = lines
        return lines

    def _text(self, cell: Cell, width: int) -> Text:
        # Shared by equal cells (DataTable only reads them): a refill re-adds rows without making texts.
        key = (cell, width)
        text = self._texts.get(key)
        if text is None:
            text = Text(fit_text(cell.text, width), style=self._styles.get(cell.tone, ""), no_wrap=True, end="")
            text.truncate(width, overflow="ellipsis")
            self._texts[key] = text
        return text

    def _add_row(self, rid: str, row: dict[str, Cell]) -> None:
        self._shown[rid] = row
        texts = [self._text(row[col], width) for col, width in self._widths.items()]
        self.add_row(*texts, *[Text()] * bool(self.columns_fit.hidden), key=rid)

    def _remove_row(self, rid: str) -> None:
        del self._shown[rid]
        self.remove_row(rid)

    def _update_row(self, rid: str, row: dict[str, Cell]) -> None:
        if self._update_cells(rid, row):
            self._schedule_resort()

    def _write_cell(self, rid: str, col: str, text: Text) -> None:
        """As DataTable.update_cell without re-measuring (fixed widths), repainting only the row:
        update_cell repaints the whole table, every visible line, for each cell written."""
        self._data[RowKey(rid)][ColumnKey(col)] = text
        self._update_count += 1
        self.refresh_row(self.get_row_index(rid))

    def _update_cells(self, rid: str, new: dict[str, Cell]) -> bool:
        """Write only the cells that differ; True when the sort column was among them."""
        current = self._shown[rid]
        sort_changed = False
        for col, cell in new.items():
            if current[col] != cell:
                current[col] = cell
                width = self._widths.get(col)
                if width is not None:  # a column the width leaves out is not drawn
                    self._write_cell(rid, col, self._text(cell, width))
                sort_changed = sort_changed or col == self.order.column
        return sort_changed

    def _refill(self, selected: ReleaseKey | None = None) -> None:
        """Show the rows the filter keeps, in order: the first :data:`FILL_STEP` now, the rest in steps.

        The filter runs over the kept search texts and sort keys (no cells are made), so the work done
        before the first frame is one substring test per release plus one step of rows.
        """
        self._take_dirty()  # every row is redrawn from the latest views
        selected = selected or self.selected_key()
        if self._fill_timer is not None:
            self._fill_timer.stop()
            self._fill_timer = None
        self.clear()
        self._shown = {}
        shown, views, search = self.row_filter.matcher(), self._views, self._search
        keys = self._sort_keys
        rows = sorted((rid for rid, view in views.items() if shown(view, search[rid])), key=keys.__getitem__,
                      reverse=not self.order.reverse)
        self._fill, self._fill_set, self._fill_joined = rows, set(rows), False
        self._fill_step(selected)
        self.applied = self.row_filter

    def _fill_step(self, selected: ReleaseKey | None, first: bool = True) -> None:
        self._fill_timer = None
        shown = self.row_filter.matcher()
        # The first step is a screenful and more; later ones (between frames) last FILL_SLICE seconds each.
        until = time.perf_counter() + FILL_SLICE
        for i in range(len(self._fill)):
            if i >= FILL_STEP and (first or time.perf_counter() > until):
                break
            rid = self._fill.pop()
            self._fill_set.discard(rid)
            view = self._views.get(rid)
            if view is not None and rid not in self._shown and shown(view, self._search[rid]):
                self._add_row(rid, dict(self._cells[rid]))
        if selected is not None and self.select(selected):
            selected = None  # found: the operator may move on while the rest is added
        if self._fill:
            self._fill_timer = self.set_timer(0.001, lambda: self._fill_step(selected, first=False))
        elif self._fill_joined:  # rows that joined may sort above rows added before them
            self._fill_joined = False
            self._resort()
        self.post_message(self.Changed())

    def _schedule_resort(self) -> None:
        if self._resort_timer is None:
            self._resort_timer = self.set_timer(RESORT_DELAY, self._resort)

    def _resort(self) -> None:
        self._resort_timer = None
        selected = self.selected_key()
        keys = self._sort_keys
        # As DataTable.sort, by the row keys' kept sort keys (the cells may be cut short with "…").
        ordered = sorted(self._row_locations, key=lambda rk: keys[str(rk.value)], reverse=self.order.reverse)
        self._row_locations = TwoWayDict({rk: i for i, rk in enumerate(ordered)})
        self._update_count += 1
        self.refresh()
        if selected is not None and self._cursor_moved:
            self.select(selected)  # the operator's row stays under the cursor
        elif self.row_count:
            self.move_cursor(row=0)  # until the operator moves, the cursor stays on the first row
