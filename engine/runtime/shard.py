"""Static shards of ``helmdeck controller``: ``--watch-label-selector``, as Flux's controllers shard.

A shard is the Package objects a label selector matches: Flux labels each object
``sharding.fluxcd.io/key: shardN`` and runs one controller per shard with
``--watch-label-selector sharding.fluxcd.io/key=shardN``, the main one with
``!sharding.fluxcd.io/key``. helmdeck's key is :data:`SHARD_KEY`.

Every shard of a package set shares the set's identity (its releases' ``helmdeck.dev/package-set``
label), so a Package moved from one shard to another keeps its release; each shard has its own Lease
(:meth:`Shard.lease_name`, from the normalised selector), so one instance acts per shard and two shards
never contend for one Lease.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from engine.base import label_selector
from engine.base.label_selector import SelectorError
from engine.runtime.package_set import PackageSet

SHARD_KEY = "sharding.helmdeck.dev/key"  # the label a Package's shard is chosen by (Flux: sharding.fluxcd.io/key)
MAIN = "main"  # the shard name of `!sharding.helmdeck.dev/key`: the Packages no shard claims
_DIGEST = 10
_MAX_LEASE = 63


class ShardSelectorError(ValueError):
    """``--watch-label-selector`` does not parse; the message names the flag, the fault and the fix."""


@dataclass(frozen=True)
class Shard:
    """A static shard: ``selector`` in normal form (:func:`engine.base.label_selector.normalise`) and
    ``name``, readable (a label value): the shard key's value for ``sharding.helmdeck.dev/key=NAME``,
    :data:`MAIN` for ``!sharding.helmdeck.dev/key``, else ``sel-<10 hex of the selector's sha256>``."""

    name: str
    selector: str

    @property
    def digest(self) -> str:
        """10 hex of the sha256 of the normalised selector."""
        return hashlib.sha256(self.selector.encode()).hexdigest()[:_DIGEST]

    def lease_name(self, package_set: PackageSet) -> str:
        """``helmdeck-<package set>-<digest>`` (the set's name shortened to fit 63 characters): one Lease per
        shard and package set, stable for a selector however it is spelled."""
        head = package_set.lease_name[:_MAX_LEASE - _DIGEST - 1].rstrip("-")
        return f"{head}-{self.digest}"

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Is an object with ``labels`` in this shard?"""
        return label_selector.matches(label_selector.parse(self.selector), labels)


def shard_for(selector: str | None, *, auto: bool = False) -> Shard | None:
    """The shard ``--watch-label-selector`` names; None for no selector (or one matching everything).
    ``auto``: ``--shards auto`` was given too, which refuses any selector: its replicas place every Package they
    watch on each other (rendezvous over the live members), so a selector would have members of different
    selectors place Packages they do not see. Raises ShardSelectorError naming the flag(s) and the fix."""
    if selector is None:
        return None
    if auto:
        raise ShardSelectorError(
            f"--shards auto and --watch-label-selector {selector[:200]!r} cannot be combined: automatic placement "
            f"spreads every Package among the replicas, a static shard takes the Packages its selector matches; "
            f"drop --watch-label-selector to place automatically, or drop --shards auto to run a static shard")
    try:
        normal = label_selector.normalise(selector)
    except SelectorError as exc:
        raise ShardSelectorError(
            f"--watch-label-selector {selector[:200]!r}: {exc}; write a Kubernetes label selector, e.g. "
            f"{SHARD_KEY}=shard1 for a shard and !{SHARD_KEY} for the main instance") from None
    if not normal:
        return None
    requirements = label_selector.parse(normal)
    if len(requirements) == 1 and requirements[0].key == SHARD_KEY:
        only = requirements[0]
        if only.op in ("=", "in") and len(only.values) == 1 and only.values[0]:
            return Shard(only.values[0], normal)
        if only.op == "!":
            return Shard(MAIN, normal)
    return Shard(f"sel-{hashlib.sha256(normal.encode()).hexdigest()[:_DIGEST]}", normal)
