"""Rendezvous placement (``--shards auto``): spread over the members, and few moves when one joins or leaves."""

from __future__ import annotations

import pytest

from engine.runtime.ledger.placement import assign, owner, package_name, weight

PACKAGES = [package_name(f"team-{i % 17}", f"app-{i}") for i in range(1000)]


def members(n: int) -> list[str]:
    # Identities as default_identity makes them: host, pid, 4 hex.
    return [f"helmdeck-controller-7d9f-{1000 + i}-{(i * 2654435761) % 65536:04x}" for i in range(n)]


@pytest.mark.parametrize("n", [3, 10])
def test_the_largest_share_is_within_1_2x_the_mean(n: int) -> None:
    placed = assign(PACKAGES, members(n))
    shares = {m: 0 for m in members(n)}
    for m in placed.values():
        assert m is not None
        shares[m] += 1
    mean = len(PACKAGES) / n
    assert max(shares.values()) <= 1.2 * mean, shares
    assert min(shares.values()) > 0


@pytest.mark.parametrize("n", [3, 10])
def test_a_joining_member_moves_at_most_its_share_plus_5_percent(n: int) -> None:
    before = assign(PACKAGES, members(n))
    after = assign(PACKAGES, members(n + 1))
    moved = [p for p in PACKAGES if before[p] != after[p]]
    assert len(moved) <= len(PACKAGES) / (n + 1) + 0.05 * len(PACKAGES), len(moved)
    joiner = members(n + 1)[-1]
    assert moved and all(after[p] == joiner for p in moved)  # only to the newcomer, never between the others


def test_a_leaving_member_moves_only_its_own_packages() -> None:
    before = assign(PACKAGES, members(4))
    gone = members(4)[1]
    after = assign(PACKAGES, [m for m in members(4) if m != gone])
    assert all(before[p] == after[p] for p in PACKAGES if before[p] != gone)
    assert all(after[p] != gone for p in PACKAGES)


def test_every_member_computes_the_same_owner_whatever_the_order() -> None:
    ms = members(5)
    assert all(owner(p, ms) == owner(p, list(reversed(ms))) == owner(p, set(ms)) for p in PACKAGES[:100])
    assert owner("a/b", []) is None


def test_member_and_package_are_hashed_apart() -> None:
    assert weight("ab", "c/d") != weight("a", "bc/d")  # not the hash of the two names run together
    assert package_name("ns", "name") == "ns/name"
