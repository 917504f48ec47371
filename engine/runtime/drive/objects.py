"""The API server's Package, HelmRepository and OCIRepository objects as the engine's packages (``helmdeck
controller``): the other :class:`~engine.runtime.drive.ports.PackageInput` beside the packages folder.

One list+watch per kind and namespace (or one per kind over all namespaces) keeps the objects; a burst of
changes (grouped for ``debounce`` seconds) is validated by the one loader (:func:`engine.package.load.load_objects`,
the folder's checks and wording) and given as a :class:`~engine.runtime.drive.folder.FolderUpdate`. A Package
that turns bad keeps its last good spec (as a file does) and is reported; a deleted one is removed.
:meth:`PackageObjects.meta` gives an object's metadata (generation, annotations, finalizers) by its origin
(``PackageSpec.file``), for the status the controller writes back.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from engine.base.labels import API_VERSION
from engine.kube import rest
from engine.kube.stream import Gone, WatchThread
from engine.package.load import load_objects, object_origin
from engine.package.model import PackageSpec
from engine.runtime.drive.folder import FolderUpdate, ReleaseKey, warm

log = logging.getLogger(__name__)

PACKAGES = "packages"
KINDS = {PACKAGES: "Package", "helmrepositories": "HelmRepository", "ocirepositories": "OCIRepository"}
_LIST_PAGE = "500"


def _path(plural: str, namespace: str | None) -> str:
    where = f"namespaces/{namespace}/" if namespace else ""
    return f"/apis/{API_VERSION}/{where}{plural}"


def origin_of(obj: dict[str, Any], plural: str) -> Path:
    """The origin (:func:`engine.package.load.object_origin`) of an object of ``plural``."""
    meta = obj.get("metadata") or {}
    return object_origin(plural, str(meta.get("namespace") or "default"), str(meta.get("name") or ""))


class _KindWatch(WatchThread):
    """A list+watch of one kind (``plural``) in one namespace, or all (None); ``changed(plural, objects)`` is
    called in the watch thread with every object after a list, then after each event (``objects`` the whole
    current set: the caller keeps no copy of its own)."""

    def __init__(self, api: client.ApiClient, plural: str, namespace: str | None,
                 changed: Callable[[str, str | None, dict[Path, dict[str, Any]]], None], watch_timeout: int = 300):
        super().__init__(f"helmdeck-{plural}-{namespace or 'all'}",
                         f"watch {plural} in {namespace or 'all namespaces'}")
        self._api, self._plural, self._namespace = api, plural, namespace
        self._changed = changed
        self._timeout = watch_timeout
        self.objects: dict[Path, dict[str, Any]] = {}

    def _relist(self) -> str:
        objects, rv = list_objects(self._api, self._plural, self._namespace)
        self.objects = objects
        self._changed(self._plural, self._namespace, dict(objects))
        return rv

    def _watch(self, rv: str) -> str:
        query = [("watch", "true"), ("resourceVersion", rv), ("allowWatchBookmarks", "true"),
                 ("timeoutSeconds", str(self._timeout))]
        try:
            resp = rest.get(self._api, _path(self._plural, self._namespace), query, timeout=(10, self._timeout + 30))
        except ApiException as exc:
            if exc.status == 410:
                raise Gone() from None
            raise
        return self._stream(resp, rv, self._apply)

    def _apply(self, etype: str, obj: dict[str, Any]) -> None:
        origin = origin_of(obj, self._plural)
        if etype == "DELETED":
            self.objects.pop(origin, None)
        else:
            self.objects[origin] = obj
        self._changed(self._plural, self._namespace, dict(self.objects))


def deleting(obj: dict[str, Any]) -> bool:
    """Is the object being deleted (its ``deletionTimestamp`` set; finalizers hold it)?"""
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def list_objects(api: client.ApiClient, plural: str, namespace: str | None) -> tuple[dict[Path, dict[str, Any]], str]:
    """Every object of ``plural`` in ``namespace`` (None: all), by origin, and the list's resourceVersion.
    Raises ApiException."""
    out: dict[Path, dict[str, Any]] = {}
    token, meta = "", dict[str, Any]()
    while True:
        query = [("limit", _LIST_PAGE)] + ([("continue", token)] if token else [])
        body = rest.get_json(api, _path(plural, namespace), query)
        for obj in body.get("items") or ():
            obj.setdefault("kind", KINDS[plural])  # list items carry no kind
            obj.setdefault("apiVersion", API_VERSION)
            out[origin_of(obj, plural)] = obj
        meta = body.get("metadata") or {}
        token = str(meta.get("continue") or "")
        if not token:
            return out, str(meta.get("resourceVersion", ""))


class PackageObjects:
    """The Package objects (and their sources) of ``namespaces`` (None: all), read and watched through ``api``.
    ``debounce``: seconds a burst of changes is grouped for before one validation; ``default_service_account``:
    the ServiceAccount a Package without ``spec.serviceAccountName`` acts as (:func:`load_objects`)."""

    def __init__(self, api: client.ApiClient, namespaces: list[str] | None = None, *, debounce: float = 0.2,
                 default_service_account: str = ""):
        self._api = api
        self._default_account = default_service_account
        self.namespaces = sorted(set(namespaces)) if namespaces else None
        self._debounce = debounce
        self._lock = threading.Lock()
        # (plural, namespace or None) -> that watch's objects by origin
        self._sets: dict[tuple[str, str | None], dict[Path, dict[str, Any]]] = {}
        self._good: dict[Path, PackageSpec] = {}  # origin -> last good spec
        self._generations: dict[Path, tuple[PackageSpec, int]] = {}  # origin -> (good spec, its generation)
        self._specs: dict[ReleaseKey, PackageSpec] = {}
        self._watches: list[_KindWatch] = []
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False
        self._listeners: list[Callable[[], None]] = []

    def on_burst(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (on the event loop) after each burst of object changes, whatever changed:
        metadata too (annotations, finalizers, deletion), which no update reports."""
        self._listeners.append(callback)

    def _scopes(self) -> list[str | None]:
        return list(self.namespaces) if self.namespaces else [None]

    def objects(self, plural: str = PACKAGES) -> dict[Path, dict[str, Any]]:
        """The objects of ``plural`` known now, by origin."""
        with self._lock:
            return {o: obj for (p, _), objs in self._sets.items() if p == plural for o, obj in objs.items()}

    def meta(self, origin: Path) -> dict[str, Any] | None:
        """The metadata of the Package object ``origin`` (``PackageSpec.file``), None when unknown."""
        obj = self.objects().get(origin)
        return obj.get("metadata") if obj is not None else None

    def removal(self, spec: PackageSpec) -> str:
        """A deleted object's release is uninstalled by the finalizer (engine.runtime.drive.finalizer); an object
        still there no longer declares this release (its release name or target namespace changed)."""
        obj = self.objects().get(spec.file)
        if obj is None or deleting(obj):
            return ("its Package object was deleted; the finalizer uninstalls the release with its spec.uninstall "
                    "options, then lets the object go")
        return ("its Package object no longer declares this release (spec.releaseName or spec.targetNamespace "
                "changed); the release is kept: uninstall it with helm if it is not wanted")

    def specs(self) -> dict[ReleaseKey, PackageSpec]:
        """The valid packages as of the last validation, by release."""
        return dict(self._specs)

    def generation(self, spec: PackageSpec) -> int | None:
        """The ``metadata.generation`` of the object ``spec`` was read from; None when ``spec`` is not the
        current spec of its object (an older one, or not an object's)."""
        found = self._generations.get(spec.file)
        return found[1] if found is not None and found[0] == spec else None

    def load(self, touched: set[Path] | None = None) -> FolderUpdate:
        """List every object now (blocking) and validate them. Raises ApiException when a list is refused."""
        for plural in KINDS:
            for scope in self._scopes():
                objects, _ = list_objects(self._api, plural, scope)
                with self._lock:
                    self._sets[(plural, scope)] = objects
        return self._update()

    def _update(self) -> FolderUpdate:
        """Validate the objects known now; changed and removed keys against the last update."""
        live = [obj for obj in self.objects(PACKAGES).values() if not deleting(obj)]
        specs, errors = load_objects(live,
                                     [*self.objects("helmrepositories").values(),
                                      *self.objects("ocirepositories").values()], self._default_account)
        good = {s.file: s for s in specs}
        packages = self.objects(PACKAGES)
        for origin, spec in good.items():
            self._generations[origin] = (spec, int((packages[origin].get("metadata") or {}).get("generation") or 0))
        present = {o for o, obj in packages.items() if not deleting(obj)}
        for origin in {e.file for e in errors}:
            if origin in self._good and origin not in good and origin in present:
                good[origin] = self._good[origin]  # an object that turned bad keeps its last good spec
        self._good = good
        self._generations = {o: g for o, g in self._generations.items() if o in good}
        new: dict[ReleaseKey, PackageSpec] = {}
        for spec in good.values():
            new.setdefault(spec.key, spec)
        old, self._specs = self._specs, new
        changed = frozenset(k for k, s in new.items() if old.get(k) != s)
        for key in changed:
            warm(new[key])
        for err in errors:
            log.warning("package problem: %s", err)
        return FolderUpdate(new, changed, frozenset(set(old) - set(new)), tuple(errors))

    def _changed(self, plural: str, scope: str | None, objects: dict[Path, dict[str, Any]]) -> None:
        with self._lock:
            self._sets[(plural, scope)] = objects
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            loop.call_soon_threadsafe(wake.set)

    async def watch(self) -> AsyncIterator[FolderUpdate]:
        """Yield an update per burst of object changes until :meth:`stop`. Call :meth:`load` first."""
        self._loop, self._wake = asyncio.get_running_loop(), asyncio.Event()
        self._watches = [_KindWatch(self._api, plural, scope, self._changed)
                         for plural in KINDS for scope in self._scopes()]
        for w in self._watches:
            w.start()
        try:
            while not self._stopping:
                await self._wake.wait()
                await asyncio.sleep(self._debounce)
                self._wake.clear()
                if self._stopping:
                    break
                update = await asyncio.to_thread(self._update)
                if update.changed or update.removed or update.errors:
                    yield update
                for callback in self._listeners:
                    callback()
        finally:
            self.stop()

    def stop(self) -> None:
        """End :meth:`watch` and its watch threads."""
        self._stopping = True
        for w in self._watches:
            w.stop()
        if self._loop is not None and self._wake is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._wake.set)
