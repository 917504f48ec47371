"""The app attached to a ``helmdeck controller``: its Package objects shown as packages, the operator's actions
made requests on them.

- Finding a controller: a controller's Lease carries the label ``wire.ROLE: controller`` and, as
  annotations, its ``--watch-namespace`` list and where its metrics are served
  (:mod:`engine.runtime.drive.lease`). The Leases so labelled are listed every ``every`` seconds; one whose
  holder renewed it within its ``leaseDurationSeconds`` (plus two rounds of slack) is live, as client-go's
  leader election counts a holder alive.
- Attached: while one is live, the Package objects of the namespaces it covers are read and watched
  (:class:`~engine.runtime.cluster.objects.PackageObjects`, the same loader), and each becomes its release's
  package in the book, marked :class:`~engine.runtime.state.Attached`: the row follows the object's status
  (conditions, failure counters, ``lastAttemptedRevision``), its release in storage and the controller's
  Events on the object (the release's log). The controller's running action is the one its latest
  ``<Action>Started`` Event names until an Event of that action ends it (:func:`started`,
  :func:`still_running`; the rule: ``ReleaseBook``'s ``_controller_running``), else a ``pending-*``
  revision's.
- Requests: the gate still decides whether an action may run (:mod:`engine.runtime.ledger.gate`); attached,
  it is carried out by the controller: :meth:`Attachment.request` writes the request annotation the
  controller handles once (:mod:`engine.runtime.cluster.annotation_requests`), or for suspend and maintenance, which are
  the spec's own fields, patches the spec.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from engine.base.wire import (
    API_VERSION,
    CONTROLLER,
    METRICS,
    ROLE,
    ROLLBACK_REVISION,
    SELECTOR,
    SHARD,
    STARTED,
    WATCH_NAMESPACES,
)
from engine.kube import rest
from engine.monitor.events import KEEP, KubeEvent
from engine.package.model import DEFAULT_TIMEOUT, PackageSpec
from engine.reconcile import conditions as cond
from engine.reconcile.conditions import Condition
from engine.reconcile.status import ActionOutcome, FailureCounts
from engine.runtime.cluster.annotation_requests import REQUESTS, pending
from engine.runtime.cluster.object_status import object_ref
from engine.runtime.cluster.objects import PACKAGES, PackageObjects, deleting
from engine.runtime.drive.lease import age
from engine.runtime.ledger.book import ActionRefused, ReleaseBook
from engine.runtime.state import (
    Attached,
    ControllerChanged,
    ControllerInfo,
    LogEntry,
    ReleaseKey,
    Requested,
    RunningAction,
)
from engine.storage.helmtime import helm_time

log = logging.getLogger(__name__)

EVERY = 2.0  # seconds between two reads of the controllers' Leases
LOGGED = 4 * KEEP  # Events remembered as logged: more than the watches of a few namespaces keep
# The app's actions the controller carries out, and the request annotation each writes (suspend and
# maintenance patch the spec instead); "reconcile" is a pass nobody forced (after a pin).
REQUEST_OF = {"upgrade": "force", "reconcile": "reconcile", "rollback": "rollback", "unlock": "unlock",
              "cancel": "cancel", "pause": "pause", "resume": "resume"}
# What the app shows a pending request as (the app's action names), by request.
_SHOWN = {**{request: action for action, request in REQUEST_OF.items()}, "reset": "reset"}
_VERBS = {"upgrade": "upgrades", "reconcile": "reconciles", "rollback": "rolls back", "unlock": "unlocks",
          "cancel": "cancels the action on", "pause": "pauses the monitor of", "resume": "resumes the monitor of",
          "suspend": "suspends", "resume-package": "resumes", "maintenance": "puts in maintenance",
          "leave-maintenance": "takes out of maintenance"}


def now_text() -> str:
    """A request's value: the time now, RFC 3339 with microseconds (two requests in one second differ)."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def live_controllers(leases: Iterable[dict[str, Any]], slack: float = 2 * EVERY) -> tuple[ControllerInfo, ...]:
    """The controllers of ``leases`` (Lease objects) whose holder renewed within the Lease's duration plus
    ``slack`` seconds, by Lease; a released Lease (no holder) is none."""
    out = []
    for lease in leases:
        meta, spec = lease.get("metadata") or {}, lease.get("spec") or {}
        holder, renewed = str(spec.get("holderIdentity") or ""), spec.get("renewTime")
        duration = float(spec.get("leaseDurationSeconds") or 15)
        if not holder or not renewed or age(renewed) > duration + slack:
            continue
        notes, marks = meta.get("annotations") or {}, meta.get("labels") or {}
        watched = tuple(n for n in str(notes.get(WATCH_NAMESPACES) or "").split(",") if n)
        out.append(ControllerInfo(holder, f"{meta.get('namespace')}/{meta.get('name')}",
                                  helm_time(str(renewed)) or 0.0, duration, watched, str(notes.get(METRICS) or ""),
                                  str(marks.get(SHARD) or ""), str(notes.get(SELECTOR) or "")))
    return tuple(sorted(out, key=lambda c: c.lease))


def read_controllers(api: client.ApiClient) -> tuple[ControllerInfo, ...]:
    """The live controllers of the cluster (blocking). Raises ApiException (403: the app needs ``list`` on
    ``leases.coordination.k8s.io`` at cluster scope)."""
    body = rest.get_json(api, rest.path("coordination.k8s.io/v1", "leases"),
                         [("labelSelector", f"{ROLE}={CONTROLLER}")])
    return live_controllers(body.get("items") or ())


def attached_state(conditions: tuple[Condition, ...], generation: int, observed: int) -> str:
    """The release state the row shows for the controller's status: a projection of its conditions (the
    controller decided), OutOfSync while a spec change waits for its pass."""
    if cond.is_true(conditions, cond.STALLED):
        return "Stalled"
    ready = cond.get(conditions, cond.READY)
    if generation > observed or ready is None:
        return "OutOfSync"
    if ready.status == "Unknown":  # in maintenance the release is left as deployed: in sync, as the app shows it
        return "InSync" if ready.reason == cond.IN_MAINTENANCE else "OutOfSync"
    return "InSync" if ready.status == "True" else "Failed"


def attached_fields(obj: dict[str, Any], spec: PackageSpec, holder: str, lease: str = "") -> dict[str, Any]:
    """The release view's fields (``ReleaseView``) a Package object and its status give; ``holder`` and
    ``lease``: the live controller covering it."""
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    owner: dict[str, Any] = status["controller"] if isinstance(status.get("controller"), dict) else {}
    conditions = tuple(
        Condition(str(c.get("type")), "True" if c.get("status") == "True" else "False" if c.get("status") == "False"
                  else "Unknown",
                  str(c.get("reason") or ""), str(c.get("message") or ""),
                  helm_time(str(c.get("lastTransitionTime") or "")) or 0.0)
        for c in status.get("conditions") or () if isinstance(c, dict))
    generation, observed = int(meta.get("generation") or 0), int(status.get("observedGeneration") or 0)
    ready = cond.get(conditions, cond.READY)
    todo = pending(obj, {})
    tokens = {v for r, v in todo if r in ("force", "reset")}  # their reconcile request is part of them
    asked = tuple(dict.fromkeys(_SHOWN[r] for r, v in todo if r != "reconcile" or v not in tokens))
    return {
        "package": spec,
        "attached": Attached((str(meta.get("namespace")), str(meta.get("name"))), holder, generation, observed,
                             str(status.get("lastAttemptedRevision") or ""),
                             str(status.get("lastAppliedRevision") or ""), asked, lease,
                             str(owner.get("replica") or ""), str(owner.get("shard") or "")),
        "conditions": conditions,
        "ready": None if ready is None or ready.status == "Unknown" else ready.status == "True",
        "state": attached_state(conditions, generation, observed),
        "suspended": spec.suspend,
        "maintenance": spec.maintenance,
        "failures": FailureCounts(int(status.get("installFailures") or 0), int(status.get("upgradeFailures") or 0),
                                  int(status.get("failures") or 0)),
    }


def started(event: KubeEvent, spec: PackageSpec | None) -> RunningAction | None:
    """The action a controller's ``<Action>Started`` Event (engine.runtime.cluster.object_status.event_reason)
    says it began on the Package: the Event's ``action`` (``upgrade``, ``correct-drift``; from the reason when
    none), since the Event's time, with the package's helm timeout (seconds); None for any other Event."""
    if event.warning or not event.reason.endswith(STARTED) or event.reason == STARTED:
        return None
    action = event.action or re.sub(r"(?<!^)(?=[A-Z])", "-", event.reason.removesuffix(STARTED)).lower()
    return RunningAction(action, event.at, spec.action_timeout(action) if spec is not None else DEFAULT_TIMEOUT)


def ended_action(event: KubeEvent, outcome: str) -> str | None:
    """The action ``event``, an Event that is no start (:func:`started` gives None; its ``outcome`` as the log
    reads it), ends: its ``action`` (``UpgradeSucceeded``, ``UpgradeCancelled``, ``DriftCorrected``: whatever
    came of that action), or, from a controller whose Events name no action, ``""`` (any action) for a success
    or failure; else None."""
    if event.action:
        return event.action
    return "" if outcome != "info" else None


def still_running(begun: RunningAction, ended: dict[str, float]) -> bool:
    """Whether ``begun`` runs yet, given when each action last ended (``ended``: action -> Event time, ``""``
    any action): no end of its action at or after its start. The order the Events were read in does not
    matter (a new watch lists them in name order)."""
    return max(ended.get(begun.action, -1.0), ended.get("", -1.0)) < begun.started


class Attachment:
    """Finds the live controllers through ``api`` and attaches the book to them (see the module docstring).
    ``namespaces``: the app's scope (None: all); ``events(namespace, callback)`` watches a namespace's
    Kubernetes Events, those already seen first (returns the unsubscribe; an Event may come twice)."""

    def __init__(self, api: client.ApiClient, book: ReleaseBook, namespaces: list[str] | None,
                 events: Callable[[str, Callable[[KubeEvent], None]], Callable[[], None]], *, every: float = EVERY):
        self._api, self._book, self._namespaces = api, book, namespaces
        self._events = events
        self.every = every
        self.controllers: tuple[ControllerInfo, ...] = ()
        self._objects: PackageObjects | None = None
        self._watching: asyncio.Task[None] | None = None
        self._keys: dict[tuple[str, str], ReleaseKey] = {}  # object ref -> its release
        self._event_watches: dict[str, Callable[[], None]] = {}
        self._last: dict[ReleaseKey, ActionOutcome] = {}  # the controller's last action on each, from its Events
        self._begun: dict[ReleaseKey, RunningAction] = {}  # the latest start its Events name
        self._ended: dict[ReleaseKey, dict[str, float]] = {}  # action -> the latest Event ending it
        # (uid, time) of the Events put in the log, the newest LOGGED; kept across attachments
        self._logged: dict[tuple[str, float], None] = {}
        # origin -> (resourceVersion, holder, spec, its view fields): a burst projects only the objects it changed
        self._projected: dict[Path, tuple[str, str, PackageSpec, dict[str, Any]]] = {}
        self.problem = ""
        self.read = asyncio.Event()  # set once the Leases were read (and the live ones' objects shown) once

    def attached(self, key: ReleaseKey) -> Attached | None:
        """``key``'s object when a live controller reconciles its package, else None."""
        view = self._book.view(key)
        return view.attached if view is not None and key not in self._book.packages else None

    def controller_of(self, namespace: str, labels: dict[str, str] | None = None) -> ControllerInfo | None:
        """The live controller reconciling a Package of ``namespace`` labelled ``labels`` (its shard's)."""
        return next((c for c in self.controllers if c.covers(namespace, labels)), None)

    async def run(self) -> None:
        """Follow the controllers' Leases until cancelled."""
        try:
            while True:
                try:
                    found = await asyncio.to_thread(read_controllers, self._api)
                    self.problem = ""
                except (ApiException, OSError, HTTPError) as exc:  # HTTPError: urllib3's, the server unreachable
                    found = self.controllers  # a blip: what was known stays until the next read
                    problem = f"controller Leases unreadable: {getattr(exc, 'reason', exc)}"
                    if problem != self.problem:
                        log.warning("%s", problem)
                    self.problem = problem
                if found != self.controllers:
                    await self._set(found)
                self.read.set()
                await asyncio.sleep(self.every)
        finally:
            await self._detach()

    async def _set(self, found: tuple[ControllerInfo, ...]) -> None:
        holders = {c.lease: c.holder for c in self.controllers}
        self.controllers = found
        self._book.emit_changed(ControllerChanged(found[0] if found else None), unsaid=ControllerChanged(None))
        if not found:
            await self._detach()
        elif self._objects is None:
            self._objects = PackageObjects(self._api, self._namespaces)
            try:
                await asyncio.to_thread(self._objects.load)
            except (ApiException, OSError, HTTPError) as exc:
                self.problem = f"Package objects unreadable: {getattr(exc, 'reason', exc)}"
                log.warning("%s", self.problem)
                self._objects = None
                return
            self._objects.on_burst(lambda _origins: self._show())  # whatever the burst changed
            self._show()
            self._watching = asyncio.create_task(self._watch(self._objects), name="attach-packages")
        elif holders != {c.lease: c.holder for c in found}:
            self._show()

    async def _watch(self, objects: PackageObjects) -> None:
        async for _update in objects.watch():
            pass  # each burst calls _show (metadata and status changes included)

    async def _detach(self) -> None:
        if self._objects is not None:
            self._objects.stop()
        if self._watching is not None:
            self._watching.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watching
        self._objects, self._watching = None, None
        for unsubscribe in self._event_watches.values():
            unsubscribe()
        self._event_watches.clear()
        self._keys.clear()
        self._last.clear()
        self._begun.clear()
        self._ended.clear()
        self._projected.clear()
        self._book.set_attached({})

    def _show(self) -> None:
        """The book's attached packages from the objects known now (once per burst of changes; an object is
        projected again only when it or its controller changed)."""
        if self._objects is None:
            return
        specs = {s.file: (k, s) for k, s in self._objects.specs().items()}
        fields: dict[ReleaseKey, dict[str, Any]] = {}
        keys: dict[tuple[str, str], ReleaseKey] = {}
        covering: dict[tuple[str, tuple[tuple[str, str], ...]], ControllerInfo | None] = {}  # (ns, labels) ->
        for origin, obj in self._objects.objects(PACKAGES).items():
            found, ref = specs.get(origin), object_ref(origin)
            if found is None or ref is None or deleting(obj) or found[0] in self._book.packages:
                continue  # a package file of this app's own set wins: that one this app drives
            key, spec = found
            labels = (obj.get("metadata") or {}).get("labels") or {}
            seen = (ref[0], tuple(sorted(labels.items())) if any(c.selector for c in self.controllers) else ())
            if seen not in covering:  # a shard's controller covers the objects its selector matches
                covering[seen] = self.controller_of(ref[0], dict(seen[1]))
            controller = covering[seen]
            if controller is None:
                continue
            holder = controller.holder
            version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
            cached = self._projected.get(origin)
            if cached is None or cached[:3] != (version, holder, spec):
                cached = (version, holder, spec, attached_fields(obj, spec, holder, controller.lease))
                self._projected[origin] = cached
            running = self._running(key)
            fields[key] = {**cached[3], **({"last": self._last[key]} if key in self._last else {}),
                           **({"running": running} if running is not None else {})}
            keys[ref] = key
        self._keys = keys
        self._projected = {o: p for o, p in self._projected.items() if o in specs}
        for namespace in {ref[0] for ref in keys} - set(self._event_watches):
            self._event_watches[namespace] = self._events(namespace, self._on_event)
        self._book.set_attached(fields)

    def _on_event(self, event: KubeEvent) -> None:
        """The controller's Event on a Package object: an entry in its release's log."""
        key = self._keys.get((event.namespace, event.name)) if event.kind == "Package" else None
        if key is None:
            return
        outcome = "failed" if event.warning else "succeeded" if event.reason.endswith("Succeeded") else "info"
        if (event.uid, event.at) not in self._logged:  # given again (replayed to a watch joined late): logged once
            self._logged[(event.uid, event.at)] = None
            if len(self._logged) > LOGGED:
                del self._logged[next(iter(self._logged))]
            self._book.add_event(LogEntry(event.at, key, event.name, event.reason, outcome, event.message))
        # Below, an Event given twice changes nothing more, and the order Events come in does not matter.
        view = self._book.view(key)
        was = self._running(key)
        begun = started(event, view.package if view is not None else None)
        if begun is not None:
            latest = self._begun.get(key)
            if latest is None or begun.started > latest.started:
                self._begun[key] = begun
        else:
            ending = ended_action(event, outcome)
            if ending is not None:
                ended = self._ended.setdefault(key, {})
                ended[ending] = max(ended.get(ending, -1.0), event.at)
        running = self._running(key)
        if running != was:
            self._book.update_attached(key, running=running)
        last = self._last.get(key)
        if outcome != "info" and (last is None or event.at >= last.at):
            # an action's end: the row's LAST ACTION (Flux's reason names it: UpgradeSucceeded); not an older one
            # read late
            action = event.reason.removesuffix("Succeeded").removesuffix("Failed").lower() or event.reason
            self._last[key] = ActionOutcome(action, outcome == "succeeded", event.message, at=event.at)
            self._book.update_attached(key, last=self._last[key])

    def _running(self, key: ReleaseKey) -> RunningAction | None:
        """The controller's action on ``key`` its Events say started and has not ended."""
        latest = self._begun.get(key)
        return latest if latest is not None and still_running(latest, self._ended.get(key, {})) else None

    async def patch(self, origin: Path, body: dict[str, Any]) -> None:
        """Merge-patch the API object ``origin`` (its API path, :func:`engine.package.load.object_origin`): a
        version pinned by the picker. Raises ApiException."""
        await asyncio.to_thread(rest.send, self._api, "PATCH", str(origin), body, content_type=rest.MERGE_PATCH)

    async def request(self, key: ReleaseKey, action: str, *, revision: int = 0, value: bool | str = True) -> Requested:
        """Have the controller carry ``action`` out on ``key``'s Package object: its request annotation, or
        for ``suspend`` (``value`` True/False) and ``maintenance`` (``value`` the mode, "" to leave) a patch of
        its spec. ``revision``: the rollback's target (0: the previous one). Raises ActionRefused (not
        attached), ApiException."""
        found = self.attached(key)
        if found is None:
            raise ActionRefused(f"{key[0]}/{key[1]} is not a Package object a live controller reconciles")
        ns, name = found.ref
        body: dict[str, Any]
        shown = action
        if action == "suspend":
            body, shown = {"spec": {"suspend": bool(value)}}, "suspend" if value else "resume-package"
            said = f"spec.suspend: {str(bool(value)).lower()}"
        elif action == "maintenance":
            body, shown = {"spec": {"maintenance": value or None}}, "maintenance" if value else "leave-maintenance"
            said = f"spec.maintenance: {value or '(none)'}"
        else:
            names, _ = REQUESTS[REQUEST_OF[action]]
            stamp = now_text()
            notes = {names[0]: stamp}
            if REQUEST_OF[action] in ("force", "reset"):  # acted on only with a reconcile request of its value
                notes[REQUESTS["reconcile"][0][0]] = stamp
            if action == "rollback":
                notes[ROLLBACK_REVISION] = str(revision)
            body = {"metadata": {"annotations": notes}}
            said = ", ".join(f"{k}={v}" for k, v in notes.items())
        await asyncio.to_thread(rest.send, self._api, "PATCH", rest.path(API_VERSION, PACKAGES, ns, name), body,
                                content_type=rest.MERGE_PATCH)
        target = f" to revision {revision}" if action == "rollback" and revision else ""
        text = f"requested: the controller {_VERBS[shown]} {key[0]}/{key[1]}{target} ({said})"
        self._book.log(key, "request", "info", text)
        return Requested(key, found.ref, action, text)
