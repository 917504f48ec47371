"""Snapshots of the app attached to a helmdeck controller: Package objects in the table with their owner, the
Overview naming the controller, and the controller view (P) with its sparklines, in every theme."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client
from prometheus_client import generate_latest
from textual.pilot import Pilot
from textual.widgets import Sparkline

from engine.base.masking import Masker
from engine.base.wire import SHARD_KEY
from engine.package.load import load_objects
from engine.reconcile.status import ActionOutcome
from engine.runtime.cluster.shard_selector import MAIN as MAIN_SHARD
from engine.runtime.cockpit.attach import Attachment, attached_fields
from engine.runtime.cockpit.pulses import PulseMeter
from engine.runtime.engine import Engine
from engine.runtime.state import ControllerInfo
from helmdeck.metrics import ControllerMetrics
from testkit.controller import oci_repository, package
from testkit.fixtures import FIXED_NOW, fixed_clock, fixed_engine, storage_secret
from tests.tui.test_snapshots import MAIN, TALL, THEMES
from tui import screens
from tui.app import HelmdeckApp
from tui.screens.confirm import ConfirmScreen
from tui.screens.pulses import PulsesScreen
from tui.widgets.release_table import ReleaseTable

API = ("team-a", "api")
WORKER = ("team-a", "worker")
HOLDER = "helmdeck-7f9c5d-x2kq4"
SHARD1_HOLDER = "helmdeck-shard1-6d8f4-k2x9p"
# Two static shards (--watch-label-selector): shard1 reconciles api, the main instance the rest (worker).
CONTROLLER = ControllerInfo(HOLDER, "helmdeck/helmdeck-cluster-5e0c2a91bd", FIXED_NOW - 3, 15.0, (),
                            "http://0.0.0.0:8080", MAIN_SHARD, f"!{SHARD_KEY}")
SHARD1 = ControllerInfo(SHARD1_HOLDER, "helmdeck/helmdeck-cluster-0b7d3e55c4", FIXED_NOW - 5, 15.0, (),
                        "http://0.0.0.0:8081", "shard1", f"{SHARD_KEY}=shard1")


def _object(name: str, generation: int, status: dict[str, Any], shard: str = "", **annotations: str) -> dict[str, Any]:
    obj = package("team-a", name, values={"replicas": 2})
    obj["metadata"].update(generation=generation, annotations=annotations)
    if shard:
        obj["metadata"]["labels"] = {SHARD_KEY: shard}
    obj["status"] = status
    return obj


def _condition(type_: str, status: str, reason: str, message: str) -> dict[str, str]:
    return {"type": type_, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": "2026-11-30T09:50:00Z"}


def attached_engine(*, readonly: bool = False) -> Engine:
    """The fixed engine, attached to a controller reconciling two Package objects of team-a: ``api`` in sync,
    ``worker`` upgrading (its revision 4 pending) with a cancel requested and not handled yet."""
    engine = fixed_engine(readonly=readonly)
    engine.gate.online = True
    for record in (
        storage_secret("api", "team-a", 1, "superseded", "web", "0.1.0", "1.27", {"replicas": 1},
                       "2026-11-30T09:10:00Z"),
        storage_secret("api", "team-a", 2, "deployed", "web", "0.2.0", "1.27", {"replicas": 2},
                       "2026-11-30T09:50:00Z", "Upgrade complete"),
        storage_secret("worker", "team-a", 3, "superseded", "web", "0.1.0", "1.27", {"replicas": 2},
                       "2026-11-30T09:30:00Z"),
        storage_secret("worker", "team-a", 4, "pending-upgrade", "web", "0.2.0", "1.27", {"replicas": 2},
                       "2026-11-30T09:59:20Z", "Preparing upgrade"),
    ):
        engine.observer.apply_object(record)
    objects = [
        _object("api", 3, {"observedGeneration": 3, "lastAttemptedRevision": "0.2.0", "lastAppliedRevision": "0.2.0",
                           "conditions": [_condition("Ready", "True", "UpgradeSucceeded",
                                                     "Helm upgrade succeeded for release team-a/api.v2"),
                                          _condition("Released", "True", "UpgradeSucceeded", "revision 2")],
                           "controller": {"replica": SHARD1_HOLDER, "shard": "shard1"}}, "shard1"),
        _object("worker", 5, {"observedGeneration": 4, "lastAttemptedRevision": "0.2.0",
                              "lastAppliedRevision": "0.1.0", "failures": 1, "upgradeFailures": 1,
                              "conditions": [_condition("Ready", "False", "UpgradeFailed", "timed out waiting"),
                                             _condition("Released", "False", "UpgradeFailed", "timed out")],
                              "controller": {"replica": HOLDER, "shard": MAIN_SHARD}},
                **{"cancel.helmdeck.dev/requestedAt": "2026-11-30T09:59:58Z"}),
    ]
    specs, errors = load_objects(objects, [oci_repository("team-a", "registry.example:5000/charts")])
    assert not errors, errors
    by_name = {s.name: s for s in specs}
    attachment = Attachment(client.ApiClient(), engine.book, None, engine.watch_kube_events)
    attachment.controllers = (CONTROLLER, SHARD1)
    engine.attachment = attachment
    engine.gate.attached = attachment.attached
    fields = {}
    for obj in objects:
        spec = by_name[obj["metadata"]["name"]]
        covering = attachment.controller_of("team-a", obj["metadata"].get("labels") or {})
        assert covering is not None
        fields[spec.key] = attached_fields(obj, spec, covering.holder, covering.lease)
    fields[API]["last"] = ActionOutcome("upgrade", True, "Helm upgrade succeeded for release team-a/api.v2",
                                        at=FIXED_NOW - 600)
    engine.book.set_attached(fields)
    return engine


def _exposition(success: int, failure: int, queue: int, durations: list[float]) -> str:
    metrics = ControllerMetrics(lambda: [], lambda: queue)
    metrics.reconciles.labels("success").inc(success)
    metrics.reconciles.labels("failure").inc(failure)
    for seconds in durations:
        metrics.actions.labels("upgrade", "succeeded").observe(seconds)
    return generate_latest(metrics.registry).decode()


class FixedReplicas:
    """Two replicas' metrics over 30 readings 10 s apart: ``ctl-0`` steady, ``ctl-1`` failing more and more."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.now = FIXED_NOW - 300

    def read(self, url: str) -> str:
        n = self.calls[url] = self.calls.get(url, 0) + 1
        if "ctl-0" in url:
            return _exposition(12 * n + (n * n) % 7, 0, (n * 7) % 5, [0.4 + 0.1 * (i % 4) for i in range(3 * n)])
        failures = sum(max(0, i - 18) for i in range(n))  # none at first, then more each reading
        return _exposition(10 * n, failures, min(n // 3, 9), [1.0 + 0.2 * (i % 9) for i in range(2 * n)])

    def clock(self) -> float:
        self.now += 5  # two replicas read per sample: 10 s between readings of one
        return self.now


def pulses_app(theme: str | None = None) -> HelmdeckApp:
    engine = attached_engine()
    replicas = FixedReplicas()
    meter = PulseMeter(lambda: [("ctl-0", "http://ctl-0:8080/metrics"), ("ctl-1", "http://ctl-1:8080/metrics")],
                       read=replicas.read, clock=replicas.clock)
    engine.pulse_meter = lambda: meter
    for _ in range(29):
        asyncio.run(meter.sample())
    return HelmdeckApp(engine, context="helmdeck-local", start_engine=False, clock=fixed_clock,
                       masker=Masker(b"snapshots"), theme=theme)


def attached_app() -> HelmdeckApp:
    return HelmdeckApp(attached_engine(), context="helmdeck-local", start_engine=False, clock=fixed_clock,
                       masker=Masker(b"snapshots"))


def test_attached_rows(snap_compare: Any) -> None:
    """The Package objects in the same table, OWNER their shard (api shard1's, worker the main instance's);
    worker's upgrade runs (the controller's); the header counts the two live controllers."""
    async def show(pilot: Pilot[None]) -> None:
        await pilot.pause()
        pilot.app.query_one(ReleaseTable).select(WORKER)
        await pilot.pause()

    assert snap_compare(attached_app(), terminal_size=MAIN, run_before=show)


def test_attached_rows_at_80_columns(snap_compare: Any) -> None:
    """At 80 columns the header still counts the live controllers and the table keeps NAMESPACE, NAME and
    STATE (OWNER is among the columns left out first: the Overview names the shard and replica)."""
    async def show(pilot: Pilot[None]) -> None:
        await pilot.pause()
        pilot.app.query_one(ReleaseTable).select(API)
        await pilot.pause()

    assert snap_compare(attached_app(), terminal_size=(80, 24), run_before=show)


@pytest.mark.parametrize("key", [API, WORKER], ids=["in-sync", "upgrading-with-a-cancel-requested"])
def test_attached_overview(snap_compare: Any, key: tuple[str, str]) -> None:
    """The Overview names the controller (holder, shard, Lease, heartbeat), the replica its status names, the
    object's generations and requests."""
    async def open_overview(pilot: Pilot[None]) -> None:
        await pilot.pause()
        pilot.app.query_one(ReleaseTable).select(key)
        await pilot.press("enter", "1")
        await pilot.pause(0.3)

    assert snap_compare(attached_app(), terminal_size=TALL, run_before=open_overview)


async def open_pulses(pilot: Pilot[None], read: Callable[[PulsesScreen], bool] = lambda screen: bool(screen.pulses),
                      ) -> None:
    """Press P and wait (5 s at most) until the P view has ``read`` its first figures, then a frame more."""
    await pilot.pause()
    await pilot.press("P")
    for _ in range(50):
        if isinstance(pilot.app.screen, PulsesScreen) and read(pilot.app.screen):
            break
        await pilot.pause(0.1)
    await pilot.pause(0.2)


@pytest.mark.parametrize("theme", THEMES)
def test_controller_view(snap_compare: Any, theme: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """P: two replicas' pulses; ctl-1's failures rise: its line and name in the error colour."""
    monkeypatch.setattr(screens.pulses, "EVERY", 3600.0)  # one reading, at open: the snapshot holds still

    assert snap_compare(pulses_app(theme), terminal_size=TALL, run_before=open_pulses)


def test_controller_view_without_metrics(snap_compare: Any) -> None:
    """P with no controller metrics known: how to give them."""
    engine = fixed_engine()
    engine.gate.online = True
    app = HelmdeckApp(engine, context="helmdeck-local", start_engine=False, clock=fixed_clock,
                      masker=Masker(b"snapshots"))

    async def open_without_metrics(pilot: Pilot[None]) -> None:
        await open_pulses(pilot, read=lambda screen: screen.pulses is not None)

    assert snap_compare(app, terminal_size=MAIN, run_before=open_without_metrics)


def test_a_controller_whose_figures_are_all_zero_draws_flat_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """P opened on an idle controller: its first readings are all zero, and every sparkline was drawn at full
    height (Textual draws a lone value so), reading as full activity until more readings came."""
    monkeypatch.setattr(screens.pulses, "EVERY", 3600.0)  # the reading at open only
    engine = attached_engine()
    meter = PulseMeter(lambda: [("ctl-0", "http://ctl-0:8080/metrics")],
                       read=lambda _url: _exposition(0, 0, 0, []), clock=FixedReplicas().clock)
    engine.pulse_meter = lambda: meter
    app = HelmdeckApp(engine, context="helmdeck-local", start_engine=False, clock=fixed_clock,
                      masker=Masker(b"snapshots"))

    async def run() -> list[str]:
        async with app.run_test(size=TALL) as pilot:
            await open_pulses(pilot)
            lines = [line.render_line(0).text for line in pilot.app.screen.query(Sparkline)]
            assert lines, "no sparkline drawn"
            return lines

    drawn = asyncio.run(run())
    assert all(set(line.strip()) <= {"▁"} for line in drawn), drawn


def test_u_on_an_attached_package_asks_first_naming_the_request_and_the_controller() -> None:
    """Attached, u sent the forced upgrade at once, where on a file package it asks first: it asks, saying what
    is requested (a forced upgrade, on the Package object) and of which controller (the replica its status
    names, or the Lease holder, and its shard); escape requests nothing."""
    app = attached_app()

    async def run() -> ConfirmScreen:
        async with app.run_test(size=MAIN) as pilot:
            await pilot.pause()
            pilot.app.query_one(ReleaseTable).select(API)
            await pilot.pause()
            await pilot.press("u")
            for _ in range(50):
                if isinstance(pilot.app.screen, ConfirmScreen):
                    break
                await pilot.pause(0.1)
            screen = pilot.app.screen
            assert isinstance(screen, ConfirmScreen), "u did not ask"
            await pilot.press("escape")
            await pilot.pause()
            assert not app.client.release(API).attached.requested  # type: ignore[union-attr]
            return screen

    asked = asyncio.run(run()).confirmation
    view = attached_engine().release(API)
    assert view is not None and view.attached is not None
    who = view.attached.replica or view.attached.controller
    assert asked.title == "Request upgrade?" and asked.confirm_label == "Request"
    assert (f"Request a forced upgrade of release api in namespace team-a from helmdeck controller {who}, shard "
            "shard1: a request annotation on Package team-a/api") in asked.body, asked.body
