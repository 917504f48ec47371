"""Shared watches: one list+watch per (resource type, namespace), whoever needs it.

Every release monitor expecting a ConfigMap in namespace ``demo`` listens to
the same watch of ConfigMaps in ``demo``; the watch starts with its first
listener and stops with its last. Kinds whose readiness is read from status
(:data:`engine.monitor.readiness.FULL_OBJECT_KINDS`) are watched whole; all
others metadata-only (``PartialObjectMetadata``), since presence is all that
matters for them.

Each watch runs in a daemon thread (the official client is synchronous) and
keeps ``name -> Readiness`` for the objects that exist. A broken watch
resumes from its last resourceVersion; ``410 Gone`` triggers a relist whose
differences are reported like events. Listeners are called in the watch
thread with the names that changed (None: everything, after a relist).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from engine.base.listeners import Listeners
from engine.kube import rest
from engine.kube.discovery import ResourceType
from engine.kube.stream import WatchThread, list_all, open_watch
from engine.monitor.readiness import PRESENT, Readiness, assess, needs_full_object

# Watches hold a connection each; let the pool keep that many instead of discarding them.
_POOL_SIZE = 1024


@dataclass(frozen=True, order=True)
class WatchKey:
    """A watched collection: ``namespace`` "" for cluster-scoped types."""

    type: ResourceType
    namespace: str

    def __str__(self) -> str:
        res = f"{self.type.resource}.{self.type.group}" if self.type.group else self.type.resource
        return f"{res}/{self.namespace}" if self.namespace else res


Listener = Callable[["SharedWatch", frozenset[str] | None], None]


class SharedWatch(WatchThread):
    """A list+watch of one :class:`WatchKey`; see the module docstring."""

    def __init__(self, api: client.ApiClient, key: WatchKey, *, watch_timeout: int = 300):
        super().__init__(f"helmdeck-watch-{key}", f"watch {key}")
        self.key = key
        self.full = needs_full_object(key.type.group, key.type.kind)
        self.synced = threading.Event()
        self._api = api
        self._timeout = watch_timeout
        self._lock = threading.Lock()
        self._objects: dict[str, Readiness] = {}
        self.listeners: Listeners[[SharedWatch, frozenset[str] | None]] = Listeners("watch listener")

    # -- state -------------------------------------------------------------------
    def get(self, name: str) -> Readiness | None:
        """The object's readiness, or None when it does not exist (meaningful once synced)."""
        with self._lock:
            return self._objects.get(name)

    # -- the loop ------------------------------------------------------------------
    def _listed(self) -> None:
        self.synced.set()
        if self.last_error:  # listing again after failing: the monitors that said why they saw nothing
            self._healthy()
            self._notify(None)

    def _failed(self) -> None:
        self._notify(None)  # the monitors waiting on it say why they see nothing

    def _state(self, obj: dict[str, Any]) -> Readiness:
        return assess(self.key.type.group, self.key.type.kind, obj) if self.full else PRESENT

    def _relist(self) -> str:
        fresh: dict[str, Readiness] = {}

        def take(obj: dict[str, Any]) -> None:
            fresh[str((obj.get("metadata") or {}).get("name", ""))] = self._state(obj)

        rv = list_all(self._api, self.key.type.path(self.key.namespace), take,
                      accept=rest.JSON if self.full else rest.METADATA_LIST)
        with self._lock:
            changed = {n for n in self._objects.keys() | fresh.keys() if self._objects.get(n) != fresh.get(n)}
            self._objects = fresh
        self._notify(None if not self.synced.is_set() else frozenset(changed))
        return rv

    def _watch(self, rv: str) -> str:
        resp = open_watch(self._api, self.key.type.path(self.key.namespace), rv, timeout=self._timeout,
                          accept=rest.JSON if self.full else rest.METADATA)
        return self._stream(resp, rv, lambda etype, obj: self._apply(
            etype, str((obj.get("metadata") or {}).get("name", "")), obj))

    def _apply(self, etype: str, name: str, obj: dict[str, Any]) -> None:
        new = None if etype == "DELETED" else self._state(obj)
        with self._lock:
            old = self._objects.get(name)
            if new is None:
                self._objects.pop(name, None)
            else:
                self._objects[name] = new
        if old != new:
            self._notify(frozenset((name,)))

    def _notify(self, names: frozenset[str] | None) -> None:
        if names is not None and not names:
            return
        self.listeners.emit(self, names)


class WatchHub:
    """Starts, shares and stops :class:`SharedWatch` es by key. Thread-safe.

    Uses its own ApiClient (same kubeconfig and headers as ``api``) whose connection
    pool keeps one connection per open watch.
    """

    def __init__(self, api: client.ApiClient, *, watch_timeout: int = 300):
        config = copy.copy(api.configuration)
        config.connection_pool_maxsize = _POOL_SIZE
        self._api = client.ApiClient(config)
        # The headers too: an impersonating client (engine.kube.client.impersonating) acts as its user by one.
        self._api.default_headers.update(api.default_headers)
        self._timeout = watch_timeout
        self._lock = threading.Lock()
        self._watches: dict[WatchKey, SharedWatch] = {}
        self._stopping: list[SharedWatch] = []

    def acquire(self, key: WatchKey, listener: Listener) -> SharedWatch:
        """The watch of ``key`` with ``listener`` added; starts it when it is new."""
        with self._lock:
            watch = self._watches.get(key)
            if watch is None:
                watch = SharedWatch(self._api, key, watch_timeout=self._timeout)
                self._watches[key] = watch
                watch.listeners.add(listener)
                watch.start()
            else:
                watch.listeners.add(listener)
            return watch

    def release(self, key: WatchKey, listener: Listener) -> None:
        """Remove ``listener``; the watch stops when it was the last one (without waiting for the thread)."""
        with self._lock:
            watch = self._watches.get(key)
            if watch is None or watch.listeners.remove(listener) > 0:
                return
            del self._watches[key]
            self._stopping = [w for w in self._stopping if w.alive]
            self._stopping.append(watch)
        watch.stop()

    def watch(self, key: WatchKey) -> SharedWatch | None:
        """The open watch of ``key``, if any."""
        with self._lock:
            return self._watches.get(key)

    def keys(self) -> list[WatchKey]:
        """The open watches."""
        with self._lock:
            return sorted(self._watches)

    def threads_alive(self) -> int:
        """Watch threads still running (open, or stopped but not yet ended)."""
        with self._lock:
            return sum(w.alive for w in [*self._watches.values(), *self._stopping])

    def stop(self, timeout: float = 5.0) -> bool:
        """Stop every watch and wait for the threads; True when all ended in ``timeout`` seconds each."""
        with self._lock:
            watches = [*self._watches.values(), *self._stopping]
            self._watches.clear()
            self._stopping = []
        for watch in watches:
            watch.stop()
        ended = all([watch.join(timeout) for watch in watches])
        if ended:
            self._api.rest_client.close()  # idle pooled connections; a later acquire reconnects
        return ended
