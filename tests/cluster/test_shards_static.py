"""Static shards beside each other (engine.runtime.cluster.static_shards): the overlap rule on small inputs, then on
the local cluster two `helmdeck controller`s whose selectors overlap (neither acts on a Package both take, and
says so), and a Package relabelled from one shard to the other while its upgrade runs (the other starts nothing
on the release until that upgrade ended or was cancelled at --stop-deadline)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from engine.base.wire import SELECTOR, SHARD, SHARD_KEY, WATCH_NAMESPACES
from engine.base.wire import SHARD_OVERLAP as OVERLAP
from engine.runtime.cluster.shard_selector import Peer, overlap_message, overlapping, peer_of, shard_for
from testkit.churn import Churn
from testkit.controller import GROUP, VERSION, create, eventually, get_package, package, releases, sees_live
from testkit.release_audit import IN_PROGRESS, read_processes
from tests.controller_fixtures import ControllerEnv

# -- the rule -----------------------------------------------------------------------------------------------------


def _peer(selector: str, lease: str = "helmdeck-cluster-b", shard: str = "b", namespaces: tuple[str, ...] = ()) -> Peer:
    return Peer(lease, f"host-1-{lease[-1]}", shard, selector, namespaces)


@pytest.mark.parametrize(("selector", "labels", "overlaps"), [
    (f"{SHARD_KEY}=x", {SHARD_KEY: "x"}, True),
    (f"{SHARD_KEY} notin (x)", {SHARD_KEY: "x"}, False),  # the fix the message gives: disjoint selectors
    (f"{SHARD_KEY} notin (x)", {}, True),
    (f"!{SHARD_KEY}", {SHARD_KEY: "x"}, False),
    (f"{SHARD_KEY} in (x,y)", {SHARD_KEY: "y"}, True),
    ("", {SHARD_KEY: "x"}, True),  # a controller without a selector takes every Package
    ("team=a,tier", {"team": "a"}, False),
    ("team in (a", {SHARD_KEY: "x"}, True),  # a selector it cannot read: reported, not missed
])
def test_another_live_shard_whose_selector_matches_the_labels_overlaps(
    selector: str, labels: dict[str, str], overlaps: bool,
) -> None:
    assert bool(overlapping([_peer(selector)], "apps", labels)) is overlaps


def test_only_the_namespaces_a_peer_watches_overlap_and_auto_members_count_once() -> None:
    assert not overlapping([_peer("", namespaces=("other",))], "apps", {})
    assert overlapping([_peer("", namespaces=("other", "apps"))], "apps", {})
    members = [_peer("", lease=f"helmdeck-member-{i}", shard="auto") for i in range(3)]
    found = overlapping([*members, _peer(f"!{SHARD_KEY}", lease="helmdeck-cluster-main", shard="main")], "apps", {})
    assert [p.lease for p in found] == ["helmdeck-cluster-main", "helmdeck-member-0"]  # sorted by Lease: stable


def test_the_overlap_message_names_both_selectors_and_the_fix() -> None:
    mine = shard_for(f"{SHARD_KEY} in (x,y)")
    assert mine is not None
    text = overlap_message(mine, ("apps", "web"), (_peer(f"{SHARD_KEY}=y", lease="helmdeck-cluster-1a2b"),))
    assert "Package apps/web" in text and f"{SHARD_KEY} in (x,y)" in text and f"{SHARD_KEY}=y" in text
    assert "helmdeck-cluster-1a2b" in text and "neither acts" in text
    assert f"{SHARD_KEY}=X on one and {SHARD_KEY} notin (X) on the other" in text


def test_a_peer_is_read_from_its_lease() -> None:
    lease = {"metadata": {"name": "helmdeck-cluster-0a", "labels": {SHARD: "shard1"},
                          "annotations": {SELECTOR: f"{SHARD_KEY}=shard1", WATCH_NAMESPACES: "a,b"}},
             "spec": {"holderIdentity": "host-7-beef"}}
    assert peer_of(lease) == Peer("helmdeck-cluster-0a", "host-7-beef", "shard1", f"{SHARD_KEY}=shard1", ("a", "b"))
    assert peer_of({"metadata": {"name": "x"}, "spec": {}}) is None  # given up: nobody acts for it
    assert peer_of({"metadata": {"name": "x"}, "spec": {"holderIdentity": "h"}}) == Peer("x", "h")
    huge = {"metadata": {"name": "x", "annotations": {SELECTOR: "a" * 100_000}}, "spec": {"holderIdentity": "h"}}
    peer = peer_of(huge)
    assert peer is not None and peer.takes("apps", {})  # bounded, unreadable: counted as taking everything


# -- on the local cluster -----------------------------------------------------------------------------------------

def _events(env: ControllerEnv, name: str, reason: str) -> list[Any]:
    items: Any = env.core.list_namespaced_event(env.namespace, field_selector=f"involvedObject.name={name}").items
    return [e for e in items if e.reason == reason]


@pytest.mark.cluster
def test_two_shards_whose_selectors_overlap_leave_the_shared_package_alone_and_say_so(
    controller_env: ControllerEnv,
) -> None:
    env = controller_env
    ns = env.namespace
    env.web_source()
    # A Lease longer than the fixture's 6 s: under this machine's load a process may freeze for seconds, and a
    # shard not seen renewing for the duration is not live (the other may then act: the claim keeps that safe).
    slow = ("--lease-duration", "15")
    wide = env.start("--watch-label-selector", f"{SHARD_KEY} in (s1,s2)", *slow, name="wide")
    narrow = env.start("--watch-label-selector", f"{SHARD_KEY}=s2", *slow, name="narrow")

    def logs() -> str:
        return f"--- wide\n{wide.text()}\n--- narrow\n{narrow.text()}"

    try:
        # Both hold their Leases before any Package exists: neither can act on the shared one unseen.
        eventually(lambda: len(env.coordination.list_namespaced_lease(
            ns, label_selector=f"{SHARD}").items) == 2 or None, 60, "both shards' Leases", logs=logs)
        # Each has listed the other live (Membership logs the live set when it changes).
        eventually(lambda: all(sees_live(ctl, 2) for ctl in (wide, narrow)), 60, "each shard sees the other live",
                   logs=logs)
        one = package(ns, "one", values={"replicas": 1})
        one["metadata"]["labels"] = {SHARD_KEY: "s1"}
        both = package(ns, "both", values={"replicas": 1})
        both["metadata"]["labels"] = {SHARD_KEY: "s2"}
        also = package(ns, "also", values={"replicas": 1})
        also["metadata"]["labels"] = {SHARD_KEY: "s2"}
        for obj in (one, both, also):
            create(env.objects, obj)
        eventually(lambda: releases(env.core, ns, "one") == [(1, "deployed")] or None, 120, "one installed",
                   logs=logs)
        warned = eventually(lambda: len(_events(env, "both", OVERLAP)) >= 2 or None, 60,
                            "a ShardOverlap Warning from each shard", logs=logs)
        assert warned
        for event in _events(env, "both", OVERLAP):
            assert event.type == "Warning"
            assert f"{SHARD_KEY} in (s1,s2)" in event.message and f"{SHARD_KEY}=s2" in event.message, event.message
            assert f"{SHARD_KEY} notin (X)" in event.message  # the fix
        leases: Any = env.coordination.list_namespaced_lease(ns, label_selector=SHARD).items
        holders = {lease.spec.holder_identity for lease in leases}
        assert {e.reporting_instance for e in _events(env, "both", OVERLAP)} == holders  # each shard said so
        for ctl in (wide, narrow):
            assert "neither acts on it" in ctl.text() and f"{ns}/both: install" not in ctl.text(), logs()
        assert releases(env.core, ns, "both") == []  # never installed while both shards are live
        assert f"{ns}/one:" not in narrow.text()

        assert releases(env.core, ns, "also") == []

        # One selector alone matches it once relabelled: the wide shard installs it at once.
        env.objects.patch_namespaced_custom_object(GROUP, VERSION, ns, "packages", "both",
                                                   {"metadata": {"labels": {SHARD_KEY: "s1"}}})
        eventually(lambda: releases(env.core, ns, "both") == [(1, "deployed")] or None, 60,
                   "both installed by the wide shard once relabelled", logs=logs)
        # ... or once the other shard is gone.
        assert releases(env.core, ns, "also") == []
        assert narrow.stop() == 0, narrow.text()
        eventually(lambda: releases(env.core, ns, "also") == [(1, "deployed")] or None, 120,
                   "also installed by the wide shard alone", logs=logs)
        def replica(name: str) -> str:
            status = (get_package(env.objects, ns, name) or {}).get("status") or {}
            return str((status.get("controller") or {}).get("replica") or "")

        eventually(lambda: all(f"-{wide.pid}-" in replica(n) for n in ("both", "also")), 30,
                   "status.controller names the wide shard", logs=logs)
        assert f"{ns}/both: install" not in narrow.text() and f"{ns}/also: install" not in narrow.text()
    finally:
        wide.stop()
        narrow.stop()


def _relabel(churn: Churn, name: str, shard: str, value: str) -> float:
    """Move Package ``name`` to ``shard`` and change its value in one write (its upgrade quick again: 1 s of
    minReadySeconds); returns when (epoch seconds)."""
    churn.objects.patch_namespaced_custom_object(GROUP, VERSION, churn.namespace, "packages", name, {
        "metadata": {"labels": {SHARD_KEY: shard}}, "spec": {"values": {"value": value, "delay": 1}}})
    return time.time()


@pytest.mark.cluster
@pytest.mark.timeout(480)
@pytest.mark.parametrize(("delay", "deadline", "cancelled"), [
    pytest.param(8, 30, False, id="finishes"),
    pytest.param(40, 4, True, id="cancelled-at-stop-deadline"),
])
def test_a_package_relabelled_mid_upgrade_is_acted_on_by_its_new_shard_only_after_the_old_one_let_go(
    controller_env: ControllerEnv, delay: int, deadline: int, cancelled: bool,
) -> None:
    env = controller_env
    churn = Churn(env.objects.api_client, env.kubeconfig, env.namespace, env.helm, env.work, env.registry,
                  lease=10.0, extra=("--watch-label-selector", f"!{SHARD_KEY}", "--stop-deadline", str(deadline)))
    try:
        # Only a's upgrade takes `delay` seconds: the install before it and b's upgrade after the move wait 1 s.
        (name,) = churn.packages(1, delay=1, timeout="2m")
        a = churn.start("a")
        churn.extra = ("--watch-label-selector", f"{SHARD_KEY}=b", "--stop-deadline", str(deadline))
        b = churn.start("b")
        eventually(lambda: releases(env.core, env.namespace, name) == [(1, "deployed")] or None, 60,
                   "installed by a", logs=churn.tails)
        churn.objects.patch_namespaced_custom_object(GROUP, VERSION, env.namespace, "packages", name,
                                                     {"spec": {"values": {"delay": delay, "value": "e1"}}})
        assert churn.acting("upgrade", timeout=60) is a, churn.tails()
        moved = _relabel(churn, name, "b", "after-move")

        def done() -> bool:
            obj = get_package(env.objects, env.namespace, name) or {}
            status = obj.get("status") or {}
            return (status.get("controller") or {}).get("shard") == "b" and not status.get("claim") and any(
                p.replica == b.replica and p.command == "upgrade" and p.end is not None
                for p in read_processes(churn.helm_log))

        eventually(done, 120 + delay, "upgraded by b after the move", every=1.0, logs=churn.tails)
        processes = sorted(read_processes(churn.helm_log), key=lambda p: p.start)
        a_upgrades = [p for p in processes if p.replica == a.replica and p.command == "upgrade"]
        b_actions = [p for p in processes if p.replica == b.replica]
        assert a_upgrades and b_actions, processes
        a_ended = max(p.end or float("inf") for p in a_upgrades)
        assert min(p.start for p in b_actions) > a_ended, (a_upgrades, b_actions)  # never both on the release
        assert all(p.start < moved for p in a_upgrades)  # a started nothing after the move
        texts = a.ctl.text() + b.ctl.text()
        assert not IN_PROGRESS.search(texts), texts  # not even the new shard's dry-run render met a's lock
        assert "handover info: placed on another shard" in a.ctl.text(), a.ctl.text()
        if cancelled:
            assert a_ended - moved < deadline + 15, (a_ended - moved)  # stopped at its deadline, not at its end
            assert "cancelled as the package moved to another shard" in a.ctl.text(), a.ctl.text()
        else:
            assert a_ended - moved < delay + 5  # it finished on its own
            assert "cancelled as the package moved" not in a.ctl.text(), a.ctl.text()
        # The old shard's upgrade ended after its Package left: that end is still an Event on the Package.
        items: Any = env.core.list_namespaced_event(env.namespace, field_selector=f"involvedObject.name={name}").items
        assert [e for e in items if e.reason in ("UpgradeSucceeded", "UpgradeFailed", "UpgradeCancelled")
                and f"-{a.ctl.pid}-" in (e.reporting_instance or "") and e.event_time.timestamp() > moved], items
        findings = [f for f in churn.audit() if f.kind in ("overlap", "in-progress", "pending")]
        assert findings == [], "\n".join(map(str, findings))
        obj = get_package(env.objects, env.namespace, name) or {}
        assert (obj["spec"]["values"] or {}).get("value") == "after-move"
    finally:
        churn.stop()
