"""Kubernetes Events (core/v1) of a release's objects and of what they own, live from shared watches.

One list+watch of ``/api/v1/namespaces/<ns>/events`` per namespace, shared by
everyone who listens there: it starts with its first listener and stops with
its last. Memory is bounded: a namespace keeps its :data:`KEEP` most recent
events (the API server itself drops events after an hour by default).

Which events belong to a release (:func:`belongs`): those whose
``involvedObject`` is one of the release's objects, or an object one of them
owns by the names Kubernetes' controllers give (the ReplicaSets and Pods of a
Deployment, the Pods of a StatefulSet, DaemonSet or Job, the Jobs of a
CronJob and their Pods), as ``kubectl describe`` shows a workload's events.
Matching by generated names keeps this a pure function of the event (no
watch of every Pod for its owner references); an unrelated object named like
a generated child of a release's workload would be counted too.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from engine.base.listeners import Listeners
from engine.kube import rest
from engine.kube.stream import WatchThread
from engine.storage.helmtime import helm_time

KEEP = 500
"""Events kept per namespace (the most recent)."""


@dataclass(frozen=True)
class KubeEvent:
    """One core/v1 Event: ``at`` is Unix seconds of its last occurrence, ``type`` ``Normal`` or ``Warning``."""

    at: float
    namespace: str
    kind: str
    name: str
    type: str
    reason: str
    message: str
    count: int = 1
    uid: str = ""
    action: str = ""  # what the reporter did (events.k8s.io's ``action``; helmdeck's: the engine's action)

    @property
    def warning(self) -> bool:
        return self.type == "Warning"

    @property
    def ref(self) -> str:
        return f"{self.kind}/{self.name}"


def _time(value: object) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    return helm_time(value)


def parse_event(obj: dict[str, Any]) -> KubeEvent | None:
    """The event in a core/v1 Event object, or None when it names no object.

    Its time is the last occurrence (``series.lastObservedTime``, ``lastTimestamp``,
    ``eventTime``, then ``metadata.creationTimestamp``), as ``kubectl get events`` sorts; to the
    microsecond when ``eventTime`` falls in that second.
    """
    meta = obj.get("metadata") or {}
    involved = obj.get("involvedObject") or {}
    kind, name = str(involved.get("kind") or ""), str(involved.get("name") or "")
    if not kind or not name:
        return None
    series = obj.get("series") or {}
    at = (_time(series.get("lastObservedTime")) or _time(obj.get("lastTimestamp")) or _time(obj.get("eventTime"))
          or _time(meta.get("creationTimestamp")) or 0.0)
    precise = _time(obj.get("eventTime"))
    if precise is not None and at <= precise < int(at) + 1:  # the same second, to the microsecond: an end and
        at = precise  # the next start written within one second keep their order
    count = series.get("count") or obj.get("count") or 1
    return KubeEvent(at, str(involved.get("namespace") or meta.get("namespace") or ""), kind, name,
                     str(obj.get("type") or "Normal"), str(obj.get("reason") or ""),
                     str(obj.get("message") or "").strip(), int(count) if isinstance(count, int) else 1,
                     str(meta.get("uid") or meta.get("name") or ""), str(obj.get("action") or "")[:128])


def oldest_first(items: Iterable[dict[str, Any]]) -> list[KubeEvent]:
    """The events of a list's Event objects, oldest first, as a watch would have given them: the API server
    lists them in name order, and a recorder's names end in a random suffix, so a start could come after its
    end."""
    return sorted((e for e in map(parse_event, items) if e is not None), key=lambda e: e.at)


_HASH = r"[a-z0-9]{1,10}"  # a pod-template-hash
_SUFFIX = r"[a-z0-9]{5}"  # generateName's random suffix
# The children a controller names after its object (a pattern after the object's name).
_OWNED: dict[str, tuple[tuple[str, str], ...]] = {
    "Deployment": (("ReplicaSet", f"-{_HASH}"), ("Pod", f"-{_HASH}-{_SUFFIX}")),
    "ReplicaSet": (("Pod", f"-{_SUFFIX}"),),
    "StatefulSet": (("Pod", r"-\d+"),),
    "DaemonSet": (("Pod", f"-{_SUFFIX}"),),
    "Job": (("Pod", f"-{_SUFFIX}"),),
    "CronJob": (("Job", r"-\d+"), ("Pod", rf"-\d+-{_SUFFIX}")),
}


def belongs(event: KubeEvent, objects: Iterable[tuple[str, str, str]]) -> bool:
    """Whether ``event`` is about one of ``objects`` (``(kind, namespace, name)``) or a child they own."""
    for kind, namespace, name in objects:
        if namespace and namespace != event.namespace:
            continue
        if kind == event.kind and name == event.name:
            return True
        for child, pattern in _OWNED.get(kind, ()):
            if child == event.kind and re.fullmatch(re.escape(name) + pattern, event.name):
                return True
    return False


Listener = Callable[[KubeEvent, bool], None]
"""Called with an event and whether it went (deleted by the API server, or past :data:`KEEP`)."""


class NamespaceEvents(WatchThread):
    """The recent events of one namespace, from a list+watch in a daemon thread (none without ``api``)."""

    def __init__(self, api: client.ApiClient | None, namespace: str, *, keep: int = KEEP, watch_timeout: int = 300):
        super().__init__(f"helmdeck-events-{namespace}", f"events watch {namespace}")
        self.namespace = namespace
        self._api = api
        self._keep = keep
        self._timeout = watch_timeout
        self._lock = threading.Lock()
        self._events: dict[str, KubeEvent] = {}
        self.listeners: Listeners[[KubeEvent, bool]] = Listeners("event listener")

    def recent(self) -> list[KubeEvent]:
        """The kept events, oldest first."""
        with self._lock:
            return sorted(self._events.values(), key=lambda e: e.at)

    def listen(self, listener: Listener) -> list[KubeEvent]:
        """Add ``listener`` and return the events kept so far (oldest first), at one instant: every event
        after them reaches ``listener``. One applied just before may reach it too (given twice)."""
        with self._lock:
            self.listeners.add(listener)
            return sorted(self._events.values(), key=lambda e: e.at)

    def apply(self, obj: dict[str, Any], *, deleted: bool = False) -> None:
        """Keep (or forget) one Event object and tell the listeners; the oldest go past :data:`KEEP`."""
        event = parse_event(obj)
        if event is not None:
            self._apply(event, deleted)

    def _apply(self, event: KubeEvent, deleted: bool) -> None:
        changes: list[tuple[KubeEvent, bool]] = [(event, deleted)]
        with self._lock:
            if deleted:
                self._events.pop(event.uid, None)
            else:
                self._events[event.uid] = event
            if len(self._events) > self._keep:
                for old in sorted(self._events.values(), key=lambda e: e.at)[:len(self._events) - self._keep]:
                    del self._events[old.uid]
                    changes.append((old, True))
        for changed, gone in changes:
            self.listeners.emit(changed, gone)

    def start(self) -> None:
        if self._api is not None:
            super().start()

    def _path(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}/events"

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                rv = self._list()
                while not self._stop.is_set():
                    rv = self._watch(rv)
                    self._healthy()
            except Exception as exc:  # relist after any failure (410 Gone included)
                if not self._retry(exc):
                    break

    def _list(self) -> str:
        assert self._api is not None
        body = rest.get_json(self._api, self._path(), [("limit", str(self._keep))])
        for event in oldest_first(body.get("items") or ()):
            self._apply(event, False)
        return str((body.get("metadata") or {}).get("resourceVersion", ""))

    def _watch(self, rv: str) -> str:
        assert self._api is not None
        query = [("watch", "true"), ("resourceVersion", rv), ("timeoutSeconds", str(self._timeout))]
        try:
            resp = rest.get(self._api, self._path(), query, timeout=(10, self._timeout + 30))
        except ApiException as exc:
            raise RuntimeError(f"watch refused: {exc.status} {exc.reason}") from None
        return self._stream(resp, rv, lambda etype, obj: self.apply(obj, deleted=etype == "DELETED"))


class EventHub:
    """Shares one :class:`NamespaceEvents` per namespace among its listeners. Thread-safe.

    Without ``api`` (an offline engine) nothing is watched; :meth:`feed` adds
    events by hand (fixtures, snapshot tests).
    """

    def __init__(self, api: client.ApiClient | None):
        self._api = api
        self._lock = threading.Lock()
        self._watches: dict[str, NamespaceEvents] = {}
        self._offline: dict[str, NamespaceEvents] = {}

    def subscribe(self, namespace: str, listener: Listener, *, replay: bool = False) -> Callable[[], None]:
        """Call ``listener`` (in the watch thread) with each event of ``namespace``; returns the unsubscribe.

        The namespace's watch is shared: a listener that joins it late gets only the events after it joined,
        unless ``replay``: then first (in the caller's thread) the events kept so far, oldest first, as the
        watch's first list would have given them. An event kept just as it joins may come twice."""
        with self._lock:
            watch = self._watches.get(namespace)
            created = watch is None
            if watch is None:
                watch = self._offline.pop(namespace, None) or NamespaceEvents(self._api, namespace)
                self._watches[namespace] = watch
            kept = watch.listen(listener)
            if created:  # after the listener joined: the first list's events reach it
                watch.start()
        if replay:
            for event in kept:
                listener(event, False)

        def unsubscribe() -> None:
            with self._lock:
                if watch.listeners.remove(listener) > 0 or self._api is None:
                    return
                if self._watches.get(namespace) is watch:
                    del self._watches[namespace]
            watch.stop()

        return unsubscribe

    def recent(self, namespace: str) -> list[KubeEvent]:
        """The kept events of ``namespace`` (watched, or fed offline), oldest first."""
        with self._lock:
            watch = self._watches.get(namespace) or self._offline.get(namespace)
        return watch.recent() if watch is not None else []

    def feed(self, obj: dict[str, Any]) -> None:
        """Add one Event object by hand (an offline hub's only source)."""
        namespace = str((obj.get("metadata") or {}).get("namespace") or "")
        with self._lock:
            watch = self._watches.get(namespace) or self._offline.setdefault(
                namespace, NamespaceEvents(None, namespace))
        watch.apply(obj)

    def stop(self, timeout: float = 5.0) -> bool:
        """Stop every watch; True when all threads ended in ``timeout`` seconds each."""
        with self._lock:
            watches = list(self._watches.values())
            self._watches.clear()
        for watch in watches:
            watch.stop()
        return all([watch.join(timeout) for watch in watches])


def _owner_candidates(event: KubeEvent) -> list[tuple[str, str]]:
    """``(kind, name)`` of the objects that may have ``event``'s object as themselves or a named child."""
    found = [(event.kind, event.name)]
    parent = event.name.rsplit("-", 1)[0]
    grand = parent.rsplit("-", 1)[0]
    if event.kind == "ReplicaSet":
        found.append(("Deployment", parent))
    elif event.kind == "Job":
        found.append(("CronJob", parent))
    elif event.kind == "Pod":
        found += [(k, parent) for k in ("ReplicaSet", "StatefulSet", "DaemonSet", "Job")]
        found += [("Deployment", grand), ("CronJob", grand)]
    return found


class WarningCounter:
    """How many kept Warning events concern each release's objects (and their named children).

    :meth:`track` gives a release's objects (watching their namespaces through ``hub``); each event
    costs a few dictionary lookups, whatever the number of releases. ``on_count(key, n)`` is called
    (in the watch thread) when a release's count changes.
    """

    def __init__(self, hub: EventHub, on_count: Callable[[tuple[str, str], int], None]):
        self._hub = hub
        self._on_count = on_count
        self._lock = threading.Lock()
        self._objects: dict[tuple[str, str], tuple[tuple[str, str, str], ...]] = {}
        self._index: dict[tuple[str, str, str], set[tuple[str, str]]] = {}  # (ns, kind, name) -> releases
        self._warnings: dict[tuple[str, str], set[str]] = {}  # release -> uids of its Warning events
        self._unsubscribe: dict[str, Callable[[], None]] = {}

    def track(self, key: tuple[str, str], objects: Iterable[tuple[str, str, str]]) -> None:
        """The release ``key`` has these ``(kind, namespace, name)`` objects (replacing what it had)."""
        placed = tuple(sorted((k, ns or key[0], n) for k, ns, n in objects))
        with self._lock:
            if self._objects.get(key) == placed:
                return
            self._drop(key)
            self._objects[key] = placed
            for kind, ns, name in placed:
                self._index.setdefault((ns, kind, name), set()).add(key)
            new = sorted({ns for _k, ns, _n in placed} - self._unsubscribe.keys())
        for ns in new:  # what the namespace's watch kept before counts (uids: an Event given twice counts once)
            unsubscribe = self._hub.subscribe(ns, self._seen, replay=True)
            with self._lock:
                self._unsubscribe[ns] = unsubscribe

    def forget(self, key: tuple[str, str]) -> None:
        with self._lock:
            self._drop(key)

    def _drop(self, key: tuple[str, str]) -> None:
        for kind, ns, name in self._objects.pop(key, ()):
            keys = self._index.get((ns, kind, name))
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._index[(ns, kind, name)]
        self._warnings.pop(key, None)

    def _seen(self, event: KubeEvent, gone: bool) -> None:
        if not event.warning:
            return
        changed: list[tuple[tuple[str, str], int]] = []
        with self._lock:
            owners = {k for kind, name in _owner_candidates(event)
                      for k in self._index.get((event.namespace, kind, name), ())}
            for key in owners:
                if not belongs(event, self._objects.get(key, ())):
                    continue
                uids = self._warnings.setdefault(key, set())
                before = len(uids)
                if gone:
                    uids.discard(event.uid)
                else:
                    uids.add(event.uid)
                if len(uids) != before:
                    changed.append((key, len(uids)))
        for key, count in changed:
            self._on_count(key, count)

    def stop(self) -> None:
        with self._lock:
            unsubscribes = list(self._unsubscribe.values())
            self._unsubscribe.clear()
        for unsubscribe in unsubscribes:
            unsubscribe()
