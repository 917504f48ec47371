"""The release table: one row per release, updated from engine events.

The rows are one ordered list of row keys (:class:`~tui.widgets.line_table.LineTable`): a filter
keystroke, a new sort order or 10,000 releases arriving at start-up cost one pass over compact per-row
keys (search text, sort key) and the lines on screen, never widget work per row. A row's cells are made
when it is drawn and its search text when a filter first reads it (or, row by row, once the table is calm):
10,000 releases listed at start-up cost their sort keys before the first frame, not their cells.
"""

from __future__ import annotations

import heapq
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual._types import SegmentLines
from textual.cache import LRUCache
from textual.geometry import Region
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip
from textual.timer import Timer
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey

from engine.runtime.state import ReleaseKey, ReleaseView
from tui.format import Tone
from tui.layout import FULL, MARKER, ColumnLayout, fit, fit_text, header_label
from tui.model import (
    COLUMN_INDEX,
    KeptCell,
    QuickFilter,
    RowFilter,
    SortOrder,
    cells,
    column,
    key_of,
    quick_set,
    row_cells,
    row_id,
    search_text,
)
from tui.themes import tone_styles
from tui.widgets.line_table import LineTable

log = logging.getLogger(__name__)
# Re-sorting after a sort-column change waits this long, so a burst of events costs one sort.
RESORT_DELAY = 0.3
# Rows are redrawn at most this often (a frame and a half at Textual's 60 per second): a burst of storage
# events costs one redraw, and a write reaches the screen within ~60 ms (bench/tui_bench.py at 100 writes/s:
# write -> row drawn p99 47-60 ms, against 78-87 ms every 50 ms; key -> frame p99 alike).
FLUSH_INTERVAL = 0.025
ON_SCREEN_MARGIN = 5  # rows above and below the visible ones that are repainted on a change too
CELL_CACHE_SIZE = 20_000  # rendered cells kept (a screen shows a few hundred)
# The search texts a filter has not asked for yet are made this long after the change that left them out, this
# many at a time (~10 ms at 10,000 releases' pace), so that the first filter keystroke after the start finds
# them made, and neither the first frame nor the records' decoding waits for them.
SEARCH_FILL_DELAY = 0.5
SEARCH_FILL_STEP = 0.05
SEARCH_FILL_CHUNK = 1_000
TIMED = ("age", "action")  # the columns whose text changes with time alone (tick)


class ReleaseTable(LineTable):
    """Every release the engine reports, filtered by :attr:`row_filter`, sorted by :attr:`order`.

    Keeps every view it was given (shown or not) so a filter change needs no
    engine call; rows are keyed ``namespace/name``. ``drawn`` is called after the first frame that draws the
    views of :meth:`upsert_many` or :meth:`sync` (those of the engine's start), with the keys of the rows on
    screen (:meth:`keys_in_view`).
    """

    row_filter: reactive[RowFilter] = reactive(RowFilter, init=False)
    order: reactive[SortOrder] = reactive(SortOrder, init=False)

    class Changed(Message):
        """The shown rows or their order changed: the header recounts and names the order."""

    def __init__(self, clock: Callable[[], float], views: Iterable[ReleaseView], *,
                 drawn: Callable[[list[ReleaseKey]], None] = lambda _keys: None, id: str | None = None):
        # No cell padding: each column's fixed width holds one trailing space (tui.model.COLUMNS).
        super().__init__(id=id, cursor_type="row", zebra_stripes=True, cell_padding=0)
        self._cursor_moved = False
        self._clock = clock
        self._drawn_port = drawn
        self._undrawn = False  # views of upsert_many or sync wait for a frame (drawn)
        self._views: dict[str, ReleaseView] = {}
        # Per release: its cells (tuples of strings: untracked by the cyclic garbage collector, tui.model.Cell),
        # made when the row is first drawn after its view changed (:meth:`_row`); what the filter searches,
        # made when a filter first reads it (:class:`_SearchTexts`); its sort key, made when its view changes.
        self._cells: dict[str, tuple[KeptCell, ...]] = {}
        self._search = _SearchTexts(self._row)
        self._search_timer: Timer | None = None
        self._quick: dict[str, frozenset[QuickFilter]] = {}  # the quick filters it belongs to
        self._sort_keys: dict[str, tuple[object, ...]] = {}
        # Every release's row key in sort order (sorted when asked after a change: mostly sorted already,
        # so a sort after a burst is a merge); a filter keeps those it matches, in this order.
        self._ranked: list[str] = []
        self._ranked_stale = False
        self.applied: RowFilter | None = None  # the filter whose rows are in the table
        self._counts: Counter[str] = Counter()  # for the header: releases per state, kept per change
        self._counted: dict[str, str] = {}
        self._running_rids: set[str] = set()
        now, order = clock(), self.order
        for view in views:
            self._take(row_id(view.key), view, now, order)
        self._styles: dict[Tone, Style] = {}
        self._resort_timer: Timer | None = None
        self._flush_timer: Timer | None = None
        self._dirty: set[str] = set()
        self._last_flush = 0.0
        # Rendered cells by what they show. DataTable keys its own cell cache by a counter every
        # row change bumps, so under an event storm each frame re-rendered every visible cell.
        self._cell_cache: LRUCache[tuple[object, ...], SegmentLines] = LRUCache(CELL_CACHE_SIZE)
        self.columns_fit = FULL  # the columns the width shows (tui.layout)
        self._widths = FULL.text_widths()  # per shown column, the cells its text may fill
        self._texts: LRUCache[tuple[KeptCell, int], Text] = LRUCache(CELL_CACHE_SIZE)

    @property
    def views(self) -> list[ReleaseView]:
        """Every release the table knows, shown or filtered out."""
        return list(self._views.values())

    @property
    def shown_count(self) -> int:
        return self.row_count

    @property
    def busy(self) -> bool:
        """Changes wait to be drawn (for benches and tests: the table is not yet what the views say)."""
        return bool(self._dirty)

    def on_mount(self) -> None:
        self._styles = tone_styles(self.app.theme_variables)
        self._lay_out(FULL)
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.restyle())

    # -- feeding -----------------------------------------------------------------
    def upsert(self, view: ReleaseView) -> None:
        """Take a new snapshot of one release; its row is added, updated, or hidden.

        Rows are redrawn at most every :data:`FLUSH_INTERVAL` seconds: a burst of
        events costs one redraw, and key presses between redraws stay fast.
        """
        rid = row_id(view.key)
        self._views[rid] = view
        self._mark(rid)

    def upsert_many(self, views: Iterable[ReleaseView]) -> None:
        """:meth:`upsert` each of ``views`` (the releases listed at start-up, a page at a time): one pass,
        then one flush, sort and redraw for them all."""
        taken = self._views
        for view in views:
            rid = row_id(view.key)
            taken[rid] = view
            self._dirty.add(rid)
        self._undrawn = True
        self._schedule_flush()

    def remove_release(self, key: ReleaseKey) -> None:
        rid = row_id(key)
        self._views.pop(rid, None)
        self._mark(rid)

    def sync(self, views: Iterable[ReleaseView]) -> None:
        """Catch up with every view the engine holds now: what changed since the table was made is taken,
        what is gone removed, and the rows are shown at once (one pass and one flush, at mount: an event said
        between the table's making and its screen's subscribing was not seen)."""
        now = {row_id(view.key): view for view in views}
        self._undrawn = True
        taken, dirty = self._views, self._dirty
        for rid, view in now.items():
            if taken.get(rid) is not view:
                taken[rid] = view
                dirty.add(rid)
        for rid in [rid for rid in taken if rid not in now]:
            del taken[rid]
            dirty.add(rid)
        # Shown at once, all of them: the storage labels' rows listed before the screen subscribed are then in
        # its first frame (one row at once and the rest after the flush interval put a frame between).
        if dirty:
            self.flush()

    @property
    def total(self) -> int:
        """How many releases the table knows (shown or not)."""
        return len(self._views)

    @property
    def state_counts(self) -> Counter[str]:
        """Releases per engine state (``-``: none), as of the last flush; kept per change, not recounted."""
        return +self._counts

    def running(self, limit: int | None = None) -> list[ReleaseView]:
        """The releases with an action running, as of the last flush, by row key: the first ``limit`` of them
        (one pass, not a sort of all: a cleanup may run thousands)."""
        rids = sorted(self._running_rids) if limit is None else heapq.nsmallest(limit, self._running_rids)
        return [self._views[rid] for rid in rids if rid in self._views]

    @property
    def running_count(self) -> int:
        """How many releases have an action running, as of the last flush."""
        return len(self._running_rids)

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

    def _take(self, rid: str, view: ReleaseView, now: float, order: SortOrder) -> bool:
        """Remember ``view``'s cells, search text and sort key in ``order`` (the table's, read once by the caller:
        a reactive's read costs more than the rest of a row at 10,000 rows); once per change, not per keystroke.
        True when its sort key changed (or it is new)."""
        self._views[rid] = view
        self._count(rid, view)
        self._cells.pop(rid, None)  # made again when drawn (_row)
        self._search.changed(rid)
        self._quick[rid] = quick_set(view)
        key = order.key(view, now)
        before = self._sort_keys.get(rid)
        if before == key:
            return False
        if before is None:
            self._ranked.append(rid)
        self._sort_keys[rid] = key
        self._ranked_stale = True
        return True

    def _forget(self, rid: str) -> None:
        for table in (self._cells, self._quick, self._sort_keys):
            table.pop(rid, None)
        self._search.drop(rid)
        self._count(rid, None)
        self._ranked_stale = True  # dropped from the ranking at its next sort

    def _take_dirty(self) -> tuple[set[str], bool]:
        """Take every pending change's cells, search text and sort key; returns the rows taken and
        whether a shown row's sort key changed."""
        dirty, self._dirty = self._dirty, set()
        now, order = self._clock(), self.order
        moved = False
        shown = self._positions
        for rid in dirty:
            view = self._views.get(rid)
            if view is None:
                self._forget(rid)
            elif self._take(rid, view, now, order) and rid in shown:
                moved = True
        return dirty, moved

    def _rank(self) -> list[str]:
        """Every known release's row key in the sort order (sorted again only after a change)."""
        if self._ranked_stale:
            keys, views = self._sort_keys, self._views
            # Timsort: the list is mostly sorted already (new rows at its end), so this is close to a merge.
            # dict.fromkeys: a release removed and added again before this sort is listed twice.
            self._ranked = sorted(dict.fromkeys(rid for rid in self._ranked if rid in views), key=keys.__getitem__,
                                  reverse=self.order.reverse)
            self._ranked_stale = False
        return self._ranked

    def flush(self) -> None:
        """Apply every pending release change to the rows now."""
        if self._flush_timer is not None:
            self._flush_timer.stop()
            self._flush_timer = None
        self._last_flush = time.monotonic()
        dirty, moved = self._take_dirty()
        if not dirty:
            return
        positions = self._positions
        shown = set(self.row_filter.select([rid for rid in dirty if rid in self._views], self._search, self._quick))
        changed = False  # rows come or go
        repaint = []
        for rid in dirty:
            visible = rid in shown
            if (rid in positions) != visible:
                changed = True
            elif visible:
                repaint.append(positions[rid])
        if changed:  # new releases are rare after start-up; in order at once (one pass over the row keys)
            moved = self._cursor_moved  # the operator's row stays under the cursor (or its place, if it went)
            self._show(self._matching(), self.selected_key() if moved else None, top=not moved)
        else:
            if moved:
                self._schedule_resort()
            self._repaint(repaint)
        self.post_message(self.Changed())
        self._schedule_search_fill()

    def _schedule_search_fill(self) -> None:
        if self._search.unmade and self._search_timer is None:
            self._search_timer = self.set_timer(SEARCH_FILL_DELAY, self._fill_search)

    def _fill_search(self) -> None:
        """Make a chunk of the search texts no filter asked for yet; again shortly while some are left."""
        self._search_timer = None
        self._search.fill(SEARCH_FILL_CHUNK)
        if self._search.unmade:
            self._search_timer = self.set_timer(SEARCH_FILL_STEP, self._fill_search)

    def _row(self, rid: str) -> tuple[KeptCell, ...]:
        """Row ``rid``'s kept cells (:func:`~tui.model.row_cells`), made now if its view changed since they were;
        blank for a release removed whose row goes at the next flush."""
        row = self._cells.get(rid)
        if row is None:
            view = self._views.get(rid)
            if view is None:
                return _GONE
            row = self._cells[rid] = row_cells(view, self._clock())
        return row

    def _repaint(self, rows: Iterable[int]) -> None:
        """Repaint the rows at these indexes that are on screen (their cells are read when drawn)."""
        top = int(self.scroll_y) - ON_SCREEN_MARGIN
        end = int(self.scroll_y) + self.size.height + ON_SCREEN_MARGIN
        for index in rows:
            if top <= index < end:
                self.refresh_row(index)

    def _mark(self, rid: str) -> None:
        self._dirty.add(rid)
        self._schedule_flush()

    def _schedule_flush(self) -> None:
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
        top = max(0, int(self.scroll_y) - ON_SCREEN_MARGIN)
        end = int(self.scroll_y) + self.size.height + ON_SCREEN_MARGIN
        for index, rid in enumerate(self.row_keys[top:end], top):
            view = self._views.get(rid)
            row = self._cells.get(rid)
            if view is None or row is None:  # removed since; its row goes at the next flush
                continue
            new = cells(view, now)
            if any(new[k] != row[COLUMN_INDEX[k]] for k in TIMED):
                self._cells[rid] = tuple(tuple(new[k]) if k in TIMED else cell  # type: ignore[misc]
                                         for k, cell in zip(COLUMN_INDEX, row, strict=True))
                self.refresh_row(index)

    def render_lines(self, crop: Region) -> list[Strip]:
        lines = super().render_lines(crop)
        if self._undrawn and not self._dirty:
            self._undrawn = False
            self._drawn_port(self.keys_in_view())
        return lines

    # -- reading -----------------------------------------------------------------
    def keys_in_view(self) -> list[ReleaseKey]:
        """``(namespace, name)`` of the rows on screen, top to bottom."""
        top = round(self.scroll_offset.y)
        return [key_of(rid) for rid in self.row_keys[top:top + max(self.size.height, 0)]]

    def selected_key(self) -> ReleaseKey | None:
        """``(namespace, name)`` of the row under the cursor, or None when no row is shown."""
        keys = self.row_keys
        if not keys:
            return None
        return key_of(keys[min(self.cursor_row, len(keys) - 1)])

    def select(self, key: ReleaseKey) -> bool:
        """Move the cursor to ``key``'s row; False when it is not shown."""
        index = self._positions.get(row_id(key))
        if index is None:
            return False
        self.move_cursor(row=index)
        return True

    def plain_cell(self, key: ReleaseKey, column: str) -> str | None:
        """The text of one shown cell (None when the row is not shown)."""
        rid = row_id(key)
        return self._row(rid)[COLUMN_INDEX[column]][0] if rid in self._positions else None

    def row_signature(self, key: str) -> tuple[KeptCell, ...]:
        return self._row(key)

    def row_texts(self, key: str) -> dict[ColumnKey, Text]:
        row = self._row(key)
        texts = {ColumnKey(col): self._text(row[COLUMN_INDEX[col]], width) for col, width in self._widths.items()}
        if self.columns_fit.hidden:
            texts[ColumnKey(MARKER)] = Text()
        return texts

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if self.has_focus and event.cursor_row != 0:
            self._cursor_moved = True

    def on_resize(self) -> None:
        layout = fit(self.size.width - self.styles.scrollbar_size_vertical)  # room kept for the scroll bar
        if layout != self.columns_fit:
            self._lay_out(layout)

    # -- reactive watchers -------------------------------------------------------
    def watch_row_filter(self) -> None:
        self._refill()

    def watch_order(self) -> None:
        for key, _width in self.columns_fit.widths:
            self.columns[ColumnKey(key)].label = Text(self._header(key))
        now, order = self._clock(), self.order
        self._sort_keys = {rid: order.key(view, now) for rid, view in self._views.items()}
        self._ranked_stale = True
        self._resort()
        self.post_message(self.Changed())  # the header names the sort order

    def restyle(self) -> None:
        """Re-colour every cell from the current theme."""
        self._styles = tone_styles(self.app.theme_variables)
        self._texts.clear()
        self._update_count += 1
        self._clear_caches()
        self.refresh()

    # -- internals ---------------------------------------------------------------
    def _lay_out(self, layout: ColumnLayout) -> None:
        """Show the columns ``layout`` keeps, then a marker column when it leaves some out; rows are re-set."""
        selected = self.selected_key()
        self.columns_fit, self._widths = layout, layout.text_widths()
        self.clear(columns=True)
        for key, width in layout.widths:
            self.add_column(self._header(key), key=key, width=width)
        if layout.hidden:
            self.add_column(Text(layout.marker, style="reverse"), key=MARKER, width=len(layout.marker))
        self._refill(selected)
        self.post_message(self.Changed())  # the header names the columns left out

    def _header(self, key: str) -> str:
        arrow = ("▼" if self.order.reverse else "▲") if key == self.order.column else ""
        return header_label(column(key).label, arrow, self._widths[key])

    def _render_cell(self, row_index: int, column_index: int, base_style: Style, width: int,
                     cursor: bool = False, hover: bool = False) -> SegmentLines:
        if row_index < 0 or column_index < 0:  # header and labels: DataTable's own cache
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        keys = self.row_keys
        row = self._row(keys[row_index]) if row_index < len(keys) else None
        column_key = self._column_locations.get_key(column_index)
        at = COLUMN_INDEX.get(str(column_key.value)) if row is not None and column_key is not None else None
        cell = row[at] if row is not None and at is not None else None
        if cell is None:
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        # Not keyed by row: equal cells render alike wherever they are (base_style carries the zebra
        # stripe), so a re-sort or a scroll re-renders only what is new.
        key = (column_index, cell, self._styles.get(cell[1]), base_style, width, cursor, hover,
               self._show_hover_cursor, self._pseudo_class_state)
        lines = self._cell_cache.get(key)
        if lines is None:
            lines = self._cell_lines(row_index, column_index, cell, base_style, width, cursor, hover)
            self._cell_cache[key] = lines
        return lines

    def _cell_lines(self, row_index: int, column_index: int, cell: KeptCell, base_style: Style, width: int,
                    cursor: bool, hover: bool) -> SegmentLines:
        """A kept cell's line as DataTable draws it (its text in its tone over the row's style and the
        cursor's, padded to ``width``), made directly: DataTable renders each new cell through Rich's
        console (padding, styling, cropping): ~0.4 ms a line, the largest part of the first table's frame."""
        column = str(self.ordered_columns[column_index].key.value)
        text = self._text(cell, self._widths.get(column, width))
        plain = text.plain
        used = cell_len(plain)
        if used > width or "\n" in plain or text.spans:  # not a kept cell's usual shape: DataTable's way
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        fixed = row_index < self.fixed_rows or column_index < self.fixed_columns
        component, post = self._get_styles_to_render_cell(
            False, False, fixed, hover, cursor, self.show_cursor, self._show_hover_cursor,
            self.cursor_foreground_priority == "css", self.cursor_background_priority == "css")
        pre = base_style + Style.from_meta({"row": row_index, "column": column_index}) + component
        tone = text.style if isinstance(text.style, Style) else Style.parse(text.style) if text.style else None
        line = [Segment(plain, pre + tone + post if tone else pre + post)] if plain else []
        if used < width:
            line.append(Segment(" " * (width - used), pre + post))
        return [line]

    def _text(self, cell: KeptCell, width: int) -> Text:
        # Shared by equal cells (DataTable only reads them).
        key = (cell, width)
        text = self._texts.get(key)
        if text is None:
            plain, tone = cell
            text = Text(fit_text(plain, width), style=self._styles.get(tone, ""), no_wrap=True, end="")
            text.truncate(width, overflow="ellipsis")
            self._texts[key] = text
        return text

    def _matching(self) -> list[str]:
        """The row keys the filter keeps, in order: one scan of each release's kept search text and quick filters."""
        return self.row_filter.select(self._rank(), self._search, self._quick)

    def _show(self, rows: list[str], selected: ReleaseKey | None, *, top: bool) -> None:
        """Set the rows; the cursor stays on ``selected`` when it is shown, else goes to the first row
        (``top``) or stays at its index (clamped)."""
        self.set_rows(rows)
        if selected is not None and self.select(selected):
            return
        if top and self.row_count:
            self.move_cursor(row=0)

    def _refill(self, selected: ReleaseKey | None = None) -> None:
        """Show the rows the filter keeps, in order: one test per release of its kept search text (no cells
        are made) and the lines on screen."""
        self._take_dirty()  # every row is shown from the latest views
        self._show(self._matching(), selected or self.selected_key(), top=True)
        self.applied = self.row_filter
        self.post_message(self.Changed())
        self._schedule_search_fill()

    def _schedule_resort(self) -> None:
        if self._resort_timer is None:
            self._resort_timer = self.set_timer(RESORT_DELAY, self._resort)

    def _resort(self) -> None:
        if self._resort_timer is not None:
            self._resort_timer.stop()
        self._resort_timer = None
        shown = self._positions
        # The operator's row stays under the cursor; until the operator moves, the cursor stays on the first row.
        self._show([rid for rid in self._rank() if rid in shown], self.selected_key() if self._cursor_moved else None,
                   top=True)


_GONE: tuple[KeptCell, ...] = (("", "plain"),) * len(COLUMN_INDEX)  # a removed release's row until the next flush


class _SearchTexts(dict[str, str]):
    """Each row's search text (:func:`~tui.model.search_text` of its cells), made when first read: a filter
    reads them through ``__getitem__`` (:meth:`RowFilter.select <tui.model.RowFilter.select>`), so a row's
    text is made at the first filter after its change, or earlier by :meth:`fill`. ``unmade``: the rows
    whose text is not made."""

    def __init__(self, row: Callable[[str], tuple[KeptCell, ...]]):
        super().__init__()
        self._row = row
        self.unmade: set[str] = set()

    def __missing__(self, rid: str) -> str:
        self.unmade.discard(rid)
        return self._make(rid)

    def _make(self, rid: str) -> str:
        row = self._row(rid)
        text = search_text(row)
        if row is not _GONE:  # a release removed: its row goes at the next flush
            self[rid] = text
        return text

    def changed(self, rid: str) -> None:
        """Row ``rid``'s view changed: its text is made again when read."""
        self.pop(rid, None)
        self.unmade.add(rid)

    def drop(self, rid: str) -> None:
        """Row ``rid`` went."""
        self.pop(rid, None)
        self.unmade.discard(rid)

    def fill(self, count: int) -> None:
        """Make up to ``count`` of the texts not made yet."""
        for _ in range(min(count, len(self.unmade))):
            self._make(self.unmade.pop())
