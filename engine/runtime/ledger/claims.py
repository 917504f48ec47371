"""The actor claim (``helmdeck controller --shards auto``): may this replica start a helm action on a release.

Before a replica starts a helm action it records itself in the Package's ``status.claim``
(``{replica, action, startedAt, timeoutSeconds}``) with a status write that carries the object's
resourceVersion, so of two replicas writing at once one wins and the other gets 409 Conflict; it clears the
claim when the action ends. :func:`decide` is the one rule over what a replica read; pure, over small values:

- no claim, or this replica's own: take it;
- a claim of a live member (its membership Lease renewed within the Lease duration, as this replica's
  monotonic clock saw it): wait, never take it;
- a claim of a member silent for at least the Lease duration: take it over, except that a release left
  ``pending-*`` under it waits until the claimed action's ``startedAt + timeoutSeconds`` (plus
  :data:`STALE_GRACE`) has passed: its helm process may still run after its controller stopped (SIGSTOP stops
  the controller, not its children; a partitioned node's helm goes on).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.runtime.ledger.book import ActionRefused

# Slack on top of a claimed action's timeout before its pending release may be unlocked by another member
# (as engine.reconcile.next_action's STALE_GRACE for a lock without claim).
STALE_GRACE = 5.0
MAX_TEXT = 253  # a replica identity or action name read from a claim: longer is not ours, cut


class ClaimRefused(ActionRefused):
    """A helm action not started: the release's claim is another member's, or the package is placed on another
    member, or this replica's membership lapsed. ``retry_after``: seconds until it is worth asking again."""

    def __init__(self, message: str, retry_after: float = 5.0):
        super().__init__(message)
        self.retry_after = retry_after


class LeaseLapsed(ClaimRefused):
    """A claimed helm action not run: this replica's membership Lease lapsed between its claim and the helm
    spawn (the process froze), so another member may have taken the claim over meanwhile."""


@dataclass(frozen=True)
class Claim:
    """Who acts on a release: ``replica`` (its identity) runs ``action`` since ``started_at`` (Unix seconds, the
    claimant's wall clock) with the helm timeout ``timeout`` (seconds)."""

    replica: str
    action: str
    started_at: float
    timeout: float

    def to_status(self) -> dict[str, Any]:
        """The ``status.claim`` object (``startedAt`` RFC 3339, ``timeoutSeconds`` whole seconds, rounded up)."""
        when = dt.datetime.fromtimestamp(self.started_at, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return {"replica": self.replica, "action": self.action, "startedAt": when,
                "timeoutSeconds": max(0, math.ceil(self.timeout))}

    @classmethod
    def from_status(cls, status: Mapping[str, Any] | None) -> Claim | None:
        """The claim in a Package's ``status`` (None: none). A claim that cannot be read (no replica, a bad time)
        counts as held by its replica since the Unix epoch with no timeout: never taken from a live member, taken
        over from a silent one without waiting (no time to wait for is known)."""
        raw = (status or {}).get("claim")
        if not isinstance(raw, Mapping) or not raw.get("replica"):
            return None
        started = 0.0
        with contextlib.suppress(ValueError):
            started = dt.datetime.fromisoformat(str(raw.get("startedAt", "")).replace("Z", "+00:00")).timestamp()
        try:
            timeout = float(raw.get("timeoutSeconds") or 0)
        except (TypeError, ValueError):
            timeout = 0.0
        if not math.isfinite(timeout) or timeout < 0:
            timeout = 0.0
        return cls(str(raw["replica"])[:MAX_TEXT], str(raw.get("action") or "")[:MAX_TEXT], started,
                   min(timeout, 7 * 24 * 3600.0))


@dataclass(frozen=True)
class Members:
    """What one replica knows of the membership at one moment.

    ``me``: its identity; ``duration``: the membership Lease duration (seconds); ``silent``: seconds since this
    replica saw each member's Lease renewed (its own monotonic clock, so clock skew does not count);
    ``watched``: seconds it has been watching, the silence of a member it never saw renew.
    """

    me: str
    duration: float
    silent: Mapping[str, float] = field(default_factory=dict)
    watched: float = 0.0

    def silence(self, replica: str) -> float:
        """Seconds ``replica`` has been silent (0 for this replica itself)."""
        if replica == self.me:
            return 0.0
        return self.silent.get(replica, self.watched)

    def is_live(self, replica: str) -> bool:
        """Renewed within the Lease duration (this replica always is: it stops acting when it cannot renew)."""
        return self.silence(replica) < self.duration

    def live(self) -> frozenset[str]:
        """The live members, this replica included."""
        return frozenset({self.me, *(r for r in self.silent if self.is_live(r))})


@dataclass(frozen=True)
class Verdict:
    """:func:`decide`'s answer: ``take`` the claim now, or not and why (``retry_after`` seconds: when to look
    again); ``taken_from``: the silent member a take-over takes it from ("" when none)."""

    take: bool
    reason: str = ""
    retry_after: float = 0.0
    taken_from: str = ""


def decide(claim: Claim | None, members: Members, *, pending: bool, now: float) -> Verdict:
    """May ``members.me`` claim a release whose Package holds ``claim``? ``pending``: the release's latest
    revision is ``pending-*``; ``now``: Unix seconds. The rules are the module's."""
    if claim is None or claim.replica == members.me:
        return Verdict(True)
    who = f"{claim.action or 'an action'} by replica {claim.replica}"
    silence = members.silence(claim.replica)
    if silence < members.duration:
        return Verdict(False, f"{who} holds the claim (a live member)",
                       retry_after=max(1.0, min(members.duration / 2, 5.0)))
    if pending:
        ends = claim.started_at + claim.timeout + STALE_GRACE
        if now < ends:
            return Verdict(False, f"{who} left the release pending and its Lease expired {silence:.0f}s ago; its "
                                  f"helm may still run until its timeout ({ends - now:.0f}s more)",
                           retry_after=ends - now + 0.5)
    return Verdict(True, f"taken over from replica {claim.replica} (its Lease not renewed for {silence:.0f}s)",
                   taken_from=claim.replica)
