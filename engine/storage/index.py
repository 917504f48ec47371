"""The observer's index of Helm's storage: one entry per storage object, the readable revisions per
release, and the unreadable records.

Not thread-safe: the :class:`~engine.storage.observer.Observer` holds its lock around every call.
Getters return new containers (observations are immutable), so callers cannot alter the index.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engine.storage.codec import StorageKey
from engine.storage.observation import Observation
from engine.storage.records import UnreadableRecord


@dataclass(frozen=True)
class Entry:
    """One storage object as last seen: its version and uid, and what it decoded to (exactly one of the two)."""

    resource_version: str
    uid: str
    observation: Observation | None
    unreadable: UnreadableRecord | None


# One release as Helm's storage holds it: ``(storage namespace, release namespace, name)``. Helm's storage driver
# is namespaced (a record is ``<storage namespace>/sh.helm.release.v1.<name>.v<n>``), so records of one release in
# two storage namespaces (Flux's ``storageNamespace`` changed) are two histories, never one.
Stored = tuple[str, str, str]


class StorageIndex:
    """Entries by storage key, indexed per stored release (:data:`Stored` -> revision -> key) and per release
    (``(release namespace, name)`` -> the storage namespaces holding a readable revision of it).

    The readers ask by release and ``storage``: the storage namespace to read (None: :meth:`storage`'s pick)."""

    def __init__(self) -> None:
        self._entries: dict[StorageKey, Entry] = {}
        self._by_release: dict[Stored, dict[int, StorageKey]] = {}
        self._stores: dict[tuple[str, str], set[str]] = {}  # release -> storage namespaces holding it
        self._unreadable: dict[StorageKey, UnreadableRecord] = {}

    def get(self, key: StorageKey) -> Entry | None:
        return self._entries.get(key)

    def stored_keys(self) -> list[StorageKey]:
        return list(self._entries)

    def put(self, key: StorageKey, entry: Entry | None) -> None:
        """Replace the entry of ``key`` (None removes it) and keep the indexes in step."""
        old = self._entries.pop(key, None)
        if old is not None and old.observation is not None:
            obs = old.observation
            stored = (key.namespace, obs.namespace, obs.name)
            revs = self._by_release.get(stored, {})
            if revs.get(obs.version) == key:
                del revs[obs.version]
            if not revs:
                self._by_release.pop(stored, None)
                stores = self._stores.get(obs.release_key, set())
                stores.discard(key.namespace)
                if not stores:
                    self._stores.pop(obs.release_key, None)
        self._unreadable.pop(key, None)
        if entry is None:
            return
        if entry.observation is not None:
            obs = entry.observation
            self._by_release.setdefault((key.namespace, obs.namespace, obs.name), {})[obs.version] = key
            self._stores.setdefault(obs.release_key, set()).add(key.namespace)
        if entry.unreadable is not None:
            self._unreadable[key] = entry.unreadable
        self._entries[key] = entry

    def observations(self) -> dict[StorageKey, Observation]:
        return {k: e.observation for k, e in self._entries.items() if e.observation is not None}

    def unreadable(self) -> list[UnreadableRecord]:
        return [self._unreadable[k] for k in sorted(self._unreadable)]

    def unreadable_releases(self) -> dict[tuple[str, str], UnreadableRecord]:
        """Releases whose newest stored record is unreadable, by ``(storage namespace, name)``.

        The value is that newest unreadable record (its reason is what to
        show). A release with only an older revision unreadable is not
        listed: Helm itself skips such records and the release works.
        """
        out: dict[tuple[str, str], UnreadableRecord] = {}
        for rec in self._unreadable.values():
            key = (rec.key.namespace, rec.release)
            newest_ok = max((max(revs) for (storage, _ns, name), revs in self._by_release.items()
                             if (storage, name) == key), default=0)
            if rec.revision is not None and rec.revision < newest_ok:
                continue
            cur = out.get(key)
            if cur is None or (rec.revision or 0) > (cur.revision or 0):
                out[key] = rec
        return out

    def storage(self, namespace: str, name: str) -> str | None:
        """The storage namespace a reader of release ``(namespace, name)`` reads when its package declares none:
        the release namespace when it holds the release (Helm's CLI stores a release there), else the first by
        name that does; None when none does."""
        stores = self._stores.get((namespace, name))
        if not stores:
            return None
        return namespace if namespace in stores else min(stores)

    def _revisions(self, namespace: str, name: str, storage: str | None) -> dict[int, StorageKey]:
        where = storage or self.storage(namespace, name)
        return self._by_release.get((where, namespace, name), {}) if where is not None else {}

    def revisions(self, namespace: str, name: str, storage: str | None = None) -> list[int]:
        return sorted(self._revisions(namespace, name, storage), reverse=True)

    def history(self, namespace: str, name: str, storage: str | None = None) -> list[Observation]:
        revs = self._revisions(namespace, name, storage)
        found = [self._entries[key].observation for _, key in sorted(revs.items(), reverse=True)]
        return [o for o in found if o is not None]

    def latest(self, namespace: str, name: str, storage: str | None = None) -> Observation | None:
        revs = self._revisions(namespace, name, storage)
        return self._entries[revs[max(revs)]].observation if revs else None

    def releases(self, storage_of: Callable[[str, str], str | None]) -> dict[tuple[str, str], Observation]:
        """The latest observation of every release, each from the storage namespace ``storage_of`` gives (None:
        :meth:`storage`'s pick); a release whose given storage holds none of it is left out."""
        out = {}
        for namespace, name in self._stores:
            obs = self.latest(namespace, name, storage_of(namespace, name))
            if obs is not None:
                out[(namespace, name)] = obs
        return out

    def key_of(self, namespace: str, name: str, revision: int, storage: str | None = None) -> StorageKey | None:
        """The storage object holding one readable revision, or None."""
        return self._revisions(namespace, name, storage).get(revision)
