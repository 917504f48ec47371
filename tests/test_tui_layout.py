"""The app at the sizes operators run it, and changes that must reach the screen: narrow terminals (columns
and footer keys), Home/End in tables, a release's Flux owner."""

from __future__ import annotations

import dataclasses

import pytest
from textual.widgets import Static

from engine.masking import Masker
from engine.storage.observation import Observation
from tests.fixtures import LEGACY, WEB, bulk_engine, fixed_clock, fixed_engine
from tui.app import HelmdeckApp
from tui.model import RowFilter, TextFilter, natural_key
from tui.screens.help import HelpFacts, help_content
from tui.widgets.history_table import HistoryTable
from tui.widgets.release_table import FILL_STEP, ReleaseTable


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


async def test_end_and_home_go_to_the_last_and_first_row_even_while_the_table_fills() -> None:
    app = HelmdeckApp(bulk_engine(3 * FILL_STEP), context="test", start_engine=False, clock=fixed_clock)
    async with app.run_test(size=(160, 20)) as pilot:
        table = app.query_one(ReleaseTable)
        keys = sorted((v.key for v in table.views), key=lambda k: natural_key(f"{k[0]}/{k[1]}"))
        await pilot.press("end")
        assert table.selected_key() == keys[-1]
        assert table.scroll_y == table.max_scroll_y > 0 and table.scroll_x == 0  # not sideways
        await pilot.press("home")
        assert table.selected_key() == keys[0] and table.scroll_y == 0
        table.row_filter = RowFilter(TextFilter("svc"))  # every row again, the first step now, the rest later
        assert table.busy and table.row_count == FILL_STEP
        table.action_scroll_bottom()  # as End does, before the fill goes on
        assert table.row_count == len(keys) and not table.busy
        assert table.selected_key() == keys[-1]


async def test_end_and_home_in_the_history_table() -> None:
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


def test_help_names_home_and_end() -> None:
    facts = HelpFacts(reasons={}, readonly=False, log_file="-", settings_dir=None, theme="helmdeck-dark")
    assert "home / end first / last row of a table" in help_content(facts).plain
