"""The release detail screen: Overview, History, Values, Manifest, Diff, Resources, Events and Notes tabs."""

from __future__ import annotations

from collections.abc import Callable

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.content import Content
from textual.reactive import reactive
from textual.timer import Timer
from textual.widgets import Static, TabbedContent, TabPane

from engine.monitor.events import KubeEvent, belongs
from engine.runtime.state import EntryLogged, ReleaseKey, ReleaseRemoved, ReleaseUpdated, ReleaseView
from tui import format as fmt
from tui.engine_client import EngineClient
from tui.messages import EngineSignals
from tui.screens.base import EngineScreen
from tui.screens.resource import ResourceScreen
from tui.widgets.diff_pane import DiffPane
from tui.widgets.event_log import EventLog
from tui.widgets.header_bar import TONE_STYLE
from tui.widgets.history_table import HistoryTable
from tui.widgets.key_footer import KeyFooter
from tui.widgets.manifest_pane import ManifestPane
from tui.widgets.notes_pane import NotesPane
from tui.widgets.overview import OverviewPanel
from tui.widgets.resources_pane import ResourcesPane
from tui.widgets.values_pane import ValuesPane

TABS = (("overview", "Overview"), ("history", "History"), ("values", "Values"), ("manifest", "Manifest"),
        ("diff", "Diff"), ("resources", "Resources"), ("events", "Events"), ("notes", "Notes"))
KUBE_REDRAW = 0.25  # seconds: a burst of Kubernetes Events costs one redraw
TABS_GROUP = Binding.Group("Tabs", compact=True)
FOCUS_IN_TAB = "OverviewPanel, HistoryTable, ValuesPane TextView, ManifestPane TextView, DiffPane TextView, " \
               "ResourcesPane DataTable, EventLog, NotesPane TextView"


def detail_title(view: ReleaseView | None, key: ReleaseKey, now: float) -> Content:
    """The line above the tabs: which release, its revision and state, and what is running."""
    parts: list[str | tuple[str, str]] = [(f"{key[0]}/{key[1]}", "bold $text-primary")]
    if view is None:
        parts.append(("   removed: no stored revision and no package", TONE_STYLE["warn"]))
        return Content.assemble(*parts)
    obs = view.observation
    status, tone = fmt.helm_status_text(view)
    parts += [f"   rev {obs.version if obs else '-'} ", (status, TONE_STYLE[tone])]
    for label, (text, t) in (("state", fmt.state_text(view)),
                             ("ready", fmt.ready_text(view.ready)), ("monitor", fmt.monitor_text(view.monitor))):
        parts += [f"   {label} ", (text, TONE_STYLE[t])]
    if view.maintenance:
        parts.append(("   ✎ maintenance", TONE_STYLE["warn"]))
    if view.suspended:
        parts.append(("   ⏸ suspended", TONE_STYLE["warn"]))
    if view.running is not None:
        parts.append((f"   ⟳ {fmt.progress_text(view.running, now)}", TONE_STYLE["busy"]))
    return Content.assemble(*parts)


class ReleaseDetailScreen(EngineScreen):
    """Everything about one release, live: it follows the engine's signals for its release."""

    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        *(Binding(str(i + 1), f"tab('{tab}')", label, group=TABS_GROUP) for i, (tab, label) in enumerate(TABS)),
        Binding("x", "reveal", "Secrets"),
        Binding("a", "computed", "Computed"),
    ]

    revision: reactive[int | None] = reactive(None, init=False)
    """The revision the Values, Manifest and Notes tabs show (the latest unless picked in History)."""

    def __init__(self, client: EngineClient, signals: EngineSignals, key: ReleaseKey, clock: Callable[[], float],
                 tab: str = "overview"):
        super().__init__(client, signals, clock)
        self.key = key
        self._tab = tab
        self._pinned = False  # True once the operator picked a revision in History
        self._objects: list[tuple[str, str, str]] = []  # (kind, namespace, name): whose Kubernetes Events
        self._objects_of: int | None = None  # the revision whose manifest listed them (None: the monitor's)
        self._kube_timer: Timer | None = None
        self._unwatch: Callable[[], None] = lambda: None

    def compose(self) -> ComposeResult:
        yield Static(id="detail-title")
        with TabbedContent(initial=self._tab, id="tabs"):
            with TabPane("Overview", id="overview"):
                yield OverviewPanel()
            with TabPane("History", id="history"):
                yield HistoryTable(id="history-table")
            with TabPane("Values", id="values"):
                yield ValuesPane(self._client, self.key, id="values-pane")
            with TabPane("Manifest", id="manifest"):
                yield ManifestPane(self._client, self.key, id="manifest-pane")
            with TabPane("Diff", id="diff"):
                yield DiffPane(self._client, self.key, id="diff-pane")
            with TabPane("Resources", id="resources"):
                yield ResourcesPane(self._client, self.key, id="resources-pane")
            with TabPane("Events", id="events"):
                yield EventLog(id="event-log")
            with TabPane("Notes", id="notes"):
                yield NotesPane(self._client, self.key, id="notes-pane")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one(EventLog).show(self._client.events(self.key))
        self._unwatch = self._client.watch_kube_events(self.key[0], self._kube_event)
        self.release_updated(self._client.release(self.key))
        self._signals.updated.subscribe(self, self._release_updated, immediate=True)
        self._signals.removed.subscribe(self, self._release_removed, immediate=True)
        self._signals.logged.subscribe(self, self._event_logged, immediate=True)
        self.set_interval(1.0, self.tick)

    def on_unmount(self) -> None:
        self._unwatch()

    # -- Kubernetes Events -------------------------------------------------------------
    def _kube_event(self, event: KubeEvent) -> None:
        # Cost per event: this release's objects only; redrawn at most every KUBE_REDRAW seconds.
        # Calls queued on the loop may arrive after the screen (or the app) is gone.
        if self._kube_timer is None and self.is_attached and self.app.is_running and belongs(event, self._objects):
            self._kube_timer = self.set_timer(KUBE_REDRAW, self._show_kube_events)

    def _show_kube_events(self) -> None:
        self._kube_timer = None
        self.query_one(EventLog).set_kube(self._client.kube_events(self.key[0], self._objects))

    def _follow_objects(self, view: ReleaseView | None, latest: int | None) -> None:
        """Whose Kubernetes Events to show: the monitor's resources, else the latest manifest's objects."""
        if view is not None and view.monitor.resources:
            self._objects_of = None
            self._set_objects([(r.kind, r.namespace, r.name) for r in view.monitor.resources])
        elif latest is not None and latest != self._objects_of:
            self._objects_of = latest
            self._load_objects(latest)

    def _set_objects(self, objects: list[tuple[str, str, str]]) -> None:
        if objects != self._objects:
            self._objects = objects
            self._show_kube_events()

    @work(exclusive=True, group="event-objects")
    async def _load_objects(self, revision: int) -> None:
        try:
            found = await self._client.objects(self.key, revision)
        except Exception:  # no manifest: no Kubernetes Events to match (the Manifest tab says why)
            return
        self._set_objects([(o.kind, o.namespace, o.name) for o in found])

    # -- engine signals ------------------------------------------------------------
    def _release_updated(self, event: ReleaseUpdated) -> None:
        if event.view.key == self.key:
            self.release_updated(event.view)
            self.keys_follow(self.key)  # the footer follows its owner

    def _release_removed(self, event: ReleaseRemoved) -> None:
        if event.key == self.key:
            self.release_updated(None)

    def _event_logged(self, event: EntryLogged) -> None:
        if event.event.key == self.key:
            self.query_one(EventLog).append(event.event)

    def release_updated(self, view: ReleaseView | None) -> None:
        """A new snapshot of this release (None: it left the engine's view)."""
        now = self._clock()
        self.query_one("#detail-title", Static).update(detail_title(view, self.key, now))
        history = self._client.history(self.key)
        if view is not None:
            controller = self._client.controller(view.attached) if view.attached is not None else None
            self.query_one(OverviewPanel).show(view, history, now, controller)
            self.query_one(ResourcesPane).show(view.monitor, history[0].version if history else None)
        self.query_one(HistoryTable).show(history)
        self.query_one(DiffPane).show_history(history)
        latest = history[0].version if history else None
        self._follow_objects(view, latest)
        if not self._pinned or self.revision not in {o.version for o in history}:
            self._pinned = False
            self.revision = latest

    def tick(self) -> None:
        """Once a second, while an action runs: its elapsed time."""
        view = self._client.release(self.key)
        # At shutdown the widgets are removed before the screen's timers stop.
        if view is not None and view.running is not None and self.query("#detail-title"):
            self.release_updated(view)

    # -- what the app's actions act on -----------------------------------------------
    def selected_release(self) -> ReleaseKey | None:
        return self.key

    def rollback_target(self) -> int | None:
        """On the History tab, the highlighted revision; elsewhere None (the app asks for one)."""
        if self.query_one(TabbedContent).active != "history":
            return None
        return self.query_one(HistoryTable).highlighted_revision()

    # -- reactive ------------------------------------------------------------------
    def watch_revision(self, revision: int | None) -> None:
        self.query_one(ValuesPane).revision = revision
        self.query_one(ManifestPane).revision = revision
        self.query_one(NotesPane).revision = revision

    # -- keys ----------------------------------------------------------------------
    def action_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab

    @on(TabbedContent.TabActivated)
    def _focus_tab(self, event: TabbedContent.TabActivated) -> None:
        # Arrow keys then scroll the tab's content without a click.
        target = event.pane.query(FOCUS_IN_TAB).first()
        target.focus()

    def action_reveal(self) -> None:
        values, manifest, diff = self.query_one(ValuesPane), self.query_one(ManifestPane), self.query_one(DiffPane)
        reveal = not values.reveal
        values.reveal = manifest.reveal = diff.reveal = self.query_one(NotesPane).reveal = reveal
        self.notify("Secrets revealed (x masks them again)" if reveal else "Secrets masked")

    def action_computed(self) -> None:
        pane = self.query_one(ValuesPane)
        pane.computed = not pane.computed
        self.query_one(TabbedContent).active = "values"

    @on(ResourcesPane.Open)
    def _open_resource(self, message: ResourcesPane.Open) -> None:
        self.app.push_screen(ResourceScreen(self._client, self._signals, self._clock, message.ref))

    @on(HistoryTable.RevisionChosen)
    def _revision_chosen(self, message: HistoryTable.RevisionChosen) -> None:
        self._pinned = True
        self.revision = message.revision
        self.notify(f"Values, Manifest and Notes now show revision {message.revision}")
