"""The cost of placing again (``--shards auto``, :class:`engine.runtime.ledger.placement.Placement`) on the event
loop, and the spread it gives, without a cluster.

For 1,000 and 10,000 Packages (``--packages``) on 10 members (``--members``), the median over ``--runs`` of the
CPU time (this process's: the figure the event loop pays, less stretched than wall time on a shared machine) of:

- a member joining: every package ranked again (10 hashes each), then placed;
- a Package created: one more ranked, every package placed (one pass, no hashing but the new one's);
- a burst that changed no Package's existence: nothing placed (the check is per object of the burst: not timed).

Then, over 20 random member sets of 3 and 10 members and 1,000 Packages: the largest share against the mean
(issue 21: within 1.2x) and the Packages a joining member moves (at most 1/N plus 5%).

Run: ``python -m bench.placement_cost [--packages 1000 10000] [--members 10] [--runs 5]``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections import Counter

from engine.runtime.ledger.placement import Placement, assign, package_name


def _names(count: int) -> list[str]:
    return [package_name(f"team-{i % 37}", f"app-{i:05d}") for i in range(count)]


def _members(count: int, rng: random.Random) -> list[str]:
    return [f"helmdeck-controller-{rng.randrange(1 << 32):08x}-{rng.randrange(1 << 22)}-{rng.randrange(1 << 16):04x}"
            for _ in range(count)]


def _ms(step: float) -> str:
    return f"{step * 1000:.1f} ms"


def cost(packages: int, members: int, runs: int) -> str:
    """The median seconds of a join and of a Package created, over ``runs`` (a line)."""
    rng = random.Random(packages)
    joins, adds = [], []
    for run in range(runs):
        names, live = _names(packages), _members(members, rng)
        placement = Placement()
        placement.place(names, live[:-1])
        started = time.process_time()
        placement.place(names, live)
        joins.append(time.process_time() - started)
        started = time.process_time()
        placement.place([*names, f"team-0/new-{run}"], live)
        adds.append(time.process_time() - started)
    return (f"{packages} Packages x {members} members: a member joining {_ms(statistics.median(joins))}, "
            f"a Package created {_ms(statistics.median(adds))} (median of {runs})")


def spread(members: int, packages: int = 1000, sets: int = 20) -> str:
    """The worst largest/mean and join moves over ``sets`` random member sets (a line)."""
    rng = random.Random(members)
    names = _names(packages)
    worst, moves = 0.0, []
    for _ in range(sets):
        live = _members(members + 1, rng)
        before, after = assign(names, live[:-1]), assign(names, live)
        worst = max(worst, max(Counter(before.values()).values()) / (packages / members))
        moves.append(sum(1 for n in names if before[n] != after[n]))
    bound = packages / (members + 1) + 0.05 * packages
    return (f"{members} members, {packages} Packages, {sets} random member sets: largest / mean at most {worst:.3f} "
            f"(goal <= 1.2); a member joining moves {min(moves)}-{max(moves)} (bound {bound:.0f})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--packages", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    for packages in args.packages:
        print(cost(packages, args.members, args.runs), flush=True)
    for members in (3, 10):
        print(spread(members), flush=True)


if __name__ == "__main__":
    main()
