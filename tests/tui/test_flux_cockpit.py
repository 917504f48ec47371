"""Flux's cockpit offline: a release a HelmRelease object owns, its row, Overview and dialogs from the object as
helm-controller writes its status (the object projected as engine.runtime.cockpit.flux does from the cluster;
the cluster test is tests/tui/test_flux_cockpit_app.py), the token and the release a HelmRelease names."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from textual.pilot import Pilot

from engine.base.masking import Masker
from engine.runtime import Engine
from engine.runtime.cockpit.flux import flux_fields, release_key
from engine.runtime.ledger.owners import flux_token
from testkit.fixtures import FIXED_NOW, LEGACY, WEB, fixed_clock, fixed_engine
from tests.tui.test_snapshots import MAIN, TALL, THEMES
from tui.app import HelmdeckApp
from tui.widgets.release_table import ReleaseTable

AT = dt.datetime.fromtimestamp(FIXED_NOW - 600, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
TOKEN = "2026-11-30T09:58:00.123456789Z"


def helmrelease(*, suspend: bool = False) -> dict[str, Any]:
    """HelmRelease legacy/legacy-api after a failed upgrade, its first install kept in the history, a forced
    reconcile requested and not yet handled (api/v2 HelmReleaseStatus, as helm-controller writes it)."""
    return {
        "metadata": {"name": "legacy-api", "namespace": "legacy", "generation": 3,
                     "annotations": {"reconcile.fluxcd.io/requestedAt": TOKEN,
                                     "reconcile.fluxcd.io/forceAt": TOKEN}},
        "spec": {"interval": "5m", **({"suspend": True} if suspend else {})},
        "status": {
            "observedGeneration": 3, "lastAttemptedRevision": "2.4.1",
            "lastHandledReconcileAt": "2026-11-30T09:40:00Z", "lastHandledResetAt": "2026-11-29T18:00:00Z",
            "failures": 1, "upgradeFailures": 1,
            "conditions": [
                {"type": "Ready", "status": "False", "reason": "UpgradeFailed", "lastTransitionTime": AT,
                 "message": "Helm upgrade failed for release legacy/legacy-api with chart legacy-api@2.4.1: "
                            "context deadline exceeded"},
                {"type": "Released", "status": "False", "reason": "UpgradeFailed", "lastTransitionTime": AT,
                 "message": "Helm upgrade failed"}],
            "history": [{"name": "legacy-api", "namespace": "legacy", "version": 1, "status": "deployed",
                         "chartName": "legacy-api", "chartVersion": "2.4.0", "appVersion": "2.4.0",
                         "digest": "sha256:" + "1" * 64, "configDigest": "sha256:" + "2" * 64,
                         "firstDeployed": AT, "lastDeployed": AT}],
        },
    }


def flux_engine(**kw: Any) -> Engine:
    engine = fixed_engine()
    engine.gate.online = True  # as operators see it: the gate answers as for a connected engine
    obj = helmrelease(**kw)
    engine.book.set_flux({release_key(obj): flux_fields(obj)})
    return engine


def _app(theme: str | None = None, **kw: Any) -> HelmdeckApp:
    return HelmdeckApp(flux_engine(**kw), context="helmdeck-local", start_engine=False, clock=fixed_clock,
                       masker=Masker(b"snapshots"), theme=theme)


def _open(*keys: str) -> Any:
    async def run(pilot: Pilot[None]) -> None:
        await pilot.pause()
        pilot.app.query_one(ReleaseTable).select(LEGACY)
        await pilot.pause()
        await pilot.press(*keys)
        await pilot.pause(0.3)

    return run


def test_a_package_of_the_same_release_keeps_its_own_row() -> None:
    """A HelmRelease object naming a helmdeck Package's release does not take its row (a HelmRelease document's
    Flux owns does: tests/tui/test_flux_owned_app.py)."""
    engine = fixed_engine()
    obj = helmrelease()
    obj["metadata"].update(name="web", namespace="helmdeck-demo")
    engine.book.set_flux({release_key(obj): flux_fields(obj)})
    view = engine.release(WEB)
    assert view is not None and view.flux is None and engine.owner(WEB).kind == "helmdeck"


def test_the_row_is_the_helmreleases() -> None:
    view = flux_engine().release(LEGACY)
    assert view is not None and view.flux is not None and view.flux.ref == LEGACY
    assert (view.state, view.ready, view.failures.upgrade) == ("Failed", False, 1)
    assert view.flux.requested == ("force",) and view.flux.handled_reset == "2026-11-29T18:00:00Z"
    assert [(h.version, h.chart_version) for h in view.flux.history] == [(1, "2.4.0")]


@pytest.mark.parametrize("theme", THEMES)
def test_the_row_of_a_release_flux_owns(snap_compare: Any, theme: str) -> None:
    """OWNER flux, STATE and READY from its conditions; the footer has u, t, s, not r, m, D (l, its reset, is
    left out for room as on every row: help and the palette list it)."""
    assert snap_compare(_app(theme), terminal_size=MAIN, run_before=_open())


def test_the_overview_shows_the_helmrelease(snap_compare: Any) -> None:
    assert snap_compare(_app(), terminal_size=TALL, run_before=_open("enter"))


def test_l_asks_to_request_fluxs_reset(snap_compare: Any) -> None:
    assert snap_compare(_app(), terminal_size=TALL, run_before=_open("l"))


def test_s_on_a_suspended_one_asks_to_resume_it(snap_compare: Any) -> None:
    assert snap_compare(_app(suspend=True), terminal_size=TALL, run_before=_open("s"))


def test_r_is_refused_saying_what_flux_offers(snap_compare: Any) -> None:
    assert snap_compare(_app(), terminal_size=TALL, run_before=_open("r"))


def test_the_token_is_written_as_the_flux_cli_writes_it() -> None:
    """Go's time.RFC3339Nano (fluxcd/flux2 cmd/flux/reconcile.go requestReconciliation): nanoseconds, trailing
    zeros dropped, none when zero; two requests in one second differ."""
    second = int(dt.datetime(2026, 12, 3, 14, 0, 1, tzinfo=dt.UTC).timestamp()) * 1_000_000_000
    assert flux_token(second) == "2026-12-03T14:00:01Z"
    assert flux_token(second + 120_000_000) == "2026-12-03T14:00:01.12Z"
    assert flux_token(second + 123_456_789) == "2026-12-03T14:00:01.123456789Z"
    assert flux_token(second + 1) != flux_token(second + 2)


def test_the_release_a_helmrelease_names() -> None:
    """api/v2 HelmRelease.GetReleaseName: releaseName, else <targetNamespace>-<name>, else its name; shortened
    over 53 characters (first 40, '-', 12 hex of sha256), in targetNamespace, else its own."""
    def obj(name: str, **spec: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": "apps"}, "spec": spec}

    assert release_key(obj("web")) == ("apps", "web")
    assert release_key(obj("web", targetNamespace="prod")) == ("prod", "prod-web")
    assert release_key(obj("web", targetNamespace="prod", releaseName="shop")) == ("prod", "shop")
    long = release_key(obj("a" * 60))[1]
    assert len(long) == 53 and long.startswith("a" * 40 + "-")


def test_help_says_which_keys_are_fluxs_on_its_row(snap_compare: Any) -> None:
    assert snap_compare(_app(), terminal_size=TALL, run_before=_open("question_mark"))
