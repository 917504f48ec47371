"""Snapshot tests of charts from repositories (tests/chart_sources.py): the CHART column's short form and
newer-version marker, the Overview's source line and verification (Verified, Failed), the version picker (v)
with the versions known to verify or fail, and its pin confirmation."""

from __future__ import annotations

import dataclasses
from typing import Any

from textual.pilot import Pilot

from engine.base.masking import Masker
from engine.reconcile.conditions import Condition
from engine.runtime.diff import unified
from engine.sources.verify import SOURCE_VERIFIED, VERIFICATION_ERROR
from tests.chart_sources import SHOP_WEB, sources_engine
from tests.fixtures import FIXED_NOW, WEB, fixed_clock
from tests.test_snapshots import MAIN, TALL
from tests.test_snapshots import app as local_app
from tui.app import HelmdeckApp
from tui.widgets.release_table import ReleaseTable


def app() -> HelmdeckApp:
    engine = sources_engine()
    engine.gate.online = True  # as operators see it: the gate answers as for a connected engine

    async def diff(_key: tuple[str, str], version: str, *, reveal: bool = False) -> str:
        return unified("replicas: 2\nimage: web:2.0.0\n", f"replicas: 2\nimage: web:{version}\n",
                       "deployed (revision 1)", f"chart {version}")

    engine.versions.diff = diff  # type: ignore[assignment,method-assign]  # rendering needs helm and the archive
    return HelmdeckApp(engine, context="helmdeck-local", start_engine=False, clock=fixed_clock,
                       masker=Masker(b"snapshots"))


def _open(*keys: str) -> Any:
    async def run(pilot: Pilot[None]) -> None:
        await pilot.pause()
        pilot.app.query_one(ReleaseTable).select(SHOP_WEB)
        await pilot.press(*keys)
        await pilot.pause(0.3)

    return run


def test_chart_column_marks_newer_versions(snap_compare: Any) -> None:
    assert snap_compare(app(), terminal_size=MAIN)


def test_overview_shows_the_source(snap_compare: Any) -> None:
    assert snap_compare(app(), terminal_size=TALL, run_before=_open("enter"))


def test_overview_shows_a_failed_verification(snap_compare: Any) -> None:
    shown = app()
    engine = shown.engine
    status = engine.book.status(SHOP_WEB)
    assert status is not None
    said = 'helm pull failed: sha256 sum does not match for web-0.2.1.tgz: "sha256:2121" != "sha256:4444"'
    failed = (Condition("Ready", "False", VERIFICATION_ERROR, said, FIXED_NOW - 60),
              Condition(SOURCE_VERIFIED, "False", VERIFICATION_ERROR, said, FIXED_NOW - 60))
    engine.book.set_status(SHOP_WEB, dataclasses.replace(status, conditions=failed))
    assert snap_compare(shown, terminal_size=TALL, run_before=_open("enter"))


def test_version_picker(snap_compare: Any) -> None:
    assert snap_compare(app(), terminal_size=TALL, run_before=_open("v"))


def test_pin_confirmation(snap_compare: Any) -> None:
    assert snap_compare(app(), terminal_size=TALL, run_before=_open("v", "up", "up", "enter"))


async def test_v_on_a_local_chart_is_refused_in_the_gates_words() -> None:
    shown = local_app()
    async with shown.run_test(size=TALL) as pilot:
        await pilot.pause()
        shown.query_one(ReleaseTable).select(WEB)
        await pilot.press("v")
        await pilot.pause()
        said = [str(n.message) for n in shown._notifications]
        assert said == ["Version: helmdeck-demo/web uses a local chart: versions are listed for a chart from a "
                        "HelmRepository or OCIRepository"]
        assert shown.screen is shown.get_default_screen()  # no picker
