"""Requests by annotation on a Package object, as Flux's CLI makes them, each handled once and acknowledged in
status (the ``lastHandled*At`` fields, as Flux's ``ReconcileRequestStatus``).

The annotations are :mod:`engine.base.wire`'s:

- reconcile now: ``RECONCILE_REQUEST``, or Flux's ``FLUX_RECONCILE_REQUEST`` (``reconcile.fluxcd.io/requestedAt``);
- force an upgrade (even in sync): ``FORCE_REQUEST`` (Flux's ``FLUX_FORCE_REQUEST``);
- reset the failure counters, then reconcile: ``RESET_REQUEST`` (Flux's ``FLUX_RESET_REQUEST``);
- the app's actions, helmdeck's own: ``ROLLBACK_REQUEST`` (to ``ROLLBACK_REVISION``, default the previous one;
  the package is then held, as after the app's rollback, until a forceAt), ``UNLOCK_REQUEST`` (a pending
  revision marked failed), ``CANCEL_REQUEST`` (the running action stopped, its pending revision unlocked, the
  package held), ``PAUSE_REQUEST`` and ``RESUME_REQUEST`` (the resource monitor).

A force or a reset acts only when its value equals the reconcile request's, itself not handled yet (as
``flux reconcile helmrelease --force``/``--reset`` write both): another value is acknowledged and does
nothing, as Flux's ``HandleAnnotationRequest`` (fluxcd/pkg/apis/meta annotations.go) decides.

A request is a new annotation value: one that differs from the acknowledged one. It is acknowledged once its
pass has ended (a pass refused because another action runs is tried again shortly), so a restarted or a
taking-over controller never handles it twice: the acknowledgement lives in the object's status.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.base import wire
from engine.package.load import object_origin
from engine.package.model import PackageSpec
from engine.runtime.cluster.objects import PACKAGES, PackageObjects, deleting
from engine.runtime.ledger.book import ActionRefused, ReleaseBook
from engine.runtime.state import EngineSignal, LeaseChanged, ReleaseKey

log = logging.getLogger(__name__)

RETRY = 2.0  # seconds before a request refused (busy) is tried again
_PASSES = ("reset", "force", "reconcile")  # requests followed by a pass, acknowledged when it ended
# request -> (the annotations asking it, helmdeck's first; the status field acknowledging it), in the order
# they are handled (a cancel first: it stops what runs; a reconcile last: after the rest)
REQUESTS: dict[str, tuple[tuple[str, ...], str]] = {
    "cancel": ((wire.CANCEL_REQUEST,), "lastHandledCancelAt"),
    "reset": ((wire.RESET_REQUEST, wire.FLUX_RESET_REQUEST), "lastHandledResetAt"),
    "unlock": ((wire.UNLOCK_REQUEST,), "lastHandledUnlockAt"),
    "rollback": ((wire.ROLLBACK_REQUEST,), "lastHandledRollbackAt"),
    "pause": ((wire.PAUSE_REQUEST,), "lastHandledPauseAt"),
    "resume": ((wire.RESUME_REQUEST,), "lastHandledResumeAt"),
    "force": ((wire.FORCE_REQUEST, wire.FLUX_FORCE_REQUEST), "lastHandledForceAt"),
    "reconcile": ((wire.RECONCILE_REQUEST, wire.FLUX_RECONCILE_REQUEST), "lastHandledReconcileAt"),
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


_TOKENS = ("force", "reset")  # requests whose value must be the reconcile request's to act


def unmatched(todo: list[tuple[str, str]]) -> set[str]:
    """Of the pending requests ``todo`` (:func:`pending`'s), the force and reset whose value is not that of a
    pending reconcile request: acknowledged without acting, as Flux's ``HandleAnnotationRequest`` decides."""
    reconcile = dict(todo).get("reconcile")
    return {r for r, v in todo if r in _TOKENS and v != reconcile}


@dataclass(frozen=True)
class Actions:
    """What the requests may do (the engine's operations): ``run(key, force)`` one pass (the operator's
    upgrade), ``reset(key)`` zero the failure counters, ``rollback(key, revision)``, ``unlock(key)``,
    ``cancel(key, by, undo)`` (at once, without waiting: it stops the running action; ``by`` who asked and
    ``undo`` how to roll back to ``{revision}``, in its outcome's words), ``pause(key)``/``resume(key)``
    the monitor. Each raises ActionRefused when it cannot act now."""

    run: Callable[[ReleaseKey, bool], Awaitable[object]]
    reset: Callable[[ReleaseKey], None]
    rollback: Callable[[ReleaseKey, int], Awaitable[object]]
    unlock: Callable[[ReleaseKey], Awaitable[object]]
    cancel: Callable[[ReleaseKey, str, str], Awaitable[object]]
    pause: Callable[[ReleaseKey], object]
    resume: Callable[[ReleaseKey], object]


@dataclass
class Requests:
    """Handles the request annotations of ``objects``' Packages through ``actions``;
    ``acknowledge(ref, field, value)`` records one in status."""

    objects: PackageObjects
    book: ReleaseBook
    actions: Actions
    acknowledge: Callable[[tuple[str, str], str, str], None]
    acting: Callable[[], bool]
    spawn: Callable[[Coroutine[Any, Any, None]], object]
    _acked: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    _busy: set[tuple[str, str]] = field(default_factory=set)
    _cancels: set[tuple[str, str]] = field(default_factory=set)  # cancel requests under way or done
    # --shards auto: is the Package object ``ref`` placed on this replica (only its replica handles requests)?
    mine: Callable[[tuple[str, str]], bool] = lambda _ref: True

    def on_signal(self, signal: EngineSignal) -> None:
        """Taking the Lease over: requests made while another instance acted (or none did)."""
        if isinstance(signal, LeaseChanged) and signal.leader:
            self.sweep()

    def sweep(self, origins: Collection[Path] | None = None) -> None:
        """Look for new requests on the Package objects ``origins`` (those of a burst of changes; None: every
        one, on taking the Lease)."""
        if not self.acting():
            return
        objects = self.objects.objects(PACKAGES) if origins is None else \
            {o: obj for o in origins if (obj := self.objects.get(o)) is not None}
        for origin, obj in objects.items():
            meta = obj.get("metadata") or {}
            ref = (str(meta.get("namespace")), str(meta.get("name")))
            latest = self.objects.spec(origin)
            spec = self.book.packages.get(latest.key) if latest is not None else None
            if deleting(obj) or spec is None or spec.file != origin or not self.mine(ref):
                continue
            todo = pending(obj, self._acked.get(ref, {}))
            cancel = dict(todo).get("cancel")
            if cancel is not None and ("cancel", cancel) not in self._cancels:  # not behind what it stops
                self._cancels.add(("cancel", cancel))
                self.spawn(self._cancel(ref, spec.key, cancel))
            todo = [(r, v) for r, v in todo if r != "cancel"]
            if todo and ref not in self._busy:
                self._busy.add(ref)
                annotations = meta.get("annotations") or {}
                self.spawn(self._handle(ref, spec.key, spec, todo, str(annotations.get(wire.ROLLBACK_REVISION, "0"))))

    def _ack(self, ref: tuple[str, str], key: ReleaseKey, request: str, value: str, problem: str = "") -> None:
        ack = REQUESTS[request][1]
        self._acked.setdefault(ref, {})[ack] = value
        self.acknowledge(ref, ack, value)
        if problem:
            self.book.log(key, "request", "failed", f"{request} requested at {value}: {problem}")
        else:
            self.book.log(key, "request", "info", f"{request} requested at {value}: handled")

    async def _cancel(self, ref: tuple[str, str], key: ReleaseKey, value: str) -> None:
        try:
            await self.actions.cancel(key, f"by request ({REQUESTS['cancel'][0][0]} {value})",
                                      f"request a rollback to revision {{revision}} ({wire.ROLLBACK_REVISION}: "
                                      f"\"{{revision}}\" and {REQUESTS['rollback'][0][0]})")
            self._ack(ref, key, "cancel", value)
        except ActionRefused as exc:  # nothing runs: said, and handled all the same
            self._ack(ref, key, "cancel", value, str(exc))

    async def _handle(self, ref: tuple[str, str], key: ReleaseKey, spec: PackageSpec,
                      todo: list[tuple[str, str]], revision: str) -> None:
        try:
            ignored = unmatched(todo)
            for request in ignored:
                names, reconcile = REQUESTS[request][0], REQUESTS["reconcile"][0]
                self._ack(ref, key, request, dict(todo)[request],
                          f"not acted on: its value is not that of a new reconcile request ({reconcile[0]} or "
                          f"{reconcile[1]}); write both with the same value, as `flux reconcile helmrelease "
                          f"--{request}` does ({names[0]} or {names[1]})")
            todo = [(r, v) for r, v in todo if r not in ignored]
            for request, value in todo:
                if request in _PASSES and request != "reset":
                    continue
                try:
                    await self._one(key, request, revision)
                    if request != "reset":  # a reset is acknowledged once its pass ended
                        self._ack(ref, key, request, value)
                except (ActionRefused, ValueError) as exc:
                    self._ack(ref, key, request, value, str(exc))
            # A reset is followed by a pass, as Flux's; a suspended package is left alone (still acknowledged).
            runs = [(r, v) for r, v in todo if r in _PASSES]
            if runs and not spec.suspend:
                while True:
                    if not self.acting():
                        return  # the Lease went elsewhere: the next holder handles it
                    try:
                        await self.actions.run(key, any(r == "force" for r, _ in runs))
                        break
                    except ActionRefused as exc:
                        log.info("request on Package %s/%s waits: %s", *ref, exc)
                        await asyncio.sleep(RETRY)
            for request, value in runs:
                self._ack(ref, key, request, value)
        finally:
            self._busy.discard(ref)
        self.sweep([object_origin(PACKAGES, *ref)])  # a request made while this one ran

    async def _one(self, key: ReleaseKey, request: str, revision: str) -> None:
        """Run one of the requests that are not a pass. Raises ActionRefused, ValueError (a bad revision)."""
        if request == "reset":
            self.actions.reset(key)
        elif request == "unlock":
            await self.actions.unlock(key)
        elif request == "rollback":
            if not revision.isdigit():
                raise ValueError(f"{wire.ROLLBACK_REVISION} {revision!r} is not a revision number")
            await self.actions.rollback(key, int(revision))
        elif request == "pause":
            self.actions.pause(key)
        elif request == "resume":
            self.actions.resume(key)
