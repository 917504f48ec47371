"""The API server's Package, HelmRepository and OCIRepository objects as the engine's packages (``helmdeck
controller``): the other :class:`~engine.runtime.drive.ports.PackageInput` beside the packages folder.

One list+watch per kind and namespace (or one per kind over all namespaces) keeps the objects; a burst of
changes (grouped for ``debounce`` seconds) is validated by the one loader (the folder's checks and wording),
incrementally (:class:`~engine.package.object_set.ObjectSet`: only what the burst changed), and given as a
:class:`~engine.runtime.drive.ports.InputUpdate`. A Package
that turns bad keeps its last good spec (as a file does) and is reported; a deleted one is removed.
:meth:`PackageObjects.meta` gives an object's metadata (generation, annotations, finalizers) by its origin
(``PackageSpec.file``), for the status the controller writes back.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from engine.base.fields import PackageError
from engine.base.wire import API_VERSION
from engine.kube.stream import WatchThread, list_all, open_watch
from engine.package.load import object_origin
from engine.package.model import PackageSpec
from engine.package.object_set import ObjectSet
from engine.runtime.drive.folder import ReleaseKey, warm
from engine.runtime.drive.ports import InputUpdate

log = logging.getLogger(__name__)

PACKAGES = "packages"
KINDS = {PACKAGES: "Package", "helmrepositories": "HelmRepository", "ocirepositories": "OCIRepository"}
SOURCES = {kind: plural for plural, kind in KINDS.items() if plural != PACKAGES}  # source kind -> plural


def _path(plural: str, namespace: str | None) -> str:
    where = f"namespaces/{namespace}/" if namespace else ""
    return f"/apis/{API_VERSION}/{where}{plural}"


def origin_of(obj: dict[str, Any], plural: str) -> Path:
    """The origin (:func:`engine.package.load.object_origin`) of an object of ``plural``."""
    meta = obj.get("metadata") or {}
    return object_origin(plural, str(meta.get("namespace") or "default"), str(meta.get("name") or ""))


class _KindWatch(WatchThread):
    """A list+watch of one kind (``plural``) in one namespace, or all (None), of the objects ``label_selector``
    matches ("" all); ``changed(plural, objects)`` is called in the watch thread with the objects that changed
    (by origin; None: deleted, or no longer matched): after a list, those whose resourceVersion differs from
    what this watch held, then after each event the one it names."""

    def __init__(self, api: client.ApiClient, plural: str, namespace: str | None,
                 changed: Callable[[str, dict[Path, dict[str, Any] | None]], None], watch_timeout: int = 300,
                 label_selector: str = ""):
        super().__init__(f"helmdeck-{plural}-{namespace or 'all'}",
                         f"watch {plural} in {namespace or 'all namespaces'}")
        self._api, self._plural, self._namespace = api, plural, namespace
        self._changed = changed
        self._timeout = watch_timeout
        self._selector = label_selector
        self.objects: dict[Path, dict[str, Any]] = {}

    def _relist(self) -> str:
        objects, rv = list_objects(self._api, self._plural, self._namespace, self._selector)
        diff: dict[Path, dict[str, Any] | None] = {o: None for o in self.objects if o not in objects}
        diff.update({o: obj for o, obj in objects.items() if _version(self.objects.get(o)) != _version(obj)})
        self.objects = objects
        self._changed(self._plural, diff)
        return rv

    def _watch(self, rv: str) -> str:
        # A label-selected watch says DELETED when an object's labels stop matching (moved to another shard).
        resp = open_watch(self._api, _path(self._plural, self._namespace), rv, label_selector=self._selector,
                          timeout=self._timeout)
        return self._stream(resp, rv, self._apply)

    def _apply(self, etype: str, obj: dict[str, Any]) -> None:
        origin = origin_of(obj, self._plural)
        if etype == "DELETED":
            self.objects.pop(origin, None)
            self._changed(self._plural, {origin: None})
        else:
            self.objects[origin] = obj
            self._changed(self._plural, {origin: obj})


def _namespace(origin: Path) -> str:
    """The namespace of an object's origin (``.../namespaces/<ns>/<plural>/<name>``)."""
    return origin.parts[-3]


def _version(obj: dict[str, Any] | None) -> str | None:
    return str((obj.get("metadata") or {}).get("resourceVersion")) if obj is not None else None


def deleting(obj: dict[str, Any]) -> bool:
    """Is the object being deleted (its ``deletionTimestamp`` set; finalizers hold it)?"""
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def observed(obj: dict[str, Any]) -> bool:
    """Was the object reconciled at its current spec: its status' ``observedGeneration`` equal to its
    ``metadata.generation`` (as Flux marks a finished reconcile)? False for a spec edited since, or no status."""
    generation = (obj.get("metadata") or {}).get("generation")
    return generation is not None and generation == (obj.get("status") or {}).get("observedGeneration")


def list_objects(api: client.ApiClient, plural: str, namespace: str | None,
                 label_selector: str = "") -> tuple[dict[Path, dict[str, Any]], str]:
    """Every object of ``plural`` in ``namespace`` (None: all) that ``label_selector`` matches ("" all), by
    origin, and the list's resourceVersion. Raises ApiException."""
    out: dict[Path, dict[str, Any]] = {}

    def take(obj: dict[str, Any]) -> None:
        obj.setdefault("kind", KINDS[plural])  # list items carry no kind
        obj.setdefault("apiVersion", API_VERSION)
        out[origin_of(obj, plural)] = obj

    rv = list_all(api, _path(plural, namespace), take, label_selector=label_selector)
    return out, rv


class PackageObjects:
    """The Package objects (and their sources) of ``namespaces`` (None: all), read and watched through ``api``.
    ``debounce``: seconds a burst of changes is grouped for before one validation; ``default_service_account``:
    the ServiceAccount a Package without ``spec.serviceAccountName`` acts as
    (:func:`~engine.package.load.package_object`).

    Incremental (:class:`~engine.package.object_set.ObjectSet`): a burst re-validates only the objects it
    changed and what they reach; an update's ``changed`` and ``removed`` hold only the keys whose spec
    changed. The other work per burst is independent of the number of packages, but for copying ``specs`` and
    the list of current errors into the update."""

    def __init__(self, api: client.ApiClient, namespaces: list[str] | None = None, *, debounce: float = 0.2,
                 default_service_account: str = "", label_selector: str = ""):
        self._api = api
        self.namespaces = sorted(set(namespaces)) if namespaces else None
        self.label_selector = label_selector
        self._debounce = debounce
        self._lock = threading.Lock()
        self._objects: dict[str, dict[Path, dict[str, Any]]] = {p: {} for p in KINDS}  # plural -> by origin
        self._dirty: dict[str, dict[Path, dict[str, Any] | None]] = {p: {} for p in KINDS}  # changed since
        self._set = ObjectSet(default_service_account)
        self._good: dict[Path, PackageSpec] = {}  # origin -> its spec now (a bad object's last good one)
        self._owners: dict[ReleaseKey, list[Path]] = {}  # origins whose spec is of each key (the first wins)
        self._errors: dict[Path, tuple[PackageError, ...]] = {}  # origin -> its current refusals
        self._said: tuple[PackageError, ...] = ()  # the errors of the last update given
        self._generations: dict[Path, tuple[PackageSpec, int]] = {}  # origin -> (good spec, its generation)
        self._validated: dict[Path, int] = {}  # origin -> the generation the last validation read (good or bad)
        self._specs: dict[ReleaseKey, PackageSpec] = {}
        self._watches: list[_KindWatch] = []
        self._source_watches: dict[tuple[str, str | None], _KindWatch] = {}  # (plural, namespace) -> its watch
        self._read: set[tuple[str, str | None]] = set()  # the source scopes listed (and watched once watching)
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False
        self._listeners: list[Callable[[frozenset[Path]], None]] = []
        self._burst: frozenset[Path] = frozenset()  # the Package objects the last update looked at

    def on_burst(self, callback: Callable[[frozenset[Path]], None]) -> None:
        """Call ``callback(origins)`` (on the event loop) after each burst of object changes with the Package
        objects it changed, whatever changed: metadata too (annotations, finalizers, deletion), which no
        update reports."""
        self._listeners.append(callback)

    def _scopes(self) -> list[str | None]:
        return list(self.namespaces) if self.namespaces else [None]

    def _source_scopes(self) -> set[tuple[str, str | None]]:
        """Where sources are read: (plural, namespace or None for all). Every scope of the packages; a shard
        (``label_selector``) reads only the namespaces holding a source its Packages name."""
        if not self.label_selector:
            return {(plural, scope) for plural in SOURCES.values() for scope in self._scopes()}
        return {(SOURCES[ref.kind], ref.namespace) for ref in self._set.used_sources()
                if ref.kind in SOURCES and (self.namespaces is None or ref.namespace in self.namespaces)}

    def objects(self, plural: str = PACKAGES) -> dict[Path, dict[str, Any]]:
        """The objects of ``plural`` known now, by origin (a copy)."""
        with self._lock:
            return dict(self._objects[plural])

    def get(self, origin: Path) -> dict[str, Any] | None:
        """The Package object ``origin`` (``PackageSpec.file``), None when unknown."""
        with self._lock:
            return self._objects[PACKAGES].get(origin)

    def settled(self, origin: Path) -> bool:
        """Was the Package object ``origin`` reconciled at its current spec (:func:`observed`)? True when unknown:
        nothing of it waits."""
        obj = self.get(origin)
        return obj is None or observed(obj)

    def meta(self, origin: Path) -> dict[str, Any] | None:
        """The metadata of the Package object ``origin``, None when unknown."""
        obj = self.get(origin)
        return obj.get("metadata") if obj is not None else None

    def removal(self, spec: PackageSpec) -> str:
        """A deleted object's release is uninstalled by the finalizer (engine.runtime.cluster.finalizer); an object
        still there no longer declares this release (its release name or target namespace changed)."""
        obj = self.objects().get(spec.file)
        if obj is None and self.label_selector:
            return (f"its Package object was deleted, or its labels no longer match --watch-label-selector "
                    f"{self.label_selector!r} (another shard reconciles it); a deleted one's release is "
                    "uninstalled by the finalizer")
        if obj is None or deleting(obj):
            return ("its Package object was deleted; the finalizer uninstalls the release with its spec.uninstall "
                    "options, then lets the object go")
        return ("its Package object no longer declares this release (spec.releaseName or spec.targetNamespace "
                "changed); the release is kept: uninstall it with helm if it is not wanted")

    def specs(self) -> dict[ReleaseKey, PackageSpec]:
        """The valid packages as of the last validation, by release."""
        return dict(self._specs)

    def spec(self, origin: Path) -> PackageSpec | None:
        """The spec the Package object ``origin`` gives now (a bad object's last good one), None when none."""
        return self._good.get(origin)

    def generation(self, spec: PackageSpec) -> int | None:
        """The ``metadata.generation`` of the object ``spec`` was read from; None when ``spec`` is not the
        current spec of its object (an older one, or not an object's)."""
        found = self._generations.get(spec.file)
        return found[1] if found is not None and found[0] == spec else None

    def validated(self, origin: Path) -> int | None:
        """The ``metadata.generation`` of the Package object ``origin`` as the last validation read it (a bad
        one's too), None when none was read. Behind the watched object's (:meth:`get`) until the burst that
        brought it is validated."""
        return self._validated.get(origin)

    def load(self, touched: set[Path] | None = None) -> InputUpdate:
        """List every object now (blocking) and validate what changed; as the port says, every key counts as
        changed (``touched`` is unused: objects have no paths). Raises ApiException when a list is refused."""
        packages = {o: obj for scope in self._scopes()
                    for o, obj in list_objects(self._api, PACKAGES, scope, self.label_selector)[0].items()}
        with self._lock:
            gone = {o: None for o in self._objects[PACKAGES] if o not in packages}
            self._dirty[PACKAGES].update({**gone, **packages})
            self._objects[PACKAGES] = packages
        self._read = set()  # every source scope is listed again by the update
        update = self._update(strict=True)
        return dataclasses.replace(update, changed=frozenset(update.specs))

    def _read_sources(self, dirty: dict[str, dict[Path, dict[str, Any] | None]], *, strict: bool) -> None:
        """List the source scopes not read yet (blocking) into ``dirty``, before the packages naming them are
        checked: a Package naming a source in a namespace this shard did not read is not refused meanwhile.
        A list that fails raises with ``strict`` (ApiException, at load); else the scope counts as read empty
        and its watch, started next (:meth:`_sync_sources`), lists it again with its retries."""
        for plural, scope in sorted(self._source_scopes() - self._read, key=str):
            try:
                objects = list_objects(self._api, plural, scope)[0]
            except (ApiException, OSError, HTTPError) as exc:  # HTTPError: urllib3's, the server unreachable
                if strict:
                    raise
                log.warning("listing %s in %s failed (%s): its watch retries", plural, scope or "all namespaces",
                            getattr(exc, "reason", exc))
                self._read.add((plural, scope))
                continue
            with self._lock:
                held = {o for o in self._objects[plural] if scope is None or _namespace(o) == scope}
                diff: dict[Path, dict[str, Any] | None] = {o: None for o in held - objects.keys()}
                diff.update(objects)
                for origin, obj in diff.items():
                    if obj is None:
                        self._objects[plural].pop(origin, None)
                    else:
                        self._objects[plural][origin] = obj
            dirty[plural].update(diff)
            self._read.add((plural, scope))

    def _update(self, *, strict: bool = False) -> InputUpdate:
        """Validate the objects changed since the last update; changed and removed keys against it.
        ``strict``: a source list that fails raises (ApiException) instead of being left to its watch."""
        with self._lock:
            dirty, self._dirty = self._dirty, {p: {} for p in KINDS}
        self._burst = frozenset(dirty[PACKAGES])
        packages = {o: obj if obj is not None and not deleting(obj) else None for o, obj in dirty[PACKAGES].items()}
        self._set.parse(packages)  # which sources they name: those not read yet are read first
        self._read_sources(dirty, strict=strict)
        checked = self._set.update(packages, {o: obj for p in KINDS if p != PACKAGES for o, obj in dirty[p].items()})
        touched: set[ReleaseKey] = set()
        fresh: list[PackageError] = []  # problems new in this update, logged once
        for origin, errors in checked.sources.items():
            fresh += self._set_errors(origin, errors)
        for origin, verdict in checked.packages.items():
            old = self._good.get(origin)
            if isinstance(verdict, PackageSpec):
                meta = (packages[origin] or {}).get("metadata") if origin in packages else self.meta(origin)
                self._generations[origin] = (verdict, int((meta or {}).get("generation") or 0))
                new: PackageSpec | None = verdict
            else:  # an object that turned bad keeps its last good spec; one gone (or deleting) is removed
                new = old if verdict else None
            fresh += self._set_errors(origin, verdict if isinstance(verdict, tuple) else ())
            if new is None:
                self._generations.pop(origin, None)
            self._place(origin, old, new, touched)
        for origin, obj in packages.items():  # a document unchanged (re-created, say): its generation moves on
            if obj is None:
                self._validated.pop(origin, None)
            else:
                self._validated[origin] = int((obj.get("metadata") or {}).get("generation") or 0)
            held = self._generations.get(origin)
            if obj is not None and held is not None and origin not in checked.packages:
                self._generations[origin] = (held[0], int((obj.get("metadata") or {}).get("generation") or 0))
        changed, removed = set(), set()
        for key in touched:
            owners = self._owners.get(key)
            before = self._specs.get(key)
            if not owners:
                if self._specs.pop(key, None) is not None:
                    removed.add(key)
                continue
            spec = self._good[owners[0]]
            if before != spec:
                self._specs[key] = spec
                changed.add(key)
                warm(spec)
        for err in fresh:
            log.warning("package problem: %s", err)
        errors = tuple(e for found in self._errors.values() for e in found)
        return InputUpdate(dict(self._specs), frozenset(changed), frozenset(removed), errors)

    def _set_errors(self, origin: Path, errors: tuple[PackageError, ...]) -> list[PackageError]:
        """Record ``origin``'s current problems; returns those it did not have."""
        before = self._errors.pop(origin, ())
        if errors:
            self._errors[origin] = errors
        said = {str(e) for e in before}
        return [e for e in errors if str(e) not in said]

    def _place(self, origin: Path, old: PackageSpec | None, new: PackageSpec | None, touched: set[ReleaseKey]) -> None:
        """Make ``new`` the spec of ``origin`` (was ``old``), keeping who owns each release key."""
        if old is not None and new is not None and old.key == new.key:
            self._good[origin] = new
            touched.add(new.key)
            return
        if old is not None:
            owners = self._owners[old.key]
            owners.remove(origin)
            if not owners:
                del self._owners[old.key]
            touched.add(old.key)
            del self._good[origin]
        if new is not None:
            self._owners.setdefault(new.key, []).append(origin)
            self._good[origin] = new
            touched.add(new.key)

    def _changed(self, plural: str, objects: dict[Path, dict[str, Any] | None]) -> None:
        with self._lock:
            for origin, obj in objects.items():
                if obj is None:
                    self._objects[plural].pop(origin, None)
                else:
                    self._objects[plural][origin] = obj
            self._dirty[plural].update(objects)
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            loop.call_soon_threadsafe(wake.set)

    async def watch(self) -> AsyncIterator[InputUpdate]:
        """Yield an update per burst of object changes that changes a spec or the problems, until
        :meth:`stop`. Call :meth:`load` first."""
        self._loop, self._wake = asyncio.get_running_loop(), asyncio.Event()
        self._watches = [_KindWatch(self._api, PACKAGES, scope, self._changed, label_selector=self.label_selector)
                         for scope in self._scopes()]
        for w in self._watches:
            w.start()
        self._sync_sources()
        try:
            while not self._stopping:
                await self._wake.wait()
                await asyncio.sleep(self._debounce)
                self._wake.clear()
                if self._stopping:
                    break
                update = await asyncio.to_thread(self._update)
                self._sync_sources()
                if update.changed or update.removed or update.errors != self._said:
                    self._said = update.errors
                    yield update
                for callback in self._listeners:
                    callback(self._burst)
        finally:
            self.stop()

    def _sync_sources(self) -> None:
        """One watch per source scope read (:meth:`_source_scopes`, listed by :meth:`_read_sources`); a scope no
        longer used stops, and its sources are gone for the next update."""
        if self._stopping:
            return
        used = self._source_scopes()
        for scope in self._read - used:
            watch = self._source_watches.pop(scope, None)
            if watch is not None:
                watch.stop()
            self._read.discard(scope)
            self._changed(scope[0], {o: None for o in self.objects(scope[0]) if _namespace(o) == scope[1]}
                          if scope[1] is not None else dict.fromkeys(self.objects(scope[0])))
        for plural, namespace in sorted((used & self._read) - set(self._source_watches), key=str):
            watch = _KindWatch(self._api, plural, namespace, self._changed)
            watch.objects = {o: obj for o, obj in self.objects(plural).items()
                             if namespace is None or _namespace(o) == namespace}  # as loaded: a relist diffs
            self._source_watches[(plural, namespace)] = watch
            watch.start()

    def stop(self) -> None:
        """End :meth:`watch` and its watch threads."""
        self._stopping = True
        for w in [*self._watches, *self._source_watches.values()]:
            w.stop()
        if self._loop is not None and self._wake is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._wake.set)
