"""Snapshot tests of every screen, tab, dialog and theme, from fixed engine state (testkit/fixtures.py).

Every ``run_before`` first pauses: the snapshot runner starts it before the
app has finished mounting, and keys pressed earlier would go astray.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from textual.pilot import Pilot

from engine.base.masking import Masker
from engine.runtime.diff import unified
from engine.runtime.engine import NotAvailable
from engine.runtime.ledger.gate import OFFLINE
from engine.runtime.state import CleanupItem, RunningAction
from testkit.fixtures import LEGACY, SETTINGS, WEB, fixed_clock, fixed_engine
from tui import confirmations
from tui.app import HelmdeckApp
from tui.engine_client import ContextSwitch
from tui.screens.confirm import ConfirmScreen
from tui.widgets.release_table import ReleaseTable

MAIN = (160, 14)
TALL = (160, 32)
THEMES = ("helmdeck-dark", "helmdeck-light", "helmdeck-high-contrast")


def app(*, readonly: bool = False, theme: str | None = None) -> HelmdeckApp:
    engine = fixed_engine(readonly=readonly)
    engine.gate.online = True  # the gate answers as for a connected engine: the app as operators see it
    return HelmdeckApp(engine, context="helmdeck-local", start_engine=False,
                       clock=fixed_clock, masker=Masker(b"snapshots"), theme=theme)


def test_main_screen(snap_compare: Any) -> None:
    assert snap_compare(app(), terminal_size=MAIN)


def test_main_screen_filtered_and_sorted(snap_compare: Any) -> None:
    async def filter_and_sort(pilot: Pilot[None]) -> None:
        await pilot.pause()
        await pilot.press("slash", *"demo", "enter", "o", "O")
        await pilot.pause(0.5)  # the re-sort after a sort change

    assert snap_compare(app(), terminal_size=MAIN, run_before=filter_and_sort)


def test_read_only_mode(snap_compare: Any) -> None:
    assert snap_compare(app(readonly=True), terminal_size=MAIN)


@pytest.mark.parametrize("theme", THEMES)
def test_theme(snap_compare: Any, theme: str) -> None:
    async def open_web(pilot: Pilot[None]) -> None:
        await pilot.pause()
        pilot.app.query_one(ReleaseTable).select(WEB)
        await pilot.pause()

    assert snap_compare(app(theme=theme), terminal_size=MAIN, run_before=open_web)


@pytest.mark.parametrize("tab", ["1", "2", "3", "4", "5", "6", "7", "8"])
def test_detail_tab(snap_compare: Any, tab: str) -> None:
    """web: rolled back by hand, a Secret in its values and manifest, a Service absent."""

    async def open_tab(pilot: Pilot[None]) -> None:
        await pilot.pause()
        pilot.app.query_one(ReleaseTable).select(WEB)
        await pilot.press("enter", tab)
        await pilot.pause(0.3)

    assert snap_compare(app(), terminal_size=TALL, run_before=open_tab)


def test_detail_of_a_failed_release(snap_compare: Any) -> None:
    """flaky: failed upgrade, conditions, failure counters, paused monitor (Overview)."""

    async def open_flaky(pilot: Pilot[None]) -> None:
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause(0.3)

    assert snap_compare(app(), terminal_size=TALL, run_before=open_flaky)


def test_help(snap_compare: Any) -> None:
    async def open_help(pilot: Pilot[None]) -> None:
        await pilot.pause()
        await pilot.press("question_mark")

    assert snap_compare(app(), terminal_size=(160, 44), run_before=open_help)


def test_rollback_picker(snap_compare: Any) -> None:
    async def pick(pilot: Pilot[None]) -> None:
        await pilot.pause()
        pilot.app.query_one(ReleaseTable).select(WEB)
        await pilot.press("r")

    assert snap_compare(app(), terminal_size=TALL, run_before=pick)


def test_context_picker(snap_compare: Any) -> None:
    def refuse(name: str) -> Any:
        raise AssertionError(f"the snapshot does not switch (asked for {name})")

    shown = app()
    shown._contexts = ContextSwitch(lambda: ["helmdeck-local", "staging", "prod-eu"], refuse)

    async def pick(pilot: Pilot[None]) -> None:
        await pilot.pause()
        await pilot.press("C")
        await pilot.pause()

    assert snap_compare(shown, terminal_size=TALL, run_before=pick)


def test_rollback_confirmation(snap_compare: Any) -> None:
    async def confirm(pilot: Pilot[None]) -> None:
        await pilot.pause()
        pilot.app.query_one(ReleaseTable).select(WEB)
        await pilot.press("r", "enter")  # the picker offers the previous revision first

    assert snap_compare(app(), terminal_size=TALL, run_before=confirm)


def test_uninstall_confirmation(snap_compare: Any) -> None:
    async def confirm(pilot: Pilot[None]) -> None:
        await pilot.pause()
        pilot.app.query_one(ReleaseTable).select(WEB)
        await pilot.press("D")
        await pilot.pause(0.3)

    assert snap_compare(app(), terminal_size=TALL, run_before=confirm)


def test_upgrade_in_maintenance_confirmation(snap_compare: Any) -> None:
    async def confirm(pilot: Pilot[None]) -> None:
        await pilot.pause()
        pilot.app.query_one(ReleaseTable).select(SETTINGS)
        await pilot.press("u")
        await pilot.pause(0.3)

    async def no_diff(_key: tuple[str, str], *, reveal: bool = False) -> str:
        raise NotAvailable(OFFLINE)  # the fixed engine cannot render: the dialog says why

    shown = app()
    shown.engine.diff = no_diff  # type: ignore[assignment,method-assign]
    assert snap_compare(shown, terminal_size=TALL, run_before=confirm)


def test_resume_confirmation(snap_compare: Any) -> None:
    async def confirm(pilot: Pilot[None]) -> None:
        await pilot.pause()
        pilot.app.query_one(ReleaseTable).select(WEB)
        await pilot.press("s")

    assert snap_compare(app(), terminal_size=TALL, run_before=confirm)


def _push(confirmation: confirmations.Confirmation) -> Any:
    """Open a dialog whose key the engine does not support yet (its text is what the key will show)."""

    async def push(pilot: Pilot[None]) -> None:
        await pilot.pause()
        await pilot.app.push_screen(ConfirmScreen(confirmation))

    return push


def _view(key: tuple[str, str]) -> Any:
    view = fixed_engine().release(key)
    assert view is not None
    return view


@pytest.mark.parametrize("entering", [True, False], ids=["enter", "leave"])
def test_maintenance_confirmation(snap_compare: Any, entering: bool) -> None:
    view = _view(WEB if entering else SETTINGS)
    assert snap_compare(app(), terminal_size=TALL, run_before=_push(confirmations.maintenance(view, entering)))


def test_unlock_confirmation(snap_compare: Any) -> None:
    dialog = confirmations.unlock(_view(LEGACY), fixed_clock())
    assert snap_compare(app(), terminal_size=TALL, run_before=_push(dialog))


def test_cancel_confirmation_says_what_stays_and_offers_a_rollback(snap_compare: Any) -> None:
    view = _view(WEB)
    deployed = view.observation
    assert deployed is not None
    hanging = dataclasses.replace(view, running=RunningAction("reconcile", fixed_clock() - 42, 300),
                                  observation=dataclasses.replace(deployed, version=deployed.version + 1,
                                                                  status="pending-upgrade"))
    dialog = confirmations.cancel(hanging, fixed_clock(), deployed)
    assert dialog.title == "Stop the upgrade?"
    assert dialog.alternative_label == f"Stop and roll back to {deployed.version}"
    assert f"the objects keep what revision {deployed.version + 1} applied" in dialog.body
    assert "stays at its last deployed revision" not in dialog.body
    assert snap_compare(app(), terminal_size=TALL, run_before=_push(dialog))


def test_cleanup_confirmation(snap_compare: Any) -> None:
    items = [CleanupItem("old-team", "api", "would-remove"), CleanupItem("old-team", "worker", "would-remove")]
    assert snap_compare(app(), terminal_size=TALL, run_before=_push(confirmations.cleanup(items)))


def test_upgrade_diff_confirmation(snap_compare: Any) -> None:
    diff = unified("replicas: 2\nimage: nginx:1.27\n", "replicas: 3\nimage: nginx:1.27\n",
                   "deployed (revision 3)", "desired (package web)")
    dialog = confirmations.upgrade(_view(WEB), diff, None)
    assert snap_compare(app(), terminal_size=TALL, run_before=_push(dialog))


def test_upgrade_diff_confirmation_folds_long_lines_with_their_markers(snap_compare: Any) -> None:
    before = "data:\n  config: short\n"
    after = "data:\n  config: " + " ".join(f"option{i}=value{i}" for i in range(30)) + "\n"
    dialog = confirmations.upgrade(_view(WEB), unified(before, after, "deployed (revision 3)", "desired"), None)
    assert snap_compare(app(), terminal_size=TALL, run_before=_push(dialog))
