"""The app at the sizes operators run it, and changes that must reach the screen: narrow terminals (columns
and footer keys), Home/End in tables, a release's Flux owner."""

from __future__ import annotations

import dataclasses

import pytest
from textual.widgets import Static

from engine.masking import Masker
from engine.storage.observation import Observation
from tests.fixtures import LEGACY, fixed_clock, fixed_engine
from tui.app import HelmdeckApp
from tui.widgets.release_table import ReleaseTable


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
