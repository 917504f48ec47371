"""Snapshots of narrow terminals (120×40, 100×30): columns narrowed or left out behind a "+N" marker named in
the header; the footer keeps ? and q, leaving out the least needed keys."""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot

from testkit.fixtures import WEB
from tests.tui.test_snapshot_sources import app as sources_app
from tests.tui.test_snapshots import app
from tui.widgets.release_table import ReleaseTable


def test_main_screen_at_120_columns(snap_compare: Any) -> None:
    assert snap_compare(app(), terminal_size=(120, 40))


def test_main_screen_at_100_columns(snap_compare: Any) -> None:
    assert snap_compare(app(), terminal_size=(100, 30))


def test_detail_at_120_columns(snap_compare: Any) -> None:
    async def open_web(pilot: Pilot[None]) -> None:
        await pilot.pause()
        pilot.app.query_one(ReleaseTable).select(WEB)
        await pilot.press("enter")
        await pilot.pause(0.3)

    assert snap_compare(app(), terminal_size=(120, 40), run_before=open_web)


def test_chart_markers_kept_at_120_columns(snap_compare: Any) -> None:
    """A narrowed CHART cell keeps its newer-version marker and cuts the chart before it."""
    assert snap_compare(sources_app(), terminal_size=(120, 14))
