"""Render cache and manifest checksum for the smart upgrade.

A render depends on the chart's files, the values, helmdeck's own code (the
post-renderer), helm's version, the release name and namespace, and the
labels the post-renderer stamps (package origin, maintenance) and the
package's own post-renderers and commonMetadata. The cache
key holds digests of all of them, so an unchanged package costs no
``helm template`` and any change to a chart file or a value misses. Entries
live in memory only: rendered manifests may hold secrets.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from importlib import metadata

from engine.monitor import comparison


def helmdeck_version() -> str:
    """The installed helmdeck distribution's version ("0" when not installed as a distribution)."""
    try:
        return metadata.version("helmdeck")
    except metadata.PackageNotFoundError:
        return "0"


def manifest_checksum(manifest: str) -> str:
    """The release label ``helmdeck.dev/manifest-checksum``: the one comparison's checksum
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


@dataclass(frozen=True)
class Rendered:
    """A post-rendered manifest and its checksum."""

    manifest: str
    checksum: str


class RenderCache:
    """A bounded LRU map of :class:`RenderKey` to :class:`Rendered`; counts hits and misses. Thread-safe."""

    def __init__(self, size: int = 1024):
        self._size = size
        self._lock = threading.Lock()
        self._entries: OrderedDict[RenderKey, Rendered] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key: RenderKey) -> Rendered | None:
        with self._lock:
            found = self._entries.get(key)
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

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
