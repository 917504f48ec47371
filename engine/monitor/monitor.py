"""A release monitor: the objects of one release manifest, live from shared watches.

Built from the release manifest: each object is resolved through discovery
to its resource type and scope (a namespaced object without a namespace is
in the release namespace; a cluster-scoped one has none) and found in the
:class:`~engine.monitor.watch.SharedWatch` of its (type, namespace). The
monitor knows presence and readiness; what to do about them (pause, report,
schedule) is the release service's business.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.kube.discovery import Discovery, ResourceType
from engine.monitor.manifest import manifest_objects, place
from engine.monitor.status import ResourceStatus
from engine.monitor.watch import SharedWatch, WatchHub, WatchKey

UNSERVED = "kind not served by the API"


@dataclass(frozen=True)
class ExpectedObject:
    """One object a release should have; ``type`` None when discovery does not know its kind."""

    api_version: str
    kind: str
    namespace: str
    name: str
    type: ResourceType | None

    @property
    def watch_key(self) -> WatchKey | None:
        return WatchKey(self.type, self.namespace) if self.type is not None else None


def expected_objects(manifest: str, release_namespace: str, discovery: Discovery) -> list[ExpectedObject]:
    """Resolve a release manifest's objects. Raises yaml.YAMLError, ApiException (discovery)."""
    out = []
    for obj in manifest_objects(manifest):
        if not obj.api_version:
            continue  # not an object the API server could serve
        rtype = discovery.resource_type(obj.api_version, obj.kind)
        at = place(obj, release_namespace, rtype.namespaced if rtype is not None else None)
        out.append(ExpectedObject(at.api_version, at.kind, at.namespace, at.name, rtype))
    return out


class ReleaseMonitor:
    """Presence and readiness of one release's objects.

    ``on_change(monitor)`` is called (in a watch thread) whenever
    :meth:`resources` may have changed, once all its watches have listed.
    Thread-safe; :meth:`close` releases the watches.
    """

    def __init__(
        self,
        key: tuple[str, str],
        objects: Sequence[ExpectedObject],
        hub: WatchHub,
        on_change: Callable[[ReleaseMonitor], None],
    ):
        self.key = key
        self.objects = tuple(objects)
        self._hub = hub
        self._on_change = on_change
        self._lock = threading.Lock()
        # Serialises change detection across watch threads, so _last is always the newest view.
        self._notify_lock = threading.Lock()
        self._watches: dict[WatchKey, SharedWatch] = {}
        self._names: dict[WatchKey, frozenset[str]] = {}
        self._closed = False
        self._last: tuple[tuple[ResourceStatus, ...], str] | None = None
        for obj in self.objects:
            if obj.watch_key is not None:
                self._names[obj.watch_key] = self._names.get(obj.watch_key, frozenset()) | {obj.name}

    def start(self) -> None:
        """Join (or start) the shared watches this release needs."""
        for wkey in self._names:
            watch = self._hub.acquire(wkey, self._listener)
            with self._lock:
                self._watches[wkey] = watch
        self._listener(None, None)

    def close(self) -> None:
        """Leave the shared watches; no more ``on_change`` calls."""
        with self._lock:
            self._closed = True
            keys = list(self._watches)
            self._watches.clear()
        for wkey in keys:
            self._hub.release(wkey, self._listener)

    @property
    def synced(self) -> bool:
        """True once every watch this monitor uses has listed its objects."""
        with self._lock:
            watches = list(self._watches.values())
        return len(watches) == len(self._names) and all(w.synced.is_set() for w in watches)

    def listing(self) -> bool:
        """False when a watch this monitor waits on failed to list (waiting longer is pointless)."""
        with self._lock:
            return not any(w.last_error and not w.synced.is_set() for w in self._watches.values())

    def wait_synced(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds until :attr:`synced`; False at once when a watch cannot list."""
        deadline = time.monotonic() + timeout
        while not self.synced:
            with self._lock:
                failing = any(w.last_error and not w.synced.is_set() for w in self._watches.values())
            if failing or time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True

    def problem(self) -> str:
        """Why this monitor cannot see some of its objects ("" when it can): a watch that cannot list them,
        or that the API server refuses (RBAC: its message names the user and the verb)."""
        with self._lock:
            watches = sorted(self._watches.items())
        for wkey, watch in watches:
            error = watch.last_error
            if error and (watch.refused or not watch.synced.is_set()):
                return f"cannot watch {wkey}: {error}"
        return ""

    def resources(self) -> tuple[ResourceStatus, ...]:
        """The current status of every expected object, in manifest order."""
        with self._lock:
            watches = dict(self._watches)
        out = []
        for obj in self.objects:
            watch = watches.get(obj.watch_key) if obj.watch_key is not None else None
            if obj.type is None:
                out.append(ResourceStatus(obj.api_version, obj.kind, obj.namespace, obj.name, False, False, UNSERVED))
                continue
            if watch is None or not watch.synced.is_set():
                why = f"cannot watch: {watch.last_error}" if watch and watch.last_error else "not observed yet"
                out.append(ResourceStatus(obj.api_version, obj.kind, obj.namespace, obj.name, True, None, why))
                continue
            state = watch.get(obj.name)
            if state is None:
                out.append(ResourceStatus(obj.api_version, obj.kind, obj.namespace, obj.name, False, False, "absent"))
            else:
                out.append(ResourceStatus(obj.api_version, obj.kind, obj.namespace, obj.name, True, state.ready,
                                          state.reason))
        return tuple(out)

    def absent(self) -> tuple[ResourceStatus, ...]:
        """Expected objects that do not exist (only objects whose watch has listed count)."""
        return tuple(r for r in self.resources() if not r.present)

    def _listener(self, watch: SharedWatch | None, names: frozenset[str] | None) -> None:
        if watch is not None and names is not None and not (names & self._names.get(watch.key, frozenset())):
            return
        with self._lock:
            if self._closed:
                return
        with self._notify_lock:
            problem = self.problem()
            if not self.synced and not problem:
                return
            current = (self.resources(), problem)
            with self._lock:
                if current == self._last or self._closed:
                    return
                self._last = current
            self._on_change(self)
