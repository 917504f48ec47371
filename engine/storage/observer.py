"""Observer of Helm release storage: a watch on the objects labelled ``owner=helm``.

Keeps the latest :class:`Observation` per storage key and calls the
registered callbacks after every create, update and delete with the change
(observations are immutable, so callers cannot alter the observer's map).
A broken watch resumes from the last resourceVersion; ``410 Gone`` triggers a
relist that emits exactly the transitions missed meanwhile (keys compared by
resourceVersion), so no change is lost or repeated.

The watch runs in a daemon thread (the official client is synchronous);
callbacks run in that thread, so a caller on an asyncio loop should hand
them over with ``loop.call_soon_threadsafe``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from engine.storage.codec import (
    OWNER_SELECTOR,
    RECORD_PREFIX,
    RELEASE_TYPE,
    StorageDecodeError,
    StorageKey,
    configmap_payload,
    decode_payload,
    release_labels,
    secret_payload,
)
from engine.storage.observation import Observation, observation_from_release

log = logging.getLogger(__name__)

ChangeType = Literal["ADDED", "MODIFIED", "DELETED"]
Driver = Literal["secret", "configmap"]


@dataclass(frozen=True)
class StorageChange:
    """One transition of a storage record.

    ``observation`` is None for deletions and for records that failed to
    decode (then ``error`` says why and names the step that failed).
    """

    type: ChangeType
    key: StorageKey
    observation: Observation | None
    error: str | None = None


Callback = Callable[[StorageChange], None]


@dataclass
class _Entry:
    resource_version: str
    observation: Observation | None
    error: str | None


class _Gone(Exception):
    """The watch's resourceVersion is too old (HTTP 410): relist."""


def decode_object(obj: dict[str, Any], driver: Driver) -> tuple[StorageKey, Observation | None, str | None]:
    """Decode one storage object as the API returns it (a dict).

    Returns ``(key, observation, error)``; exactly one of observation and
    error is None. Never raises for bad payloads.
    """
    meta = obj.get("metadata") or {}
    key = StorageKey(str(meta.get("namespace", "")), str(meta.get("name", "")))
    payload = secret_payload(obj) if driver == "secret" else configmap_payload(obj)
    if payload is None:
        return key, None, "record has no 'release' data"
    try:
        release = decode_payload(payload, str(key))
        obs = observation_from_release(
            release, labels=release_labels(meta.get("labels")), storage_key=key
        )
    except StorageDecodeError as exc:
        return key, None, exc.reason
    except ValueError as exc:
        return key, None, f"release is missing fields ({exc})"
    return key, obs, None


class Observer:
    """Watches Helm release storage in all namespaces or the given ones.

    ``start()`` launches the watch threads; ``wait_synced()`` blocks until the
    first list is in. Getters return copies of the internal map.
    """

    def __init__(
        self,
        api: client.ApiClient | None,
        namespaces: Sequence[str] | None = None,
        driver: Driver = "secret",
        watch_timeout: int = 240,
    ):
        self._core = client.CoreV1Api(api) if api is not None else None
        self._namespaces: list[str | None] = list(namespaces) if namespaces else [None]
        self._driver: Driver = driver
        self._watch_timeout = watch_timeout
        self._lock = threading.RLock()
        self._entries: dict[StorageKey, _Entry] = {}
        # (namespace, release) -> {revision: storage key}; decodable records only.
        self._by_release: dict[tuple[str, str], dict[int, StorageKey]] = {}
        self._callbacks: list[Callback] = []
        self._stop = threading.Event()
        self._synced: dict[str | None, threading.Event] = {ns: threading.Event() for ns in self._namespaces}
        self._threads: list[threading.Thread] = []
        self._responses: dict[str | None, Any] = {}
        # Offline only (no API to read back from): the objects fed in, for load_release.
        self._offline_objects: dict[StorageKey, dict[str, Any]] = {}
        self.last_error: str | None = None

    # -- public API ----------------------------------------------------------
    def subscribe(self, callback: Callback) -> Callable[[], None]:
        """Register ``callback``; returns a function that unregisters it."""
        with self._lock:
            self._callbacks.append(callback)

        def unsubscribe() -> None:
            with self._lock, contextlib.suppress(ValueError):
                self._callbacks.remove(callback)

        return unsubscribe

    def start(self) -> None:
        """Start the watch threads; a no-op for an offline observer (api None)."""
        if self._core is None:
            for ev in self._synced.values():
                ev.set()
            return
        for ns in self._namespaces:
            t = threading.Thread(target=self._run, args=(ns,), name=f"helm-storage-{ns or 'all'}", daemon=True)
            t.start()
            self._threads.append(t)

    def wait_synced(self, timeout: float | None = None) -> bool:
        """True once every namespace has been listed at least once."""
        return all(ev.wait(timeout) for ev in self._synced.values())

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the watch threads (interrupting an open watch) and wait for them."""
        self._stop.set()
        for resp in list(self._responses.values()):
            with contextlib.suppress(Exception):
                resp.shutdown()
        for t in self._threads:
            t.join(timeout)

    def observations(self) -> dict[StorageKey, Observation]:
        """Every decodable record, by storage key."""
        with self._lock:
            return {k: e.observation for k, e in self._entries.items() if e.observation is not None}

    def errors(self) -> dict[StorageKey, str]:
        """Records that failed to decode, with the reason."""
        with self._lock:
            return {k: e.error for k, e in self._entries.items() if e.error is not None}

    def history(self, namespace: str, name: str) -> list[Observation]:
        """All stored revisions of one release, newest first."""
        with self._lock:
            revs = self._by_release.get((namespace, name), {})
            found = [self._entries[k].observation for _, k in sorted(revs.items(), reverse=True)]
        return [o for o in found if o is not None]

    def latest(self, namespace: str, name: str) -> Observation | None:
        """The highest stored revision of one release, or None."""
        with self._lock:
            revs = self._by_release.get((namespace, name))
            return self._entries[revs[max(revs)]].observation if revs else None

    def releases(self) -> dict[tuple[str, str], Observation]:
        """The latest observation of every release, by ``(namespace, name)``."""
        with self._lock:
            keys = list(self._by_release)
        out = {}
        for ns, name in keys:
            obs = self.latest(ns, name)
            if obs is not None:
                out[(ns, name)] = obs
        return out

    def load_release(self, namespace: str, name: str, revision: int) -> dict[str, Any]:
        """The whole decoded release of one stored revision, read from storage now.

        Manifests and chart values are not kept in memory; this fetches them.
        Raises KeyError when the revision is not stored, StorageDecodeError
        when it cannot be decoded, ApiException on API errors.
        """
        with self._lock:
            key = self._by_release.get((namespace, name), {}).get(revision)
        if key is None:
            raise KeyError(f"{namespace}/{name} has no stored revision {revision}")
        obj: dict[str, Any]
        if self._core is None:
            obj = self._offline_objects[key]
        else:
            read: Any = (self._core.read_namespaced_secret if self._driver == "secret"
                         else self._core.read_namespaced_config_map)
            obj = json.loads(read(key.name, key.namespace, _preload_content=False).data)
        payload = secret_payload(obj) if self._driver == "secret" else configmap_payload(obj)
        if payload is None:
            raise StorageDecodeError(str(key), "record has no 'release' data")
        return decode_payload(payload, str(key))

    def apply_object(self, obj: dict[str, Any]) -> None:
        """Take one storage object (as the API returns it) as if the watch saw it.

        The watch uses this path; tests and offline views feed fixed records
        through it too. Objects that are not release records are ignored.
        """
        if self._is_record(obj):
            if self._core is None:
                meta = obj["metadata"]
                self._offline_objects[StorageKey(meta.get("namespace", ""), meta.get("name", ""))] = obj
            self._apply(obj, relist=False)

    # -- watch loop ----------------------------------------------------------
    def _list_fn(self, namespace: str | None) -> Callable[..., Any]:
        core = self._core
        assert core is not None
        if self._driver == "secret":
            if namespace is None:
                return core.list_secret_for_all_namespaces
            return lambda **kw: core.list_namespaced_secret(namespace, **kw)
        if namespace is None:
            return core.list_config_map_for_all_namespaces
        return lambda **kw: core.list_namespaced_config_map(namespace, **kw)

    def _run(self, namespace: str | None) -> None:
        rv: str | None = None
        backoff = 0.2
        while not self._stop.is_set():
            try:
                if rv is None:
                    rv = self._relist(namespace)
                    self._synced[namespace].set()
                rv = self._watch(namespace, rv)
                backoff = 0.2
                self.last_error = None
            except _Gone:
                log.info("storage watch expired (410); relisting", extra={"namespace": namespace})
                rv = None
            except Exception as exc:  # keep watching whatever the transport threw
                if self._stop.is_set():
                    break
                self.last_error = _describe(exc)
                log.warning("storage watch failed: %s; retrying in %.1fs", self.last_error, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)

    def _relist(self, namespace: str | None) -> str:
        list_fn = self._list_fn(namespace)
        items: list[dict[str, Any]] = []
        token: str | None = None
        rv = ""
        while True:
            kwargs: dict[str, Any] = {"label_selector": OWNER_SELECTOR, "limit": 500, "_preload_content": False}
            if token:
                kwargs["_continue"] = token
            resp = list_fn(**kwargs)
            body = json.loads(resp.data)
            items.extend(body.get("items") or [])
            meta = body.get("metadata") or {}
            token = meta.get("continue")
            rv = str(meta.get("resourceVersion", ""))
            if not token:
                break
        seen: set[StorageKey] = set()
        for obj in items:
            if not self._is_record(obj):
                continue
            key = self._apply(obj, relist=True)
            seen.add(key)
        with self._lock:
            gone = [k for k in self._entries if k not in seen and (namespace is None or k.namespace == namespace)]
        for key in gone:
            self._delete(key)
        return rv

    def _watch(self, namespace: str | None, rv: str) -> str:
        resp = self._list_fn(namespace)(
            label_selector=OWNER_SELECTOR,
            watch=True,
            resource_version=rv,
            allow_watch_bookmarks=True,
            timeout_seconds=self._watch_timeout,
            _preload_content=False,
            _request_timeout=(10, self._watch_timeout + 30),
        )
        self._responses[namespace] = resp
        try:
            for line in _lines(resp):
                if self._stop.is_set():
                    break
                event = json.loads(line)
                etype = event.get("type")
                obj = event.get("object") or {}
                if etype == "ERROR":
                    if obj.get("code") == 410:
                        raise _Gone()
                    raise RuntimeError(f"watch error: {obj.get('message', obj)}")
                new_rv = (obj.get("metadata") or {}).get("resourceVersion")
                if etype == "BOOKMARK":
                    rv = str(new_rv or rv)
                    continue
                if self._is_record(obj):
                    if etype == "DELETED":
                        meta = obj.get("metadata") or {}
                        self._delete(StorageKey(str(meta.get("namespace", "")), str(meta.get("name", ""))))
                    else:
                        self._apply(obj, relist=False)
                if new_rv:
                    rv = str(new_rv)
        except ApiException as exc:
            if exc.status == 410:
                raise _Gone() from None
            raise
        finally:
            self._responses.pop(namespace, None)
            with contextlib.suppress(Exception):
                resp.release_conn()
        return rv

    def _is_record(self, obj: dict[str, Any]) -> bool:
        name = str((obj.get("metadata") or {}).get("name", ""))
        if not name.startswith(RECORD_PREFIX):
            return False
        return self._driver != "secret" or obj.get("type") == RELEASE_TYPE

    def _apply(self, obj: dict[str, Any], relist: bool) -> StorageKey:
        rv = str((obj.get("metadata") or {}).get("resourceVersion", ""))
        key = StorageKey(str(obj["metadata"].get("namespace", "")), str(obj["metadata"].get("name", "")))
        with self._lock:
            cur = self._entries.get(key)
        if cur is not None and cur.resource_version == rv:
            return key  # relist or replayed event of a version we already hold
        key, obs, error = decode_object(obj, self._driver)
        with self._lock:
            self._unindex(key)
            self._entries[key] = _Entry(rv, obs, error)
            if obs is not None:
                self._by_release.setdefault(obs.release_key, {})[obs.version] = key
        if error:
            log.warning("unreadable release record %s: %s", key, error)
        self._emit(StorageChange("ADDED" if cur is None else "MODIFIED", key, obs, error))
        return key

    def _delete(self, key: StorageKey) -> None:
        with self._lock:
            self._unindex(key)
            cur = self._entries.pop(key, None)
        if cur is not None:
            self._emit(StorageChange("DELETED", key, None))

    def _unindex(self, key: StorageKey) -> None:
        cur = self._entries.get(key)
        if cur is None or cur.observation is None:
            return
        revs = self._by_release.get(cur.observation.release_key)
        if revs is not None and revs.get(cur.observation.version) == key:
            del revs[cur.observation.version]
            if not revs:
                del self._by_release[cur.observation.release_key]

    def _emit(self, change: StorageChange) -> None:
        with self._lock:
            callbacks = list(self._callbacks)
        for cb in callbacks:
            try:
                cb(change)
            except Exception:
                log.exception("storage observer callback failed")


def _lines(resp: Any) -> Iterator[bytes]:
    """Split a streamed watch response into JSON lines."""
    buf = b""
    for chunk in resp.stream(amt=None, decode_content=False):
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if line.strip():
                yield line
    if buf.strip():
        yield buf


def _describe(exc: Exception) -> str:
    if isinstance(exc, ApiException):
        if exc.status == 403:
            return f"forbidden: cannot list/watch helm storage ({exc.reason})"
        return f"API error {exc.status}: {exc.reason}"
    return f"{type(exc).__name__}: {exc}"
