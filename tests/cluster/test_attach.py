"""The app attached to a controller, its pure parts: which Leases are live controllers, a Package object's status
as the row shows it, and the gate's rules for a release the controller reconciles."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from typing import Any

from kubernetes import client

from engine.base.wire import CONTROLLER, METRICS, ROLE, SELECTOR, SHARD, SHARD_KEY, WATCH_NAMESPACES
from engine.package.load import load_objects
from engine.runtime.cockpit.attach import Attachment, attached_fields, attached_state, live_controllers
from engine.runtime.drive.lease import LeaseElector
from engine.runtime.ledger.book import ReleaseBook
from engine.runtime.ledger.gate import READ_ONLY
from engine.runtime.ledger.owners import owner_of
from engine.runtime.report import status_row
from engine.runtime.state import Attached, Condition
from engine.storage.observer import Observer
from testkit.controller import oci_repository, package
from testkit.fixtures import FLAKY, LEGACY, fixed_engine


def _lease(name: str, holder: str, renewed_ago: float, notes: dict[str, str] | None = None) -> dict[str, Any]:
    renew = (dt.datetime.now(dt.UTC) - dt.timedelta(seconds=renewed_ago)).isoformat().replace("+00:00", "Z")
    return {"metadata": {"name": name, "namespace": "helmdeck", "labels": {ROLE: CONTROLLER},
                         "annotations": notes or {}},
            "spec": {"holderIdentity": holder, "renewTime": renew, "leaseDurationSeconds": 15}}


def test_a_controller_is_live_while_its_holder_renews_the_lease() -> None:
    found = live_controllers([
        _lease("helmdeck-cluster", "helmdeck-7f9c-x2", 3, {WATCH_NAMESPACES: "a,b", METRICS: "http://0.0.0.0:8080"}),
        _lease("helmdeck-cluster-1", "dead-pod", 60),  # not renewed for 60 s of a 15 s Lease
        _lease("helmdeck-cluster-2", "", 1),  # given up on a clean stop
    ])
    assert [(c.holder, c.lease, c.namespaces, c.metrics) for c in found] == [
        ("helmdeck-7f9c-x2", "helmdeck/helmdeck-cluster", ("a", "b"), "http://0.0.0.0:8080")]
    assert found[0].covers("a") and not found[0].covers("c")
    assert live_controllers([_lease("x", "h", 3)])[0].covers("anything")  # no list: every namespace


def test_a_shards_controller_covers_the_objects_its_selector_matches() -> None:
    def sharded(name: str, holder: str, shard: str, selector: str) -> dict[str, Any]:
        lease = _lease(name, holder, 2, {SELECTOR: selector})
        lease["metadata"]["labels"][SHARD] = shard
        return lease

    found = live_controllers([sharded("helmdeck-cluster-aa", "p1", "shard1", f"{SHARD_KEY}=shard1"),
                              sharded("helmdeck-cluster-bb", "p0", "main", f"!{SHARD_KEY}"),
                              sharded("helmdeck-cluster-cc", "px", "broken", "a in (")])  # annotated by hand
    by_shard = {c.shard: c for c in found}
    assert by_shard["shard1"].selector == f"{SHARD_KEY}=shard1"
    assert by_shard["shard1"].covers("team-a", {SHARD_KEY: "shard1"})
    assert not by_shard["shard1"].covers("team-a", {})
    assert by_shard["main"].covers("team-a", {}) and not by_shard["main"].covers("team-a", {SHARD_KEY: "shard1"})
    assert not by_shard["broken"].covers("team-a", {})  # a selector that does not parse covers nothing
    assert by_shard["shard1"].covers("team-a")  # the namespace alone: it reconciles some of its objects


def test_status_controller_names_the_replica_and_shard_as_the_owner() -> None:
    obj = _object({"observedGeneration": 2, "controller": {"replica": "pod-7f9c", "shard": "shard1"}}, {})
    specs, errors = load_objects([obj], [oci_repository("team-a", "127.0.0.1:1/x")])
    assert not errors
    attached = attached_fields(obj, specs[0], "pod-7f9c", "helmdeck/helmdeck-cluster-aa")["attached"]
    assert (attached.lease, attached.replica, attached.shard) == ("helmdeck/helmdeck-cluster-aa", "pod-7f9c", "shard1")
    engine = fixed_engine()
    key = specs[0].key
    engine.book.set_attached({key: attached_fields(obj, specs[0], "pod-7f9c", "helmdeck/helmdeck-cluster-aa")})
    view = engine.release(key)
    assert view is not None
    assert owner_of(view).text == "helmdeck controller, Package team-a/api, replica pod-7f9c, shard shard1"
    assert status_row(view)["owner"] == {"kind": "controller", "namespace": "team-a", "name": "api",
                                         "replica": "pod-7f9c", "shard": "shard1", "packageSet": None}
    bare = _object({"observedGeneration": 2}, {})  # not written yet (an older controller): no replica, no shard
    assert attached_fields(bare, specs[0], "pod-7f9c")["attached"].replica == ""


def _object(status: dict[str, Any], annotations: dict[str, str]) -> dict[str, Any]:
    obj = package("team-a", "api")
    obj["metadata"].update(generation=2, annotations=annotations)
    obj["status"] = status
    return obj


def test_the_row_follows_the_objects_status() -> None:
    obj = _object({"observedGeneration": 2, "lastAttemptedRevision": "0.2.0", "lastAppliedRevision": "0.1.0",
                   "failures": 2, "upgradeFailures": 2,
                   "conditions": [{"type": "Ready", "status": "False", "reason": "UpgradeFailed",
                                   "message": "boom", "lastTransitionTime": "2026-12-01T10:00:00Z"}]},
                  {"reconcile.helmdeck.dev/forceAt": "t1", "cancel.helmdeck.dev/requestedAt": "t2"})
    obj["status"]["lastHandledCancelAt"] = "t2"  # the cancel was handled, the forced upgrade not yet
    specs, errors = load_objects([obj], [oci_repository("team-a", "127.0.0.1:1/x")])
    assert not errors
    fields = attached_fields(obj, specs[0], "helmdeck-7f9c")
    assert fields["attached"] == Attached(("team-a", "api"), "helmdeck-7f9c", 2, 2, "0.2.0", "0.1.0", ("upgrade",))
    assert fields["state"] == "Failed" and fields["ready"] is False
    assert fields["failures"].upgrade == 2 and fields["failures"].total == 2
    assert fields["conditions"][0].reason == "UpgradeFailed"


def test_the_state_is_the_controllers_verdict() -> None:
    ready = Condition("Ready", "True", "UpgradeSucceeded")
    assert attached_state((ready,), 3, 3) == "InSync"
    assert attached_state((ready,), 4, 3) == "OutOfSync"  # an edited spec waits for its pass
    assert attached_state((), 1, 0) == "OutOfSync"
    assert attached_state((Condition("Ready", "Unknown", "InMaintenance"),), 3, 3) == "InSync"
    assert attached_state((Condition("Ready", "Unknown", "Progressing"),), 3, 3) == "OutOfSync"
    assert attached_state((ready, Condition("Stalled", "True", "RetriesExceeded")), 3, 3) == "Stalled"
    assert attached_state((Condition("Ready", "False", "InvalidPackage"),), 3, 3) == "Failed"


def _attached_engine(*, readonly: bool = False) -> Any:
    engine = fixed_engine(readonly=readonly)
    engine.gate.online = True
    found = {FLAKY: Attached(("helmdeck-demo", "flaky"), "helmdeck-7f9c"),
             LEGACY: Attached(("legacy", "legacy-api"), "helmdeck-7f9c")}
    engine.gate.attached = found.get
    return engine


def test_the_gate_decides_and_the_controller_carries_out() -> None:
    gate = _attached_engine().gate
    gate.set_lease("another-app", False)  # this app's own lease does not matter for a request
    for action in ("upgrade", "rollback", "monitor", "maintenance", "suspend", "reconcile"):
        assert gate.why_not(action, FLAKY) is None, action
    assert "kubectl delete pkg -n helmdeck-demo flaky" in str(gate.why_not("uninstall", FLAKY))
    assert "takes no test request" in str(gate.why_not("test", FLAKY))
    assert gate.why_not("versions", FLAKY) is None  # pinned in the object
    assert "not pending" in str(gate.why_not("unlock", FLAKY))
    assert "nothing to cancel" in str(gate.why_not("cancel", FLAKY))
    # legacy-api is pending-upgrade: the controller's action runs, it can be cancelled or unlocked
    assert gate.why_not("cancel", LEGACY) is None and gate.why_not("unlock", LEGACY) is None


def test_read_only_refuses_every_request() -> None:
    gate = _attached_engine(readonly=True).gate
    for action in ("upgrade", "rollback", "monitor", "maintenance", "suspend", "cancel", "unlock"):
        assert gate.why_not(action, LEGACY) == READ_ONLY


def _unreachable() -> client.ApiClient:
    config = client.Configuration()
    config.host = "http://127.0.0.1:9"  # nothing listens: urllib3 raises MaxRetryError, not an OSError
    return client.ApiClient(config)


async def test_an_unreachable_api_server_is_said_and_the_attachment_keeps_trying() -> None:
    attachment = Attachment(_unreachable(), ReleaseBook(Observer(None)), None, lambda _ns, _cb: lambda: None,
                            every=0.05)
    task = asyncio.create_task(attachment.run())
    for _ in range(100):
        if attachment.problem:
            break
        await asyncio.sleep(0.05)
    assert not task.done() and "controller Leases unreadable" in attachment.problem
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_a_leader_that_cannot_reach_the_api_server_stops_acting_after_its_lease() -> None:
    changes: list[tuple[str, bool]] = []
    elector = LeaseElector(_unreachable(), "helmdeck-cluster", duration=0.2, retry=0.05,
                           on_change=lambda holder, leader: changes.append((holder, leader)))
    elector._set(elector.identity, True)  # it led, then the API server went away
    elector.start()
    for _ in range(100):
        if not elector.leader:
            break
        await asyncio.sleep(0.05)
    assert not elector.leader and changes[-1] == (elector.identity, False)
    assert elector.last_error is not None and "127.0.0.1" in elector.last_error
    await elector.stop(release=False)
