"""The actor claim's rule (``--shards auto``): when a replica may take a release's claim, and when a claimant
reads the release's status again."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import pytest
from kubernetes import client

from engine.reconcile.status import EngineStatus
from engine.runtime.cluster.members import EXPIRY_SLACK, Membership
from engine.runtime.cluster.shards import Shards
from engine.runtime.drive.lease import LeaseElector
from engine.runtime.ledger.claims import STALE_GRACE, Claim, LeaseLapsed, Members, decide
from engine.storage.observer import Observer
from engine.storage.snapshot import History, Snapshot
from testkit.fixtures import WEB, fixed_engine, storage_secret

NOW = 1_800_000_000.0
ME = "b"


def members(**silent: float) -> Members:
    return Members(ME, 6.0, silent, watched=60.0)


def claim(replica: str = "a", started: float = NOW - 10, timeout: float = 60) -> Claim:
    return Claim(replica, "upgrade", started, timeout)


def test_no_claim_or_our_own_is_taken() -> None:
    assert decide(None, members(), pending=True, now=NOW).take
    assert decide(claim(ME), members(), pending=True, now=NOW).take


def test_a_live_members_claim_is_never_taken_whatever_its_age() -> None:
    old = claim(started=NOW - 10_000, timeout=1)  # long past its timeout, but its member renews
    for pending in (False, True):
        verdict = decide(old, members(a=5.9), pending=pending, now=NOW)
        assert not verdict.take and "live member" in verdict.reason and verdict.retry_after > 0


def test_a_silent_members_claim_is_taken_over_after_the_lease_duration() -> None:
    assert not decide(claim(), members(a=5.9), pending=False, now=NOW).take
    verdict = decide(claim(), members(a=6.0), pending=False, now=NOW)
    assert verdict.take and verdict.taken_from == "a"


def test_a_pending_release_waits_for_the_claimed_actions_timeout() -> None:
    c = claim(started=NOW - 30, timeout=60)  # 30 s of its 60 s left
    verdict = decide(c, members(a=100), pending=True, now=NOW)
    assert not verdict.take and "pending" in verdict.reason
    assert verdict.retry_after == 30 + STALE_GRACE + 0.5
    assert not decide(c, members(a=100), pending=True, now=NOW + 30 + STALE_GRACE - 0.1).take
    assert decide(c, members(a=100), pending=True, now=NOW + 30 + STALE_GRACE).take
    assert decide(c, members(a=100), pending=False, now=NOW).take  # not pending: nothing of it runs on helm


def test_a_member_never_seen_is_silent_for_as_long_as_we_watched() -> None:
    assert not decide(claim("x"), Members(ME, 6.0, {}, watched=2.0), pending=False, now=NOW).take
    assert decide(claim("x"), Members(ME, 6.0, {}, watched=6.0), pending=False, now=NOW).take
    assert Members(ME, 6.0, {"a": 1.0, "c": 7.0}).live() == {"a", "b"}


def test_the_status_object_reads_back_and_bad_claims_are_bounded() -> None:
    c = Claim("a", "upgrade", NOW, 59.2)
    assert c.to_status() == {"replica": "a", "action": "upgrade", "startedAt": "2027-01-15T08:00:00Z",
                             "timeoutSeconds": 60}
    assert Claim.from_status({"claim": c.to_status()}) == Claim("a", "upgrade", NOW, 60)
    assert Claim.from_status({}) is None and Claim.from_status({"claim": None}) is None
    assert Claim.from_status({"claim": {"action": "upgrade"}}) is None  # no replica: no claim
    bad = Claim.from_status({"claim": {"replica": "a" * 10_000, "startedAt": "yesterday", "timeoutSeconds": "nan"}})
    assert bad == Claim("a" * 253, "", 0.0, 0.0)
    huge = Claim.from_status({"claim": {"replica": "a", "timeoutSeconds": 1e300}})
    assert huge is not None and huge.timeout == 7 * 24 * 3600


class _Store:
    """A persisted-status store holding one status (the one read the test needs)."""

    def __init__(self, status: EngineStatus) -> None:
        self.status = status

    def load(self, _namespace: str, _release: str) -> EngineStatus:
        return self.status


def test_a_status_is_read_again_only_when_it_holds_the_latest_stored_revision() -> None:
    engine = fixed_engine()
    book = engine.book
    latest = engine.observer.latest(*WEB)
    assert latest is not None
    theirs = EngineStatus(history=History((Snapshot.from_observation(latest),)))  # another replica's action
    stale = EngineStatus()
    book.store = _Store(theirs)  # type: ignore[assignment]
    book.set_status(WEB, stale)
    assert asyncio.run(book.reload_status(WEB)) and book.status(WEB) == theirs
    assert not asyncio.run(book.reload_status(WEB))  # the book knows the latest revision now
    book.set_status(WEB, stale)
    book.store = _Store(EngineStatus())  # type: ignore[assignment]  # a persisted status older than the book's (its write failed)
    assert not asyncio.run(book.reload_status(WEB)) and book.status(WEB) == stale


def test_a_claim_waits_for_its_lagging_storage_watch_to_show_the_revision_another_replica_wrote(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine = fixed_engine()
    book, observer = engine.book, engine.observer
    latest = observer.latest(*WEB)
    assert latest is not None
    newer = storage_secret(WEB[1], WEB[0], latest.version + 1, "deployed", "web", "1.0.1", "1.0",
                           {"replicas": 3}, "2026-11-30T10:00:00Z")
    elsewhere = Observer(None)  # the other replica's storage view, where its upgrade is seen
    elsewhere.apply_object(newer)
    made = elsewhere.latest(*WEB)
    assert made is not None and made.version == latest.version + 1
    ours = EngineStatus(history=History((Snapshot.from_observation(latest),)))
    theirs = EngineStatus(history=History((Snapshot.from_observation(made), Snapshot.from_observation(latest))))
    book.store = _Store(theirs)  # type: ignore[assignment]
    book.set_status(WEB, ours)
    # This replica's watch still shows its own revision: without a claim, nothing is read.
    assert not asyncio.run(book.reload_status(WEB)) and book.status(WEB) == ours
    # Claimed: the status names a newer revision; the watch never shows it within the bound: decided as it stands.
    monkeypatch.setattr("engine.runtime.ledger.book.CATCH_UP", 0.2)
    assert not asyncio.run(book.reload_status(WEB, before_acting=True)) and book.status(WEB) == ours

    async def claimed() -> bool:
        asyncio.get_running_loop().call_later(0.3, observer.apply_object, newer)  # the watch catches up
        return await book.reload_status(WEB, before_acting=True)

    monkeypatch.setattr("engine.runtime.ledger.book.CATCH_UP", 5.0)
    assert asyncio.run(claimed()) and book.status(WEB) == theirs


def _lease(holder: str, renew: str) -> dict[str, object]:
    return {"metadata": {"name": f"m-{holder}"}, "spec": {"holderIdentity": holder, "renewTime": renew}}


def test_the_members_are_listed_again_the_moment_a_silent_ones_lease_expires() -> None:
    clock = [100.0]
    seen = Membership(client.ApiClient(), "ns", ME, duration=10.0, retry=2.0, clock=lambda: clock[0])
    seen._observe([_lease(ME, "t0"), _lease("a", "t0")])
    assert seen.next_list() == 2.0  # a renewed just now: the renew interval
    clock[0] = 109.0  # a not seen renewing since 100: its Lease expires at 110, before the next interval
    seen._observe([_lease(ME, "t9"), _lease("a", "t0")])
    assert abs(seen.next_list() - (1.0 + EXPIRY_SLACK)) < 1e-9
    assert seen.members().is_live("a")
    clock[0] = 110.0 + EXPIRY_SLACK  # listed then: a is gone, and an expired member sets no more wake-ups
    seen._observe([_lease(ME, "t10"), _lease("a", "t0")])
    assert seen.members().live() == {ME} and seen.next_list() == 2.0


def test_a_renewal_the_watch_brings_counts_from_its_arrival() -> None:
    clock = [100.0]
    seen = Membership(client.ApiClient(), "ns", ME, duration=10.0, retry=2.0, clock=lambda: clock[0])
    seen._observe([_lease(ME, "t0"), _lease("a", "2026-12-03T10:00:00.000000Z")])
    seen.renewed("a", "2026-12-03T10:00:01.000000Z", 101.0)  # a new renewal: from its arrival
    seen.renewed("a", "2026-12-03T09:59:59.000000Z", 101.5)  # an older one, late (the watch lags): ignored
    seen.renewed("z", "2026-12-03T10:00:01.000000Z", 101.0)  # not listed yet: who joins is the lists' to say
    seen.renewed(ME, "t1", 101.0)  # its own: judged on lists (its return after a pause)
    assert seen._seen["a"] == ("2026-12-03T10:00:01.000000Z", 101.0) and "z" not in seen._seen
    assert seen._seen[ME] == ("t0", 100.0)
    clock[0] = 102.0
    seen._observe([_lease(ME, "t2"), _lease("a", "2026-12-03T10:00:02.000000Z")])  # the list saw it first...
    seen.renewed("a", "2026-12-03T10:00:02.000000Z", 101.8)  # ...the watch's copy had arrived before it
    assert seen._seen["a"] == ("2026-12-03T10:00:02.000000Z", 101.8)
    clock[0] = 111.9  # listed 10.1 s after that arrival, 9.9 s after the list that saw it: gone
    seen._observe([_lease(ME, "t11"), _lease("a", "2026-12-03T10:00:02.000000Z")])
    assert not seen.members().is_live("a")


def test_a_replica_whose_own_lease_it_saw_unrenewed_for_a_duration_returns() -> None:
    clock = [100.0]
    seen = Membership(client.ApiClient(), "ns", ME, duration=10.0, retry=2.0, clock=lambda: clock[0])
    for step, renew in enumerate(("t0", "t2", "t4")):  # renewed every list: nothing to say
        clock[0] = 100.0 + 2 * step
        seen._observe([_lease(ME, renew)])
    assert not seen._returned
    clock[0] = 112.0  # a pause: its own renewal seen again 8 s (the duration less a list) after the last
    seen._observe([_lease(ME, "t12")])
    assert seen._returned


def test_a_claimed_action_whose_lease_lapsed_since_the_claim_spawns_no_helm() -> None:
    api = client.ApiClient()
    elector = LeaseElector(api, "m-b", identity=ME, duration=10.0)
    membership = Membership(api, "ns", ME, duration=10.0, retry=2.0)
    book = SimpleNamespace(packages={})  # no Package object: the message names the release
    shards = Shards(api, None, book, membership, elector, lambda _ns, _name: None,  # type: ignore[arg-type]
                    lambda _coro: None)
    key = ("demo", "web")
    mono, wall = time.monotonic(), time.time()

    def lease_written(*agos: float, wall_agos: tuple[float, ...] = ()) -> None:  # writes ``ago`` s before now
        elector._writes.clear()
        elector._writes.extend((mono - a, wall - w) for a, w in zip(agos, wall_agos or agos, strict=True))

    shards.recheck(key)  # nothing claimed here: nothing to refuse
    shards._held.add(key)
    shards._fenced[key] = (mono - 7, wall - 7)  # claimed 7 s ago (half the Lease: 5 s)
    lease_written(8)  # none since: silent now
    with pytest.raises(LeaseLapsed, match="demo/web"):
        shards.recheck(key)
    lease_written(8, 4)  # never 5 s without a write since the claim: helm may run
    shards.recheck(key)
    lease_written(8, 1)  # a freeze after the claim, renewed on waking: still refused
    with pytest.raises(LeaseLapsed):
        shards.recheck(key)
    lease_written(4, wall_agos=(10,))  # the machine suspended: the monotonic clock stood still, the wall one did not
    shards._fenced[key] = (mono - 3, wall - 9)
    with pytest.raises(LeaseLapsed):
        shards.recheck(key)
