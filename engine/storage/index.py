"""The observer's index of Helm's storage: one entry per storage object, the readable revisions per
release, and the unreadable records.

Not thread-safe: the :class:`~engine.storage.observer.Observer` holds its lock around every call.
Getters return new containers (observations are immutable), so callers cannot alter the index.
"""

from __future__ import annotations

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


class StorageIndex:
    """Entries by storage key, indexed per release (``(release namespace, name)`` -> revision -> keys)."""

    def __init__(self) -> None:
        self._entries: dict[StorageKey, Entry] = {}
        self._by_release: dict[tuple[str, str], dict[int, set[StorageKey]]] = {}
        self._unreadable: dict[StorageKey, UnreadableRecord] = {}

    def get(self, key: StorageKey) -> Entry | None:
        return self._entries.get(key)

    def stored_keys(self) -> list[StorageKey]:
        return list(self._entries)

    def put(self, key: StorageKey, entry: Entry | None) -> None:
        """Replace the entry of ``key`` (None removes it) and keep the indexes in step."""
        old = self._entries.pop(key, None)
        if old is not None and old.observation is not None:
            revs = self._by_release.get(old.observation.release_key, {})
            keys = revs.get(old.observation.version, set())
            keys.discard(key)
            if not keys:
                revs.pop(old.observation.version, None)
                if not revs:
                    self._by_release.pop(old.observation.release_key, None)
        self._unreadable.pop(key, None)
        if entry is None:
            return
        if entry.observation is not None:
            obs = entry.observation
            self._by_release.setdefault(obs.release_key, {}).setdefault(obs.version, set()).add(key)
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
            revs = self._by_release.get(key, {})
            newest_ok = max(revs) if revs else 0
            if rec.revision is not None and rec.revision < newest_ok:
                continue
            cur = out.get(key)
            if cur is None or (rec.revision or 0) > (cur.revision or 0):
                out[key] = rec
        return out

    def revisions(self, namespace: str, name: str) -> list[int]:
        return sorted(self._by_release.get((namespace, name), {}), reverse=True)

    def history(self, namespace: str, name: str) -> list[Observation]:
        revs = self._by_release.get((namespace, name), {})
        found = [self._observation(namespace, keys) for _, keys in sorted(revs.items(), reverse=True)]
        return [o for o in found if o is not None]

    def latest(self, namespace: str, name: str) -> Observation | None:
        revs = self._by_release.get((namespace, name))
        return self._observation(namespace, revs[max(revs)]) if revs else None

    def releases(self) -> dict[tuple[str, str], Observation]:
        out = {}
        for (ns, name), revs in self._by_release.items():
            obs = self._observation(ns, revs[max(revs)])
            if obs is not None:
                out[(ns, name)] = obs
        return out

    def key_of(self, namespace: str, name: str, revision: int) -> StorageKey | None:
        """The storage object holding one readable revision (see :meth:`_pick`), or None."""
        keys = self._by_release.get((namespace, name), {}).get(revision)
        return self._pick(namespace, keys) if keys else None

    def _pick(self, namespace: str, keys: set[StorageKey]) -> StorageKey:
        # Two storage namespaces may hold the same release revision: prefer the
        # one in the release namespace (Helm's default), else the first by name.
        return min(keys, key=lambda k: (k.namespace != namespace, k))

    def _observation(self, namespace: str, keys: set[StorageKey]) -> Observation | None:
        return self._entries[self._pick(namespace, keys)].observation
