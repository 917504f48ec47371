"""Deleting a Package object uninstalls its release, through a finalizer, as Flux's helm-controller does.

The acting controller puts :data:`FINALIZER` on every Package object it reconciles. When one is deleted
(``deletionTimestamp`` set, the finalizer holding it), its release is uninstalled with the object's
``spec.uninstall`` options (:meth:`PackageController.uninstall_removed`, the prune's path, under the
release's guard; a suspended one's release is kept, as Flux keeps it), an Event says how it went, and the
finalizer is removed, so the API server deletes the object. A failed uninstall keeps the finalizer and is
tried again at the next change or retry. An object the loader refused (so never installed from) and one
whose release is gone lose the finalizer at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from engine.base.fields import PackageError
from engine.base.wire import API_VERSION, FINALIZER
from engine.package.load import package_object
from engine.package.model import PackageSpec
from engine.reconcile import conditions as cond
from engine.runtime.cluster.objects import PACKAGES, PackageObjects, deleting
from engine.runtime.ledger.book import ActionRefused
from engine.runtime.state import EngineSignal, LeaseChanged

log = logging.getLogger(__name__)

GROUP, VERSION = API_VERSION.split("/")
RETRY = 5.0  # seconds before a failed or refused uninstall is tried again
CONFLICTS = 10  # writes of the finalizers tried on an object that keeps changing
CONFLICT_WAIT = 0.5  # seconds for the watch to bring the object's newer version after a conflict

Uninstall = Callable[[PackageSpec, str], Awaitable[str | None]]
Record = Callable[[tuple[str, str], str, str, bool], Awaitable[None]]  # (ref, reason, message, warning)


@dataclass
class Finalizers:
    """Keeps :data:`FINALIZER` on ``objects``' Packages and finishes their deletion; ``uninstall(spec, why)``
    returns None when done (or nothing to do), else helm's error; ``record`` writes an Event."""

    api: client.ApiClient
    objects: PackageObjects
    uninstall: Uninstall
    record: Record
    acting: Callable[[], bool]
    spawn: Callable[[Coroutine[Any, Any, None]], object]
    _busy: set[Path] = field(default_factory=set)
    _missed: set[Path] = field(default_factory=set)  # busy when a burst named them: looked at once free
    # --shards auto: is the Package object ``(namespace, name)`` placed on this replica (only its replica acts)?
    mine: Callable[[tuple[str, str]], bool] = lambda _ref: True

    def on_signal(self, signal: EngineSignal) -> None:
        """The book's signals: the Lease was taken (each burst of object changes calls :meth:`sweep` itself)."""
        if isinstance(signal, LeaseChanged) and signal.leader:
            self.sweep()

    def sweep(self, origins: Collection[Path] | None = None) -> None:
        """Look at the Package objects ``origins`` (those of a burst of changes; None: every one, on taking the
        Lease over)."""
        if not self.acting():
            return
        objects = self.objects.objects(PACKAGES) if origins is None else \
            {o: obj for o in origins if (obj := self.objects.get(o)) is not None}
        for origin, obj in objects.items():
            meta = obj.get("metadata") or {}
            if not self.mine((str(meta.get("namespace")), str(meta.get("name")))):
                continue
            if origin in self._busy:
                self._missed.add(origin)
                continue
            finalizers = list((obj.get("metadata") or {}).get("finalizers") or [])
            if deleting(obj):
                if FINALIZER in finalizers:
                    self._busy.add(origin)
                    self.spawn(self._finish(origin, obj))
            elif FINALIZER not in finalizers:
                self._busy.add(origin)
                self.spawn(self._patch(origin, obj, _added))

    async def _patch(self, origin: Path, obj: dict[str, Any], change: Callable[[list[str]], list[str]]) -> None:
        """Write ``change(finalizers)`` on the object ``obj``, a compare-and-swap on its resourceVersion (another
        writer's change is not lost). On a conflict (the object changed since it was read, e.g. its status) the
        change is made again on the object as the watch holds it a moment later, up to :data:`CONFLICTS` times:
        no later change of the object may come to trigger another look. (The watch, not a GET: the locked-down
        role may only list, watch and patch Packages.)"""
        meta = obj.get("metadata") or {}
        namespace, name = str(meta.get("namespace")), str(meta.get("name"))
        api = client.CustomObjectsApi(self.api)
        try:
            for _ in range(CONFLICTS):
                meta = obj.get("metadata") or {}
                body = {"metadata": {"finalizers": change(list(meta.get("finalizers") or [])),
                                     "resourceVersion": meta.get("resourceVersion")}}
                try:
                    await asyncio.to_thread(api.patch_namespaced_custom_object, GROUP, VERSION, namespace, PACKAGES,
                                            name, body)
                    return
                except ApiException as exc:
                    if exc.status != 409:
                        raise
                await asyncio.sleep(CONFLICT_WAIT)
                now = self.objects.get(origin)
                if now is None:
                    return  # gone
                obj = now
        except ApiException as exc:
            if exc.status != 404:  # gone: nothing to do
                log.warning("finalizers of Package %s/%s not written: %s", namespace, name, exc.reason)
        finally:
            self._busy.discard(origin)
            if origin in self._missed:  # it changed meanwhile (deleted, say): look at it as it is now
                self._missed.discard(origin)
                self.sweep([origin])

    async def _finish(self, origin: Path, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        ref = (str(meta.get("namespace")), str(meta.get("name")))
        try:
            try:
                spec = package_object(obj)
            except PackageError:
                spec = None  # refused by the loader: nothing was ever installed from it
            problem = await self.uninstall(spec, "Package deleted") if spec is not None else None
        except ActionRefused as exc:
            problem = str(exc)
        if problem is not None:
            await self.record(ref, f"{cond.UNINSTALL_FAILED}", f"release not uninstalled: {problem}", True)
            await asyncio.sleep(RETRY)
            self._busy.discard(origin)
            self._missed.discard(origin)
            self.sweep([origin])
            return
        if spec is not None and (kept := spec.kept_when_removed) is not None:
            await self.record(ref, cond.UNINSTALL_SUCCEEDED, f"Package deleted: {kept}", False)
        elif spec is not None:
            await self.record(ref, cond.UNINSTALL_SUCCEEDED,
                              f"Helm uninstall succeeded for release {spec.key[0]}/{spec.key[1]}", False)
        await self._patch(origin, obj, _removed)


def _added(finalizers: list[str]) -> list[str]:
    return finalizers if FINALIZER in finalizers else [*finalizers, FINALIZER]


def _removed(finalizers: list[str]) -> list[str]:
    return [f for f in finalizers if f != FINALIZER]
