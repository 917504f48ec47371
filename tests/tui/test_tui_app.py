"""The app driven by keys over fixed engine state (no cluster): filters, live cells, refusals, themes, help."""

from __future__ import annotations

import gc
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Input
from textual.widgets._footer import FooterKey

from engine.base.fields import PackageError
from engine.base.masking import Masker
from engine.monitor.status import MonitorStatus
from engine.runtime.state import LogEntry, PackageProblems, ReleasesListed, RunningAction
from engine.storage.records import ListedRevision
from testkit.fixtures import (
    FIXED_NOW,
    FLAKY,
    LEGACY,
    SETTINGS,
    WEB,
    announce_lease,
    bulk_engine,
    fixed_clock,
    fixed_engine,
    log_event,
    set_engine_status,
)
from tui.app import NO_RELEASE_HERE, HelmdeckApp
from tui.messages import EngineMessage
from tui.model import COLUMN_INDEX, RowFilter, TextFilter, row_id
from tui.operations import BY_NAME
from tui.screens.confirm import ConfirmScreen
from tui.screens.detail import ReleaseDetailScreen
from tui.screens.help import HelpScreen
from tui.screens.main import MainScreen
from tui.settings import Settings
from tui.widgets import release_table
from tui.widgets.header_bar import HeaderBar
from tui.widgets.release_table import ReleaseTable
from tui.widgets.text_view import TextView

SIZE = (160, 30)


class Recorder:
    """Stands in for App.notify: keeps (message, title, severity)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []

    def __call__(self, message: str, *, title: str = "", severity: str = "information", **_: Any) -> None:
        self.calls.append((message, title, severity))

    def text(self) -> str:
        return "\n".join(f"{t}: {m}" for m, t, _ in self.calls)


def make_app(*, readonly: bool = False, online: bool = True, **kwargs: Any) -> tuple[HelmdeckApp, Recorder]:
    """The app over the fixed engine; ``online``: its gate answers as a connected engine's would."""
    engine = fixed_engine(readonly=readonly)
    engine.gate.online = online
    app = HelmdeckApp(engine, context="test", start_engine=False, clock=fixed_clock,
                      masker=Masker(b"test"), **kwargs)
    recorder = Recorder()
    app.notify = recorder  # type: ignore[method-assign]
    return app, recorder


async def filled_table(app: HelmdeckApp, pilot: Pilot[None]) -> ReleaseTable:
    """The main screen's table once every row the engine has shown is in it (it fills in steps)."""
    table = app.query_one(ReleaseTable)
    while table.busy:
        await pilot.pause(0.05)
    return table


def shown_names(app: HelmdeckApp) -> list[str]:
    table = app.query_one(ReleaseTable)
    return [str(row.key.value).split("/")[1] for row in table.ordered_rows]


def footer(app: HelmdeckApp) -> dict[str, bool]:
    """Footer descriptions -> enabled."""
    return {k.description: not k.has_class("-disabled") for k in app.screen.query(FooterKey) if k.description}


def repaints(monkeypatch: pytest.MonkeyPatch, table: ReleaseTable) -> list[int]:
    """The row indexes ``table`` repaints from now on, in order (its ``refresh_row`` spied on)."""
    painted: list[int] = []
    original = table.refresh_row

    def spy(index: int) -> Any:
        painted.append(index)
        return original(index)

    monkeypatch.setattr(table, "refresh_row", spy)
    return painted


async def test_live_event_repaints_only_the_affected_row(monkeypatch: pytest.MonkeyPatch) -> None:
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(ReleaseTable)
        await pilot.pause()
        painted = repaints(monkeypatch, table)
        set_engine_status(app.engine, WEB, ready=True)
        await pilot.pause()
        index = table.get_row_index("helmdeck-demo/web")
        assert painted == [index]
        assert table.plain_cell(WEB, "ready") == "✔ yes"
        # as drawn, not only kept: the line drawn before the change is not the one drawn now
        line = table.render_line(index - int(table.scroll_y) + table.header_height).text
        assert " web " in line and "✔ yes" in line, line


async def test_rows_off_screen_are_not_repainted_and_show_their_latest_cells_when_scrolled_to(
        monkeypatch: pytest.MonkeyPatch) -> None:
    app = HelmdeckApp(bulk_engine(200), context="test", start_engine=False, clock=fixed_clock)
    async with app.run_test(size=(160, 20)) as pilot:
        table = app.query_one(ReleaseTable)
        last = table.views[-1].key  # sorted by namespace then name: the last row is far below
        painted = repaints(monkeypatch, table)
        set_engine_status(app.engine, last, state="Locked")
        await pilot.pause(0.5)
        assert painted == []  # nothing on screen changed: no repaint
        table.select(last)
        await pilot.pause()
        index = table.get_row_index(f"{last[0]}/{last[1]}")
        line = table.render_line(index - int(table.scroll_y) + table.header_height).text
        assert "⧗ Locked" in line and f"{last[1]} " in line


async def test_a_frame_after_a_cell_write_finds_its_lines_by_index() -> None:
    # DataTable remade its list of every row after each cell write to find a screen line's row (per event).
    app = HelmdeckApp(bulk_engine(200), context="test", start_engine=False, clock=fixed_clock)
    async with app.run_test(size=(160, 20)) as pilot:
        table = await filled_table(app, pilot)
        first = table.selected_key()
        assert first is not None
        table._ordered_row_cache.clear()
        set_engine_status(app.engine, first, state="Locked")
        await pilot.pause(0.2)
        await pilot.press("down")
        assert table.plain_cell(first, "state") == "⧗ Locked"
        assert len(table._ordered_row_cache) == 0  # drawn and scrolled without the list of every row
        assert table._get_offsets(0) == (table._header_row_key, 0)
        assert table._get_offsets(2) == (table._row_locations.get_key(1), 0)
        with pytest.raises(LookupError):
            table._get_offsets(201)


async def test_a_click_selects_the_row_under_the_pointer() -> None:
    # Rendered cells are shared by equal cells of other rows; their segments carried the row index of
    # the row that rendered them first, so a click on an equal cell selected that row.
    app = HelmdeckApp(bulk_engine(200), context="test", start_engine=False, clock=fixed_clock)
    async with app.run_test(size=(160, 20)) as pilot:
        table = await filled_table(app, pilot)
        await pilot.pause()
        for line in (5, 3, 7):
            assert await pilot.click(ReleaseTable, offset=(2, line))  # the NAMESPACE cell: equal on many rows
            assert table.cursor_row == line - 1  # the header is line 0
        table.scroll_to(y=50, animate=False)
        await pilot.pause()
        assert await pilot.click(ReleaseTable, offset=(2, 3))
        assert table.cursor_row == 52


async def test_filters_quick_filters_and_namespaces() -> None:
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        assert shown_names(app) == ["flaky", "settings", "web", "legacy-api"]
        await pilot.press("slash", *"fla", "enter")
        assert shown_names(app) == ["flaky"]
        assert isinstance(app.focused, ReleaseTable)
        await pilot.press("slash", "escape")
        assert shown_names(app) == ["flaky", "settings", "web", "legacy-api"]
        await pilot.press("1")
        assert shown_names(app) == ["flaky"]
        await pilot.press("4")
        assert shown_names(app) == ["settings"]
        await pilot.press("0", "n")
        await pilot.pause()
        await pilot.press("down", "down", "enter")  # all, helmdeck-demo, legacy
        await pilot.pause()
        assert shown_names(app) == ["legacy-api"]


async def test_escape_on_the_list_drops_a_kept_filter() -> None:
    # As k9s: escape on the list clears the filter kept with enter (it did nothing; only "/" then escape did).
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("slash", *"fla", "enter")
        assert shown_names(app) == ["flaky"] and isinstance(app.focused, ReleaseTable)
        await pilot.press("escape")
        assert shown_names(app) == ["flaky", "settings", "web", "legacy-api"]
        assert isinstance(app.focused, ReleaseTable)


async def test_a_package_file_error_is_toasted_once_while_it_lasts() -> None:
    # Every reload (any file's change) toasted every error again: the toasts piled up over the table.
    app, recorder = make_app()
    one, two = (PackageError(Path(f"/pk/{n}.yaml"), "spec.chart", "is required") for n in ("a", "b"))
    async with app.run_test(size=SIZE) as pilot:
        for errors in ((one,), (one,), (one, two), (two,), (one, two)):
            app.signals.publish(PackageProblems(errors))
            await pilot.pause()
    toasts = [m for m, t, _ in recorder.calls if t == "Package file error"]
    assert [t.split(":")[0] for t in toasts] == ["/pk/a.yaml", "/pk/b.yaml", "/pk/a.yaml"]  # a again: it came back


async def test_sort_keys_and_header_click() -> None:
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("o")  # namespace -> name
        await pilot.pause()
        assert shown_names(app) == ["flaky", "legacy-api", "settings", "web"]
        await pilot.press("O")
        await pilot.pause()
        assert shown_names(app) == ["web", "settings", "legacy-api", "flaky"]
        table = app.query_one(ReleaseTable)
        assert str(table.columns[table.ordered_columns[1].key].label) == "NAME ▼"
        rev_x = sum(c.get_render_width(table) for c in table.ordered_columns[:4]) + 1
        await pilot.click(ReleaseTable, offset=(rev_x, 0))  # the REV header
        await pilot.pause()
        assert table.order.column == "revision"


async def test_a_filter_keystroke_sets_the_rows_from_kept_search_texts_without_widget_work_per_row() -> None:
    engine = bulk_engine(1000)
    app = HelmdeckApp(engine, context="test", start_engine=False, clock=fixed_clock)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = await filled_table(app, pilot)
        assert table.row_count == 1000
        made: list[Any] = []
        drawn: list[str] = []
        take, texts = table._take, table.row_texts

        def counted_take(*args: Any) -> Any:
            made.append(args)
            return take(*args)

        def counted_texts(key: str) -> Any:
            drawn.append(key)
            return texts(key)

        table._take = counted_take  # type: ignore[method-assign,assignment]
        table.row_texts = counted_texts  # type: ignore[method-assign]
        await pilot.press("slash")
        while not isinstance(app.focused, Input):  # the filter line shows (slow under load)
            await pilot.pause(0.05)
        await pilot.press("s")  # every release matches "s": the whole table again
        while table.row_filter.text.source != "s":
            await pilot.pause(0.05)
        assert table.row_filter.text.source == "s" and not made  # no cells made: the kept texts are searched
        assert table.row_count == 1000 and not table.busy  # every row at once
        assert len(set(drawn)) <= SIZE[1]  # at most the rows on screen are made into cells (none: drawn alike)
        names = table.row_keys
        assert names[:3] == ["team-00/svc-0000", "team-00/svc-0010", "team-00/svc-0020"]
        await pilot.press("v", "c", "minus", "0", "0", "9")  # "svc-009": svc-0090 … svc-0099
        await pilot.pause()
        assert sorted(key.split("/")[1] for key in table.row_keys) == [f"svc-{i:04d}" for i in range(90, 100)]
        rendered: list[str] = []
        render_row = table._render_line_in_row

        def counted_row(row_key: Any, *args: Any, **kwargs: Any) -> Any:
            if row_key is not table._header_row_key:
                rendered.append(str(row_key.value))
            return render_row(row_key, *args, **kwargs)

        table._render_line_in_row = counted_row  # type: ignore[method-assign]
        await pilot.press(*["backspace"] * 7)  # the whole table again: its lines on screen were drawn before
        await pilot.pause()
        # drawn from the lines kept by what they show, but the rows the cursor left and came to
        assert table.row_count == 1000 and set(rendered) <= {"team-00/svc-0090", "team-00/svc-0000"}, rendered
        lines = [table.render_line(y).text for y in range(1, 4)]
        assert [line.split()[:2] for line in lines] == [["team-00", f"svc-00{i}0"] for i in range(3)]


def counted_sets(table: ReleaseTable) -> list[int]:
    """A list that gets an entry per ``set_rows`` call of ``table`` from now on."""
    sets: list[int] = []
    set_rows = table.set_rows

    def counted(keys: Any) -> None:
        sets.append(1)
        set_rows(keys)

    table.set_rows = counted  # type: ignore[method-assign]
    return sets


async def test_a_burst_of_new_releases_is_shown_in_order_in_one_pass() -> None:
    # At start-up the storage list arrives in bursts: each burst is merged into the sorted rows at once.
    engine = bulk_engine(400)
    app = HelmdeckApp(engine, context="test", start_engine=False, clock=fixed_clock)
    async with app.run_test(size=SIZE) as pilot:
        table = await filled_table(app, pilot)
        sets = counted_sets(table)
        web = app.engine.release(table.views[0].key)
        assert web is not None and web.observation is not None
        for i in range(300):  # a burst of new releases sorting first, then one sorting among them
            name = f"svc-{i:03d}" if i else "svc-0000a"
            table.upsert(replace(web, name=name, observation=replace(web.observation, name=name)))
        table.flush()
        assert len(sets) == 2 and not table.busy  # the first at once (calm), the other 299 in one pass
        keys = table.row_keys
        assert len(keys) == 700
        assert keys == sorted(keys, key=table._sort_keys.__getitem__)
        assert "team-00/svc-0000a" in keys[:3]


async def test_releases_listed_from_storage_labels_reach_the_table_as_one_event_and_one_pass() -> None:
    # At start-up a page of the labels list (5,000 releases) is one engine event, not one per release.
    engine = bulk_engine(10)
    app = HelmdeckApp(engine, context="test", start_engine=False, clock=fixed_clock)
    async with app.run_test(size=SIZE) as pilot:
        table = await filled_table(app, pilot)
        said: list[object] = []
        engine.subscribe(said.append)
        sets = counted_sets(table)
        engine.book.reading = True  # the engine starts: storage not read yet
        engine.book.preview([ListedRevision(f"listed-{i % 3}", f"rel-{i}", 1, "deployed") for i in range(500)])
        await pilot.pause(0.2)
        assert [type(e) for e in said] == [ReleasesListed]
        assert len(sets) == 1 and not table.busy
        keys = table.row_keys
        assert len(keys) == 510 and keys == sorted(keys, key=table._sort_keys.__getitem__)
        assert keys.index("listed-0/rel-3") < keys.index("listed-0/rel-12")  # natural order, as k9s
        assert table.plain_cell(("listed-1", "rel-1"), "chart") == "…"  # the record is not decoded yet


async def test_a_rows_cells_are_made_when_drawn_and_its_search_text_when_a_filter_reads_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # 10,000 releases listed at start-up: their cells and search texts were made before the first frame (~0.1 s
    # of CPU at 10,000, bench/tui_launch.py); only the rows on screen need cells for it.
    monkeypatch.setattr(release_table, "SEARCH_FILL_DELAY", 3600.0)  # no texts made ahead here
    app = HelmdeckApp(bulk_engine(1000), context="test", start_engine=False, clock=fixed_clock)
    async with app.run_test(size=SIZE) as pilot:
        table = await filled_table(app, pilot)
        await pilot.pause()
        assert table.row_count == 1000
        assert 0 < len(table._cells) <= SIZE[1] and not dict(table._search)  # the rows drawn, no search text
        table.row_filter = RowFilter(TextFilter("svc-099"))  # rows never drawn: their texts are made now
        await pilot.pause()
        assert sorted(k.split("/")[1] for k in table.row_keys) == [f"svc-{i:04d}" for i in range(990, 1000)]
        assert len(table._search) == 1000 and not table._search.unmade
        assert table.plain_cell(("team-09", "svc-0999"), "name") == "svc-0999"


async def test_search_texts_no_filter_asked_for_are_made_once_the_table_is_calm(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(release_table, "SEARCH_FILL_DELAY", 0.05)
    monkeypatch.setattr(release_table, "SEARCH_FILL_CHUNK", 300)  # four steps
    app = HelmdeckApp(bulk_engine(1000), context="test", start_engine=False, clock=fixed_clock)
    async with app.run_test(size=SIZE) as pilot:
        table = await filled_table(app, pilot)
        for _ in range(100):
            if not table._search.unmade:
                break
            await pilot.pause(0.05)
        assert len(table._search) == 1000 and not table._search.unmade
        view = table.views[0]
        assert "⚠" not in table._search[row_id(view.key)]
        table.upsert(replace(view, warnings=3))  # a change: its text is made again
        await filled_table(app, pilot)
        for _ in range(100):
            if not table._search.unmade:
                break
            await pilot.pause(0.05)
        assert "⚠ 3" in table._search[row_id(view.key)]


async def test_a_filtered_row_reappears_when_an_event_makes_it_match() -> None:
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("3")
        assert shown_names(app) == ["web"]
        set_engine_status(app.engine, SETTINGS, state="Drifted")
        await pilot.pause(0.5)
        assert shown_names(app) == ["settings", "web"]
        set_engine_status(app.engine, WEB, state="InSync", monitor=MonitorStatus("active"))
        await pilot.pause(0.5)
        assert shown_names(app) == ["settings"]


async def test_a_release_said_before_the_main_screen_subscribed_is_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    # The engine starts while the main screen mounts: an event the app publishes between the table's
    # making and the screen's subscribing reached nobody (one row of 300 missing at start-up).
    app, _ = make_app()
    original = MainScreen.on_mount

    def early(screen: MainScreen) -> None:
        set_engine_status(app.engine, WEB, state="Locked")
        app.on_engine_message(EngineMessage())  # published now, before the subscription
        original(screen)

    monkeypatch.setattr(MainScreen, "on_mount", early)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.2)
        assert app.query_one(ReleaseTable).plain_cell(WEB, "state") == "⧗ Locked"


async def test_package_files_bad_at_start_are_in_the_header() -> None:
    # The engine read the folder before the main screen subscribed: the files' errors came as toasts only,
    # and the header's line naming the bad files came after the next change of a file.
    app, recorder = make_app()
    app.engine.controller.package_errors = [PackageError(Path("/pk/bad.yaml"), "spec.chart", "is required")]
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.2)
        assert app.query_one(HeaderBar).package_errors == ("bad.yaml",)
        # The toasts go; the palette says every error again.
        [command] = [c for c in app.get_system_commands(app.screen) if c.title.startswith("Package file errors")]
        command.callback()
    assert recorder.calls[-1][:2] == ("/pk/bad.yaml: spec.chart: is required", "Package file errors (1)")


async def test_releases_listed_before_the_main_screen_mounted_are_all_shown_as_it_mounts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The engine lists storage first: its labels' views may be made before the screen subscribes. They were
    # taken one by one, the first shown at once and the rest a flush interval later, a frame apart.
    app, _ = make_app()
    seen: list[tuple[int, int, bool]] = []
    original = MainScreen.on_mount

    def early(screen: MainScreen) -> None:
        app.engine.book.reading = True
        app.engine.book.preview([ListedRevision(f"listed-{i % 3}", f"rel-{i}", 1, "deployed") for i in range(200)])
        original(screen)
        table = screen.query_one(ReleaseTable)
        seen.append((table.row_count, table.total, table.busy))

    monkeypatch.setattr(MainScreen, "on_mount", early)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
    total = seen[0][1]
    assert total >= 200 and seen == [(total, total, False)]


async def test_a_filter_keystroke_before_a_pending_redraw_shows_the_latest_views() -> None:
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(ReleaseTable)
        await pilot.pause(0.2)
        web = app.engine.release(WEB)
        assert web is not None and web.observation is not None
        table.upsert(replace(web, state="Drifted"))  # calm: drawn at once
        table.upsert(replace(web, state="Locked"))  # within the redraw interval: waits
        new = replace(web, name="web-2", observation=replace(web.observation, name="web-2"))
        table.upsert(new)  # a new release, waiting too
        table.row_filter = RowFilter(TextFilter("web"))  # refilled before the redraw
        await pilot.pause(0.2)
        assert table.plain_cell(WEB, "state") == "⧗ Locked"
        assert table.plain_cell(new.key, "name") == "web-2"


async def test_readonly_removes_every_action_key_and_refuses_them() -> None:
    app, notes = make_app(readonly=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        keys = footer(app)
        for label in ("Upgrade", "Rollback", "Test", "Pause", "Maint", "Suspend", "Unlock", "Cleanup", "Uninstall"):
            assert label not in keys
        assert keys["Help"] and keys["Quit"]
        await pilot.press("u", "D")
        assert len(notes.calls) == 2 and all("read-only" in m for m, _, _ in notes.calls)
        commands = [c.title for c in app.get_system_commands(app.screen)]
        assert not any(c.startswith("Upgrade") for c in commands)


async def test_unavailable_actions_are_shown_disabled_and_say_why() -> None:
    app, notes = make_app(online=False)  # an engine without a cluster can only suspend
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        keys = footer(app)
        assert keys["Suspend"] and keys["Context"] and keys["Help"]
        assert keys["Test"] is False and keys["Upgrade"] is False
        assert "Unlock" not in keys and "Cleanup" not in keys  # rarer: help and the palette list them
        await pilot.press("l", "c")
        why = app.engine.why_not("unlock")  # the gate's own words, shown as they are
        assert why and why == app.engine.why_not("cleanup")
        assert notes.calls[0][0] == f"Unlock: {why}"
        assert notes.calls[1][0] == f"Cleanup: {why}"
        commands = {c.title: c.help for c in app.get_system_commands(app.screen)}
        assert commands["Unlock (l)"] == f"Unavailable: {why}"
        assert commands["Suspend (s)"] == BY_NAME["suspend"].summary


async def test_release_refusals_are_the_gates() -> None:
    app, notes = make_app()
    async with app.run_test(size=SIZE) as pilot:
        app.query_one(ReleaseTable).select(WEB)
        await pilot.press("l")  # web is deployed, not pending
        assert notes.calls[-1][0] == f"Unlock: {app.engine.why_not('unlock', WEB)}"
        assert "not pending" in notes.calls[-1][0]
        assert len(app.screen_stack) == 1


async def test_a_release_key_on_the_controller_view_says_no_release_is_shown() -> None:
    """On the controller view (P) u and l were refused as "Not available: Upgrade: available": the screen has no
    release, and that is what the refusal, the palette and help say."""
    from tui.screens.pulses import PulsesScreen

    app, notes = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("P")
        await pilot.pause()
        assert isinstance(app.screen, PulsesScreen)
        await pilot.press("u", "l")
        assert [m for m, _, _ in notes.calls] == [f"Upgrade: {NO_RELEASE_HERE}", f"Unlock: {NO_RELEASE_HERE}"]
        commands = {c.title: c.help for c in app.get_system_commands(app.screen)}
        assert commands["Upgrade (u)"] == f"Unavailable: {NO_RELEASE_HERE}"
        assert commands["Cleanup (c)"] == BY_NAME["cleanup"].summary  # not per release: still available


async def test_an_engine_failure_becomes_a_notification_naming_the_log(tmp_path: Path) -> None:
    app, notes = make_app(log_file=tmp_path / "helmdeck.log")

    async def broken(_key: object) -> None:
        raise RuntimeError("the API server went away")

    app.engine.test = broken  # type: ignore[assignment,method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("t")
        await pilot.pause(0.3)
        message, title, severity = notes.calls[-1]
        assert severity == "error" and title == "Test helmdeck-demo/flaky failed"
        assert "the API server went away" in message and str(tmp_path / "helmdeck.log") in message
        assert app.is_running


async def test_upgrade_of_a_release_without_package_is_refused() -> None:
    app, notes = make_app()
    async with app.run_test(size=SIZE) as pilot:
        app.query_one(ReleaseTable).select(LEGACY)
        await pilot.press("u")
        assert "no package declares release legacy/legacy-api" in notes.text()
        assert len(app.screen_stack) == 1


async def test_suspend_and_resume_from_the_keyboard() -> None:
    app, notes = make_app()
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(ReleaseTable)
        table.select(FLAKY)
        await pilot.press("s")
        await pilot.pause()
        assert table.plain_cell(FLAKY, "suspended") == "⏸ yes"
        await pilot.press("s")  # resuming asks first
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
        assert table.plain_cell(FLAKY, "suspended") == "-"
        assert "Reconciliation of helmdeck-demo/flaky resumed" in notes.text()


async def test_detail_reveals_secrets_only_on_request() -> None:
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        app.query_one(ReleaseTable).select(WEB)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, ReleaseDetailScreen) and app.screen.key == WEB
        await pilot.press("3")
        await pilot.pause(0.3)

        def values_text() -> str:
            return str(app.screen.query_one("#values-pane TextView", TextView).query_one(".text-body").render())

        assert "hunter2" not in values_text() and "••••••" in values_text()
        await pilot.press("x")
        await pilot.pause(0.3)
        assert "hunter2" in values_text() and "t0k3n" in values_text()
        await pilot.press("escape")
        assert len(app.screen_stack) == 1


async def test_history_rollback_asks_naming_the_highlighted_revision() -> None:
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        app.query_one(ReleaseTable).select(WEB)
        await pilot.press("enter", "2")
        await pilot.pause()
        await pilot.press("down", "down", "r")  # revision 1
        await pilot.pause()
        body = str(app.screen.query_one("#dialog-body").render())
        assert "from revision 3" in body and "to   revision 1" in body
        await pilot.press("n")
        assert isinstance(app.screen, ReleaseDetailScreen)


async def test_help_lists_every_action_with_its_availability() -> None:
    app, _ = make_app(online=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = str(app.screen.query_one(TextView).query_one(".text-body").render())
        assert f"Unlock       disabled: {app.engine.why_not('unlock')}" in text
        assert "D / ctrl+d Uninstall    disabled" in text and "s          Suspend      available" in text
        flat = " ".join(text.split())  # wrapped at the help box width
        assert "key and topologyKey stay visible" in flat and "the YAML stays valid" in flat


async def test_help_says_availability_for_the_selected_release() -> None:
    """Help said Unlock, Cancel, Flux and Version were available on a release where each is refused."""
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        key = app.screen.selected_release()  # type: ignore[attr-defined]
        assert key is not None
        await pilot.press("question_mark")
        await pilot.pause()
        text = str(app.screen.query_one(TextView).query_one(".text-body").render())
        assert f"Actions  on {key[0]}/{key[1]}" in text
        for name, label in (("unlock", "Unlock"), ("cancel", "Cancel")):
            reason = app.engine.why_not(name, key)
            assert reason is not None and f"{label:<13}disabled: {reason}" in text.replace("\n" + " " * 26, " ")
        assert "local chart" in text.split("Version", 1)[1].split("\n", 1)[0]  # v: a local chart has no versions
        assert "Suspend      available" in text


async def test_theme_choice_is_remembered_and_bad_themes_fall_back(tmp_path: Path) -> None:
    settings = Settings(tmp_path / "helmdeck")
    settings.themes_dir.mkdir(parents=True)
    (settings.themes_dir / "broken.toml").write_text('name = "broken"\nprimary = "blurple"\n')
    (settings.themes_dir / "mine.toml").write_text('name = "mine"\nprimary = "#336699"\ndark = false\n')
    app, notes = make_app(settings=settings, theme="helmdeck-light")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.theme == "helmdeck-light"
        assert "broken.toml: primary: 'blurple' is not a colour" in notes.text()
        app.theme = "mine"
        await pilot.pause()
    assert settings.load_theme() == ("mine", None)

    app, notes = make_app(settings=settings, theme="no-such-theme")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.theme == "helmdeck-dark"
        assert "theme 'no-such-theme' is not installed" in notes.text()

    app, _ = make_app(settings=settings)  # no --theme: the remembered one
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.theme == "helmdeck-dark"  # remembered from the fallback above


async def test_engine_events_reach_an_open_detail_screen() -> None:
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        app.query_one(ReleaseTable).select(WEB)
        await pilot.press("enter")
        await pilot.pause()
        set_engine_status(app.engine, WEB, state="InSync")
        log_event(app.engine, LogEntry(FIXED_NOW, WEB, "web", "upgrade", "started",
                                             "upgrade started (timeout 120s)"))
        await pilot.press("7")  # a log renders once it is on screen
        await pilot.pause()
        title = str(app.screen.query_one("#detail-title").render())
        assert "state ✔ InSync" in title
        log = app.screen.query_one("#event-log")
        assert any("upgrade started" in strip.text for strip in log.lines)  # type: ignore[attr-defined]


async def test_filter_line_keeps_enter_for_itself() -> None:
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("slash", "w", "e", "b")
        assert isinstance(app.focused, Input)
        await pilot.press("enter")
        assert len(app.screen_stack) == 1  # enter kept the filter; it did not open a detail
        assert shown_names(app) == ["web"]


async def test_header_names_the_lease_holder() -> None:
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        header = app.query_one(HeaderBar)
        assert "lease: - (not reported by the engine)" in str(header.render())
        announce_lease(app.engine, "ops@bastion-2", leader=False)
        await pilot.pause()
        assert "lease: held by ops@bastion-2 · this instance watches read-only" in str(header.render())
        announce_lease(app.engine, "me@laptop", leader=True)
        await pilot.pause()
        assert "lease: me@laptop (this instance acts)" in str(header.render())


async def test_ctrl_d_also_uninstalls_and_the_palette_offers_themes() -> None:
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        app.query_one(ReleaseTable).select(WEB)
        await pilot.press("ctrl+d")
        await pilot.pause(0.3)
        assert isinstance(app.screen, ConfirmScreen) and app.screen.confirmation.title == "Uninstall?"
        await pilot.press("escape")
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Theme" in titles and "Uninstall (D / ctrl+d)" in titles and "Help (?)" in titles


async def test_a_release_removed_and_added_again_between_sorts_shows_once() -> None:
    app = HelmdeckApp(bulk_engine(50), context="test", start_engine=False, clock=fixed_clock)
    async with app.run_test(size=SIZE) as pilot:
        table = await filled_table(app, pilot)
        view = table.views[3]
        table.remove_release(view.key)
        table.flush()
        table.upsert(view)
        table.flush()
        assert table.row_count == 50 and len(set(table.row_keys)) == 50
        assert table.row_keys == sorted(table.row_keys, key=table._sort_keys.__getitem__)


async def test_the_header_names_a_few_running_actions_and_counts_the_rest() -> None:
    # A cleanup may run thousands: the header sorted and wrapped every one of them at each refresh.
    engine = bulk_engine(40)
    app = HelmdeckApp(engine, context="test", start_engine=False, clock=fixed_clock)
    async with app.run_test(size=SIZE) as pilot:
        keys = sorted(v.key for v in engine.releases())
        for key in keys[:12]:
            set_engine_status(engine, key, running=RunningAction("upgrade", fixed_clock() - 5, 300))
        header = app.query_one(HeaderBar)
        for _ in range(40):  # the header refreshes every 0.25 s (later on a loaded machine)
            await pilot.pause(0.1)
            if len(header.running) > 1:
                break
        assert header.running[-1] == "+4 more" and len(header.running) == 9, header.running
        assert header.running[0].endswith(f"{keys[0][0]}/{keys[0][1]}")


async def test_the_tables_kept_cells_leave_the_garbage_collectors_walk() -> None:
    # A full collection walks every tracked object not frozen: 10,000 rows of cell objects made it a stall.
    app = HelmdeckApp(bulk_engine(50), context="test", start_engine=False, clock=fixed_clock)
    async with app.run_test(size=SIZE):
        table = app.query_one(ReleaseTable)
        rows = [table.row_signature(key) for key in table.row_keys]  # made when drawn: made here for the rest
        gc.collect()  # its cells untracked at their first pass, a row's tuple at a pass after that
        gc.collect()
        assert len(rows) == 50 and not any(gc.is_tracked(row) for row in rows)


def _styled_cells(lines: Any) -> list[tuple[str, Any]]:
    """Each terminal cell of rendered lines with its style: segments split differently draw alike."""
    return [(char, segment.style) for line in lines for segment in line for char in segment.text]


async def test_cells_made_directly_draw_as_datatable_renders_them() -> None:
    # The table makes its cells' segments itself (tui.widgets.release_table._cell_lines): every shown cell,
    # under the cursor or not, on either zebra stripe, in every tone, must be what DataTable's Rich render gives.
    app = HelmdeckApp(bulk_engine(40), context="test", start_engine=False, clock=fixed_clock)
    async with app.run_test(size=SIZE) as pilot:
        table = await filled_table(app, pilot)
        await pilot.pause()
        compared = 0
        for row_index in range(min(table.row_count, 12)):
            cells = table.row_signature(table.row_keys[row_index])
            for column_index, column in enumerate(table.ordered_columns):
                at = COLUMN_INDEX.get(str(column.key.value))
                if at is None:
                    continue
                width = column.get_render_width(table)
                for base in (table.get_component_rich_style("datatable--even-row"),
                             table.get_component_rich_style("datatable--odd-row")):
                    for cursor, hover in ((False, False), (True, False), (False, True)):
                        made = table._cell_lines(row_index, column_index, cells[at], base, width, cursor, hover)
                        rendered = DataTable._render_cell(table, row_index, column_index, base, width, cursor, hover)
                        assert _styled_cells(made) == _styled_cells(rendered), (row_index, column.key.value)
                        compared += 1
        assert compared > 100
