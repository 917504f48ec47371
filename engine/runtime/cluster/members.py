"""The members of ``helmdeck controller --shards auto``: one membership Lease per replica, and the live set.

Every replica holds its own Lease, ``helmdeck-member-<hash of its identity>`` in the controller's namespace,
labelled ``wire.ROLE: controller`` (the app finds it) and ``wire.SHARD: auto`` (:mod:`engine.base.wire`), its
``holderIdentity`` the replica's identity; the engine's :class:`~engine.runtime.drive.lease.LeaseElector` renews
it (nobody competes for it). :class:`Membership` lists those Leases every renew interval (one bounded list) and
keeps, for each member, when this replica first saw its ``renewTime`` change, on its own monotonic clock, as
client-go's leader election does: a member not seen renewing for the Lease duration is gone, whatever the
clocks of the machines say. A watch of the same Leases (:class:`RenewalWatch`) sees a renewal as the API server
stores it, not up to a list later, so a member is gone that much sooner after its last renewal; the lists still
decide who is gone. A Lease given up (no holder: a clean stop) is gone at once; one left behind by a
replica long dead (unrenewed for :data:`FORGET_AFTER` Lease durations, by its ``renewTime``) is deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from engine.base.wire import CONTROLLER, ROLE, SHARD
from engine.kube import rest
from engine.kube.stream import WatchThread, list_all, open_watch
from engine.runtime.drive.lease import LeaseConfig, age
from engine.runtime.ledger.claims import Members

log = logging.getLogger(__name__)

AUTO = "auto"  # the SHARD label's value on a membership Lease
FORGET_AFTER = 10  # Lease durations (and at least a minute) after which a dead member's Lease is deleted
MAX_MEMBERS = 500  # one list page; more replicas than this are not read (nor expected)
# --shards auto's default --lease-duration (the one Lease's is 15 s, as client-go's leader election). A member
# is gone this long after its last renewal was seen; its packages are then gained and passed at once, so a
# SIGKILL's takeover is this (give or take a renew interval) plus one pass and its helm actions. Issue 36 asks
# for 10 s at p99: with 8 s the takeover bench saw the member gone 6.8-8.8 s after the kill, too much of 10 s.
# client-go's rules hold at 5 s (NewLeaderElector, tools/leaderelection/leaderelection.go: the duration over the
# renew deadline, the deadline over 1.2 renew intervals): renewed every second (a fifth), a replica not written
# for 2.5 s (half) re-checks before acting and spawns no helm after such a silence since its claim, and other
# members judge silence on their own monotonic clocks (skew does not count). The cost: one Lease write and one
# list of the members a second per replica (0.6 of each at 8 s), and a freeze longer than 5 s (this 2-core
# machine at load ~30 froze replicas for 10-25 s) moves the frozen member's share away and back: safe (the claim
# keeps one actor per release) but a pass of the share each time.
AUTO_LEASE_DURATION = 5.0
EXPIRY_SLACK = 0.05  # seconds past a member's computed expiry the list is made at (never a busy loop)


def member_lease_name(identity: str) -> str:
    """``helmdeck-member-<12 hex of SHA-256 of the identity>``: a valid Lease name for any identity."""
    return f"helmdeck-member-{hashlib.sha256(identity.encode()).hexdigest()[:12]}"


def member_lease(identity: str, namespace: str, duration: float,
                 annotations: tuple[tuple[str, str], ...] = ()) -> LeaseConfig:
    """The membership Lease of the replica ``identity`` (renewed every fifth of ``duration``, at most 2 s)."""
    return LeaseConfig(member_lease_name(identity), namespace, duration=duration,
                       retry=max(0.5, min(2.0, duration / 5)), identity=identity,
                       labels=((ROLE, CONTROLLER), (SHARD, AUTO)), annotations=annotations)


class RenewalWatch(WatchThread):
    """The renewals of the Leases ``selector`` picks in ``namespace`` as the API server sends them: for each Lease
    added or modified, ``seen(holder, renewTime, at)`` from the watch's thread, ``at`` the ``clock`` (monotonic
    seconds) when it arrived. The arrival is after the write, so a silence measured from it is never longer than
    the member's own."""

    def __init__(self, api: client.ApiClient, namespace: str, selector: str,
                 seen: Callable[[str, str, float], object], clock: Callable[[], float]):
        super().__init__("members-watch", f"watch of the membership Leases in {namespace}")
        self._api = api
        self._path = rest.path("coordination.k8s.io/v1", "leases", namespace)
        self._selector = selector
        self._seen = seen
        self._clock = clock

    def _relist(self) -> str:
        return list_all(self._api, self._path, lambda _lease: None, label_selector=self._selector)  # lists judge

    def _watch(self, rv: str) -> str:
        resp = open_watch(self._api, self._path, rv, label_selector=self._selector)
        return self._stream(resp, rv, self._apply)

    def _retry(self, exc: Exception) -> bool:
        if isinstance(exc, ApiException) and exc.status in (401, 403):  # a role without watch: the lists alone
            log.warning("%s refused (%s): member renewals are seen by the lists alone, up to a list late",
                        self._what, exc.status)
            return False
        return super()._retry(exc)

    def _apply(self, etype: str, lease: dict[str, Any]) -> None:
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        if etype != "DELETED" and holder:
            self._seen(holder, str(spec.get("renewTime") or ""), self._clock())


class Membership:
    """The live members as replica ``me`` sees them, from the membership Leases of ``namespace``;
    ``on_change(live)`` is called (on the event loop) when the live set changes, ``on_return()`` when this
    replica's own Lease was seen unrenewed for long enough that the others may have counted it gone (its process
    paused: SIGSTOP, a long GC, a partition), once it is renewed again. ``selector``: the Leases that count
    (default the membership Leases; static shards give every controller's, ``wire.ROLE=controller``, and
    ``forget`` False: a shard's Lease is its standbys' too, never deleted by another shard). ``leases``: the
    Leases of the last list. ``clock``: monotonic seconds."""

    def __init__(self, api: client.ApiClient, namespace: str, me: str, *, duration: float, retry: float,
                 on_change: Callable[[frozenset[str]], None] | None = None,
                 on_return: Callable[[], None] | None = None, selector: str = f"{SHARD}={AUTO}",
                 forget: bool = True, clock: Callable[[], float] = time.monotonic):
        self._api = api
        self.namespace = namespace
        self.selector = selector
        self.forget = forget
        self.leases: list[dict[str, Any]] = []
        self.me = me
        self.duration = duration
        self.retry = retry
        self.on_change = on_change
        self.on_return = on_return
        self._returned = False  # this replica's own Lease seen unrenewed for about a duration (see _observe)
        self._clock = clock  # monotonic seconds
        self._started = self._listed_at = clock()
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="members")  # never behind the shared pool
        self._seen: dict[str, tuple[str, float]] = {}  # identity -> (renewTime, monotonic time it changed)
        self._gone: dict[str, None] = {}  # identities whose Lease was given up, oldest first
        self._live: frozenset[str] = frozenset({me})
        self.last_error: str | None = None
        self.listed = asyncio.Event()  # set after the first list

    def members(self) -> Members:
        """What this replica knows as of its last list (the claim's rule reads it). Silences are measured to
        that list, not to now: a replica whose own lists stall (a pause, a partition) finds nobody silent for
        longer than it could see, so it takes nothing over on the strength of its own blindness."""
        silent = {m: self._listed_at - at for m, (_, at) in self._seen.items()}
        silent.update({m: math.inf for m in self._gone})
        return Members(self.me, self.duration, silent, watched=self._listed_at - self._started)

    def live(self) -> frozenset[str]:
        """The live members as of the last list, this replica included."""
        return self._live

    async def run(self) -> None:
        """List every renew interval, and again the moment a member's Lease expires, until cancelled; meanwhile
        watch the Leases for renewals (:meth:`renewed`)."""
        loop = asyncio.get_running_loop()
        watch = RenewalWatch(self._api, self.namespace, self.selector,
                             lambda *seen: loop.call_soon_threadsafe(self.renewed, *seen), self._clock)
        watch.start()
        try:
            while True:
                await self.refresh()
                await asyncio.sleep(self.next_list())
        finally:
            watch.stop()

    def renewed(self, holder: str, renew: str, at: float) -> None:
        """The watch saw ``holder``'s Lease with ``renewTime`` ``renew`` at ``at`` (this replica's monotonic
        seconds): a known member's new renewal counts from then, not from the next list (up to a renew interval
        later), so its silence, and its departure, is measured from its last write give or take the watch's
        delay. Who joins and who gave its Lease up stays the lists' to say; this replica's own Lease too (its
        return after a pause is judged on lists)."""
        seen = self._seen.get(holder)
        if holder == self.me or seen is None:
            return
        # A renewal newer than the one seen (renewTimes as the member writes them, RFC 3339 to the microsecond in
        # UTC: they sort as text), or the one seen, arrived before the list that saw it. An event older than the
        # list's view (the watch lags) changes nothing, nor one whose member's wall clock stepped back: the lists
        # see those.
        if (renew > seen[0] and at > seen[1]) or (renew == seen[0] and at < seen[1]):
            self._seen[holder] = (renew, at)

    def next_list(self) -> float:
        """Seconds until the next list: the renew interval, or less when a member last seen renewing expires
        sooner (seen renewing, by the watch or else a list, + the Lease duration, by this replica's clock). A
        departure is then seen as the Lease expires, not up to an interval later: the packages it held are gained
        that much sooner (the takeover after a SIGKILL). The list at that moment measures the silence past the
        duration; after a failed list, the interval."""
        if self.last_error is not None:
            return self.retry  # the list failed: try again at the interval, never in a tight loop
        expiries = [at + self.duration for member, (_, at) in self._seen.items()
                    if member != self.me and at + self.duration > self._listed_at]  # live as of the last list
        soonest = min(expiries, default=math.inf) - self._clock()
        return max(EXPIRY_SLACK, min(self.retry, soonest + EXPIRY_SLACK))

    async def refresh(self) -> None:
        """List the membership Leases now and update the live set; an API error is logged and leaves the view
        as it is (members then go silent by the clock alone)."""
        try:
            leases = await asyncio.get_running_loop().run_in_executor(self._thread, self._list_and_forget)
            self.last_error = None
        except (ApiException, OSError, HTTPError) as exc:
            self.last_error = f"membership Leases in {self.namespace}: {exc}"
            log.warning("%s", self.last_error)
            leases = None
        if leases is not None:
            self.leases = leases
            self._observe(leases)
            self.listed.set()
        live = self.members().live()
        if live != self._live:
            log.info("live members: %s", ", ".join(sorted(live)))
            self._live = live
            if self.on_change is not None:
                self.on_change(live)
        if self._returned:
            self._returned = False
            log.warning("this replica's membership Lease was not seen renewed for about its duration (a pause?): "
                        "the others may have acted on its packages meanwhile")
            if self.on_return is not None:
                self.on_return()

    def _list_and_forget(self) -> list[dict[str, Any]]:
        """The membership Leases (blocking); those of members long gone are deleted on the way."""
        body = rest.get_json(self._api, rest.path("coordination.k8s.io/v1", "leases", self.namespace),
                             [("labelSelector", self.selector), ("limit", str(MAX_MEMBERS))])
        leases = list(body.get("items") or [])
        for lease in leases if self.forget else ():
            self._forget(lease)
        return leases

    def _observe(self, leases: list[dict[str, Any]]) -> None:
        now = self._listed_at = self._clock()
        held: set[str] = set()
        for lease in leases:
            spec = lease.get("spec") or {}
            holder = str(spec.get("holderIdentity") or "")
            renew = str(spec.get("renewTime") or "")
            if not holder:
                continue
            held.add(holder)
            seen = self._seen.get(holder)
            if holder == self.me and seen is not None and seen[0] != renew and \
                    now - seen[1] >= self.duration - self.retry:
                # The others see renewals up to a list later than made: silent this long here, gone there.
                self._returned = True
            if seen is None or seen[0] != renew:
                # First sight counts as a renewal: a member met now is given a whole Lease duration.
                self._seen[holder] = (renew, now)
            self._gone.pop(holder, None)
        for member in set(self._seen) - held:  # its Lease given up or deleted: gone now
            del self._seen[member]
            self._gone[member] = None
        while len(self._gone) > MAX_MEMBERS:  # the oldest departures are forgotten (never seen: silent anyway)
            del self._gone[next(iter(self._gone))]

    def _forget(self, lease: dict[str, Any]) -> None:
        """Delete a membership Lease given up, or left unrenewed for :data:`FORGET_AFTER` durations by its
        ``renewTime`` (its resourceVersion as precondition: one renewed meanwhile stays)."""
        meta = lease.get("metadata") or {}
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        if holder == self.me or (holder and age(spec.get("renewTime")) < max(60.0, FORGET_AFTER * self.duration)):
            return
        body = {"apiVersion": "v1", "kind": "DeleteOptions",
                "preconditions": {"resourceVersion": meta.get("resourceVersion")}}
        with contextlib.suppress(ApiException, OSError, HTTPError):
            rest.send(self._api, "DELETE", rest.path("coordination.k8s.io/v1", "leases", self.namespace,
                                                       str(meta.get("name"))), body)
