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

from engine.listeners import Listeners
from engine.monitor import rest
from engine.monitor.stream import WatchThread
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
    ``eventTime``, then ``metadata.creationTimestamp``), as ``kubectl get events`` sorts.
    """
    meta = obj.get("metadata") or {}
    involved = obj.get("involvedObject") or {}
    kind, name = str(involved.get("kind") or ""), str(involved.get("name") or "")
    if not kind or not name:
        return None
    series = obj.get("series") or {}
    at = (_time(series.get("lastObservedTime")) or _time(obj.get("lastTimestamp")) or _time(obj.get("eventTime"))
          or _time(meta.get("creationTimestamp")) or 0.0)
    count = series.get("count") or obj.get("count") or 1
    return KubeEvent(at, str(involved.get("namespace") or meta.get("namespace") or ""), kind, name,
                     str(obj.get("type") or "Normal"), str(obj.get("reason") or ""),
                     str(obj.get("message") or "").strip(), int(count) if isinstance(count, int) else 1,
                     str(meta.get("uid") or meta.get("name") or ""))


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


Listener = Callable[[KubeEvent], None]


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
        self.listeners: Listeners[[KubeEvent]] = Listeners("event listener")

    def recent(self) -> list[KubeEvent]:
        """The kept events, oldest first."""
        with self._lock:
            return sorted(self._events.values(), key=lambda e: e.at)

    def apply(self, obj: dict[str, Any], *, deleted: bool = False) -> None:
        """Keep (or forget) one Event object and tell the listeners; the oldest go past :data:`KEEP`."""
        event = parse_event(obj)
        if event is None:
            return
        with self._lock:
            if deleted:
                self._events.pop(event.uid, None)
                return
            self._events[event.uid] = event
            if len(self._events) > self._keep:
                for old in sorted(self._events.values(), key=lambda e: e.at)[:len(self._events) - self._keep]:
                    del self._events[old.uid]
        self.listeners.emit(event)

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
        for obj in body.get("items") or ():
            self.apply(obj)
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

    def subscribe(self, namespace: str, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` (in the watch thread) with each event of ``namespace``; returns the unsubscribe."""
        with self._lock:
            watch = self._watches.get(namespace)
            if watch is None:
                watch = self._offline.pop(namespace, None) or NamespaceEvents(self._api, namespace)
                self._watches[namespace] = watch
                watch.start()
            watch.listeners.add(listener)

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
