"""Placement (``--shards auto``): consistent hashing with bounded loads over rendezvous weights. The spread is
bounded whatever the member identities, a joining member moves about its share, a package coming moves few."""

from __future__ import annotations

import math
import random

import pytest

from engine.runtime.ledger.placement import SLACK, Placement, assign, cap, package_name, weight

PACKAGES = [package_name(f"team-{i % 17}", f"app-{i}") for i in range(1000)]


def members(n: int, seed: int = 0) -> list[str]:
    # Identities as default_identity makes them: host, pid, 4 hex; random ones, the spread must not hang on them.
    rng = random.Random(seed)
    return [f"helmdeck-controller-7d9f{rng.randrange(1 << 16):04x}-{rng.randrange(1, 1 << 22)}-"
            f"{rng.randrange(1 << 16):04x}" for _ in range(n)]


def shares(placed: dict[str, str], ms: list[str]) -> dict[str, int]:
    out = dict.fromkeys(ms, 0)
    for m in placed.values():
        out[m] += 1
    return out


@pytest.mark.parametrize("n", [3, 10])
def test_the_largest_share_is_within_1_1x_the_mean_over_many_member_sets(n: int) -> None:
    # Rendezvous alone went past 1.2x with 10 members about one set in eight: 40 sets would catch it.
    for seed in range(40):
        ms = members(n, seed)
        placed = assign(PACKAGES, ms)
        assert placed.keys() == set(PACKAGES)
        counts = shares(placed, ms)
        assert max(counts.values()) <= SLACK * len(PACKAGES) / n, (seed, counts)
        assert min(counts.values()) > 0


@pytest.mark.parametrize(("p", "n"), [(1, 3), (2, 3), (5, 3), (1, 10), (5, 10), (11, 10), (2, 2), (3, 1)])
def test_few_packages_are_placed_whole_and_no_member_gets_more_than_the_rounded_up_mean(p: int, n: int) -> None:
    names = PACKAGES[:p]
    for seed in range(20):
        ms = members(n, seed)
        placed = assign(names, ms)
        assert placed.keys() == set(names) and set(placed.values()) <= set(ms)
        assert max(shares(placed, ms).values()) <= math.ceil(p / n)


def test_the_cap_is_never_below_the_mean() -> None:
    assert cap(5, 3) == 2 and cap(1, 10) == 1 and cap(1000, 10) == 110 and cap(1000, 3) == 366
    assert all(cap(p, n) * n >= p for p in range(0, 200) for n in range(1, 12))


def test_one_package_goes_to_its_highest_weight_member() -> None:
    ms = members(7)
    for p in PACKAGES[:50]:
        assert assign([p], ms)[p] == max(ms, key=lambda m: weight(m, p))


@pytest.mark.parametrize("n", [3, 10])
def test_a_joining_member_moves_at_most_its_share_plus_5_percent(n: int) -> None:
    for seed in range(20):
        ms = members(n + 1, seed)
        before, after = assign(PACKAGES, ms[:-1]), assign(PACKAGES, ms)
        moved = [p for p in PACKAGES if before[p] != after[p]]
        assert 0 < len(moved) <= len(PACKAGES) / (n + 1) + 0.05 * len(PACKAGES), (seed, len(moved))
        assert sum(after[p] == ms[-1] for p in moved) >= 0.8 * len(moved)  # mostly to the newcomer


def test_a_leaving_member_moves_its_own_and_few_others() -> None:
    for seed in range(10):
        ms = members(4, seed)
        before = assign(PACKAGES, ms)
        after = assign(PACKAGES, ms[1:])
        held = sum(1 for p in PACKAGES if before[p] == ms[0])
        moved = sum(1 for p in PACKAGES if before[p] != after[p])
        assert ms[0] not in after.values()
        assert held <= moved <= 1.3 * held, (seed, held, moved)


@pytest.mark.parametrize("n", [3, 10])
def test_a_package_created_or_deleted_moves_few_others(n: int) -> None:
    # Mostly none; a few when the cap steps (a chain of members over it gives one on).
    moves = []
    for seed in range(3):
        placement, ms = Placement(), members(n, seed)
        before = dict(placement.place(PACKAGES[:900], ms))
        for p in range(901, 1000):
            after = dict(placement.place(PACKAGES[:p], ms))
            moves.append(sum(before[q] != after[q] for q in before))
            shrunk = placement.place(PACKAGES[:p - 2], ms)
            moves.append(sum(after[q] != shrunk[q] for q in shrunk))
            before = dict(placement.place(PACKAGES[:p], ms))
    assert max(moves) <= 10 and sum(moves) / len(moves) < 1, (max(moves), sum(moves) / len(moves))


def test_every_member_computes_the_same_placement_whatever_the_input_order() -> None:
    ms = members(5)
    reordered = list(reversed(PACKAGES))
    random.Random(1).shuffle(reordered)
    expected = assign(PACKAGES, ms)
    assert assign(reordered, list(reversed(ms))) == expected
    assert assign(set(PACKAGES) | {PACKAGES[0]}, set(ms)) == expected


def test_no_member_places_nothing() -> None:
    placement = Placement()
    assert placement.place(PACKAGES[:3], []) == {}
    assert placement.owner(PACKAGES[0]) is None
    assert assign([], members(3)) == {}


def test_placing_again_gives_what_placing_afresh_gives() -> None:
    # The cached rankings and orders: after members and packages come and go, as a fresh placement's.
    placement = Placement()
    ms = members(6)
    steps = [(PACKAGES[:500], ms[:3]), (PACKAGES[:501], ms[:3]), (PACKAGES[10:501], ms[:3]), (PACKAGES[10:501], ms),
             (PACKAGES, ms[1:]), (PACKAGES, ms[1:])]
    for names, live in steps:
        assert placement.place(names, live) == assign(names, live)
        assert all(placement.owner(p) == assign(names, live)[p] for p in names[:20])
    assert placement.owner("team-0/absent") is None


def test_member_and_package_are_hashed_apart() -> None:
    assert weight("ab", "c/d") != weight("a", "bc/d")  # not the hash of the two names run together
    assert package_name("ns", "name") == "ns/name"
