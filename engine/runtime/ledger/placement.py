"""Which live member reconciles a package (``helmdeck controller --shards auto``): rendezvous hashing.

Rendezvous (highest random weight) hashing, as Thaler and Ravishankar's: every (member, package) pair gets a
pseudo-random weight and a package goes to the member with the highest. Every member computes the same answer
from the same member set, with no table to agree on, and a member joining or leaving moves only the packages it
wins or held (about 1/N of them). Pure: no I/O, no clock.

A package is named ``namespace/name`` (its Package object's); a member by its replica identity.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable


def package_name(namespace: str, name: str) -> str:
    """The name placement hashes: ``namespace/name`` of the Package object."""
    return f"{namespace}/{name}"


def weight(member: str, package: str) -> int:
    """The weight of ``member`` for ``package``: a 64-bit integer from BLAKE2b over both (a NUL between them,
    so ``("a/b", "c")`` and ``("a", "b/c")`` differ)."""
    digest = hashlib.blake2b(f"{member}\0{package}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def owner(package: str, members: Collection[str]) -> str | None:
    """The member ``package`` is placed on (the highest weight; ties, which BLAKE2b makes vanishingly rare, go
    to the greatest identity), None when there is no member."""
    if not members:
        return None
    return max(members, key=lambda m: (weight(m, package), m))


def assign(packages: Iterable[str], members: Collection[str]) -> dict[str, str | None]:
    """Every package's member (:func:`owner`), by package."""
    return {p: owner(p, members) for p in packages}
