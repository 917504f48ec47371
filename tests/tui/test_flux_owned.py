"""A HelmRelease document whose HelmRelease exists in the cluster: Flux owns its release. The app shows it as
Flux's (OWNER flux, "OutOfSync (Flux owns it)" when the release differs from the document, the Diff offered),
its keys are Flux's requests (u, l, s) and the rest Flux would undo is refused, and its state is judged as Flux's state
detection judges it (chart and values, no render). Offline: the finding is seeded in the book as the controller
keeps it (engine.runtime.drive.flux_ownership.FluxOwnership.observe; the cluster test is
tests/tui/test_flux_owned_app.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from engine.base.masking import Masker
from engine.package.load import load_package
from engine.reconcile import state as st
from engine.reconcile.conditions import Condition
from engine.reconcile.request import Request
from engine.reconcile.status import EngineStatus
from engine.resolve.release import resolve
from engine.runtime import Engine
from engine.runtime.assemble import offline_engine
from engine.runtime.ledger.gate import ACTIONS
from engine.runtime.ledger.owners import FLUX_OWNED
from engine.storage.observer import Observer
from testkit.fixtures import EXAMPLES, FIXED_NOW, fixed_clock, set_engine_status, storage_secret
from tests.tui.test_snapshots import MAIN, TALL
from tui.app import HelmdeckApp
from tui.widgets.release_table import ReleaseTable

FLUX_FOLDER = Path(__file__).resolve().parents[1] / "data" / "flux-owned"
KEY = ("shop", "web")
MESSAGE = ("Flux owns it: HelmRelease shop/web exists in the cluster; helmdeck plans and shows it and acts only "
           "through Flux's requests (u, l, s)")


def flux_engine() -> Engine:
    """The Flux repository's HelmRelease, its release deployed by Flux with replicas 1 (the document says 2)."""
    observer = Observer(None)
    engine = offline_engine(FLUX_FOLDER, observer=observer)
    engine.gate.online = True  # as operators see it: the gate answers as for a connected engine
    observer.apply_object(storage_secret("web", "shop", 1, "deployed", "web", "1.0.0", "1.0.0", {"replicas": 1},
                                         "2026-11-30T09:10:00Z", "Install complete"))
    engine.book.set_flux_owned(KEY, True)
    set_engine_status(engine, KEY, state="OutOfSync",
                      conditions=(Condition("Ready", "Unknown", FLUX_OWNED, MESSAGE, FIXED_NOW - 300),))
    return engine


def test_the_release_is_fluxs_its_keys_are_fluxs_requests_and_the_rest_is_refused() -> None:
    engine = flux_engine()
    view = engine.release(KEY)
    assert view is not None and view.flux_owned and view.package is not None
    assert engine.owner(KEY).text == "Flux HelmRelease shop/web"
    # u, l, s: Flux's requests (engine.runtime.ledger.owners.FLUX_REQUESTS); the rest Flux would undo refused
    assert [engine.why_not(a, KEY) for a in ("upgrade", "unlock", "suspend")] == [None] * 3
    refused = {a: engine.why_not(a, KEY) for a in ("rollback", "maintenance", "uninstall")}
    for action, why in refused.items():
        assert why is not None and "HelmRelease shop/web" in why, action
    # reading, helm's tests and the queue's pass stay; the pass looks at the cluster again itself
    assert [engine.why_not(a, KEY) for a in ("diff", "render", "test", "reconcile")] == [None] * 4
    engine.book.set_flux_owned(KEY, False)  # its HelmRelease gone from the cluster: helmdeck acts again
    assert {engine.why_not(a, KEY) for a in ACTIONS if a not in ("unlock", "cancel")} == {None}
    assert engine.owner(KEY).kind == "helmdeck"


def test_fluxs_state_detection_judges_chart_and_values_without_a_render(tmp_path: Path) -> None:
    spec = load_package(EXAMPLES / "packages" / "web.yaml")
    resolved = resolve(spec)
    req = Request.from_resolved(resolved, EngineStatus())
    chart, version = resolved.chart.name, resolved.chart.version
    observer = Observer(None)
    revisions = iter(range(1, 100))

    def stored(version_: str, config: dict[str, Any], status: str = "deployed") -> Any:
        observer.apply_object(storage_secret(spec.release_name, spec.release_namespace, next(revisions), status,
                                             chart, version_, "1", config, "2026-11-30T09:10:00Z"))
        return observer.latest(*spec.key)

    assert st.flux_state(req, None).status == st.ABSENT
    assert st.flux_state(req, stored(version, dict(resolved.values))).status == st.IN_SYNC
    changed = st.flux_state(req, stored(version, {**resolved.values, "replicas": 9}))
    assert (changed.status, changed.reason) == (st.OUT_OF_SYNC, "values changed")
    older = st.flux_state(req, stored("0.0.1", {}))
    assert (older.status, older.reason) == (st.OUT_OF_SYNC, f"chart 0.0.1 → {version}; values changed")
    assert st.flux_state(req, stored(version, {}, "pending-upgrade")).status == st.LOCKED
    assert st.flux_state(req, stored(version, {}, "failed")).status == st.FAILED


def test_the_book_judges_a_flux_owned_release_by_fluxs_state_detection() -> None:
    spec = load_package(EXAMPLES / "packages" / "web.yaml")
    resolved = resolve(spec)  # what the controller's Flux check does first (engine.runtime.drive.controller)
    observer = Observer(None)
    engine = offline_engine(EXAMPLES / "packages", observer=observer)
    observer.apply_object(storage_secret(spec.release_name, spec.release_namespace, 1, "deployed",
                                         resolved.chart.name, resolved.chart.version, "1", dict(resolved.values),
                                         "2026-11-30T09:10:00Z"))
    engine.book.refresh(spec.key)
    before = engine.release(spec.key)
    assert before is not None and before.state == st.UNMANAGED  # helmdeck did not make it
    engine.book.set_flux_owned(spec.key, True)
    after = engine.release(spec.key)
    assert after is not None and after.state == st.IN_SYNC and after.flux_owned


def _app() -> HelmdeckApp:
    return HelmdeckApp(flux_engine(), context="helmdeck-local", start_engine=False, clock=fixed_clock,
                       masker=Masker(b"snapshots"))


def _open(*keys: str) -> Any:
    async def run(pilot: Pilot[None]) -> None:
        await pilot.pause()
        pilot.app.query_one(ReleaseTable).select(KEY)
        await pilot.press(*keys)
        await pilot.pause(0.3)

    return run


def test_the_row_says_flux_owns_it(snap_compare: Any) -> None:
    assert snap_compare(_app(), terminal_size=MAIN)


def test_the_overview_marks_it_out_of_sync_flux_owns_it_and_offers_the_diff(snap_compare: Any) -> None:
    assert snap_compare(_app(), terminal_size=TALL, run_before=_open("enter"))


def test_u_on_it_asks_to_request_fluxs_forced_reconcile(snap_compare: Any) -> None:
    assert snap_compare(_app(), terminal_size=TALL, run_before=_open("u"))


def test_a_finding_about_a_document_no_longer_declared_is_void() -> None:
    engine = flux_engine()
    engine.book.set_packages({})  # the HelmRelease document left the folder: its release is no one's
    engine.book.refresh(KEY)
    view = engine.release(KEY)
    assert view is not None and not view.flux_owned and not engine.book.flux_owned(KEY)
    assert engine.why_not("rollback", KEY) is None and engine.owner(KEY).kind == "none"
