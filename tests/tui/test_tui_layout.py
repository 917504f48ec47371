"""The app at the sizes operators run it, and changes that must reach the screen: narrow terminals (columns
and footer keys), Home/End in tables, a release's Flux owner."""

from __future__ import annotations

import dataclasses

import pytest
from textual.widgets import Static
from textual.widgets._footer import FooterKey

from engine.base.masking import Masker
from engine.storage.observation import Observation
from testkit.fixtures import LEGACY, SETTINGS, WEB, bulk_engine, fixed_clock, fixed_engine, set_engine_status
from tui.app import HelmdeckApp
from tui.layout import FULL, MARKER, MARKER_WIDTH, NARROW, fit, fit_text, header_label
from tui.model import RowFilter, TextFilter, natural_key
from tui.screens.help import HelpFacts, help_content
from tui.widgets.header_bar import HeaderBar
from tui.widgets.history_table import HistoryTable
from tui.widgets.key_footer import kept, rank
from tui.widgets.release_table import ReleaseTable
from tui.widgets.resources_pane import ObjectTable

FULL_WIDTHS = dict(FULL.widths)


def make_app() -> HelmdeckApp:
    engine = fixed_engine()
    engine.gate.online = True
    return HelmdeckApp(engine, context="test", start_engine=False, clock=fixed_clock, masker=Masker(b"test"))


async def test_a_change_of_the_flux_owner_alone_reaches_the_row_and_the_overview(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The observer notes Flux's labels from the manifest; a view whose only change is that owner is a change."""
    app = make_app()
    async with app.run_test(size=(160, 30)) as pilot:
        table = app.query_one(ReleaseTable)
        assert table.plain_cell(LEGACY, "owner") == "-"
        table.select(LEGACY)
        await pilot.press("enter")
        await pilot.pause()
        observer = app.engine.observer
        stored = observer.latest(*LEGACY)
        assert stored is not None and stored.flux_owner == ""
        owned = dataclasses.replace(stored, flux_owner="flux-system/legacy-api")

        def latest(namespace: str, name: str) -> Observation | None:
            return owned if (namespace, name) == LEGACY else stored_latest(namespace, name)

        stored_latest = observer.latest
        monkeypatch.setattr(observer, "latest", latest)
        app.engine.book.refresh(LEGACY)
        await pilot.pause(0.2)
        assert table.plain_cell(LEGACY, "owner") == "flux"
        overview = str(app.screen.query_one("#overview-text", Static).render())
        assert "Flux HelmRelease flux-system/legacy-api" in overview


async def test_end_and_home_go_to_the_last_and_first_row() -> None:
    app = HelmdeckApp(bulk_engine(360), context="test", start_engine=False, clock=fixed_clock)
    async with app.run_test(size=(160, 20)) as pilot:
        table = app.query_one(ReleaseTable)
        keys = sorted((v.key for v in table.views), key=lambda k: natural_key(f"{k[0]}/{k[1]}"))
        await pilot.press("end")
        assert table.selected_key() == keys[-1]
        assert table.scroll_y == table.max_scroll_y > 0 and table.scroll_x == 0  # not sideways
        await pilot.press("home")
        assert table.selected_key() == keys[0] and table.scroll_y == 0
        table.row_filter = RowFilter(TextFilter("svc"))  # every row again, at once
        assert table.row_count == len(keys) and not table.busy
        table.action_scroll_bottom()
        assert table.selected_key() == keys[-1]


async def test_end_and_home_in_the_history_and_resources_tables() -> None:
    app = make_app()
    async with app.run_test(size=(160, 30)) as pilot:
        app.query_one(ReleaseTable).select(WEB)
        await pilot.press("enter", "2")
        await pilot.pause()
        history = app.screen.query_one(HistoryTable)
        assert history.has_focus and history.row_count >= 3
        await pilot.press("end")
        assert history.highlighted_revision() == 1  # newest first: the oldest is last
        await pilot.press("home")
        assert history.highlighted_revision() == history.row_count
        await pilot.press("6")
        await pilot.pause()
        objects = app.screen.query_one(ObjectTable)
        assert objects.has_focus and objects.row_count == 3
        await pilot.press("end")
        assert objects.cursor_row == 2
        await pilot.press("home")
        assert objects.cursor_row == 0


def test_help_names_home_and_end_and_the_hidden_columns_marker() -> None:
    facts = HelpFacts(reasons={}, readonly=False, log_file="-", settings_dir=None, theme="helmdeck-dark")
    text = help_content(facts).plain
    assert "home / end first / last row of a table" in text
    assert "+N         at the right of the table header: N columns do not fit the terminal" in text


def test_columns_narrow_first_then_the_least_needed_are_left_out() -> None:
    assert fit(158) == FULL and fit(200) == FULL  # a 160-column terminal shows every column as before
    at_120 = fit(118)
    assert at_120.hidden == ("app_version", "owner", "age") and at_120.marker == "+3"
    minimum = dict(NARROW)
    previous: tuple[str, ...] = ()
    for width in range(158, 30, -1):  # narrower never shows a column a wider table left out
        layout = fit(width)
        assert set(previous) <= set(layout.hidden)
        previous = layout.hidden
        used = sum(w for _, w in layout.widths) + (MARKER_WIDTH if layout.hidden else 0)
        assert used <= width or [k for k, _ in layout.widths] == ["namespace", "name", "state"]
        assert all(w >= minimum.get(k, FULL_WIDTHS[k]) for k, w in layout.widths)
        assert {"namespace", "name", "state"} <= {k for k, _ in layout.widths}
    assert header_label("HELM STATUS", "▲", 11) == "HELM STA… ▲"
    assert header_label("NAME", "", 12) == "NAME"
    assert fit_text("web@0.2.0 ↑0.3.0", 16) == "web@0.2.0 ↑0.3.0"
    assert fit_text("web@0.2.0 ⇡1.0.0", 13) == "web@0… ⇡1.0.0"  # the marker stays
    assert fit_text("a long release name", 5) == "a long release name"  # no marker: the table cuts it


def test_the_footer_leaves_out_the_least_needed_keys_never_help_or_quit() -> None:
    units = [(rank("open_detail"), 10), (rank("context"), 10), (rank("quick('all')"), 10), (rank("help"), 6),
             (rank("quit"), 6)]
    assert kept(units, 100) == [True] * 5
    assert kept(units, 30) == [True, False, False, True, True]
    assert kept(units, 5) == [False, False, False, True, True]  # help and quit even past the edge


async def test_a_narrow_terminal_hides_columns_with_a_sign_and_keeps_help_and_quit() -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        table = app.query_one(ReleaseTable)
        table.select(LEGACY)
        await pilot.pause(0.3)  # the footer is made again for the new row, then fitted
        assert table.columns_fit.hidden == ("app_version", "owner", "age")
        assert [str(c.key.value) for c in table.ordered_columns][-1] == MARKER
        assert str(table.ordered_columns[-1].label) == "+3"
        header = app.screen.query_one(HeaderBar)
        assert "+3 hidden: APP, OWNER, AGE" in str(header.render())
        assert header.size.height == 4  # the view wraps onto a line of its own, above the running action
        shown = {k.description for k in app.screen.query(FooterKey) if k.display and k.region.right <= 120}
        assert {"Help", "Quit", "Details", "Upgrade", "Uninstall"} <= shown and "Context" not in shown
        await pilot.resize_terminal(160, 40)
        await pilot.pause(0.3)
        assert table.columns_fit == FULL and len(table.columns) == len(FULL.widths)
        assert table.selected_key() == LEGACY and table.plain_cell(LEGACY, "owner") == "-"
        # Every key, C at most left out: the palette and help list it.
        assert {k.description for k in app.screen.query(FooterKey) if not k.display} <= {"Context"}
        assert header.size.height == 3
        set_engine_status(app.engine, SETTINGS, running=None)
        await pilot.pause(0.5)
        assert not header.running and header.size.height == 2  # the running line went: the table moves up
