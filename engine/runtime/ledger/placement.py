"""Which live member reconciles a package (``helmdeck controller --shards auto``): consistent hashing with
bounded loads.

The rule is Mirrokni, Thorup and Zadimoghaddam's "consistent hashing with bounded loads" (2017) over rendezvous
(highest random weight, Thaler and Ravishankar's) weights:

- every (member, package) pair gets a pseudo-random weight (:func:`weight`), so each package ranks the members;
- the packages are taken in an order fixed by a hash of their names (:func:`order`), never the input's;
- each goes to its highest-ranked member whose load is below the cap, ``max(ceil(P/N), floor(c*P/N))`` packages
  (:func:`cap`, ``c`` = :data:`SLACK`; the first term keeps the cap at or above the mean when ``c*P/N`` rounds
  below it, for small P).

Rendezvous alone looks at one package at a time, so the largest share varies with the member identities (with
10 members over 1,000 packages it exceeds 1.2x the mean about one time in eight); the cap bounds it at about
``c`` times the mean whatever the identities. The price: placement depends on the set of packages too, not only on
the members. A member joining moves about its share (1/N, plus a little as the capped members' overflow settles
again); one leaving moves about 1.15x what it held; a package created or deleted moves at most a few others.

Every member computes the same answer from the same (package names, live members), with no table to agree on.
Two members whose views lag each other (one has seen a member, or a Package, that the other has not yet) may
disagree for a moment and both count a package theirs: placement alone does not keep two actors apart, the
actor claim does (:mod:`engine.runtime.ledger.claims`: a status write with the object's resourceVersion as
precondition, which only one writer wins).

A package is named ``namespace/name`` (its Package object's); a member by its replica identity. Pure: no I/O, no
clock.
"""

from __future__ import annotations

import bisect
import hashlib
import math
from collections.abc import Collection, Iterable, Mapping

SLACK = 1.1  # c: the cap over the mean share (1.2x is the goal; 1.1 leaves room for rounding)


def package_name(namespace: str, name: str) -> str:
    """The name placement hashes: ``namespace/name`` of the Package object."""
    return f"{namespace}/{name}"


def weight(member: str, package: str) -> int:
    """The weight of ``member`` for ``package``: a 64-bit integer from BLAKE2b over both (a NUL between them,
    so ``("a/b", "c")`` and ``("a", "b/c")`` differ)."""
    digest = hashlib.blake2b(f"{member}\0{package}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def order(package: str) -> bytes:
    """Where ``package`` comes in the order packages are placed: 8 bytes of BLAKE2b over its name (then the name
    itself breaks a tie)."""
    return hashlib.blake2b(package.encode(), digest_size=8).digest()


Prefixes = list[tuple[str, "hashlib.blake2b"]]  # each member, and its hash state over the member and a NUL


def _prefixes(members: Iterable[str]) -> Prefixes:
    """Each member's hash state over its identity and a NUL: :func:`weight` is one copy and one update on."""
    return [(m, hashlib.blake2b(f"{m}\0".encode(), digest_size=8)) for m in members]


def _ranking(package: str, prefixes: Prefixes) -> tuple[str, ...]:
    """The members by decreasing :func:`weight` for ``package`` (a tie, which BLAKE2b makes vanishingly rare,
    goes to the greater identity)."""
    tail = package.encode()
    weighed = []
    for member, prefix in prefixes:
        h = prefix.copy()
        h.update(tail)
        weighed.append((h.digest(), member))  # big-endian: bytes order as weight()'s integers
    weighed.sort(reverse=True)
    return tuple(m for _, m in weighed)


def cap(packages: int, members: int, slack: float = SLACK) -> int:
    """The most packages one member is given: ``max(ceil(P/N), floor(slack*P/N))``. Raises ZeroDivisionError
    when ``members`` is 0."""
    return max(math.ceil(packages / members), math.floor(slack * packages / members))


class Placement:
    """The placement of a set of packages on a set of members, kept between changes (:meth:`place`). The members'
    ranking of each package is cached for the current member set and the packages are kept in placing order, so
    placing again after a package came or went hashes only that one and takes one pass over the packages (8 ms of
    CPU for 10,000 on 10 members, bench/placement_cost.py); a change of members ranks every package again (N
    hashes each: 58 ms). Not thread-safe: one owner calls it (the event loop)."""

    def __init__(self, slack: float = SLACK) -> None:
        self.slack = slack
        self._members: frozenset[str] = frozenset()
        self._ranks: dict[str, tuple[str, ...]] = {}  # package -> ranking over _members
        self._prefixes: Prefixes = []  # of _members
        self._names: set[str] = set()  # the packages placed
        self._sorted: list[tuple[bytes, str]] = []  # their sort keys (order(p), p), in placing order
        self._owners: dict[str, str] = {}

    def place(self, packages: Iterable[str], members: Collection[str]) -> dict[str, str]:
        """Place ``packages`` (names, any order, duplicates ignored) on ``members`` and keep the result; returns
        it, member by package (empty when there is no member)."""
        live = frozenset(members)
        names = set(packages)
        if live != self._members:
            self._members, self._ranks, self._prefixes = live, {}, _prefixes(sorted(live))
        if names != self._names:
            self._reorder(names)
        if not live:
            self._owners = {}
            return self._owners
        limit = cap(len(names), len(live), self.slack)
        load = dict.fromkeys(live, 0)
        owners: dict[str, str] = {}
        ranks = self._ranks
        for _, p in self._sorted:
            ranked = ranks.get(p)
            if ranked is None:
                ranked = ranks[p] = _ranking(p, self._prefixes)
            for m in ranked:
                if load[m] < limit:
                    load[m] += 1
                    owners[p] = m
                    break
        self._owners = owners
        return owners

    def _reorder(self, names: set[str]) -> None:
        """Take ``names`` as the packages: a few came or went, each into or out of the sorted list by bisection
        (a memory move, not a sort); many, one sort."""
        came, went = names - self._names, self._names - names
        for p in went:
            self._ranks.pop(p, None)
        if len(came) + len(went) > 64:
            self._sorted = sorted((order(p), p) for p in names)
        else:
            for p in went:
                del self._sorted[bisect.bisect_left(self._sorted, (order(p), p))]
            for p in came:
                bisect.insort(self._sorted, (order(p), p))
        self._names = names

    def owners(self) -> Mapping[str, str]:
        """The last :meth:`place`'s result, member by package (a later one leaves it as it is)."""
        return self._owners

    def owner(self, package: str) -> str | None:
        """The member ``package`` was placed on by the last :meth:`place`, None when it was not placed."""
        return self._owners.get(package)


def assign(packages: Iterable[str], members: Collection[str], slack: float = SLACK) -> dict[str, str]:
    """Every package's member, by package (empty when there is no member): :meth:`Placement.place` once."""
    return Placement(slack).place(packages, members)
