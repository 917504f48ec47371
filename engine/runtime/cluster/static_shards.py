"""Static shards (``helmdeck controller --watch-label-selector``) beside each other: overlaps, claims, handover.

A static shard acts on the Package objects its selector matches (its watch brings only those). Two rules keep
it from ever acting beside another controller on one release, both reusing ``--shards auto``'s parts
(:class:`~engine.runtime.cluster.shards.Shards`: the actor claim, its fence, its hand-over):

- Overlap. Every controller's Lease carries its selector (``wire.SELECTOR``) and watched
  namespaces; the shard lists the live ones of its Lease namespace (:class:`~engine.runtime.cluster.members.
  Membership` over ``wire.ROLE=controller``) every renew interval. A Package another live controller
  also takes (:func:`engine.runtime.cluster.shard_selector.overlapping`) is acted on by neither: a Warning Event
  ``ShardOverlap`` on it and a log line name both selectors and the fix, once per set of overlapping shards.
  When the overlap ends (a selector changed, the other controller stopped) the Package is reconciled again.
- Claim and handover. The shard takes the actor claim (``status.claim``, rule in
  :mod:`engine.runtime.ledger.claims`) before every helm action, as ``--shards auto`` replicas do, with the
  controllers' Leases as the members (a claimant is live while its shard's Lease names it and is renewed). A
  Package relabelled away while its action runs here (the watch drops it): the running helm action finishes,
  the pass's next one is refused, and after ``--stop-deadline`` the action is cancelled as the operator's cancel
  does; the claim is cleared when the pass lets the release go. The shard it moved to finds the claim held by a
  live controller and waits until then (it never starts helm on the release meanwhile).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.base.wire import SHARD_OVERLAP
from engine.package.model import PackageSpec
from engine.runtime.cluster.shard_selector import Peer, Shard, overlap_message, overlapping, peer_of
from engine.runtime.cluster.shards import Ref, Shards, _origin
from engine.runtime.ledger.claims import ClaimRefused
from engine.runtime.state import ReleaseKey

log = logging.getLogger(__name__)

ELSEWHERE = "another shard"  # what owner_of says of a Package this shard does not act on
LEFT_RETRY = 30.0  # seconds before a pass refused for a Package that left the shard looks again (it will not)


@dataclass(eq=False, repr=False)
class StaticShards(Shards):
    """The static shard ``shard`` (its Lease ``lease``) among the live controllers (see the module docstring).
    ``warn(ref, reason, message)`` records a Warning Event on a Package object."""

    shard: Shard = field(default_factory=lambda: Shard("", ""))
    lease: str = ""
    warn: Callable[[Ref, str, str], Coroutine[Any, Any, None]] | None = None
    _refs: dict[ReleaseKey, Ref] = field(default_factory=dict)  # the object of each release seen here
    _peers: tuple[Peer, ...] = ()  # the other live controllers, as of the last list
    _overlaps: dict[Ref, frozenset[str]] = field(default_factory=dict)  # refused Packages: the peers' Leases
    _leaving: set[ReleaseKey] = field(default_factory=set)  # releases handed over, their action still running
    _keys: dict[Ref, ReleaseKey] = field(default_factory=dict)  # _refs the other way
    _mine: set[ReleaseKey] = field(default_factory=set)  # acted on here as of the last look at every Package

    # -- placement: this shard, unless another takes the Package too -------------------------
    def peers(self) -> tuple[Peer, ...]:
        """The other live controllers of the Lease namespace (never this shard's own Lease: its standbys)."""
        members = self.membership.members()
        found = (peer_of(lease) for lease in self.membership.leases)
        return tuple(p for p in found if p is not None and p.lease != self.lease and members.is_live(p.holder))

    def refusal(self, ref: Ref) -> str | None:
        """Why this shard does not act on the Package ``ref`` (it left the selector, or another live controller
        takes it too: warned once per set of peers), None when it does. The one static placement rule."""
        if not self.membership.listed.is_set():
            return "the other controllers' Leases are not listed yet"
        obj = self.objects.get(_origin(ref))
        if obj is None:
            self._overlaps.pop(ref, None)
            return (f"Package {ref[0]}/{ref[1]} left this shard: its labels no longer match --watch-label-selector "
                    f"{self.shard.selector!r}")
        labels = (obj.get("metadata") or {}).get("labels") or {}
        found = overlapping(self._peers, ref[0], labels)
        if not found:
            self._overlaps.pop(ref, None)
            return None
        message = overlap_message(self.shard, ref, found)
        leases = frozenset(p.lease for p in found)
        if self._overlaps.get(ref) != leases:
            self._overlaps[ref] = leases
            log.warning("%s", message)
            if self.warn is not None:
                self.spawn(self.warn(ref, SHARD_OVERLAP, message))
        return message

    def owner_of(self, ref: Ref) -> str | None:
        return self.me if self.refusal(ref) is None else ELSEWHERE

    def left(self, key: ReleaseKey) -> Ref | None:
        """A relabelled Package's object while its action still runs here: that action's end Event is still
        recorded on it."""
        return self.ref(key)

    def ref(self, key: ReleaseKey) -> Ref | None:
        """The Package object of ``key``'s package, remembered after it left the shard (its claim is cleared
        on it then)."""
        found = super().ref(key)
        if found is not None:
            self._refs[key], self._keys[found] = found, key
            return found
        return self._refs.get(key)

    def where(self, to: str) -> str:
        return f"{to} (its labels no longer match --watch-label-selector {self.shard.selector!r})"

    def why_not(self, key: ReleaseKey) -> str | None:
        ref = self.ref(key)
        refused = self.refusal(ref) if ref is not None and key not in self._held else None
        return refused if refused is not None else super().why_not(key)

    async def fence(self, key: ReleaseKey, action: str, timeout: float, spec: PackageSpec | None = None) -> None:
        ref = self.ref(key)
        refused = self.refusal(ref) if ref is not None else None
        if refused is not None:
            raise ClaimRefused(refused, LEFT_RETRY)
        await super().fence(key, action, timeout, spec)

    # -- changes: the controllers listed, the Packages watched -----------------------------
    def on_members(self, live: frozenset[str]) -> None:
        """The live controllers changed (a peer came, went, or restarted with another selector; and at start):
        look at every Package again; those this shard may act on now and did not before are reconciled."""
        self._peers = self.peers()
        mine: set[ReleaseKey] = set()
        for key in list(self.book.packages):
            ref = self.ref(key)
            if ref is None or self.refusal(ref) is None:
                mine.add(key)
        gained, self._mine = mine - self._mine, mine
        if gained:
            self.gained(gained)

    def sweep(self, _origins: frozenset[Path] = frozenset()) -> None:
        """After a burst of Package changes: a release whose Package left this shard while its action runs here
        is handed over (``stop_deadline`` seconds to finish, then cancelled); a Package refused for an overlap
        that a relabel ended is reconciled."""
        for key in list(self._held - self._leaving):
            ref = self._refs.get(key)
            if ref is not None and self.objects.get(_origin(ref)) is None and self.book.busy(key):
                self._leaving.add(key)
                self.spawn(self._leave(key))
        ended = {self._keys[ref] for ref in list(self._overlaps) if self.refusal(ref) is None and ref in self._keys}
        if ended:
            self._mine |= ended
            self.gained(ended)

    async def _leave(self, key: ReleaseKey) -> None:
        try:
            await self._hand_over(key, ELSEWHERE, self.stop_deadline)
        finally:
            self._leaving.discard(key)
