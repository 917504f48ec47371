"""``helmdeck controller --shards auto`` on the local cluster: membership Leases, and replicas as processes each
reconciling the Packages placed on it, the claim cleared after each action, a killed replica's share taken over."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from engine.base.wire import SHARD
from engine.kube.client import KubeTarget, api_client
from engine.package.load import object_origin
from engine.runtime.assemble import build_engine
from engine.runtime.cluster.members import AUTO, Membership, member_lease, member_lease_name
from engine.runtime.cluster.objects import PACKAGES, PackageObjects
from engine.runtime.cluster.shards import Shards
from engine.runtime.drive.lease import LeaseElector
from engine.runtime.engine import Engine
from engine.runtime.ledger.book import ReleaseBook
from engine.runtime.ledger.claims import ClaimRefused, LeaseLapsed
from engine.runtime.ledger.placement import assign, package_name
from engine.runtime.package_set import cluster_package_set
from engine.storage.observer import Observer
from testkit.churn import Churn, ready_now
from testkit.controller import (
    GROUP,
    VERSION,
    Controller,
    create,
    eventually,
    get_package,
    oci_repository,
    package,
    released,
    releases,
    sees_live,
)
from tests.cluster.test_lease import wait_until
from tests.controller_fixtures import Apis, ControllerEnv

pytestmark = pytest.mark.cluster
LEASE = 10  # seconds: --lease-duration of the replicas (this 2-core machine runs at a load of 30: shorter ones lapse)


def _member(kube_target: KubeTarget, namespace: str, identity: str) -> tuple[LeaseElector, Membership]:
    config = member_lease(identity, namespace, 2.0)
    api = api_client(kube_target)
    elector = LeaseElector(api, config.name, namespace, identity=identity, duration=config.duration, retry=0.3,
                           labels=dict(config.labels))
    return elector, Membership(api, namespace, identity, duration=config.duration, retry=0.3)


async def test_members_see_each_other_and_a_silent_one_is_gone_after_the_lease_duration(
    kube_target: KubeTarget, namespace: str,
) -> None:
    (ea, ma), (eb, mb), (ec, mc) = (_member(kube_target, namespace, i) for i in ("a", "b", "c"))
    for e in (ea, eb, ec):
        e.start()
    tasks = [asyncio.create_task(m.run()) for m in (ma, mb, mc)]
    try:
        await wait_until(lambda: all(m.live() == {"a", "b", "c"} for m in (ma, mb, mc)), 10)
        assert ea.name == member_lease_name("a") and ea.labels[SHARD] == AUTO

        loop = asyncio.get_running_loop()
        died = loop.time()
        await ec.stop(release=False)  # c dies: its Lease stays, unrenewed
        await wait_until(lambda: ma.live() == {"a", "b"}, 6)
        took = loop.time() - died
        assert 2.0 <= took < 4.0, took  # the Lease duration, by a's own clock, within a couple of lists
        assert not ma.members().is_live("c") and ma.members().silence("c") >= 2.0

        await eb.stop(release=True)  # b stops cleanly: gone at the next list, not after a Lease duration
        gave_up = loop.time()
        await wait_until(lambda: ma.live() == {"a"}, 3)
        assert loop.time() - gave_up < 1.5
    finally:
        for t in tasks:
            t.cancel()
        for e in (ea, eb, ec):
            await e.stop()


async def test_a_members_renewal_counts_from_the_watch_not_from_the_next_list(
    kube_target: KubeTarget, namespace: str,
) -> None:
    """A renewal is seen as the API server sends it (the Leases' watch), not up to a renew interval later at the
    next list: b's silence at the first list after its renewal is the time since the watch brought it, not 0. The
    lists are 30 s apart here, so only the watch can show the renewal at all meanwhile."""
    eb, _ = _member(kube_target, namespace, "b")
    assert await eb.confirm()
    api = api_client(kube_target)
    ma = Membership(api, namespace, "a", duration=30.0, retry=30.0)
    task = asyncio.create_task(ma.run())
    try:
        await wait_until(lambda: "b" in ma._seen, 10)  # the first list
        listed = ma._seen["b"][0]
        await asyncio.sleep(0.5)  # the watch opened (from the list's resourceVersion in its thread)
        assert await eb.confirm()  # b renews: nothing lists for 30 s now
        await wait_until(lambda: ma._seen["b"][0] != listed, 10)
        renewed = ma._seen["b"][0]
        await ma.refresh()  # a list: the same renewTime, its first sight kept
        assert ma._seen["b"][0] == renewed and ma.members().silence("b") > 0
    finally:
        task.cancel()
        await eb.stop()


async def _replica(kube_target: KubeTarget, namespace: str, identity: str, duration: float) -> Shards:
    """One replica's claim side over the real API server: its view of the Package objects as listed now (no
    watch: it goes stale, as a replica's view does for a moment), its membership Lease renewed once."""
    api = api_client(kube_target)
    objects = PackageObjects(api, [namespace])
    await asyncio.to_thread(objects.load)
    book = ReleaseBook(Observer(None))
    book.set_packages(objects.specs())
    elector = LeaseElector(api, member_lease_name(identity), namespace, identity=identity, duration=duration,
                           retry=0.3, labels={SHARD: AUTO})
    assert await elector.confirm()
    membership = Membership(api, namespace, identity, duration=duration, retry=0.3)
    await membership.refresh()
    shards = Shards(api, objects, book, membership, elector, lambda _ns, _n: None, lambda coro: coro.close())
    membership.on_change = shards.on_members  # as the engine wires it, and places once the members are listed
    shards.on_members(membership.live())
    return shards


def _placed(names: list[str], namespace: str, members: list[str]) -> dict[str, str]:
    """The member placement gives each of the Packages ``names`` of ``namespace`` (all its Packages) on ``members``."""
    placed = assign([package_name(namespace, n) for n in names], members)
    return {n: placed[package_name(namespace, n)] for n in names}


def _claim(apis: Apis, namespace: str, name: str) -> dict[str, Any] | None:
    claim = ((get_package(apis[0], namespace, name) or {}).get("status") or {}).get("claim")
    return dict(claim) if claim else None


async def test_of_two_replicas_claiming_at_once_one_wins_and_a_silent_ones_claim_is_taken_over(
    apis: Apis, kube_target: KubeTarget, namespace: str,
) -> None:
    # A Package placement gives a when a and b are live: b, which does not know a yet, thinks it its own too.
    name = next(n for n in (f"web-{i}" for i in range(100)) if _placed([n], namespace, ["a", "b"])[n] == "a")
    create(apis[0], oci_repository(namespace, "127.0.0.1:1/unused"))
    create(apis[0], package(namespace, name))
    key = (namespace, name)
    b = await _replica(kube_target, namespace, "b", 30.0)  # lists before a's Lease exists: sees only itself
    a = await _replica(kube_target, namespace, "a", 30.0)
    c = None
    try:
        assert a.placed_elsewhere(key) is None and b.placed_elsewhere(key) is None  # both think it theirs
        # Both read it unclaimed; a writes first; b's write carries the resourceVersion it read: 409 every time.
        await a.fence(key, "upgrade", 60)
        claim = _claim(apis, namespace, name)
        assert claim is not None
        assert (claim["replica"], claim["action"], claim["timeoutSeconds"]) == ("a", "upgrade", 60)
        with pytest.raises(ClaimRefused, match="409 Conflict"):
            await b.fence(key, "install", 60)
        assert _claim(apis, namespace, name) == claim

        # Seen as it is now, a's claim is a live member's: refused.
        await asyncio.to_thread(b.objects.load)
        with pytest.raises(ClaimRefused, match="a live member"):
            await b.fence(key, "install", 60)
        assert not await b._swap_own(key, None)  # b clears only its own claim

        # A later action of a's pass rewrites its own claim; letting go clears it.
        await a.fence(key, "test", 60)
        assert (_claim(apis, namespace, name) or {})["action"] == "test"
        await a.let_go(key)
        assert _claim(apis, namespace, name) is None

        # a claims again and falls silent (nothing renews its Lease). c, with a 1 s Lease duration, takes the
        # claim over once a has been silent that long in its sight; a's next action, and its letting go, find the
        # claim c's and leave it.
        await asyncio.to_thread(a.objects.load)
        await a.fence(key, "upgrade", 60)
        c = await _replica(kube_target, namespace, "c", 1.0)
        assert c.membership.members().is_live("a")  # first sight counts as a renewal
        with pytest.raises(ClaimRefused):
            await c.fence(key, "upgrade", 60)  # a live member's claim (or placed on a)
        await asyncio.sleep(1.2)
        await c.membership.refresh()
        assert c.membership.live() == {"c"}
        await c.fence(key, "upgrade", 60)
        assert (_claim(apis, namespace, name) or {})["replica"] == "c"
        await asyncio.to_thread(a.objects.load)
        with pytest.raises(ClaimRefused, match="no longer this replica's"):
            await a.fence(key, "test", 60)
        await a.let_go(key)
        assert (_claim(apis, namespace, name) or {})["replica"] == "c"
    finally:
        for r in (a, b, c):
            if r is not None:
                await r.elector.stop()


async def test_a_claim_is_not_taken_over_on_a_list_of_the_members_older_than_the_claim(
    apis: Apis, kube_target: KubeTarget, namespace: str,
) -> None:
    name = "web"
    create(apis[0], oci_repository(namespace, "127.0.0.1:1/unused"))
    create(apis[0], package(namespace, name))
    key = (namespace, name)
    a = await _replica(kube_target, namespace, "a", 30.0)  # lists before c exists: the Package is a's
    c = await _replica(kube_target, namespace, "c", 2.0)
    try:
        # c lists while a is silent (paused): a is gone in c's view, the Package placed on c.
        await asyncio.sleep(2.2)
        await c.membership.refresh()
        assert c.membership.live() == {"c"}
        # a comes back: renews its Lease and claims the release. c reads the claim, its last list older than it.
        assert await a.elector.confirm()
        await a.fence(key, "upgrade", 60)
        await asyncio.to_thread(c.objects.load)
        assert await c.elector.confirm()  # c itself is not paused: no re-check of its own on that account
        with pytest.raises(ClaimRefused, match="a live member"):
            await c.fence(key, "upgrade", 60)
        assert (_claim(apis, namespace, name) or {})["replica"] == "a"
        assert c.membership.live() == {"a", "c"}
    finally:
        for r in (a, c):
            await r.elector.stop()


async def test_a_package_created_or_deleted_moves_another_through_gained_and_lost(
    apis: Apis, kube_target: KubeTarget, namespace: str,
) -> None:
    # Bounded loads weigh the whole set: four Packages (two each on a and b, the cap), then a fifth that moves
    # one of the four to the other replica. Each replica places again after the burst that brings the fifth,
    # and hands the moved one over as on a member change; deleting the fifth moves it back.
    # Three that rank a first and one that ranks b first: one of a's three is over the cap (2) and goes to b,
    # and a fifth Package raises the cap to 3, so that one can come back to a (a 2/2 split would move nothing).
    first = {n: _placed([n], namespace, ["a", "b"])[n] for n in (f"w{i}" for i in range(200))}
    names = [n for n in first if first[n] == "a"][:3] + [n for n in first if first[n] == "b"][:1]
    before = _placed(names, namespace, ["a", "b"])
    new = next(n for n in (f"x{i}" for i in range(200))
               if any(m != before[k] for k, m in _placed([*names, n], namespace, ["a", "b"]).items() if k in before))
    after = _placed([*names, new], namespace, ["a", "b"])
    [moved] = [n for n in names if after[n] != before[n]]
    create(apis[0], oci_repository(namespace, "127.0.0.1:1/unused"))
    for name in names:
        create(apis[0], package(namespace, name))
    replicas = {r: await _replica(kube_target, namespace, r, 30.0) for r in ("a", "b")}
    changes: list[tuple[str, str, set[str]]] = []

    def record(replica: str, what: str) -> Callable[[set[tuple[str, str]]], None]:
        return lambda keys: changes.append((replica, what, {k[1] for k in keys}))

    for r, shards in replicas.items():
        await shards.membership.refresh()  # a listed before b's Lease existed
        shards.gained, shards.lost = record(r, "gained"), record(r, "lost")
    try:
        assert {n: r for r, shards in replicas.items() for n in names
                if shards.placed_elsewhere((namespace, n)) is None} == before

        async def burst(name: str) -> None:
            changes.clear()
            for shards in replicas.values():
                await asyncio.to_thread(shards.objects.load)
                shards.book.set_packages(shards.objects.specs())
                shards.on_packages(frozenset({object_origin(PACKAGES, namespace, name)}))

        create(apis[0], package(namespace, new))
        await burst(new)
        gainer, loser = after[moved], before[moved]
        # The new one is neither gained nor lost: it is queued on its creation, as any new Package.
        assert sorted(changes) == sorted([(gainer, "gained", {moved}), (loser, "lost", {moved})])
        assert replicas[gainer].placed_elsewhere((namespace, moved)) is None
        assert replicas[loser].placed_elsewhere((namespace, moved)) == gainer
        changes.clear()
        for shards in replicas.values():
            shards.on_packages(frozenset({object_origin(PACKAGES, namespace, names[0])}))  # a status change: none
        assert changes == []

        apis[0].delete_namespaced_custom_object(GROUP, VERSION, namespace, "packages", new)
        await burst(new)
        assert sorted(changes) == sorted([(loser, "gained", {moved}), (gainer, "lost", {moved})])
        assert replicas[loser].placed_elsewhere((namespace, moved)) is None
    finally:
        for shards in replicas.values():
            await shards.elector.stop()


async def test_a_claim_is_refused_to_a_pass_on_a_spec_older_than_the_package_it_claims(
    apis: Apis, kube_target: KubeTarget, namespace: str,
) -> None:
    # Issue 32: a replica back from a pause works through its watch's backlog; its claim write (on the object as
    # it is now: the resourceVersion precondition) must not let a pass act on an older spec. Here the watch has
    # brought a newer generation that is not validated yet (the debounce), then it is validated while the pass
    # still holds the old spec: refused both times, and the pass on the new spec claims it.
    name = "web"
    create(apis[0], oci_repository(namespace, "127.0.0.1:1/unused"))
    create(apis[0], package(namespace, name, values={"v": 1}))
    key = (namespace, name)
    a = await _replica(kube_target, namespace, "a", 30.0)
    objects = PackageObjects(api_client(kube_target), [namespace], debounce=600.0)  # validated by load() only
    await asyncio.to_thread(objects.load)
    a.objects = objects

    async def watch() -> None:  # raw objects arrive; their burst waits 600 s
        async for _update in objects.watch():
            return

    watching = asyncio.create_task(watch())
    try:
        old = objects.spec(object_origin(PACKAGES, namespace, name))
        assert old is not None
        await asyncio.sleep(1.0)  # the watch is open
        apis[0].patch_namespaced_custom_object(GROUP, VERSION, namespace, "packages", name,
                                               {"spec": {"values": {"v": 2}}})
        await wait_until(lambda: (objects.get(object_origin(PACKAGES, namespace, name)) or {}).get(
            "metadata", {}).get("generation") == 2, 10)
        with pytest.raises(ClaimRefused, match="at generation 2, not read here yet"):
            await a.fence(key, "upgrade", 60, old)
        await a.let_go(key)  # the pass ends: its claim is cleared
        await asyncio.to_thread(objects.load)  # generation 2 validated; the pass still holds the old spec
        new = objects.spec(object_origin(PACKAGES, namespace, name))
        assert new is not None and new != old
        with pytest.raises(ClaimRefused, match="was edited since this pass read it"):
            await a.fence(key, "upgrade", 60, old)
        await a.let_go(key)
        await a.fence(key, "upgrade", 60, new)
        assert (_claim(apis, namespace, name) or {})["replica"] == "a"
    finally:
        watching.cancel()
        objects.stop()
        await a.elector.stop()


async def test_a_replica_waking_from_a_pause_rechecks_its_lease_and_drops_what_moved_meanwhile(
    apis: Apis, kube_target: KubeTarget, namespace: str,
) -> None:
    # Two Packages: both p's while p is alone, one each once q is live (the cap: one per member).
    placed = _placed(["web-0", "web-1"], namespace, ["p", "q"])
    [stays] = [n for n, m in placed.items() if m == "p"]
    [moves] = [n for n, m in placed.items() if m == "q"]
    create(apis[0], oci_repository(namespace, "127.0.0.1:1/unused"))
    for name in (stays, moves):
        create(apis[0], package(namespace, name))
    p = await _replica(kube_target, namespace, "p", 2.0)  # nothing renews its Lease now: p is "stopped"
    q = None
    try:
        assert p.placed_elsewhere((namespace, moves)) is None  # p knows no other member: both are p's
        q = await _replica(kube_target, namespace, "q", 30.0)  # joins while p sleeps
        await asyncio.sleep(1.2)
        assert p.elector.lapsed(1.0)
        def renewed() -> str:
            lease: Any = apis[2].read_namespaced_lease(member_lease_name("p"), namespace)
            return str(lease.spec.renew_time)

        before = renewed()
        # p wakes: before writing a claim it renews its Lease and lists the members again, so the Package that
        # moved to q meanwhile is refused, and the one still its own is claimed.
        with pytest.raises(ClaimRefused, match="placed on controller replica q now"):
            await p.fence((namespace, moves), "upgrade", 60)
        assert renewed() > before
        assert not p.elector.lapsed(1.0) and p.membership.live() == {"p", "q"}
        await p.fence((namespace, stays), "upgrade", 60)
        assert (_claim(apis, namespace, stays) or {})["replica"] == "p" and _claim(apis, namespace, moves) is None
    finally:
        for r in (p, q):
            if r is not None:
                await r.elector.stop()


async def test_a_replica_frozen_after_its_claim_starts_no_helm_though_its_lease_was_renewed_since(
    apis: Apis, kube_target: KubeTarget, namespace: str,
) -> None:
    # A replica starved of CPU (the takeover bench at load 12) froze between its claim and the helm spawn; when it
    # woke, the Lease's own thread renewed first, so "not written for half the duration" was false again by the
    # spawn, while another member had taken the claim over meanwhile: both ran helm upgrade on one release.
    create(apis[0], oci_repository(namespace, "127.0.0.1:1/unused"))
    create(apis[0], package(namespace, "web"))
    p = await _replica(kube_target, namespace, "p", 2.0)  # nothing renews its Lease but confirm()
    key = (namespace, "web")
    try:
        await p.fence(key, "upgrade", 60)
        p.recheck(key)  # claimed just now: helm may start
        await asyncio.sleep(1.2)  # the freeze: longer than half the Lease without a write
        assert await p.elector.confirm()  # woken, the Lease renewed before helm is spawned
        assert not p.elector.lapsed(1.0)
        with pytest.raises(LeaseLapsed, match="since the claim"):
            p.recheck(key)
        await p.fence(key, "upgrade", 60)  # the next pass claims again (its Lease and the members re-checked)
        p.recheck(key)
    finally:
        await p.elector.stop()


def _identities(env: ControllerEnv) -> dict[str, str]:
    """Replica identity -> membership Lease name, of the live membership Leases of the test's namespace."""
    items: Any = env.coordination.list_namespaced_lease(env.namespace, label_selector=f"{SHARD}={AUTO}").items
    return {str(x.spec.holder_identity): x.metadata.name for x in items if x.spec.holder_identity}


def _identity(ctl: Controller, identities: dict[str, str]) -> str:
    [found] = [i for i in identities if f"-{ctl.pid}-" in i]
    return found


def _acted(ctl: Controller, namespace: str, name: str, action: str) -> bool:
    return f"{namespace}/{name}: {action} succeeded" in ctl.text()


def test_replicas_reconcile_what_placement_gives_them_and_take_over_a_killed_ones_share(
    controller_env: ControllerEnv,
) -> None:
    env = controller_env
    objects, core, namespace = env.objects, env.core, env.namespace
    env.web_source()
    ctls = [env.start("--shards", "auto", "--lease-duration", str(LEASE), name=n) for n in ("a", "b", "c")]

    def logs() -> str:
        return "\n".join(c.text()[-6000:] for c in ctls)

    try:
        eventually(lambda: all(sees_live(c, 3) for c in ctls), 60, "every replica sees three members", logs=logs)
        identities = _identities(env)
        ids = {c.pid: _identity(c, identities) for c in ctls}
        names = [f"p{i}" for i in range(6)]
        for name in names:
            create(objects, package(namespace, name, values={"replicas": 1}))
        eventually(lambda: all(releases(core, namespace, n) == [(1, "deployed")] for n in names), 180,
                   "every Package installed", logs=logs)

        placed = _placed(names, namespace, list(ids.values()))

        def acted(name: str, action: str) -> list[str]:
            return [ids[c.pid] for c in ctls if _acted(c, namespace, name, action)]

        eventually(lambda: all(acted(n, "install") for n in names), 60, "each install logged", logs=logs)
        for name in names:  # installed once, by the replica placement names
            assert acted(name, "install") == [placed[name]], (name, placed)

        def claims() -> list[Any]:
            return [(get_package(objects, namespace, n) or {}).get("status", {}).get("claim") for n in names]

        eventually(lambda: claims() == [None] * len(names), 15, "every claim cleared", logs=logs)
        # helmdeck_releases: each replica counts its own share, so the sum over the replicas is every Package once.
        share = {c.pid: sum(1 for n in names if placed[n] == ids[c.pid]) for c in ctls}
        eventually(lambda: all(released(c) == share[c.pid] for c in ctls), 30, "each replica counts its share",
                   logs=logs)

        # SIGKILL the replica with the largest share; edit every Package: the killed one's are upgraded by the
        # replica placement gives them among the two left, within the Lease duration and a pass or two.
        victim = max(ctls, key=lambda c: sum(1 for n in names if placed[n] == ids[c.pid]))
        left = [c for c in ctls if c is not victim]
        victim.stop(signal.SIGKILL)
        killed = time.monotonic()
        for name in names:
            objects.patch_namespaced_custom_object(GROUP, VERSION, namespace, "packages", name,
                                                   {"spec": {"values": {"replicas": 2}}})
        eventually(lambda: all(releases(core, namespace, n)[-1] == (2, "deployed") for n in names), 120,
                   "every Package upgraded once", logs=logs)
        took = time.monotonic() - killed
        survivors = [ids[c.pid] for c in left]
        eventually(lambda: all(acted(n, "upgrade") for n in names), 60, "each upgrade logged", logs=logs)
        after = _placed(names, namespace, survivors)
        for name in names:  # once each; the killed one's by the survivor placement gives it now. Bounded loads may
            # move a survivor's Package to the other survivor too: upgraded by either, as the edit met the move.
            by = acted(name, "upgrade")
            assert len(by) == 1 and by[0] in ({after[name]} if placed[name] == ids[victim.pid] else
                                              {placed[name], after[name]}), (name, by, placed, after)
        assert took < 60, took
        eventually(lambda: claims() == [None] * len(names), 15, "every claim cleared", logs=logs)
    finally:
        codes = [c.stop() for c in ctls if c.proc.poll() is None]
    assert codes == [0, 0], logs()
    assert set(_identities(env)) == {ids[victim.pid]}  # the survivors gave their membership Leases up


def test_a_package_moving_to_a_joining_replica_while_its_upgrade_runs_is_upgraded_once(
    controller_env: ControllerEnv,
) -> None:
    # Issue 32: a running action is not moved. Eight Packages upgraded by one replica (each upgrade waits 30 s of
    # minReadySeconds, until the test lifts it), a second joins while they run: the four placed on it now are
    # left to finish where they run (not cancelled at --stop-deadline), and the joining replica, which waits for
    # the claim, finds them done and upgrades none again. Decided on storage and the Packages' statuses.
    env = controller_env
    namespace = env.namespace
    churn = Churn(env.objects.api_client, env.kubeconfig, namespace, env.helm, env.work, env.registry,
                  extra=("--shards", "auto", "--concurrency", "8", "--stop-deadline", "2"), lease=LEASE)
    names = churn.packages(8, delay=1, timeout="2m")  # four move to the second replica (the cap: four each)
    try:
        a = churn.start("a")
        churn.wait_ready(len(names), 240)
        for name in names:
            env.objects.patch_namespaced_custom_object(GROUP, VERSION, namespace, "packages", name,
                                                       {"spec": {"values": {"delay": 30, "value": "e1"}}})
        eventually(lambda: all((2, "pending-upgrade") in releases(env.core, namespace, n) for n in names), 120,
                   "every upgrade running", logs=churn.tails)
        b = churn.start("b")
        eventually(lambda: sees_live(a.ctl, 2) and sees_live(b.ctl, 2), 60, "the replicas see each other",
                   logs=churn.tails)
        ids = _identities(env)
        ida, idb = _identity(a.ctl, ids), _identity(b.ctl, ids)
        placed = _placed(names, namespace, [ida, idb])
        moved = [n for n, m in placed.items() if m == idb]
        assert len(moved) == 4, moved
        # They moved while their upgrades ran (else this proves nothing).
        assert all(releases(env.core, namespace, n)[-1] == (2, "pending-upgrade") for n in moved), \
            {n: releases(env.core, namespace, n) for n in moved}
        # a left each to finish (up to its timeout), and cancelled none at --stop-deadline (a static shard's rule);
        # then the upgrades end now instead of waiting out their 30 s (no minReadySeconds on the rolled pods).
        eventually(lambda: all(f"{namespace}/{n}: handover info" in a.ctl.text() for n in moved), 30,
                   "a handed the moved ones over", logs=churn.tails)
        time.sleep(2 * 2)  # twice --stop-deadline: a cancel at it would have come
        apps = client.AppsV1Api(env.core.api_client)
        for name in names:
            apps.patch_namespaced_deployment(name, namespace, {"spec": {"minReadySeconds": 0}})

        def converged() -> bool:
            found = {n: get_package(env.objects, namespace, n) or {} for n in names}
            return all(ready_now(obj) and not obj["status"].get("claim")
                       and (obj["status"].get("controller") or {}).get("replica") == placed[n]
                       for n, obj in found.items())

        eventually(converged, 240, "every Package Ready, its status written by the replica it is placed on",
                   every=1.0, logs=churn.tails)
        findings = churn.audit()
    finally:
        churn.stop()
    stored = {n: releases(env.core, namespace, n) for n in names}
    assert all(revisions == [(1, "superseded"), (2, "deployed")] for revisions in stored.values()), stored
    assert "cancelled as the package moved" not in a.ctl.text()
    assert findings == [], "\n".join(map(str, findings)) + "\n" + churn.tails()


def _auto_engine(env: ControllerEnv, kube_target: KubeTarget, identity: str) -> Engine:
    """A ``helmdeck controller --shards auto`` replica in this process (its monitors and book in reach), built as
    the command line builds it."""
    namespaces = [env.namespace]
    return build_engine(kube_target, env.helm, None, namespaces=namespaces,
                  lease=member_lease(identity, env.namespace, LEASE),
                  package_set=cluster_package_set(None, namespaces).identity, cluster_packages=True,
                  auto_shards=True, stop_deadline=5)


async def _until(probe: Callable[[], object], timeout: float, what: str) -> None:
    """Poll ``probe`` (blocking API reads: in a thread, the replicas run on this loop) until it is truthy."""
    end = time.monotonic() + timeout
    while not await asyncio.to_thread(probe):
        if time.monotonic() > end:
            raise AssertionError(f"not within {timeout}s: {what} (last: {await asyncio.to_thread(probe)!r})")
        await asyncio.sleep(0.3)


async def test_each_replica_monitors_its_share_and_one_getting_packages_back_writes_their_status_again(
    controller_env: ControllerEnv, kube_target: KubeTarget,
) -> None:
    env = controller_env
    objects, core, namespace = env.objects, env.core, env.namespace
    env.web_source()
    # Four Packages, two placed on each of a and b when both are live (the cap), all on a while it is alone.
    placed = _placed([f"w{i}" for i in range(4)], namespace, ["a", "b"])
    on = {r: [n for n, m in placed.items() if m == r] for r in ("a", "b")}
    names = on["a"] + on["b"]
    keys = [(namespace, n) for n in names]
    for name in names:
        create(objects, package(namespace, name, values={"replicas": 1}))

    def status(name: str) -> dict[str, Any]:
        return dict((get_package(objects, namespace, name) or {}).get("status") or {})

    def reconciled_by(replica: str, name: str, generation: int) -> bool:
        """The Package's status is ``replica``'s, at ``generation``, Ready."""
        found = status(name)
        ready = [c for c in found.get("conditions") or () if c.get("type") == "Ready"]
        return ((found.get("controller") or {}).get("replica") == replica
                and found.get("observedGeneration") == generation and bool(ready) and ready[0]["status"] == "True"
                and ready[0].get("observedGeneration") == generation)

    def monitored(engine: Engine) -> set[str]:
        return {k[1] for k in keys if engine.service.has_monitor(*k)}

    a = _auto_engine(env, kube_target, "a")
    b: Engine | None = None
    await a.start()
    try:
        await _until(lambda: all(releases(core, namespace, n) == [(1, "deployed")] for n in names), 180,
                     "every Package installed by a")
        await _until(lambda: all(reconciled_by("a", n, 1) for n in names), 60, "a wrote every status")
        await wait_until(lambda: monitored(a) == set(names), 30)

        # b joins: b's share moves to it (b's pass ends: b writes their statuses); each monitors its share only.
        b = _auto_engine(env, kube_target, "b")
        await b.start()
        assert b.shards is not None and a.shards is not None
        await wait_until(lambda: a.shards is not None and a.shards.membership.live() == {"a", "b"}, 30)
        await _until(lambda: all(reconciled_by("b", n, 1) for n in on["b"]), 60, "b wrote the status of its share")
        await wait_until(lambda: monitored(a) == set(on["a"]) and b is not None and monitored(b) == set(on["b"]), 30)
        assert all(reconciled_by("a", n, 1) for n in on["a"])

        # b stops: a gets b's share back. What a wrote on them before is not what they hold now (b's): a writes
        # their status again once its pass ends, and monitors all of them.
        await b.stop(5)
        await wait_until(lambda: a.shards is not None and a.shards.membership.live() == {"a"}, 30)
        await _until(lambda: all(reconciled_by("a", n, 1) for n in names), 60,
                     "a rewrote the status of the Packages it got back")
        await wait_until(lambda: monitored(a) == set(names), 30)

        # Later edits of what a got back are reconciled by a.
        for name in on["b"]:
            objects.patch_namespaced_custom_object(GROUP, VERSION, namespace, "packages", name,
                                                   {"spec": {"values": {"replicas": 2}}})
        await _until(lambda: all(releases(core, namespace, n)[-1] == (2, "deployed") for n in on["b"]), 120,
                     "the edits upgraded")
        await _until(lambda: all(reconciled_by("a", n, 2) for n in on["b"]), 60, "a's status at the edit")
    finally:
        await a.stop(5)
        if b is not None:
            await b.stop(5)


def test_a_status_another_replica_wrote_on_a_package_placed_here_is_written_again(
    controller_env: ControllerEnv,
) -> None:
    # Two replicas whose views of the members lag each other can both pass a Package for a moment (a pass with no
    # helm action takes no claim); the one it is placed on writes its status again when the other wrote last.
    env = controller_env
    objects, namespace = env.objects, env.namespace
    env.web_source()
    create(objects, package(namespace, "web", values={"replicas": 1}))
    ctl = env.start("--shards", "auto", "--lease-duration", str(LEASE), name="a")

    def writer() -> str:
        status = (get_package(objects, namespace, "web") or {}).get("status") or {}
        return str((status.get("controller") or {}).get("replica") or "")

    try:
        me = eventually(lambda: writer() if (get_package(objects, namespace, "web") or {}).get("status", {}).get(
            "observedGeneration") == 1 else "", 120, "web reconciled and its status written", logs=ctl.text)
        objects.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, "packages", "web", {
            "status": {"controller": {"replica": "vm-1-stale", "shard": "auto"}}})
        eventually(lambda: writer() == me, 30, "the status names the replica the Package is placed on again",
                   logs=ctl.text)
    finally:
        ctl.stop()
