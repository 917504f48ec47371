"""``spec.valuesFrom`` at run time: reading the referenced ConfigMaps and Secrets, watching them.

The resolution stage stays plain (:mod:`engine.resolve.values`
composes, no I/O): before a package is resolved, :meth:`ValuesObjects.fetch`
reads each object it refers to (a GET each, off the event loop; NotFound is
kept apart from every other error, so ``optional`` ignores NotFound only),
and :meth:`ValuesObjects.layers` — the ``values_from`` hook the controller,
the release service and ``plan`` give to :func:`engine.resolve.release.resolve` —
composes them from what was read. Values that came from a Secret are handed
to the engine's :class:`~engine.base.masking.Masker` as they are composed, so they
are masked in every text shown or logged.

Identity: a package with ``spec.serviceAccountName`` has its objects read
and watched as that ServiceAccount (Kubernetes impersonation, as helm's
``--kube-as-user`` for the same package), so a ServiceAccount that may not
read a Secret gets Ready=False naming the Secret and the ServiceAccount; the
others as helmdeck itself. What was read is kept per identity.

Reacting to changes (:meth:`ValuesObjects.run`): one metadata-only
list+watch per (kind, namespace, identity) that some package refers to —
shared by every package, whatever their number (helm's own release Secrets
are left out by label) — and a change, creation or deletion of a referenced
object queues every package referring to it (as that identity) at once. Flux watches only objects
labelled ``reconcile.fluxcd.io/watch: Enabled``; helmdeck watches every
referenced object. The content is read again by the pass (its spec digest
covers it: an unchanged object renders nothing).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from engine.base.fields import PackageError
from engine.base.masking import Masker
from engine.base.strvals import Path as ValuesPath
from engine.kube import rest
from engine.kube.client import impersonating
from engine.kube.stream import WatchThread, list_all, open_watch
from engine.package.model import PackageSpec
from engine.reconcile.options import kube_user
from engine.resolve.release import CACHE as RESOLVED
from engine.resolve.release import resolve
from engine.resolve.values import ObjectData, ObjectKey, ValuesLayer, compose, object_keys
from engine.runtime.drive.ports import Triggers
from engine.runtime.ledger.book import ReleaseBook
from engine.runtime.state import EngineSignal, PackageProblems, ReleaseKey

log = logging.getLogger(__name__)

_PLURAL = {"ConfigMap": "configmaps", "Secret": "secrets"}
_NOT_HELM = "owner!=helm"  # helm's release storage is no values source: not watched
WatchKey = tuple[str, str, str]  # (kind, namespace, identity: the impersonated user, "" for helmdeck's own)


class ValuesObjects:
    """The objects ``valuesFrom`` refers to, as last read; see the module docstring.

    ``api`` None (offline): nothing is read, and a package with ``valuesFrom`` does not resolve.
    """

    def __init__(self, api: client.ApiClient | None, book: ReleaseBook, masker: Masker):
        self._api = api
        self._book = book
        self._masker = masker
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._objects: dict[tuple[str, ObjectKey], ObjectData] = {}  # (identity, object): as read
        self._watches: dict[WatchKey, _ReferenceWatch] = {}
        self._triggers: Triggers | None = None
        book.scrub = masker.scrub  # the event log and conditions never show a value read from a Secret

    # -- reading ----------------------------------------------------------------------
    async def fetch(self, spec: PackageSpec) -> None:
        """Read every object ``spec.valuesFrom`` refers to now, as the package's identity (no-op without
        references or offline)."""
        if not spec.values_from or self._api is None:
            return
        user = kube_user(spec)
        read = await asyncio.gather(*(asyncio.to_thread(self._read, key, user) for key in object_keys(spec)))
        with self._lock:
            for obj in read:
                self._objects[(user, obj.key)] = obj

    def _client(self, user: str) -> client.ApiClient:
        assert self._api is not None
        return impersonating(self._api, user) if user else self._api

    def _read(self, key: ObjectKey, user: str) -> ObjectData:
        kind, namespace, name = key
        try:
            body = rest.get_json(self._client(user), f"/api/v1/namespaces/{namespace}/{_PLURAL[kind]}/{name}")
        except ApiException as exc:
            if exc.status == 404:
                return ObjectData(kind, namespace, name, reader=user)
            return ObjectData(kind, namespace, name, error=f"{exc.reason or 'error'} ({exc.status})", reader=user)
        except Exception as exc:  # the cluster unreachable, say: the pass fails and names it
            return ObjectData(kind, namespace, name, error=f"{type(exc).__name__}: {exc}", reader=user)
        version = str((body.get("metadata") or {}).get("resourceVersion") or "")
        if kind == "Secret":
            data = {k: base64.b64decode(v) for k, v in (body.get("data") or {}).items() if isinstance(v, str)}
        else:
            data = {k: v.encode() for k, v in (body.get("data") or {}).items() if isinstance(v, str)}
        return ObjectData(kind, namespace, name, data, version=version, reader=user)

    async def warm(self, specs: Iterable[PackageSpec]) -> None:
        """Read the objects of every package of ``specs`` with valuesFrom and resolve it (a problem is left
        to its pass), so the first verdicts — and those of an engine that does not act — count them."""
        todo = [spec for spec in specs if spec.values_from]
        if not todo or self._api is None:
            return
        await asyncio.gather(*(self.fetch(spec) for spec in todo))
        for spec in todo:
            with contextlib.suppress(PackageError):
                await asyncio.to_thread(functools.partial(resolve, spec, values_from=self.layers))

    def layers(self, spec: PackageSpec) -> Sequence[ValuesLayer]:
        """The ``values_from`` hook of :func:`engine.resolve.release.resolve`: ``spec``'s valuesFrom composed from
        the objects as last read (no I/O). Raises ValuesError (e.g. a required object missing)."""
        if not spec.values_from:
            return ()
        user = kube_user(spec)
        with self._lock:
            objects = {k: self._objects[(user, k)] for k in object_keys(spec) if (user, k) in self._objects}
        composed = compose(spec, objects)
        texts = _texts(composed.values, composed.secret_paths)
        for target in composed.targets:
            if target.secret:
                texts += _texts({"v": [value for _, value in target.assignments]}, [("v",)])
        self._masker.remember(texts)
        return (ValuesLayer(composed.entries, "spec.valuesFrom", secret_paths=composed.secret_paths,
                            digest=composed.digest),)

    def secret_paths(self, key: ReleaseKey) -> tuple[ValuesPath, ...]:
        """The paths of ``key``'s values that came from Secrets (its last resolution; none when unknown)."""
        spec = self._book.packages.get(key)
        resolved = RESOLVED.last(spec) if spec is not None else None
        return resolved.secret_paths if resolved is not None else ()

    def remember(self, key: ReleaseKey, values: Mapping[str, Any]) -> None:
        """Have the masker mask what ``values`` (e.g. a stored revision's) hold at ``key``'s secret paths:
        a revision deployed from an older Secret shows its old values masked too."""
        self._masker.remember(_texts(values, self.secret_paths(key)))

    # -- watching ---------------------------------------------------------------------
    async def run(self, triggers: Triggers) -> None:
        """Watch the referenced objects until cancelled; a change queues the packages referring to the
        object through ``triggers`` (when the engine acts on its own). The watches follow the packages as
        they are reloaded."""
        if self._api is None:
            return
        self._triggers = triggers
        self._loop = asyncio.get_running_loop()
        unsubscribe = self._book.subscribe(self._on_packages)
        self._sync()
        try:
            await asyncio.Event().wait()
        finally:
            unsubscribe()
            self._triggers = None
            with self._lock:
                watches, self._watches = list(self._watches.values()), {}
            for watch in watches:
                watch.stop()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.to_thread(lambda: [w.join(5.0) for w in watches])

    def watched(self) -> list[WatchKey]:
        """The (kind, namespace, identity) watched now (identity "": helmdeck's own)."""
        with self._lock:
            return sorted(self._watches)

    def _on_packages(self, event: EngineSignal) -> None:
        if not isinstance(event, PackageProblems):  # the packages were (re)loaded
            return
        self._sync()
        triggers = self._triggers
        if triggers is not None and not triggers.acts_on_its_own():
            for key, spec in list(self._book.packages.items()):  # no pass will resolve a new or changed one
                if spec.values_from and RESOLVED.last(spec) is None:
                    triggers.spawn(self._review(key, spec))

    def _sync(self) -> None:
        """One watch per (kind, namespace, identity) the packages refer to; the others stop."""
        if self._api is None or self._triggers is None:
            return
        wanted = {(kind, ns, kube_user(spec)) for spec in self._book.packages.values()
                  for kind, ns, _ in object_keys(spec)}
        with self._lock:
            gone = [w for k, w in self._watches.items() if k not in wanted]
            self._watches = {k: w for k, w in self._watches.items() if k in wanted}
            for kind, ns, user in sorted(wanted - set(self._watches)):
                watch = _ReferenceWatch(self._client(user), (kind, ns, user), self._from_thread)
                self._watches[(kind, ns, user)] = watch
                watch.start()
        for watch in gone:
            watch.stop()

    def _from_thread(self, watched: WatchKey, versions: dict[str, str | None]) -> None:
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed: the engine stopped
                loop.call_soon_threadsafe(self._changed, watched, versions)

    def _changed(self, watched: WatchKey, versions: dict[str, str | None]) -> None:
        """Objects seen by the watch (on the engine's loop), by name: their resourceVersion, None when gone.
        Those not as last read by the watch's identity (the first list included: a change between the read
        and the watch's start counts) queue every package referring to them as that identity."""
        triggers = self._triggers
        if triggers is None:
            return
        kind, namespace, user = watched
        with self._lock:
            names = {name for name, version in versions.items() if not _as_read(
                self._objects.get((user, (kind, namespace, name))), version)}
        for key, spec in list(self._book.packages.items()):
            hit = sorted({ref.name for ref in spec.values_from if ref.kind == kind} & names)
            if hit and spec.namespace == namespace and kube_user(spec) == user:
                objects = ", ".join(f"{kind} {namespace}/{name}" for name in hit)
                acting = triggers.acts_on_its_own()
                self._book.log(key, "valuesFrom", "info", f"{objects} changed" + (": reconciling" if acting else ""))
                if acting:
                    triggers.enqueue(key)
                else:  # no pass will look: the view's verdict is made again from the objects as they are now
                    triggers.spawn(self._review(key, spec))

    async def _review(self, key: ReleaseKey, spec: PackageSpec) -> None:
        await self.warm([spec])
        self._book.set_state(key, None)


def _as_read(obj: ObjectData | None, version: str | None) -> bool:
    """Is ``version`` (None: absent) what was read last for the object? Never read: not known to differ."""
    if obj is None:
        return True
    if obj.error:
        return False
    return obj.version == version if obj.data is not None else version is None


def _texts(values: Any, paths: Sequence[ValuesPath]) -> list[str]:
    """The scalar texts at ``paths`` in ``values`` (and below them)."""
    out: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, str | int | float) and not isinstance(value, bool):
            out.append(str(value))

    for path in paths:
        node: Any = values
        for seg in path:
            inside = isinstance(node, list) and isinstance(seg, int) and seg < len(node)
            if inside or (isinstance(node, dict) and seg in node):
                node = node[seg]
            else:
                node = None
                break
        walk(node)
    return out


class _ReferenceWatch(WatchThread):
    """A metadata-only list+watch of one kind in one namespace, by ``api`` (as the watch key's identity);
    ``changed(key, versions)`` is called (in the watch thread) with the objects listed first, then those
    created, changed or deleted (name -> resourceVersion, None when deleted)."""

    def __init__(self, api: client.ApiClient, key: WatchKey,
                 changed: Callable[[WatchKey, dict[str, str | None]], None], watch_timeout: int = 300):
        kind, namespace, user = key
        super().__init__(f"helmdeck-values-{kind.lower()}-{namespace}",
                         f"watch {kind}s in {namespace} (valuesFrom{' as ' + user if user else ''})")
        self._api = api
        self._key = key
        self._kind = kind
        self._namespace = namespace
        self._path = f"/api/v1/namespaces/{namespace}/{_PLURAL[kind]}"
        self._changed = changed
        self._timeout = watch_timeout
        self._versions: dict[str, str] = {}

    def _relist(self) -> str:
        fresh: dict[str, str] = {}

        def take(obj: dict[str, Any]) -> None:
            m = obj.get("metadata") or {}
            fresh[str(m.get("name", ""))] = str(m.get("resourceVersion", ""))

        rv = list_all(self._api, self._path, take, label_selector=_NOT_HELM, accept=rest.METADATA_LIST)
        changed = {n: fresh.get(n) for n in self._versions.keys() | fresh.keys()
                   if self._versions.get(n) != fresh.get(n)}
        self._versions = fresh
        if changed:
            self._changed(self._key, changed)
        return rv

    def _watch(self, rv: str) -> str:
        resp = open_watch(self._api, self._path, rv, label_selector=_NOT_HELM, timeout=self._timeout,
                          accept=rest.METADATA)
        return self._stream(resp, rv, self._apply)

    def _apply(self, etype: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        name, version = str(meta.get("name", "")), str(meta.get("resourceVersion", ""))
        if etype == "DELETED":
            self._versions.pop(name, None)
        elif self._versions.get(name) == version:
            return
        else:
            self._versions[name] = version
        self._changed(self._key, {name: None if etype == "DELETED" else version})
