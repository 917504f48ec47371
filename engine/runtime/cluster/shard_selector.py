"""Static shards of ``helmdeck controller``: ``--watch-label-selector``, as Flux's controllers shard.

A shard is the Package objects a label selector matches: Flux labels each object
``sharding.fluxcd.io/key: shardN`` and runs one controller per shard with
``--watch-label-selector sharding.fluxcd.io/key=shardN``, the main one with
``!sharding.fluxcd.io/key``. helmdeck's key is :data:`SHARD_KEY`.

Every shard of a package set shares the set's identity (its releases' ``wire.PACKAGE_SET``
label), so a Package moved from one shard to another keeps its release; each shard has its own Lease
(:meth:`Shard.lease_name`, from the normalised selector), so one instance acts per shard and two shards
never contend for one Lease.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.base import label_selector
from engine.base.label_selector import SelectorError
from engine.base.wire import CONTROLLER, ROLE, SELECTOR, SHARD, SHARD_KEY, WATCH_NAMESPACES
from engine.runtime.cluster.members import AUTO_LEASE_DURATION, member_lease
from engine.runtime.drive.lease import LeaseConfig, default_identity
from engine.runtime.package_set import PackageSet

MAIN = "main"  # the shard name of `!SHARD_KEY`: the Packages no shard claims
_DIGEST = 10
_MAX_LEASE = 63


class ShardSelectorError(ValueError):
    """``--watch-label-selector`` does not parse; the message names the flag, the fault and the fix."""


@dataclass(frozen=True)
class Shard:
    """A static shard: ``selector`` in normal form (:func:`engine.base.label_selector.normalise`) and
    ``name``, readable (a label value): the shard key's value for ``SHARD_KEY=NAME``,
    :data:`MAIN` for ``!SHARD_KEY``, else ``sel-<10 hex of the selector's sha256>``."""

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
    watch on each other (bounded-load hashing over the live members), so a selector would have members of different
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


# -- overlapping shards -------------------------------------------------------------------------------------
# Two live shards whose selectors both match one Package would both act on it: neither does (the rule below,
# asked by engine.runtime.cluster.static_shards), and each says so on the Package and in its log.

def controller_lease(package_set: PackageSet, namespace: str, *, watch_namespaces: Sequence[str] | None = None,
                     shard: Shard | None = None, auto: bool = False, duration: float | None = None) -> LeaseConfig:
    """The Lease a ``helmdeck controller`` replica holds in ``namespace``, from its options: the package set's
    (:attr:`PackageSet.lease_name`), a static ``shard``'s own (:meth:`Shard.lease_name`), or with ``auto``
    (``--shards auto``) the replica's membership Lease (:func:`engine.runtime.cluster.members.member_lease`).
    Labelled and annotated so the app finds it and attaches (:mod:`engine.runtime.cockpit.attach`) and static
    shards see each other's selectors (:func:`peer_of`). ``duration``: seconds (None: 15, with ``auto``
    :data:`~engine.runtime.cluster.members.AUTO_LEASE_DURATION`); renewed every fifth of it, between 0.5 and 2 s."""
    labels, notes = [(ROLE, CONTROLLER)], [(WATCH_NAMESPACES, ",".join(watch_namespaces or ()))]
    if shard is not None:
        labels.append((SHARD, shard.name))
        notes.append((SELECTOR, shard.selector))
    duration = duration or (AUTO_LEASE_DURATION if auto else LeaseConfig.duration)
    if auto:
        return member_lease(default_identity(), namespace, duration, tuple(notes))
    return LeaseConfig(shard.lease_name(package_set) if shard else package_set.lease_name, namespace,
                       duration=duration, retry=max(0.5, min(2.0, duration / 5)), labels=tuple(labels),
                       annotations=tuple(notes))


@dataclass(frozen=True)
class Peer:
    """Another live controller beside this shard, as its Lease (in the same Lease namespace) describes it:
    ``lease`` its name, ``holder`` the replica acting for it, ``shard`` its ``SHARD`` label ("" for
    a controller without shards), ``selector`` the Packages it takes ("" every one: no
    ``--watch-label-selector``, or ``--shards auto`` whose members spread every Package), ``namespaces`` the
    namespaces it watches (() every one)."""

    lease: str
    holder: str
    shard: str = ""
    selector: str = ""
    namespaces: tuple[str, ...] = ()

    def takes(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """Does this controller act on a Package of ``namespace`` labelled ``labels``? A selector that does not
        parse (written by something else) counts as taking every Package: the overlap is then reported, not
        missed."""
        if self.namespaces and namespace not in self.namespaces:
            return False
        try:
            return label_selector.matches(label_selector.parse(self.selector), labels)
        except SelectorError:
            return True

    @property
    def described(self) -> str:
        """``shard shard1 (<SHARD_KEY>=shard1, Lease helmdeck-cluster-0a1b2c3d4e)``."""
        what = f"shard {self.shard}" if self.shard and self.shard != "auto" else (
            "the --shards auto replicas" if self.shard == "auto" else "a controller without --watch-label-selector")
        return f"{what} ({self.selector or 'every Package'}, Lease {self.lease})"


def overlapping(peers: Iterable[Peer], namespace: str, labels: Mapping[str, str]) -> tuple[Peer, ...]:
    """The live controllers besides this shard that also take a Package of ``namespace`` labelled ``labels``
    (which this shard's selector matches: its watch brought it). Any: this shard does not act on it, nor does
    any of them that applies the same rule; which is the same answer on every shard, whatever each saw first.
    ``--shards auto`` members count as one peer (their first Lease, by name, stands for them all)."""
    found: dict[str, Peer] = {}
    for peer in sorted(peers, key=lambda p: p.lease):
        group = "auto" if peer.shard == "auto" else peer.lease
        if group not in found and peer.takes(namespace, labels):
            found[group] = peer
    return tuple(found.values())


def overlap_message(shard: Shard, ref: tuple[str, str], peers: tuple[Peer, ...]) -> str:
    """Why shard ``shard`` does not act on the Package ``ref`` that ``peers`` also take, and the fix."""
    others = "; ".join(p.described for p in peers)
    return (f"Package {ref[0]}/{ref[1]} is matched by this shard's --watch-label-selector {shard.selector!r} "
            f"(shard {shard.name}) and by {others}: neither acts on it until one selector alone matches it; "
            f"make the selectors disjoint, e.g. {SHARD_KEY}=X on one and {SHARD_KEY} notin (X) on the other")


def peer_of(lease: Mapping[str, Any]) -> Peer | None:
    """The :class:`Peer` a controller Lease (as the API server gives it) describes; None without a holder (no
    replica acts for it: a clean stop gave it up)."""
    meta = lease.get("metadata") or {}
    spec = lease.get("spec") or {}
    holder = str(spec.get("holderIdentity") or "")
    if not holder:
        return None
    labels, notes = meta.get("labels") or {}, meta.get("annotations") or {}
    namespaces = tuple(n for n in str(notes.get(WATCH_NAMESPACES) or "").split(",") if n)
    return Peer(str(meta.get("name") or ""), holder, str(labels.get(SHARD) or ""),
                str(notes.get(SELECTOR) or "")[:label_selector.MAX_EXPRESSION + 1], namespaces)
