"""The main screen: header, the ``/`` filter line, the release table and the footer."""

from __future__ import annotations

from collections.abc import Callable

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Input

from engine.runtime.state import (
    AccessProblems,
    ControllerChanged,
    LeaseChanged,
    PackageProblems,
    ReleaseKey,
    ReleaseRemoved,
    ReleasesListed,
    ReleaseUpdated,
)
from tui import format as fmt
from tui.engine_client import EngineClient
from tui.messages import EngineSignals, OpenDetail
from tui.model import (
    COLUMN_KEYS,
    QUICK_FILTERS,
    QuickFilter,
    RowFilter,
    SortOrder,
    TextFilter,
    column,
    namespaces,
)
from tui.screens.base import EngineScreen
from tui.screens.picker import PickerScreen
from tui.widgets.filter_input import FilterInput
from tui.widgets.header_bar import HeaderBar
from tui.widgets.key_footer import KeyFooter
from tui.widgets.release_table import ReleaseTable

QUICK = Binding.Group("Quick", compact=True)
SORT = Binding.Group("Sort", compact=True)
HEADER_REFRESH = 0.25  # seconds: counts are recomputed at most this often under an event storm
RUNNING_SHOWN = 8  # running actions the header names; the others are counted (its line is laid out per change)


class MainScreen(EngineScreen):
    """Every release, live: it follows the engine's signals (releases, lease, package problems)."""

    BINDINGS = [
        Binding("enter", "open_detail", "Details", priority=True),
        Binding("slash", "filter", "Filter"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
        *(Binding(str(i), f"quick('{q}')", q.capitalize(), group=QUICK) for i, q in enumerate(QUICK_FILTERS)),
        Binding("n", "namespace", "NS"),
        Binding("o", "sort_next", "Sort next", group=SORT),
        Binding("O", "sort_reverse", "Reverse", group=SORT),
    ]

    def __init__(self, client: EngineClient, signals: EngineSignals, clock: Callable[[], float], context: str):
        super().__init__(client, signals, clock)
        self._cluster_context = context
        self._header_dirty = True
        self._hidden_said: tuple[str, ...] = ()  # the columns left out as the header last named them

    def set_context(self, context: str) -> None:
        """The header names ``context`` (after a switch)."""
        self._cluster_context = context
        self.query_one(HeaderBar).context = context

    def compose(self) -> ComposeResult:
        header = HeaderBar(id="header")
        header.context = self._cluster_context
        header.readonly = self._client.readonly
        yield header
        yield FilterInput(id="filter")
        # Kept: engine events reach it one by one (10,000 at start-up), a query each would cost more than the event.
        # Once it drew the releases listed from storage's labels, the engine decodes the records: not before,
        # where decoding would compete with the first table for the interpreter.
        self._table = ReleaseTable(self._clock, self._client.releases(), drawn=self._client.preview_shown,
                                   id="releases")
        yield self._table
        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one(ReleaseTable).focus()
        self._signals.updated.subscribe(self, self._release_updated, immediate=True)
        self._signals.listed.subscribe(self, self._releases_listed, immediate=True)
        self._signals.removed.subscribe(self, self._release_removed, immediate=True)
        self._signals.lease.subscribe(self, self._lease_changed, immediate=True)
        self._signals.problems.subscribe(self, self._package_problems, immediate=True)
        self._signals.access.subscribe(self, self._access_problems, immediate=True)
        self._signals.controller.subscribe(self, self._controllers_changed, immediate=True)
        self._controllers_changed(None)
        self._access_problems(self._client.access())  # published before this screen subscribed?
        self._package_problems(self._client.package_problems())  # so too the files bad at start
        # The engine starts beside the mounting: releases said before the subscription would be missed.
        self.query_one(ReleaseTable).sync(self._client.releases())
        self.set_interval(HEADER_REFRESH, self._refresh_header)
        self.set_interval(1.0, self.tick)
        self._refresh_header()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # enter opens the detail only from the table: in the filter line it keeps the filter.
        if action == "open_detail":
            return isinstance(self.focused, ReleaseTable)
        if action == "clear_filter":  # only a kept filter: escape otherwise goes on to whoever else takes it
            return bool(self.query_one(FilterInput).value)
        return True

    # -- engine signals ------------------------------------------------------------
    def _release_updated(self, event: ReleaseUpdated) -> None:
        self._table.upsert(event.view)

    def _releases_listed(self, event: ReleasesListed) -> None:
        self._table.upsert_many(event.views)

    def _release_removed(self, event: ReleaseRemoved) -> None:
        self._table.remove_release(event.key)

    def _lease_changed(self, lease: LeaseChanged) -> None:
        self.query_one(HeaderBar).lease = lease

    def _controllers_changed(self, _event: ControllerChanged | None) -> None:
        """The number of live controllers (as the engine decides it, engine.runtime.cockpit.attach)."""
        self.query_one(HeaderBar).controllers = len(self._client.controllers())

    def _package_problems(self, event: PackageProblems) -> None:
        """The package files that are bad now (none: all good)."""
        self.query_one(HeaderBar).package_errors = tuple(sorted({err.file.name for err in event.errors}))

    def _access_problems(self, access: AccessProblems) -> None:
        """Refused storage permissions, storage never listed, and the scope note, kept in the header until
        resolved."""
        self.query_one(HeaderBar).access = (*access.missing, *access.unread,
                                            *(f"note: {access.scope}",) * bool(access.scope))

    def tick(self) -> None:
        """Once a second: ages and the progress of running actions."""
        # At shutdown the widgets are removed before the screen's timers stop.
        for table in self.query(ReleaseTable):
            table.tick()
        self._header_dirty = True

    # -- what the app's actions act on -----------------------------------------------
    def selected_release(self) -> ReleaseKey | None:
        return self.query_one(ReleaseTable).selected_key()

    # -- header ------------------------------------------------------------------
    @on(ReleaseTable.Changed)
    def _table_changed(self) -> None:
        self.keys_follow(self.selected_release())  # another row under the cursor, or its owner changed
        self._header_dirty = True
        # Releases that came or went and the columns the width leaves out are said at once (the first rows at
        # launch came under "0 releases" for up to HEADER_REFRESH); other changes (states, revisions, filter
        # keystrokes: a storm of them) wait for the interval.
        table = self._table
        if self.query_one(HeaderBar).total != table.total or self._hidden_said != table.columns_fit.hidden:
            self._refresh_header()

    def _refresh_header(self) -> None:
        if not self._header_dirty or not self.query(HeaderBar) or not self.query(ReleaseTable):
            return  # nothing to do, or shutting down / recomposing
        self._header_dirty = False
        table = self.query_one(ReleaseTable)
        header = self.query_one(HeaderBar)
        header.counts = table.state_counts  # kept by the table per change: no pass over every release
        header.total = table.total
        header.shown = table.shown_count
        order = table.order
        label = order.column.replace("_", " ")
        hidden = self._hidden_said = table.columns_fit.hidden  # the table's "+N" column: what the width leaves out
        shown_view = table.row_filter.describe(self._client.watched_namespaces())
        header.view = (f"{shown_view} · sort {label} {'▼' if order.reverse else '▲'}"
                       + (f" · +{len(hidden)} hidden: {', '.join(column(k).label for k in hidden)}" if hidden else ""))
        now = self._clock()
        shown = tuple(f"⟳ {fmt.progress_text(v.running, now)} {v.namespace}/{v.name}"
                      for v in table.running(RUNNING_SHOWN) if v.running is not None)
        more = table.running_count - len(shown)
        header.running = (*shown, f"+{more} more") if more > 0 and shown else shown

    # -- actions -----------------------------------------------------------------
    def action_open_detail(self) -> None:
        key = self.selected_release()
        if key is not None:
            self.post_message(OpenDetail(key))

    @on(DataTable.RowHighlighted, "#releases")
    def _row_highlighted(self) -> None:
        self.keys_follow(self.selected_release())

    @on(DataTable.RowSelected, "#releases")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open_detail()

    def action_filter(self) -> None:
        box = self.query_one(FilterInput)
        # Shown through its inline style, not a class: a hidden widget refuses focus until CSS is
        # refreshed, and keys typed straight after "/" must land in the line.
        box.display = True
        box.focus()

    def action_clear_filter(self) -> None:
        """escape on the list drops a kept filter, as in k9s (in the filter line, the line's own escape)."""
        self.query_one(FilterInput).action_clear_filter()

    @on(Input.Changed, "#filter")
    def _filter_typed(self, event: Input.Changed) -> None:
        table = self.query_one(ReleaseTable)
        table.row_filter = RowFilter(TextFilter(event.value), table.row_filter.quick, table.row_filter.namespace)

    @on(Input.Submitted, "#filter")
    def _filter_kept(self) -> None:
        box = self.query_one(FilterInput)
        box.display = bool(box.value)
        self.query_one(ReleaseTable).focus()

    @on(FilterInput.Cleared)
    def _filter_cleared(self) -> None:
        self.query_one(FilterInput).display = False
        self.query_one(ReleaseTable).focus()

    def action_quick(self, quick: QuickFilter) -> None:
        table = self.query_one(ReleaseTable)
        table.row_filter = RowFilter(table.row_filter.text, quick, table.row_filter.namespace)

    def action_namespace(self) -> None:
        table = self.query_one(ReleaseTable)
        views = table.views
        names = namespaces(views)
        counts = {ns: sum(1 for v in views if v.namespace == ns) for ns in names}
        choices = [(f"all namespaces ({len(views)})", "")]  # "" = all (no namespace is empty)
        choices += [(f"{ns} ({counts[ns]})", ns) for ns in names]
        current = table.row_filter.namespace
        initial = names.index(current) + 1 if current in names else 0

        def chosen(ns: str | None) -> None:
            if ns is not None:  # None: cancelled
                table.row_filter = RowFilter(table.row_filter.text, table.row_filter.quick, ns or None)

        self.app.push_screen(PickerScreen[str]("Show namespace", choices, initial), chosen)

    def action_sort_next(self) -> None:
        table = self.query_one(ReleaseTable)
        table.order = table.order.next_column()

    def action_sort_reverse(self) -> None:
        table = self.query_one(ReleaseTable)
        table.order = table.order.flipped()

    @on(DataTable.HeaderSelected, "#releases")
    def _header_clicked(self, event: DataTable.HeaderSelected) -> None:
        table = self.query_one(ReleaseTable)
        column = str(event.column_key.value)
        if column in COLUMN_KEYS:
            order = table.order
            table.order = order.flipped() if order.column == column else SortOrder(column)
