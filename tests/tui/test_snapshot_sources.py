"""Snapshot tests of charts from repositories (testkit/chart_sources.py): the CHART column's short form and
newer-version marker, the Overview's source line and verification (Verified, Failed), the version picker (v)
with the versions known to verify or fail, and its pin confirmation."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from engine.base.masking import Masker
from engine.base.wire import SOURCE_VERIFIED, VERIFICATION_ERROR
from engine.reconcile.conditions import Condition
from engine.runtime.assemble import offline_engine
from engine.runtime.diff import unified
from engine.sources import ChartRequest, ChartVersionInfo
from engine.storage.observer import Observer
from testkit.chart_sources import OFFERED, SHOP_API, SHOP_WEB, SOURCES_PACKAGES, sources_engine
from testkit.fixtures import FIXED_NOW, WEB, fixed_clock
from tests.tui.test_snapshots import MAIN, TALL
from tests.tui.test_snapshots import app as local_app
from tui.app import HelmdeckApp
from tui.widgets.release_table import ReleaseTable

DIGEST = "sha256:" + "5" * 64


def app() -> HelmdeckApp:
    engine = sources_engine()
    engine.gate.online = True  # as operators see it: the gate answers as for a connected engine

    async def diff(_key: tuple[str, str], version: str, *, reveal: bool = False) -> str:
        return unified("replicas: 2\nimage: web:2.0.0\n", f"replicas: 2\nimage: web:{version}\n",
                       "deployed (revision 1)", f"chart {version}")

    engine.versions().diff = diff  # type: ignore[assignment,method-assign]  # rendering needs helm and the archive
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


async def test_picking_a_version_under_a_digest_pin_says_how_to_move_it(tmp_path: Path) -> None:
    """The picker lists the versions of an OCIRepository pinned by digest (``ref.digest`` comes first, as Flux):
    picking one pins nothing and says why, as a warning."""
    for name in ("api.yaml", "charts.yaml"):
        text = (SOURCES_PACKAGES / name).read_text()
        (tmp_path / name).write_text(text.replace('semver: "~1.0"   # patch releases only', f"digest: '{DIGEST}'"))
    engine = offline_engine(tmp_path, observer=Observer(None))
    engine.gate.online = True

    async def versions(request: ChartRequest) -> list[ChartVersionInfo]:
        return OFFERED["api"]

    engine.controller.charts.versions = versions  # type: ignore[method-assign]
    shown = HelmdeckApp(engine, context="helmdeck-local", start_engine=False, clock=fixed_clock,
                        masker=Masker(b"snapshots"))
    async with shown.run_test(size=TALL) as pilot:
        await pilot.pause()
        shown.query_one(ReleaseTable).select(SHOP_API)
        await pilot.press("v")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await pilot.pause(0.3)
        said = [(n.severity, str(n.message)) for n in shown._notifications]
        assert said == [("warning", f"shop/api: the chart is pinned by digest {DIGEST}; edit the OCIRepository's "
                                    "spec.ref by hand to move it")]
    assert (tmp_path / "api.yaml").read_text() == (SOURCES_PACKAGES / "api.yaml").read_text()  # nothing pinned
