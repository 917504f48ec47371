"""Render cache and manifest checksum for the smart upgrade.

A render is made as helm would act (:meth:`engine.service.ReleaseService.render`):
an install for a release not installed, an upgrade for an installed one, on the
server (``--dry-run=server``, so ``lookup`` reads live objects) or, without a
cluster, offline (``helm template``). Its answer depends on the chart's files,
the values, helmdeck's own code (the post-renderer), helm's version, the release
name and namespace, the labels the post-renderer stamps (package origin,
maintenance), the package's own post-renderers and commonMetadata, install or
upgrade, the revision an upgrade follows (``.Release.Revision``), server or
offline, and the user the render runs as (what ``lookup`` may read). The cache
key holds all of them, so an unchanged package costs no render and any change
to a chart file or a value misses.

The live objects ``lookup`` reads cannot be keyed: a server render is reused for
at most :data:`SERVER_RENDER_TTL` seconds and never across a new revision of the
release, so an object changed by someone else meanwhile is seen that late at
most. Entries live in memory only: rendered manifests may hold secrets.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from importlib import metadata

from engine.monitor import comparison


@functools.cache  # read from the distribution's metadata on first use (~5 ms), not by every command's start
def helmdeck_version() -> str:
    """The installed helmdeck distribution's version ("0" when not installed as a distribution)."""
    try:
        return metadata.version("helmdeck")
    except metadata.PackageNotFoundError:
        return "0"


def manifest_checksum(manifest: str) -> str:
    """The release label ``wire.MANIFEST_CHECKSUM``: the one comparison's checksum
    (:func:`engine.monitor.comparison.checksum`, 32 hex), so the smart upgrade counts as changed
    exactly what ``diff`` and ``plan`` show."""
    return comparison.checksum(manifest)


@dataclass(frozen=True)
class RenderKey:
    """Everything a render depends on; equal keys give equal manifests."""

    chart_digest: str
    values_digest: str
    helmdeck_version: str
    helm_version: str
    namespace: str
    release: str
    stamped: tuple[tuple[str, str], ...]
    rendering: str = ""  # the package's own post-rendering, canonical JSON (engine.package.postrender)
    upgrade_of: int | None = None  # the revision an upgrade follows; None: an install
    server: bool = True  # rendered by helm's server-side dry run (False: offline, helm template)
    user: str = ""  # the user the render runs as (spec.serviceAccountName impersonated), "" helmdeck's own


# Seconds a server render (``lookup`` read live objects) is reused.
SERVER_RENDER_TTL = 60.0


@dataclass(frozen=True)
class Rendered:
    """A post-rendered manifest (the release's objects, then its hooks, as ``helm template`` prints them),
    its checksum, whether it was rendered offline, and when (``time.monotonic()`` seconds)."""

    manifest: str
    checksum: str
    offline: bool = False
    made: float = field(default_factory=time.monotonic)

    def fresh(self) -> bool:
        """Still good to reuse: an offline render always, a server render for :data:`SERVER_RENDER_TTL`."""
        return self.offline or time.monotonic() - self.made < SERVER_RENDER_TTL


class RenderCache:
    """A bounded LRU map of :class:`RenderKey` to :class:`Rendered`; counts hits and misses. Thread-safe."""

    def __init__(self, size: int = 1024):
        self._size = size
        self._lock = threading.Lock()
        self._entries: OrderedDict[RenderKey, Rendered] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key: RenderKey) -> Rendered | None:
        """The entry for ``key`` while :meth:`Rendered.fresh`, else None (a stale one is dropped)."""
        with self._lock:
            found = self._entries.get(key)
            if found is not None and not found.fresh():
                del self._entries[key]
                found = None
            if found is None:
                self.misses += 1
                return None
            self.hits += 1
            self._entries.move_to_end(key)
            return found

    def put(self, key: RenderKey, rendered: Rendered) -> None:
        with self._lock:
            self._entries[key] = rendered
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def held(self) -> list[RenderKey]:
        """The keys held, least recently used first."""
        with self._lock:
            return list(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
