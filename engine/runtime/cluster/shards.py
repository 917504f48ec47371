"""``helmdeck controller --shards auto``: placement on the live members, the actor claim, and handover.

The I/O around two pure rules: :mod:`engine.runtime.ledger.placement` (which live member a Package is placed
on: consistent hashing with bounded loads over the live members and every Package object's ``namespace/name``)
and :mod:`engine.runtime.ledger.claims` (may this replica claim a release). The members come from
:class:`~engine.runtime.cluster.members.Membership`; this replica's own membership Lease is the engine's
:class:`~engine.runtime.drive.lease.LeaseElector` (while it cannot renew it the gate lets it act on nothing).
Placement alone may, for a moment, give one Package to two replicas (their views of the members or of the
Package objects lag each other); the claim is what keeps a release to one actor.

- The gate asks :meth:`Shards.why_not` (a package placed on another member, a claim another member holds).
- Before each helm action the engine awaits :meth:`Shards.fence` (the action context's fence): after a pause
  (the Lease not written for half its duration, by the monotonic or the wall clock) it re-checks the membership
  Lease and the members first; it refuses a package placed elsewhere now; then it writes ``status.claim`` with
  the object's resourceVersion as precondition (409 Conflict: another writer won; the object is looked at again
  as the watch brings it, and the rule decides again). A claim is taken over from a silent member only on a list
  of the members made after the claim was read. The first claim of a pass reads the release's persisted
  status again: when another replica acted since, the pass starts over on the fresh status.
- Right before the helm process is spawned, :meth:`Shards.recheck` refuses it when the Lease lapsed since the
  fence (a freeze after the claim: another member may hold the claim by now).
- A later helm action of the same pass rewrites the claim (its action, start and timeout) and clears it, both
  in a JSON patch that applies only while the claim still names this replica.
- When the action's guard lets the release go (:meth:`Shards.let_go`), the status is persisted, then the claim
  cleared, both only while the claim is still this replica's as the API server holds it (a replica paused past its
  Lease finds its claim taken over, or taken and cleared: the status is then the other member's).
- Placement is kept in one :class:`~engine.runtime.ledger.placement.Placement`, placed again when the live set
  changes (:meth:`Shards.on_members`, once per list of the members) and when a burst of Package object changes
  creates or deletes one (:meth:`Shards.on_packages`, once per burst: the watch groups changes for its debounce),
  never per event: a Package coming or going can move another one, bounded loads weigh the whole set. A Package
  object newer than the last placing is nobody's until the next (its burst's, right after it is read).
- When the placement changes, the packages placed on this replica now are handed to ``gained`` (and when this
  replica comes back from a pause the others took for a departure, all of them), those placed here no more to
  ``lost``. A running action is not moved (issue 32: one edit, one upgrade): a package placed elsewhere now whose
  action still runs here lets it finish (the pass's next action is refused), its claim holding the new owner off
  until the guard lets go; the new owner's first claim then reads the status it persisted, and decides on storage
  as it is (a revision made from its spec is recorded, not made again). Only an action still running past the
  package's timeout (+ :data:`~engine.runtime.ledger.claims.STALE_GRACE`) is cancelled, as the operator's cancel
  does (its pending revision unlocked), as a :class:`~engine.reconcile.action.Handover`, which uses no remediation
  retry (not the release's failure). A replica gone (its Lease lapsed) is not waited for: its claim is taken over
  by the claim's rule.

Reads use the watched objects (the controller's role may list, watch and patch Packages, not get them).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from engine.kube import rest
from engine.package.load import object_origin
from engine.package.model import PackageSpec
from engine.reconcile.action import Handover
from engine.runtime.cluster.members import Membership
from engine.runtime.cluster.object_status import GROUP, VERSION, object_ref
from engine.runtime.cluster.objects import PACKAGES, PackageObjects
from engine.runtime.drive.lease import LeaseElector
from engine.runtime.ledger.book import ActionRefused, ReleaseBook
from engine.runtime.ledger.claims import STALE_GRACE, Claim, ClaimRefused, LeaseLapsed, decide
from engine.runtime.ledger.gate import is_pending
from engine.runtime.ledger.placement import Placement, package_name
from engine.runtime.state import ReleaseKey
from engine.storage.observation import Observation

log = logging.getLogger(__name__)

CONFLICTS = 10  # claim writes tried on an object that keeps changing
CONFLICT_WAIT = 0.3  # seconds for the watch to bring the object's newer version after a conflict
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"

Ref = tuple[str, str]  # a Package object's (namespace, name)
UNPLACED = "no replica yet (a Package object newer than the last placing)"


def _origin(ref: Ref) -> Path:
    return object_origin(PACKAGES, *ref)


@dataclass(eq=False, repr=False)
class Shards:
    """Placement and claims of one replica (see the module docstring). ``latest(ns, name)``: the release's
    latest stored revision; ``spawn`` runs background tasks; ``stop_deadline``: seconds a static shard's
    handed-over action may still run here (``--shards auto`` waits for the action, up to its timeout)."""

    api: client.ApiClient
    objects: PackageObjects
    book: ReleaseBook
    membership: Membership
    elector: LeaseElector
    latest: Callable[[str, str], Observation | None]
    spawn: Callable[[Coroutine[Any, Any, None]], object]
    stop_deadline: float = 30.0
    gained: Callable[[set[ReleaseKey]], None] = lambda _keys: None  # set by the engine
    lost: Callable[[set[ReleaseKey]], None] = lambda _keys: None  # set by the engine
    # Stops the action running on a release, as the operator's cancel does (its pending revision unlocked);
    # ``(key, by)``, ``by`` who asked. None: the book's cancel alone.
    cancel: Callable[[ReleaseKey, str], Awaitable[object]] | None = None
    _held: set[ReleaseKey] = field(default_factory=set)  # releases whose claim this replica holds
    _fenced: dict[ReleaseKey, tuple[float, float]] = field(default_factory=dict)  # (monotonic, wall) of last fence
    placement: Placement = field(default_factory=Placement)  # as of the last placing
    _placed: bool = False  # placed at least once (the members were listed)

    @property
    def me(self) -> str:
        return self.membership.me

    def ref(self, key: ReleaseKey) -> Ref | None:
        """The Package object of ``key``'s package, None when none."""
        spec = self.book.packages.get(key)
        return object_ref(spec.file) if spec is not None else None

    def left(self, key: ReleaseKey) -> Ref | None:
        """The Package object of a release whose Package left this replica while its action ran (static shards
        only: :meth:`StaticShards.left`)."""
        return None

    def owner_of(self, ref: Ref) -> str | None:
        """The live member the Package ``ref`` is placed on, None while it is not placed (a Package object newer
        than the last placing)."""
        return self.placement.owner(package_name(*ref))

    def mine(self, ref: Ref) -> bool:
        """Is the Package ``ref`` placed on this replica (never before the members were first listed)?"""
        return self.membership.listed.is_set() and self.owner_of(ref) == self.me

    def placed_elsewhere(self, key: ReleaseKey) -> str | None:
        """The member ``key``'s package is placed on when it is another, else None."""
        ref = self.ref(key)
        if ref is None:
            return None
        found = self.owner_of(ref)
        return None if found == self.me else found or UNPLACED

    def why_not(self, key: ReleaseKey) -> str | None:
        """Why this replica may not act on ``key`` now (placement, or the claim as the watch last saw it), None
        when it may. The gate's rule; the claim write decides again on the object (:meth:`fence`)."""
        ref = self.ref(key)
        if ref is None or key in self._held:
            return None
        found = self.owner_of(ref)
        if found != self.me:
            return f"Package {ref[0]}/{ref[1]} is placed on {self._on(found)} (--shards auto)"
        obj = self.objects.get(_origin(ref)) or {}
        verdict = decide(Claim.from_status(obj.get("status")), self.membership.members(),
                         pending=is_pending(self.latest(*key)), now=time.time())
        return None if verdict.take else verdict.reason

    # -- the claim -------------------------------------------------------------------
    async def fence(self, key: ReleaseKey, action: str, timeout: float, spec: PackageSpec | None = None) -> None:
        """Claim ``key``'s release for ``action`` (its helm ``timeout``, seconds) before it starts; ``spec``: the
        package spec the action is of (None: not checked). Raises ClaimRefused (with when to try again) when this
        replica may not start it, or not on ``spec``: the Package object, as it was when claimed, is of a newer
        generation than the one ``spec`` was read from (a replica back from a pause acts on its watch's
        backlog otherwise: the churn caught one upgrading to an edit already superseded)."""
        limit = self.membership.duration / 2
        if self.elector.lapsed(limit):
            log.warning("no membership Lease write for over %.0fs (a pause?): re-checking it before acting", limit)
            if not await self.elector.confirm():
                raise ClaimRefused("this replica's membership Lease is not renewed: it acts on nothing until it is",
                                   self.membership.retry)
            await self.membership.refresh()  # what moved while it slept
        ref = self.ref(key)
        if ref is None:
            return  # not a Package object's release: nothing to claim it on
        self._placed_here(ref)
        self._fenced[key] = (time.monotonic(), time.time())  # before the write: a freeze during it counts
        first = key not in self._held
        if first:
            verdict, claimed = await self._write_claim(key, ref, action, timeout)
            self._held.add(key)
            if verdict:
                self.book.log(key, "claim", "info", verdict)
        else:
            claimed = self.objects.get(_origin(ref)) or {}
            if not await self._swap_own(ref, Claim(self.me, action, time.time(), timeout).to_status()):
                self._held.discard(key)
                self._fenced.pop(key, None)
                raise ClaimRefused(f"the claim on Package {ref[0]}/{ref[1]} is no longer this replica's", 5.0)
        if first and await self.book.reload_status(key, before_acting=True):
            raise ClaimRefused("another replica acted on the release since this one read its status: the pass "
                               "starts over on the status it wrote", 0.5)
        if spec is not None:
            self._read_as_claimed(ref, spec, (claimed.get("metadata") or {}).get("generation"))
        self._placed_here(ref)  # the live set may have changed while the claim was written: no start to cancel

    def _read_as_claimed(self, ref: Ref, spec: PackageSpec, generation: object) -> None:
        """Raises ClaimRefused unless ``spec`` is the spec of the Package ``ref`` at ``generation`` (the one its
        claim was written on): that generation validated here, and ``spec`` what it gave (a bad edit's last good
        spec included). The pass starts over on the spec read since."""
        origin = _origin(ref)
        if generation is not None and self.objects.validated(origin) != generation:
            raise ClaimRefused(f"Package {ref[0]}/{ref[1]} is at generation {generation}, not read here yet: the "
                               "pass starts over once it is", 0.5)
        if self.objects.spec(origin) not in (None, spec):
            raise ClaimRefused(f"Package {ref[0]}/{ref[1]} was edited since this pass read it: the pass starts over "
                               "on its new spec", 0.5)

    def recheck(self, key: ReleaseKey) -> None:
        """Right before a helm process is spawned on ``key`` (after :meth:`fence`): raises LeaseLapsed when this
        replica's membership Lease went unwritten for half its duration at any moment since the fence (as the
        fence's pause check, a local one): it froze after claiming, and a member that saw it silent may have taken
        the claim over. A renewal made after the freeze does not clear it (the Lease's thread can renew before the
        event loop spawns helm: the takeover bench at load 12 caught two replicas' helm upgrades overlapping on
        one release that way). The next pass's fence re-checks the Lease and the claim."""
        limit = self.membership.duration / 2
        if key in self._held and self.elector.lapsed(limit, since=self._fenced.get(key, (-math.inf, -math.inf))):
            ref = self.ref(key)
            what = f"Package {ref[0]}/{ref[1]}" if ref is not None else f"{key[0]}/{key[1]}"
            raise LeaseLapsed(f"no membership Lease write for over {limit:.0f}s since the claim on {what} (a "
                              "pause?): another replica may hold it now", 0.5)

    def _placed_here(self, ref: Ref) -> None:
        """Raises ClaimRefused when the Package ``ref`` is placed on another live member now."""
        found = self.owner_of(ref)
        if found != self.me:
            raise ClaimRefused(f"Package {ref[0]}/{ref[1]} is placed on {self._on(found)} now", 30.0)

    def _on(self, member: str | None) -> str:
        return UNPLACED if member is None else f"controller replica {member}"

    async def _write_claim(self, key: ReleaseKey, ref: Ref, action: str,
                           timeout: float) -> tuple[str, dict[str, Any]]:
        """Write this replica's claim on ``ref`` (compare-and-swap on the resourceVersion); returns the take-over
        sentence ("" when it took none) and the object as it was when claimed. Raises ClaimRefused.

        A take-over is decided on a list of the members made after the claim was read: the last list may predate
        the claim (its member paused past its Lease, came back, renewed and claimed since), and a member seen silent
        then is not silent now. The churn at load ~50 caught two replicas upgrading one release that way."""
        relisted_for: object = None  # the resourceVersion of the object the members were listed again for
        for _ in range(CONFLICTS):
            obj = self.objects.get(_origin(ref))
            if obj is None:
                raise ClaimRefused(f"Package {ref[0]}/{ref[1]} is gone", 30.0)
            verdict = decide(Claim.from_status(obj.get("status")), self.membership.members(),
                             pending=is_pending(self.latest(*key)), now=time.time())
            if not verdict.take:
                raise ClaimRefused(verdict.reason, verdict.retry_after)
            version = (obj.get("metadata") or {}).get("resourceVersion")
            if verdict.taken_from and relisted_for != version:
                await self.membership.refresh()
                if self.membership.last_error is not None:
                    raise ClaimRefused(f"the claim of silent replica {verdict.taken_from} is not taken over while "
                                       f"the members cannot be listed: {self.membership.last_error}",
                                       self.membership.retry)
                relisted_for = version
                continue
            claim = Claim(self.me, action, time.time(), timeout).to_status()
            if await self._patch(ref, obj, {"claim": claim}):
                if verdict.taken_from:
                    log.warning("%s/%s: claim %s", *ref, verdict.reason)
                return verdict.reason if verdict.taken_from else "", obj
            await asyncio.sleep(CONFLICT_WAIT)
        raise ClaimRefused(f"Package {ref[0]}/{ref[1]} kept changing while its claim was written (409 Conflict)", 1.0)

    async def _patch(self, ref: Ref, obj: dict[str, Any], status: dict[str, Any]) -> bool:
        """Merge ``status`` into ``ref``'s status with ``obj``'s resourceVersion as precondition; False on 409
        Conflict. Raises ClaimRefused for another API error (404: the object is gone)."""
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        return await self._send(ref, {"metadata": {"resourceVersion": rv}, "status": status}, MERGE_PATCH, (409,))

    async def _swap_own(self, ref: Ref, claim: dict[str, Any] | None) -> bool:
        """Replace (``claim`` None: remove) this replica's own claim on ``ref``, in one JSON patch whose ``test``
        makes it apply only while the claim names this replica (no resourceVersion needed: the API server applies
        the patch to the object as it is). False when the claim is not this replica's (or none)."""
        ops: list[dict[str, Any]] = [{"op": "test", "path": "/status/claim/replica", "value": self.me}]
        ops.append({"op": "remove", "path": "/status/claim"} if claim is None else
                   {"op": "replace", "path": "/status/claim", "value": claim})
        return await self._send(ref, ops, JSON_PATCH, (409, 422, 400))

    async def _send(self, ref: Ref, body: Any, content_type: str, refused: tuple[int, ...]) -> bool:
        path = rest.path(f"{GROUP}/{VERSION}", PACKAGES, ref[0], ref[1]) + "/status"
        try:
            await asyncio.to_thread(rest.send, self.api, "PATCH", path, body, content_type=content_type)
        except ApiException as exc:
            if exc.status in refused:
                return False
            raise ClaimRefused(f"claim on Package {ref[0]}/{ref[1]} not written: {exc.status} {exc.reason}",
                               5.0) from exc
        except (OSError, HTTPError) as exc:
            raise ClaimRefused(f"claim on Package {ref[0]}/{ref[1]} not written: {exc}", 5.0) from exc
        return True

    async def let_go(self, key: ReleaseKey) -> None:
        """The action's guard let ``key`` go: persist its status, then clear the claim, both only while the claim
        is still this replica's (asked of the API server, not the watch, which may lag: a claim taken over while
        this replica was paused, and cleared since by the member that took it, looks like none). A claim lost
        so leaves the status to the member that took it: the book takes the status it persisted, and this
        replica's is not written over it (a failure is logged)."""
        if key not in self._held:
            return
        self._held.discard(key)
        self._fenced.pop(key, None)
        ref = self.ref(key)
        if ref is not None and not await self._still_mine(ref):
            log.warning("%s/%s: the claim was taken over by another replica while this one acted (its membership "
                        "Lease lapsed): the release's status is left to it", *ref)
            await self.book.reload_status(key, before_acting=True)
            return
        await self.book.persist(key)  # before the claim goes: the next claimant reads what this one did
        if ref is None:
            return
        try:
            await self._swap_own(ref, None)  # False: taken over meanwhile, or gone: nothing of ours to clear
        except ClaimRefused as exc:
            log.warning("%s (it is taken over once this replica is gone, or cleared by its next action)", exc)

    async def _still_mine(self, ref: Ref) -> bool:
        """Does the claim on ``ref`` name this replica now? A JSON patch whose only operation is that ``test``
        (it changes nothing). The watch's view answers when it shows another member's claim; an API error
        counts as yes (the claim write's own precondition still guards the next action)."""
        obj = self.objects.get(_origin(ref))
        claim = Claim.from_status(obj.get("status")) if obj is not None else None
        if claim is not None and claim.replica != self.me:
            return False
        try:
            return await self._send(ref, [{"op": "test", "path": "/status/claim/replica", "value": self.me}],
                                    JSON_PATCH, (409, 422, 400))
        except ClaimRefused as exc:
            log.warning("%s: taken for this replica's", exc)
            return True

    # -- placement changes: the members, the Package objects ------------------------------
    def on_members(self, live: frozenset[str]) -> None:
        """The live set changed (and at start, once the members are first listed): place again."""
        self._place(live)

    def on_packages(self, origins: frozenset[Path]) -> None:
        """After a burst of Package object changes (``origins``): place again when it created or deleted one
        (a look at each object of the burst; the rest of the burst, specs and statuses, moves nothing)."""
        if not self.membership.listed.is_set():
            return  # placed first when the members are listed
        for origin in origins:
            ref = object_ref(origin)
            if ref is not None and (self.objects.get(origin) is None) != (self.owner_of(ref) is None):
                self._place(self.membership.live())
                return

    def _place(self, live: frozenset[str]) -> None:
        """Place every Package object on ``live`` again: hand the packages placed here now and not before to
        ``gained``, those placed here before and not now to ``lost``; give a package placed elsewhere now whose
        action runs here ``stop_deadline`` seconds to finish, then cancel it. A Package object new since the last
        placing is neither: it was queued on its creation, as any new package, and its pass (after this: the
        burst's listeners run before the queue's workers) finds it placed."""
        first, before = not self._placed, self.placement.owners()
        names = (package_name(*ref) for ref in map(object_ref, self.objects.objects()) if ref is not None)
        after = self.placement.place(names, live)
        self._placed = True
        gained: set[ReleaseKey] = set()
        lost: set[ReleaseKey] = set()
        for key in list(self.book.packages):
            ref = self.ref(key)
            if ref is None:
                continue  # not a Package object's: no placement
            name = package_name(*ref)
            if not first and name not in before:
                continue
            now, was = after.get(name) == self.me, before.get(name) == self.me
            if now and not was:
                gained.add(key)
            elif was and not now:
                lost.add(key)
                if self.book.busy(key):
                    spec = self.book.packages[key]
                    wait = spec.action_timeout("reconcile") + STALE_GRACE
                    self.spawn(self._hand_over(key, after.get(name) or "?", wait))
        if lost:
            self.lost(lost)
        if gained:
            self.gained(gained)

    def where(self, to: str) -> str:
        """Where a handed-over package went, in a sentence's words (a static shard's say it otherwise)."""
        return f"controller replica {to}"

    def on_return(self) -> None:
        """This replica's membership Lease went unrenewed long enough for the others to count it gone (a pause):
        they may have acted on its packages meanwhile, so every package placed on it is gained again."""
        mine = {key for key in self.book.packages if self.ref(key) is not None and self.placed_elsewhere(key) is None}
        if mine:
            self.gained(mine)

    async def _hand_over(self, key: ReleaseKey, to: str, within: float) -> None:
        """``key``'s package moved to ``to`` while its action runs here: the action finishes (the pass's next
        one is refused by the fence), and is cancelled only if it still runs after ``within`` seconds."""
        self.book.log(key, "handover", "info", f"placed on {self.where(to)} now: the running action finishes here "
                                               f"first (cancelled if it still runs in {within:.0f}s)")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.book.released(key), within)
            return
        if self.placed_elsewhere(key) is None:
            return  # back here meanwhile
        by = Handover(f"as the package moved to {self.where(to)}")  # not the release's failure: no retry used
        if self.cancel is None:
            self.book.cancel(key, by)
            return
        with contextlib.suppress(ActionRefused):  # ended on its own meanwhile
            await self.cancel(key, by)
