"""Requests by annotation on a Package object, as Flux's CLI makes them, each handled once and acknowledged in
status (the ``lastHandled*At`` fields, as Flux's ``ReconcileRequestStatus``).

- reconcile now: ``reconcile.helmdeck.dev/requestedAt``, or Flux's ``reconcile.fluxcd.io/requestedAt``;
- force an upgrade (even in sync): ``reconcile.helmdeck.dev/forceAt`` (Flux's ``reconcile.fluxcd.io/forceAt``);
- reset the failure counters, then reconcile: ``reconcile.helmdeck.dev/resetAt`` (Flux's ``.../resetAt``).

A request is a new annotation value: one that differs from the acknowledged one. It is acknowledged once its
pass has ended (a pass refused because another action runs is tried again shortly), so a restarted or a
taking-over controller never handles it twice: the acknowledgement lives in the object's status.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from engine.package.model import PackageSpec
from engine.runtime.drive.objects import PACKAGES, PackageObjects, deleting
from engine.runtime.ledger.book import ActionRefused, ReleaseBook
from engine.runtime.state import EngineSignal, LeaseChanged, ReleaseKey

log = logging.getLogger(__name__)

RETRY = 2.0  # seconds before a request refused (busy) is tried again
# request -> (the annotations asking it, helmdeck's first; the status field acknowledging it)
REQUESTS: dict[str, tuple[tuple[str, str], str]] = {
    "reset": (("reconcile.helmdeck.dev/resetAt", "reconcile.fluxcd.io/resetAt"), "lastHandledResetAt"),
    "force": (("reconcile.helmdeck.dev/forceAt", "reconcile.fluxcd.io/forceAt"), "lastHandledForceAt"),
    "reconcile": (("reconcile.helmdeck.dev/requestedAt", "reconcile.fluxcd.io/requestedAt"),
                  "lastHandledReconcileAt"),
}


def asked(annotations: dict[str, str], request: str) -> str:
    """The value of ``request``'s annotation (helmdeck's, else Flux's), "" when none."""
    names, _ = REQUESTS[request]
    return next((annotations[n] for n in names if annotations.get(n)), "")


def pending(obj: dict[str, Any], acknowledged: dict[str, str]) -> list[tuple[str, str]]:
    """The requests of ``obj`` not handled yet, in order (reset, force, reconcile), with their values;
    ``acknowledged`` (status field -> value) wins over the object's status (written, maybe not read back yet)."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    status = obj.get("status") or {}
    out = []
    for request, (_, ack) in REQUESTS.items():
        value = asked(annotations, request)
        if value and value != acknowledged.get(ack, status.get(ack)):
            out.append((request, value))
    return out


@dataclass
class Requests:
    """Handles the request annotations of ``objects``' Packages: ``run(key, force)`` runs one pass (the
    operator's upgrade), ``reset(key)`` zeroes the failure counters, ``acknowledge(ref, field, value)`` records
    it in status."""

    objects: PackageObjects
    book: ReleaseBook
    run: Callable[[ReleaseKey, bool], Awaitable[object]]
    reset: Callable[[ReleaseKey], None]
    acknowledge: Callable[[tuple[str, str], str, str], None]
    acting: Callable[[], bool]
    spawn: Callable[[Coroutine[Any, Any, None]], object]
    _acked: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    _busy: set[tuple[str, str]] = field(default_factory=set)

    def on_signal(self, signal: EngineSignal) -> None:
        """Taking the Lease over: requests made while another instance acted (or none did)."""
        if isinstance(signal, LeaseChanged) and signal.leader:
            self.sweep()

    def sweep(self) -> None:
        """Look for new requests on every Package object (after each burst of changes, on taking the Lease)."""
        if not self.acting():
            return
        specs = {(s.namespace, s.name): (k, s) for k, s in self.book.packages.items()}
        for obj in self.objects.objects(PACKAGES).values():
            meta = obj.get("metadata") or {}
            ref = (str(meta.get("namespace")), str(meta.get("name")))
            if ref in self._busy or deleting(obj) or ref not in specs:
                continue
            todo = pending(obj, self._acked.get(ref, {}))
            if todo:
                self._busy.add(ref)
                self.spawn(self._handle(ref, *specs[ref], todo))

    async def _handle(self, ref: tuple[str, str], key: ReleaseKey, spec: PackageSpec,
                      todo: list[tuple[str, str]]) -> None:
        try:
            requests = dict(todo)
            if "reset" in requests:
                self.reset(key)
            if not spec.suspend:  # a suspended package is left alone, as Flux does; the request is still acked
                while True:
                    if not self.acting():
                        return  # the Lease went elsewhere: the next holder handles it
                    try:
                        await self.run(key, "force" in requests)
                        break
                    except ActionRefused as exc:
                        log.info("request on Package %s/%s waits: %s", *ref, exc)
                        await asyncio.sleep(RETRY)
            for request, value in todo:
                ack = REQUESTS[request][1]
                self._acked.setdefault(ref, {})[ack] = value
                self.acknowledge(ref, ack, value)
                self.book.log(key, "request", "info", f"{request} requested at {value}: handled")
        finally:
            self._busy.discard(ref)
        self.sweep()  # a request made while this one ran
