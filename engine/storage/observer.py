"""Observer of Helm release storage: a watch on the objects labelled ``owner=helm``.

Keeps the latest :class:`Observation` per storage key, indexed per release as
its storage holds it (revision list per storage namespace: :meth:`Observer.set_storage_of`
says which one a reader sees), and calls the registered callbacks after every create,
update and delete with the change (observations are immutable, so callers
cannot alter the observer's map). Manifests and chart files are not held:
:meth:`Observer.load_release` reads a whole record on demand.

Resilience: a broken watch resumes from the last resourceVersion it saw
(bookmarks included), so the API server replays exactly the events missed;
``410 Gone`` (that version was compacted away) triggers a relist that is
diffed against what the observer holds (by resourceVersion and uid), so it
emits exactly the net transitions missed meanwhile: no change is lost or
repeated. Connection errors, an API server restart and 5xx answers are
retried with backoff (0.2 s doubling to 5 s).

Records that cannot be decoded are kept as :class:`UnreadableRecord` with a
typed reason; the observer keeps going. RBAC: the observer needs ``list``
and ``watch`` on the driver's resource (secrets or configmaps) in each
watched namespace, nothing else (``load_release`` lists by name).

The watches run in daemon threads (the official client is synchronous);
callbacks run in those threads, so a caller on an asyncio loop should hand
them over with ``loop.call_soon_threadsafe``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from engine.base.listeners import Listeners
from engine.kube import rest
from engine.kube.client import watch_lines
from engine.storage.access import RESOURCE, Denied, MissingPermission, check_access, describe
from engine.storage.codec import (
    OWNER_SELECTOR,
    RECORD_PREFIX,
    Driver,
    MissingPayloadError,
    StorageDecodeError,
    StorageKey,
    decode_payload,
    driver_from_env,
    is_record,
    object_payload,
)
from engine.storage.index import Entry, StorageIndex
from engine.storage.observation import Observation, chart_default_values
from engine.storage.records import (
    ListedRevision,
    StorageChange,
    UnreadableRecord,
    decode_object,
    decode_record,
    key_of,
    listed_revision,
    unreadable_record,
)

__all__ = [
    "Driver",
    "LabelsAhead",
    "ListedRevision",
    "MissingPermission",
    "Observer",
    "StorageChange",
    "UnreadableRecord",
    "decode_object",
    "decode_record",
]

log = logging.getLogger(__name__)

_MAX_BACKOFF = 5.0
_MAX_DENIED_BACKOFF = 30.0
_MIN_WATCH_SECONDS = 0.5
# Failed tries (0.2 + 0.4 + 0.8 s of backoff) after which a namespace never listed counts as unreadable for
# wait_synced: helm gives up on an unreachable cluster at once; the watch goes on retrying all the same.
_UNLISTED_TRIES = 3
_NAMED_MAX = 100  # release names put in a list's label selector (``name in (...)``); more are filtered on arrival
# Seconds the watch waits, at most, for the first rows' records listed ahead once it handed their labels on (a
# list of up to 100 names: tens of ms), before it reads them itself.
_FIRST_RECORDS_WAIT = 0.5
_LABELS_PAGE = "10000"  # objects per page of the labels-only list (~0.7 KB each with their managedFields): at
# 10,000 releases one page came in 130 ms, two of 5,000 in 165 ms (kube-apiserver 1.34, bench/tui_launch.py)
# The labels list skips superseded revisions: each release's newest is never one, so a release with ten
# revisions costs one object, not ten (as ``helm list`` shows only the newest).
_LABELS_SELECTOR = f"{OWNER_SELECTOR},status!=superseded"


Callback = Callable[[StorageChange], None]
_Pages = queue.SimpleQueue[list[ListedRevision] | None]  # a labels list's pages as they come; None after the last


def _labels_pages(api: client.ApiClient | None, driver: Driver, namespace: str | None, selectors: Sequence[str],
                  keep: Callable[[Mapping[str, Any]], bool], stop: threading.Event | None = None,
                  ) -> Iterator[list[ListedRevision]]:
    """The labels list's pages (see :meth:`Observer.on_listed`) of the records ``keep`` accepts, one list a
    selector, as they come; a failure is logged and ends them (the full list that follows retries and reports)."""
    try:
        for selector in selectors:
            log.debug("storage list of %s (labels only): %s", namespace or "all namespaces", selector)
            token: str | None = None
            while stop is None or not stop.is_set():
                query = [("labelSelector", selector), ("limit", _LABELS_PAGE)]
                if token:
                    query.append(("continue", token))
                assert api is not None
                body = rest.get_json(api, rest.path("v1", RESOURCE[driver], namespace), query,
                                     accept=rest.METADATA_LIST)
                found = [listed_revision(obj) for obj in body.get("items") or []
                         if str((obj.get("metadata") or {}).get("name", "")).startswith(RECORD_PREFIX) and keep(obj)]
                yield [revision for revision in found if revision is not None]
                token = (body.get("metadata") or {}).get("continue")
                if not token:
                    break
    except Exception as exc:
        log.info("storage labels list of %s failed: %s", namespace or "all namespaces", describe(exc))


def _named_lists(api: client.ApiClient, driver: Driver, namespace: str, names: Collection[str],
                 ) -> Iterator[dict[str, Any]]:
    """The storage lists holding every record of the releases ``names`` in ``namespace``: one list per
    :data:`_NAMED_MAX` names, narrowed on the server to them (helm's ``name`` label), decoded. Raises
    ApiException."""
    ordered = sorted(names)
    for at in range(0, len(ordered), _NAMED_MAX):
        selector = f"{OWNER_SELECTOR},name in ({','.join(ordered[at:at + _NAMED_MAX])})"
        log.debug("storage list of %s (records first): %s", namespace, selector)
        yield rest.get_json(api, rest.path("v1", RESOURCE[driver], namespace), [("labelSelector", selector)])


ReleaseKey = tuple[str, str]  # (namespace, release name)
FirstRows = Callable[[list[ReleaseKey]], Sequence[ReleaseKey]]


class _Listed:
    """One namespace's list ahead: the labels' pages as they come (None after the last), then the records of
    the first rows (:class:`LabelsAhead`'s ``first``), ``read`` once they are in (or failed: none)."""

    def __init__(self) -> None:
        self.pages: _Pages = queue.SimpleQueue()
        self.records: list[dict[str, Any]] = []
        self.read = threading.Event()


class LabelsAhead:
    """Storage's labels listed ahead of the :class:`Observer` that hands them on (:meth:`Observer.on_listed`), a
    thread a namespace (``namespaces`` None: all), started now. The app starts it as soon as its kubeconfig is
    read, before the engine's modules and Textual import (~0.4 s of CPU), so that the API server builds the
    list meanwhile (at 10,000 releases most of ``helm list``'s time). ``first`` (the app's: the releases its
    first screen shows, of those listed) names the releases whose records are listed next, so that the first
    screen shows them (the observer decodes them before it hands the labels on). The observer built with it
    (``ahead``) takes each namespace it lists with the same selector and driver (every release's); the others
    are dropped. ``driver`` None: ``HELM_DRIVER``, as the observer's."""

    def __init__(self, api: client.ApiClient, namespaces: Sequence[str] | None, driver: Driver | None = None,
                 first: FirstRows | None = None):
        self.driver: Driver = driver or driver_from_env()
        self._listed: dict[str | None, _Listed] = {}
        for ns in dict.fromkeys(namespaces) if namespaces else (None,):
            listed = self._listed[ns] = _Listed()
            threading.Thread(target=self._list, args=(api, ns, listed, first),
                             name=f"helm-storage-labels-{ns or 'all'}", daemon=True).start()

    def _list(self, api: client.ApiClient, namespace: str | None, listed: _Listed, first: FirstRows | None) -> None:
        keys: dict[ReleaseKey, None] = {}  # each release once (a pending revision beside the deployed one)
        try:
            for page in _labels_pages(api, self.driver, namespace, [_LABELS_SELECTOR], lambda _obj: True):
                listed.pages.put(page)
                keys.update(dict.fromkeys((r.namespace, r.name) for r in page))
        finally:
            listed.pages.put(None)  # the end
        try:
            wanted: dict[str, set[str]] = {}
            for ns, name in first(list(keys)) if first is not None and keys else ():
                wanted.setdefault(ns, set()).add(name)
            for ns, names in wanted.items():
                for body in _named_lists(api, self.driver, ns, names):
                    listed.records.extend(body.get("items") or [])
        except Exception as exc:  # the observer reads them after the labels are drawn (Observer.read_first)
            log.info("storage list of the first records failed: %s", describe(exc))
            listed.records.clear()
        finally:
            listed.read.set()

    def take(self, namespace: str | None) -> _Listed | None:
        """What was listed of ``namespace`` (None: not listed here, or taken already)."""
        return self._listed.pop(namespace, None)


class _Gone(Exception):
    """The watch's resourceVersion is too old (HTTP 410): relist."""


class Observer:
    """Watches Helm release storage in all namespaces or the given ones.

    ``api`` None makes an offline observer fed through :meth:`apply_object`.
    ``driver`` None takes ``HELM_DRIVER`` as Helm does (raises
    ``UnsupportedDriverError`` for drivers that are not observable).
    ``watch_timeout`` (seconds) bounds one watch request; it is then resumed. ``page_size`` is the
    objects per page of a list.
    ``releases`` (storage namespace → release names): hold the records of these releases only, for a command
    that needs no other (``reconcile --once`` or ``plan`` of a folder: its packages' releases), and with
    ``labelled`` (labels) also those of the releases whose records carry those labels (``plan``: its package
    set's, which it would prune). A namespace needing none is never listed, so an empty folder's ``reconcile
    --once`` lists nothing. None (the default): every release.
    ``ahead``: storage's labels listed before this observer was built (:class:`LabelsAhead`), handed on at start
    instead of listing them again.
    ``start()`` launches the watch threads; ``wait_synced()`` blocks until
    the first list is in. Getters return copies of the internal maps.
    """

    def __init__(
        self,
        api: client.ApiClient | None,
        namespaces: Sequence[str] | None = None,
        driver: Driver | None = None,
        watch_timeout: int = 240,
        page_size: int = 500,
        releases: Mapping[str, Collection[str]] | None = None,
        labelled: Mapping[str, str] | None = None,
        ahead: LabelsAhead | None = None,
    ):
        self._api = api
        self._namespaces: tuple[str | None, ...] = tuple(dict.fromkeys(namespaces)) if namespaces else (None,)
        self._driver: Driver = driver or driver_from_env()
        self._watch_timeout = watch_timeout
        self._page_size = str(page_size)
        self._releases = ({ns: frozenset(names) for ns, names in releases.items() if names}
                          if releases is not None else None)
        self._labelled = dict(labelled or {})
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._index = StorageIndex()
        self._listeners: Listeners[[StorageChange]] = Listeners("storage observer callback")
        self._stop = threading.Event()
        self._synced: set[str | None] = set()
        self._denied: dict[str | None, MissingPermission] = {}
        self._unlisted_tries: dict[str | None, int] = {}  # failed tries of a namespace not listed yet
        self._problems: dict[str | None, str] = {}
        self._problem_listeners: Listeners[[]] = Listeners("storage problem callback")
        self._listed: Listeners[[list[ListedRevision]]] = Listeners("storage labels callback")
        self._labels_done: Listeners[[]] = Listeners("storage labels end callback")
        self._threads: list[threading.Thread] = []
        # What was listed before start (``ahead``), by namespace: the labels' pages, the first rows' records.
        self._early: dict[str | None, _Listed] = {}
        self._read_ahead: set[ReleaseKey] = set()  # releases whose every record came from ``ahead``
        self._responses: dict[str | None, Any] = {}
        self._relists = 0
        # Offline only (no API to read back from): the objects fed in, for load_release.
        self._offline_objects: dict[StorageKey, Mapping[str, Any]] = {}
        self._storage_of: Callable[[str, str], str | None] = lambda _namespace, _name: None
        self.last_error: str | None = None
        if ahead is not None and ahead.driver == self._driver:  # its pages where this observer lists the same
            for ns in self._namespaces:
                listed = ahead.take(ns)
                if listed is not None and self._selectors(ns, _LABELS_SELECTOR) == [_LABELS_SELECTOR]:
                    self._early[ns] = listed

    # -- configuration ---------------------------------------------------------
    @property
    def driver(self) -> Driver:
        """The storage driver watched: ``secret`` or ``configmap``."""
        return self._driver

    @property
    def namespaces(self) -> tuple[str, ...] | None:
        """The storage namespaces watched, or None for all namespaces."""
        return None if self._namespaces == (None,) else tuple(ns for ns in self._namespaces if ns)

    @property
    def relists(self) -> int:
        """How many full lists the watches made (1 per namespace at start, +1 per ``410 Gone``)."""
        return self._relists

    # -- public API ----------------------------------------------------------
    def subscribe(self, callback: Callback) -> Callable[[], None]:
        """Register ``callback``; returns a function that unregisters it."""
        return self._listeners.add(callback)

    def on_listed(self, callback: Callable[[list[ListedRevision]], None]) -> Callable[[], None]:
        """Before the first list decodes any record, call ``callback`` (in a watch thread) with the stored
        revisions that are not superseded (each release's newest, and any failed or pending ones) as their
        labels say, a page at a time; returns an unsubscribe. Only when subscribed before :meth:`start`: the
        labels come from one more list, metadata only (PartialObjectMetadataList, as client-go's metadata
        client asks; ~0.3 KB an object, no payload), so the first rows need not wait for the records (~0.1 ms
        each to decode). A failing labels list is skipped: the full list says why."""
        return self._listed.add(callback)

    def on_labels_done(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` (in a watch thread) after the last page of the labels list (see :meth:`on_listed`),
        before the records are listed: that list waits for it to return (a caller may hold it until the
        labels are shown, so that decoding does not compete with that). Returns an unsubscribe."""
        return self._labels_done.add(callback)

    def start(self) -> None:
        """Start the watch threads; an offline observer (api None) counts as synced at once."""
        if self._api is None:
            with self._changed:
                self._synced.update(self._namespaces)
                self._changed.notify_all()
            return
        with self._changed:  # a namespace none of whose releases is needed holds nothing: listed as is
            self._synced.update(ns for ns in self._namespaces if not self._selectors(ns, OWNER_SELECTOR))
        for ns in self._namespaces:
            if ns in self._synced:
                continue
            t = threading.Thread(target=self._run, args=(ns,), name=f"helm-storage-{ns or 'all'}", daemon=True)
            t.start()
            self._threads.append(t)

    def wait_synced(self, timeout: float | None = None) -> bool:
        """Block until every namespace has been listed once; True if so.

        Returns False after ``timeout`` seconds, and early when every
        namespace not yet listed was refused by RBAC or failed
        ``_UNLISTED_TRIES`` times (unreachable: see :meth:`unlisted`).
        """
        with self._changed:
            self._changed.wait_for(
                lambda: all(ns in self._synced or ns in self._denied
                            or self._unlisted_tries.get(ns, 0) >= _UNLISTED_TRIES for ns in self._namespaces),
                timeout)
            return all(ns in self._synced for ns in self._namespaces)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the watch threads (interrupting an open watch) and wait for them."""
        self._stop.set()
        for resp in list(self._responses.values()):
            with contextlib.suppress(Exception):
                resp.shutdown()
        for t in self._threads:
            t.join(timeout)

    def problems(self) -> dict[str, str]:
        """Current watch problems by namespace (``""`` = all namespaces), e.g. a missing permission."""
        with self._lock:
            return {ns or "": msg for ns, msg in self._problems.items()}

    def unlisted(self) -> dict[str, str]:
        """Why the storage of a namespace (``""`` = all namespaces) was never listed, for each one a list or
        watch failed in before its first list succeeded, other than a refused permission (:meth:`denied`):
        the API server unreachable, say. Empty once each one was listed."""
        with self._lock:
            return {ns or "": msg for ns, msg in self._problems.items()
                    if ns not in self._synced and ns not in self._denied}

    def denied(self) -> list[MissingPermission]:
        """The permissions the API server refused right now (a list or watch answered 403), by namespace."""
        with self._lock:
            return [self._denied[ns] for ns in sorted(self._denied, key=lambda n: n or "")]

    def on_problems(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` (in a watch thread) whenever :meth:`problems` changes; returns an unsubscribe."""
        return self._problem_listeners.add(callback)

    def observations(self) -> dict[StorageKey, Observation]:
        """Every decodable record, by storage key."""
        with self._lock:
            return self._index.observations()

    def errors(self) -> dict[StorageKey, str]:
        """Records that failed to decode, with the reason."""
        return {u.key: u.reason for u in self.unreadable()}

    def unreadable(self) -> list[UnreadableRecord]:
        """Every record that failed to decode, sorted by key."""
        with self._lock:
            return self._index.unreadable()

    def unreadable_releases(self) -> dict[tuple[str, str], UnreadableRecord]:
        """Releases whose newest stored record is unreadable (see :meth:`StorageIndex.unreadable_releases`)."""
        with self._lock:
            return self._index.unreadable_releases()

    def unreadable_release(self, namespace: str, name: str) -> UnreadableRecord | None:
        """The newest unreadable record of release ``(namespace, name)`` when it is the release's newest, read in
        the storage its package declares (:meth:`set_storage_of`), else the release namespace's; None otherwise.
        An unreadable record names only the namespace it is stored in, so :meth:`unreadable_releases` keys it
        by that: this asks by release."""
        with self._lock:
            storage = self._storage_of(namespace, name) or namespace
            return self._index.unreadable_releases().get((storage, name))

    def set_storage_of(self, storage_of: Callable[[str, str], str | None]) -> None:
        """Which storage namespace holds release ``(namespace, name)`` for the readers that ask by release
        (:meth:`latest`, :meth:`history`, :meth:`revisions`, :meth:`releases`, :meth:`load_release`):
        ``storage_of(namespace, name)`` gives the one its package declares (as Flux's ``storageNamespace``; the
        release book's packages), None for a release no package declares: then the release namespace's
        storage, else the first by name holding it. Helm's storage is per namespace, so records of one release
        in two storage namespaces are two histories; a reader sees one whole. Called under the observer's lock:
        ``storage_of`` must not block."""
        self._storage_of = storage_of

    def revisions(self, namespace: str, name: str) -> list[int]:
        """The readable stored revisions of one release, newest first (its storage: :meth:`set_storage_of`)."""
        with self._lock:
            return self._index.revisions(namespace, name, self._storage_of(namespace, name))

    def history(self, namespace: str, name: str, storage: str | None = None) -> list[Observation]:
        """All readable stored revisions of one release, newest first, in the storage namespace ``storage``
        (None: the release's, :meth:`set_storage_of`)."""
        with self._lock:
            return self._index.history(namespace, name, storage or self._storage_of(namespace, name))

    def latest(self, namespace: str, name: str, storage: str | None = None) -> Observation | None:
        """The highest readable stored revision of one release, or None, in the storage namespace ``storage``
        (None: the release's, :meth:`set_storage_of`)."""
        with self._lock:
            return self._index.latest(namespace, name, storage or self._storage_of(namespace, name))

    def releases(self) -> dict[tuple[str, str], Observation]:
        """The latest observation of every release, by ``(namespace, name)`` (each from its storage:
        :meth:`set_storage_of`)."""
        with self._lock:
            return self._index.releases(self._storage_of)

    def load_release(self, namespace: str, name: str, revision: int) -> dict[str, Any]:
        """The whole decoded release of one stored revision, read from storage now.

        Manifests and chart files are not kept in memory; this fetches them
        (a list by name, so ``list`` permission suffices). Raises KeyError
        when the revision is not stored (or was deleted meanwhile),
        StorageDecodeError when it cannot be decoded, ApiException on API errors.
        """
        with self._lock:
            key = self._index.key_of(namespace, name, revision, self._storage_of(namespace, name))
        if key is None:
            raise KeyError(f"{namespace}/{name} has no stored revision {revision}")
        obj: Mapping[str, Any]
        if self._api is None:
            obj = self._offline_objects[key]
        else:
            found = self._list(key.namespace, [("fieldSelector", f"metadata.name={key.name}")]).get("items") or []
            if not found:
                raise KeyError(f"{key} is no longer stored")
            obj = found[0]
        payload = object_payload(obj, self._driver)
        if payload is None:
            raise MissingPayloadError(str(key), "record has no 'release' data")
        return decode_payload(payload, str(key))

    def manifest(self, namespace: str, name: str, revision: int) -> str:
        """The manifest Helm stored for one revision, loaded now (see :meth:`load_release`)."""
        manifest = self.load_release(namespace, name, revision).get("manifest")
        return manifest if isinstance(manifest, str) else ""

    def chart_values(self, namespace: str, name: str, revision: int) -> dict[str, Any]:
        """The chart's default values of one revision, loaded now (see :meth:`load_release`)."""
        return chart_default_values(self.load_release(namespace, name, revision))

    def read_first(self, releases: Sequence[tuple[str, str]]) -> None:
        """Read and decode the records of ``releases`` (``(namespace, name)``: the rows on screen) now, before the
        full list does (the caller's thread: a watch thread, before its list), so their rows need not wait for
        every other record: one list a namespace, narrowed on the server to their names (helm's ``name``
        label; every revision of each). A failure is logged and skipped: the full list reads them all after."""
        wanted: dict[str, set[str]] = {}
        for namespace, name in releases:
            if (namespace, name) not in self._read_ahead:
                wanted.setdefault(namespace, set()).add(name)
        assert self._api is not None
        for namespace, names in wanted.items():
            try:
                for body in _named_lists(self._api, self._driver, namespace, names):
                    for obj in body.get("items") or []:
                        if self._held(obj):
                            self._apply(obj)
            except Exception as exc:  # the full list that follows retries and reports
                log.info("storage list of the first records failed: %s", describe(exc))
                return

    def apply_object(self, obj: Mapping[str, Any]) -> None:
        """Take one storage object (as the API returns it) as if the watch saw it.

        The watch uses this path; tests and offline views feed fixed records
        through it too. Objects that are not release records are ignored.
        """
        if is_record(obj, self._driver):
            if self._api is None:
                self._offline_objects[key_of(obj)] = obj
            self._apply(obj)

    def check_access(self, verbs: Sequence[str] = ("list", "watch")) -> list[MissingPermission]:
        """Ask the API server (SelfSubjectAccessReview) whether each ``verb`` is allowed.

        Returns the missing permissions for the driver's resource in every
        watched namespace; empty when all are granted (or offline). Raises
        ApiException when the review itself fails.
        """
        if self._api is None:
            return []
        return check_access(self._api, self._namespaces, self._driver, verbs)

    # -- watch loop ----------------------------------------------------------
    def _wanted_names(self, namespace: str | None) -> frozenset[str] | None:
        """The release names held in ``namespace`` (None: all namespaces): None for every release, else the
        names ``releases`` gives (all namespaces': the union)."""
        if self._releases is None:
            return None
        if namespace is None:
            return frozenset().union(*self._releases.values())
        return self._releases.get(namespace, frozenset())

    def _selectors(self, namespace: str | None, base: str) -> list[str]:
        """The label selectors whose lists hold the records held in ``namespace``: ``base`` for every release,
        else ``base`` narrowed to the names held (helm's ``name`` label; when more than :data:`_NAMED_MAX`,
        ``base`` filtered on arrival by :meth:`_held`) and to ``labelled``; none when nothing is held there."""
        names = self._wanted_names(namespace)
        if names is None:
            return [base]
        selectors = []
        if names:
            selectors.append(base if len(names) > _NAMED_MAX else f"{base},name in ({','.join(sorted(names))})")
        if self._labelled:
            selectors.append(",".join([base, *(f"{k}={v}" for k, v in sorted(self._labelled.items()))]))
        return selectors

    def _watch_selector(self, namespace: str | None) -> str:
        """One watch's selector: the one list's, or helm's own filtered by :meth:`_held` (several lists)."""
        selectors = self._selectors(namespace, OWNER_SELECTOR)
        return selectors[0] if len(selectors) == 1 else OWNER_SELECTOR

    def _held(self, obj: Mapping[str, Any]) -> bool:
        """A storage object is one of the records held (``releases``; every record without it)."""
        return is_record(obj, self._driver) and self._named(obj)

    def _named(self, obj: Mapping[str, Any]) -> bool:
        """A storage object (a record, or its metadata alone: no Secret ``type`` then) is of a release held."""
        if self._releases is None:
            return True
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        if self._labelled and all(labels.get(k) == v for k, v in self._labelled.items()):
            return True
        return str(labels.get("name", "")) in self._releases.get(str(meta.get("namespace")), ())

    def _list(self, namespace: str | None, query: list[tuple[str, str]]) -> dict[str, Any]:
        """The driver's collection in ``namespace`` (None: all), decoded. Raises ApiException."""
        assert self._api is not None
        return rest.get_json(self._api, rest.path("v1", RESOURCE[self._driver], namespace), query)

    def _labels_pages(self, namespace: str | None) -> Iterator[list[ListedRevision]]:
        return _labels_pages(self._api, self._driver, namespace, self._selectors(namespace, _LABELS_SELECTOR),
                             self._named, self._stop)

    def _list_labels(self, namespace: str | None) -> None:
        """Hand the labels' pages to the :meth:`on_listed` callbacks: those listed ahead (:class:`LabelsAhead`),
        after the records of its first rows when these are in (the views made from the labels show them), else
        listed now."""
        early = self._early.pop(namespace, None)
        if early is None:
            for page in self._labels_pages(namespace):
                self._listed.emit(page)
            return
        pages = []
        while (kept := early.pages.get()) is not None:
            pages.append(kept)
        if early.read.is_set():  # the first rows' records are in: the views made from the labels show them
            self._apply_ahead(early)
            for page in pages:
                self._listed.emit(page)
            return
        # Not yet (at 10,000 releases the labels came late): the rows are not held back for them; they are drawn
        # with their records once these are in, before the rows drawn are read (read_first skips them).
        for page in pages:
            self._listed.emit(page)
        if early.read.wait(_FIRST_RECORDS_WAIT):
            self._apply_ahead(early)

    def _apply_ahead(self, early: _Listed) -> None:
        """Take the records of the first rows listed ahead (:class:`LabelsAhead`)."""
        for obj in early.records:
            if self._held(obj):
                self._apply(obj)
                meta = obj.get("metadata") or {}
                self._read_ahead.add((str(meta.get("namespace", "")), str((meta.get("labels") or {}).get("name"))))

    def _run(self, namespace: str | None) -> None:
        rv: str | None = None
        backoff = 0.2
        if self._listed:
            self._list_labels(namespace)
            self._labels_done.emit()
        else:
            self._early.pop(namespace, None)  # listed early for callbacks that did not come
        while not self._stop.is_set():
            try:
                if rv is None:
                    rv = self._relist(namespace)
                    with self._changed:
                        self._synced.add(namespace)
                        self._changed.notify_all()
                began = time.monotonic()
                rv = self._watch(namespace, rv)
                backoff = 0.2
                if time.monotonic() - began < _MIN_WATCH_SECONDS:
                    self._stop.wait(backoff)  # the server keeps closing at once: do not spin
            except _Gone:
                log.info("storage watch of %s expired (410 Gone); relisting", namespace or "all namespaces")
                rv = None
            except Exception as exc:  # keep watching whatever the transport threw
                if self._stop.is_set():
                    break
                denied = exc.permission if isinstance(exc, Denied) else None
                if namespace not in self._problems:
                    backoff = 0.2  # a watch was established since the last failure
                if rv is None:
                    with self._changed:
                        self._unlisted_tries[namespace] = self._unlisted_tries.get(namespace, 0) + 1
                self._set_problem(namespace, str(exc) if denied else describe(exc), denied)
                log.warning("storage watch failed: %s; retrying in %.1fs", self.last_error, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, _MAX_DENIED_BACKOFF if denied else _MAX_BACKOFF)

    def _set_problem(self, namespace: str | None, message: str | None,
                     denied: MissingPermission | None = None) -> None:
        with self._changed:
            before = (self._problems.get(namespace), self._denied.get(namespace))
            if message is None:
                self._problems.pop(namespace, None)
                self._denied.pop(namespace, None)
            else:
                self._problems[namespace] = message
                if denied is not None:
                    self._denied[namespace] = denied
                else:  # another failure now (e.g. the connection): the refusal is no longer what we know
                    self._denied.pop(namespace, None)
                self._changed.notify_all()
            self.last_error = next(iter(self._problems.values()), None)
            changed = before != (self._problems.get(namespace), self._denied.get(namespace))
        if changed:
            self._problem_listeners.emit()

    def _call(self, verb: str, namespace: str | None, query: list[tuple[str, str]]) -> Any:
        """A list (decoded) or, with ``verb`` "watch", the watch's unread response; a 403 raises Denied,
        a 410 _Gone."""
        try:
            if verb == "watch":
                assert self._api is not None
                return rest.get(self._api, rest.path("v1", RESOURCE[self._driver], namespace), query,
                                timeout=(10, self._watch_timeout + 30))
            return self._list(namespace, query)
        except ApiException as exc:
            if exc.status == 403:
                raise Denied.from_api(exc, verb, self._driver, namespace) from None
            if exc.status == 410:
                raise _Gone() from None
            raise

    def _relist(self, namespace: str | None) -> str:
        # Pages are applied as they come, so at most one page of payloads is in memory.
        seen: set[StorageKey] = set()
        versions: list[str] = []
        for selector in self._selectors(namespace, OWNER_SELECTOR):
            log.debug("storage list of %s (records): %s", namespace or "all namespaces", selector)
            token: str | None = None
            while True:
                query = [("labelSelector", selector), ("limit", self._page_size)]
                if token:
                    query.append(("continue", token))
                body = self._call("list", namespace, query)
                for obj in body.get("items") or []:
                    if self._held(obj):
                        self._apply(obj)
                        seen.add(key_of(obj))
                meta = body.get("metadata") or {}
                token = meta.get("continue")
                if not token:
                    break
            # A paginated list is one snapshot: every page carries its resourceVersion.
            versions.append(str(meta.get("resourceVersion", "")))
        self._relists += 1
        with self._lock:
            gone = [k for k in self._index.stored_keys()
                    if k not in seen and (namespace is None or k.namespace == namespace)]
        for key in gone:
            self._delete(key)
        # Watched from the first list's version: what changed during the next lists is replayed, in order.
        return versions[0]

    def _watch(self, namespace: str | None, rv: str) -> str:
        resp = self._call(
            "watch", namespace,
            [("labelSelector", self._watch_selector(namespace)), ("watch", "true"), ("resourceVersion", rv),
             ("allowWatchBookmarks", "true"), ("timeoutSeconds", str(self._watch_timeout))],
        )
        self._responses[namespace] = resp
        self._set_problem(namespace, None)  # connected and allowed again
        try:
            for line in watch_lines(resp):
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
                if etype != "BOOKMARK" and self._held(obj):
                    if etype == "DELETED":
                        self._delete(key_of(obj))
                    else:
                        self._apply(obj)
                if new_rv:
                    rv = str(new_rv)
        finally:
            self._responses.pop(namespace, None)
            with contextlib.suppress(Exception):
                resp.release_conn()
        return rv

    def _apply(self, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = key_of(obj)
        rv = str(meta.get("resourceVersion", ""))
        uid = str(meta.get("uid", ""))
        with self._lock:
            cur = self._index.get(key)
        if cur is not None and cur.resource_version == rv:
            return  # a relist or replayed event of a version we already hold
        if cur is not None and cur.uid != uid and cur.uid and uid:
            # Deleted and created again while we were not watching: two transitions.
            self._delete(key)
            cur = None
        try:
            entry = Entry(rv, uid, decode_record(obj, self._driver), None)
        except StorageDecodeError as exc:
            entry = Entry(rv, uid, None, unreadable_record(obj, exc))
            log.warning("unreadable release record %s", entry.unreadable)
        with self._lock:
            self._index.put(key, entry)
        problem = entry.unreadable
        self._emit(StorageChange(
            "ADDED" if cur is None else "MODIFIED", key, entry.observation,
            problem.reason if problem else None, problem,
        ))

    def _delete(self, key: StorageKey) -> None:
        with self._lock:
            if self._index.get(key) is None:
                return
            self._index.put(key, None)
        self._emit(StorageChange("DELETED", key, None))

    def _emit(self, change: StorageChange) -> None:
        self._listeners.emit(change)
