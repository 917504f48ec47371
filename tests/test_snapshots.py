"""Snapshot tests of the screens, from fixed engine state."""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot

from tests.fixtures import fixed_engine
from tui.app import HelmdeckApp

SIZE = (150, 16)


def app() -> HelmdeckApp:
    return HelmdeckApp(fixed_engine(), context="helmdeck-local", start_engine=False)


def test_main_screen(snap_compare: Any) -> None:
    assert snap_compare(app(), terminal_size=SIZE)


def test_rollback_confirmation(snap_compare: Any) -> None:
    async def open_dialog(pilot: Pilot[None]) -> None:
        await pilot.press("down", "r")  # second row: helmdeck-demo/settings, revision 2

    assert snap_compare(app(), terminal_size=(150, 24), run_before=open_dialog)
