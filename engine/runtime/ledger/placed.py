"""Is a package this replica's to act on: the placement port the gate, the running-action guard, the action
context and the writers on the Package objects ask.

One answer per question, from one owner: :data:`ALL_HERE` on the local path (a folder, one controller
without shards: every package is this engine's), the replica's shards with ``--watch-label-selector`` or
``--shards auto`` (:class:`engine.runtime.cluster.shards.Shards`). The builders
(:mod:`engine.runtime.assemble`) hand it to each part at construction; where the shards are built after
the parts that ask them (they need the book), a :class:`PlacedLater` stands for them until bound.
"""

from __future__ import annotations

from typing import Protocol

from engine.package.model import PackageSpec
from engine.runtime.state import ReleaseKey

Ref = tuple[str, str]  # a Package object: (namespace, name)


class Placed(Protocol):
    """What the parts ask about placement. ``why_not(key)``: why this replica may not act on ``key`` now
    (None: it may; the gate's rule 10); ``placed_elsewhere(key)``: the member ``key``'s package is placed on
    when another (None: here); ``let_go(key)``: awaited when the running-action guard lets a release go;
    ``fence(key, action, timeout, spec)``: awaited before each helm action (raises to refuse it);
    ``recheck(key)``: right before a helm process starts (raises to refuse it); ``mine(ref)``: is the
    Package object ``ref`` placed here; ``left(key)``: the Package object of a release whose Package left
    this shard while its action ran here (None: none)."""

    def why_not(self, key: ReleaseKey) -> str | None: ...

    def placed_elsewhere(self, key: ReleaseKey) -> str | None: ...

    async def let_go(self, key: ReleaseKey) -> None: ...

    async def fence(self, key: ReleaseKey, action: str, timeout: float, spec: PackageSpec | None) -> None: ...

    def recheck(self, key: ReleaseKey) -> None: ...

    def mine(self, ref: Ref) -> bool: ...

    def left(self, key: ReleaseKey) -> Ref | None: ...


class AllHere:
    """The local path's placement: every package is this engine's, nothing is fenced."""

    sharded = False

    def why_not(self, key: ReleaseKey) -> str | None:
        return None

    def placed_elsewhere(self, key: ReleaseKey) -> str | None:
        return None

    async def let_go(self, key: ReleaseKey) -> None:
        return None

    async def fence(self, key: ReleaseKey, action: str, timeout: float, spec: PackageSpec | None) -> None:
        return None

    def recheck(self, key: ReleaseKey) -> None:
        return None

    def mine(self, ref: Ref) -> bool:
        return True

    def left(self, key: ReleaseKey) -> Ref | None:
        return None


ALL_HERE = AllHere()


class PlacedLater:
    """Stands for the shards until :meth:`bind` (once, by the builder, before the engine starts); every
    package is here until then."""

    def __init__(self) -> None:
        self._to: Placed = ALL_HERE

    def bind(self, placed: Placed) -> None:
        self._to = placed

    def why_not(self, key: ReleaseKey) -> str | None:
        return self._to.why_not(key)

    def placed_elsewhere(self, key: ReleaseKey) -> str | None:
        return self._to.placed_elsewhere(key)

    async def let_go(self, key: ReleaseKey) -> None:
        await self._to.let_go(key)

    async def fence(self, key: ReleaseKey, action: str, timeout: float, spec: PackageSpec | None) -> None:
        await self._to.fence(key, action, timeout, spec)

    def recheck(self, key: ReleaseKey) -> None:
        self._to.recheck(key)

    def mine(self, ref: Ref) -> bool:
        return self._to.mine(ref)

    def left(self, key: ReleaseKey) -> Ref | None:
        return self._to.left(key)
