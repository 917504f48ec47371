"""What `helmdeck controller` writes back on the Package objects: status in Flux's HelmRelease shape (the
status subresource) and Kubernetes Events with Flux's reasons, so ``kubectl get pkg``, ``kubectl describe pkg``
and ``kubectl events`` show what the engine did.

:func:`flux_status` is the projection of the engine's status (:class:`~engine.reconcile.status.EngineStatus`,
kept by the release book) onto the CRD's status fields (:data:`engine.package.schema.PACKAGE_STATUS`);
:class:`StatusWriter` follows the book's signals: a changed release view rewrites its object's status (only
when the projection changed), an action's start and its end each become an Event (``reportingInstance``: this
replica, ``action``: the engine's action, ``eventTime`` to the microsecond: an audit can tell which replica acted
on a release when), and a problem only the loader can find
(references, cycles, limits) becomes Ready=False, reason ``InvalidPackage``, with the loader's words and a
Warning Event. Writes run off the event loop; an object deleted meanwhile is skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from engine.base.fields import PackageError
from engine.base.wire import API_VERSION, REQUEST_FAILED, STARTED
from engine.package.load import object_origin
from engine.package.model import KIND, PackageSpec
from engine.reconcile import conditions as cond
from engine.reconcile.status import EngineStatus
from engine.runtime.cluster.objects import PACKAGES, PackageObjects
from engine.runtime.ledger.book import ReleaseBook
from engine.runtime.state import (
    EngineSignal,
    EntryLogged,
    LeaseChanged,
    LogEntry,
    PackageProblems,
    PassFinished,
    ReleaseKey,
    ReleaseUpdated,
)
from engine.storage.snapshot import Snapshot

log = logging.getLogger(__name__)

GROUP, VERSION = API_VERSION.split("/")
COMPONENT = "helmdeck-controller"
MAX_MESSAGE = 1024  # an Event's message, as client-go's recorder truncates it
MAX_FIELD = 128  # an Event's reportingInstance and action (the API server's validation)
# The engine's actions, as Flux names them in reasons (<Action>Succeeded / <Action>Failed).
_ACTION_REASONS = {"install": "Install", "upgrade": "Upgrade", "test": "Test", "rollback": "Rollback",
                   "uninstall": "Uninstall", "uninstall-remediation": "Uninstall", "prune": "Uninstall"}
_OTHER_REASONS = {("correct-drift", "succeeded"): cond.DRIFT_CORRECTED, ("unlock", "succeeded"): cond.UNLOCKED,
                  ("reconcile", "failed"): cond.RECONCILE_ERROR,
                  ("request", "failed"): REQUEST_FAILED}


def rfc3339(seconds: float) -> str:
    """``2026-12-01T10:00:00Z`` (Kubernetes' time format, seconds precision)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def flux_test_hooks(snapshot: Snapshot) -> dict[str, dict[str, Any]]:
    """A snapshot's ``testHooks`` as helm-controller writes them once tests ran (internal/release/observation.go
    ``TestHooksFromRelease``; api/v2 ``TestHookStatus``): by hook name, ``lastStarted``/``lastCompleted`` as
    ``metav1.Time`` (seconds, UTC, as the snapshot holds them; ``null`` when unset), ``phase`` when set."""
    return {h.name: {"lastStarted": h.started_at or None, "lastCompleted": h.completed_at or None,
                     **({"phase": h.phase} if h.phase else {})} for h in snapshot.test_hooks}


def flux_snapshot(s: Snapshot) -> dict[str, Any]:
    """One ``status.history`` entry as helm-controller v1.6.3 writes its api/v2 ``Snapshot``: ``omitempty``
    fields (``apiVersion``, ``action``, ``appVersion``, ``ociDigest``) left out when empty, a zero ``metav1.Time``
    (``null``, which the API server drops) left out, ``testHooks`` once tests ran (:func:`flux_test_hooks`); and
    helmdeck's ``chart`` (``name@version``, the app's CHART column)."""
    out: dict[str, Any] = {
        "apiVersion": s.api_version, "digest": s.digest, "name": s.name, "namespace": s.namespace,
        "version": s.version, "status": s.status, "action": s.action, "chart": f"{s.chart_name}@{s.chart_version}",
        "chartName": s.chart_name, "chartVersion": s.chart_version, "appVersion": s.app_version,
        "configDigest": s.config_digest, "firstDeployed": s.first_deployed, "lastDeployed": s.last_deployed,
        "deleted": s.deleted, "ociDigest": s.oci_digest}
    for key in ("apiVersion", "action", "appVersion", "firstDeployed", "lastDeployed", "deleted", "ociDigest"):
        if not out[key]:
            del out[key]
    if any(h.phase for h in s.test_hooks):  # Flux records them when its Test action ran
        out["testHooks"] = flux_test_hooks(s)
    return out


def event_reason(entry: LogEntry) -> str | None:
    """The Flux reason of a finished action (``InstallSucceeded``, ``UpgradeFailed``, ``DriftCorrected``), or
    ``UpgradeCancelled`` (Flux has none: a cancel's account of what stays live); an action's start is
    ``<Action>Started`` (``UpgradeStarted``, ``CorrectDriftStarted``: Flux records none, an audit of who acted
    when needs both ends); None for what is no action's start or end (info)."""
    if entry.outcome == "started":
        return f"{_action_word(entry.action)}{STARTED}"
    if entry.outcome == "cancelled":
        return f"{_ACTION_REASONS.get(entry.action, 'Action')}Cancelled"
    if entry.outcome not in ("succeeded", "failed"):
        return None
    action = _ACTION_REASONS.get(entry.action)
    if action is not None:
        return f"{action}{'Succeeded' if entry.outcome == 'succeeded' else 'Failed'}"
    found = _OTHER_REASONS.get((entry.action, entry.outcome))
    if found is None and entry.outcome == "failed":  # every started action's end is recorded
        return f"{_action_word(entry.action)}Failed"
    return found


def _action_word(action: str) -> str:
    """``Upgrade`` for "upgrade", ``CorrectDrift`` for "correct-drift" (a reason is CamelCase)."""
    return _ACTION_REASONS.get(action) or "".join(part.capitalize() for part in action.split("-"))


def micro_time(seconds: float) -> str:
    """``2026-12-01T10:00:00.123456Z`` (Kubernetes' MicroTime, an Event's ``eventTime``)."""
    whole = int(seconds)
    return f"{rfc3339(whole)[:-1]}.{int((seconds - whole) * 1e6):06d}Z"


def flux_status(status: EngineStatus | None, generation: int,
                invalid: PackageError | None = None, handled: dict[str, str] | None = None,
                controller: dict[str, str] | None = None) -> dict[str, Any]:
    """The Package's ``status`` (Flux's HelmRelease fields) for the engine's ``status`` of its package, the object
    at ``generation``; ``invalid``: the loader's refusal of the current object (Ready=False, ``InvalidPackage``,
    its words); ``handled``: the request annotations acknowledged (``lastHandledReconcileAt``, ...);
    ``controller``: ``{replica, shard}``, who reconciles it (helmdeck's own field)."""
    status = status or EngineStatus()
    conditions = status.conditions
    if invalid is not None:
        conditions = cond.set_condition(conditions, cond.READY, False, cond.INVALID_PACKAGE, problem_text(invalid))
    applied = next((s.chart_version for s in status.history if s.status in ("deployed", "superseded")), "")
    out: dict[str, Any] = {
        "observedGeneration": generation,
        "conditions": [{"type": c.type, "status": c.status, "reason": c.reason or "Unknown",
                        "message": c.message[:32768], "observedGeneration": generation,
                        "lastTransitionTime": rfc3339(c.last_transition or time.time())} for c in conditions],
        "lastAttemptedRevision": status.last_attempted_chart_version,
        **({"lastAttemptedRevisionDigest": status.last_attempted_revision_digest}
           if status.last_attempted_revision_digest else {}),
        "lastAppliedRevision": applied,
        "lastAttemptedReleaseAction": status.last_attempted_release_action,
        "history": [flux_snapshot(s) for s in status.history],
        "failures": status.failures.total,
        "installFailures": status.failures.install,
        "upgradeFailures": status.failures.upgrade,
    }
    # Where the release of the history is stored, as recorded when a pass last ran; none until then, and after a
    # release target change uninstalled it: helm-controller v1.6.3 sets it in internal/controller/
    # helmrelease_controller.go reconcileRelease (after the target check, before any action) and clears it there
    # and in reconcileReleaseDeletion; api/v2 HelmReleaseStatus omits it empty. null: the merge patch removes it.
    out["storageNamespace"] = status.storage_namespace or None
    out.update(handled or {})
    if controller:
        out["controller"] = dict(controller)
    return out


def problem_text(error: PackageError) -> str:
    """The loader's words without the object's path (the object is the one the status is on)."""
    text = f"{error.field}: {error.problem}" if error.field else error.problem
    return f"{text} ({error.fix})" if error.fix else text


def object_ref(origin: Path) -> tuple[str, str] | None:
    """``(namespace, name)`` of a Package object's origin (``.../namespaces/<ns>/packages/<name>``), None
    for anything else (a package file)."""
    parts = origin.parts
    if len(parts) >= 4 and parts[-2] == PACKAGES and parts[-4] == "namespaces":
        return parts[-3], parts[-1]
    return None


@dataclass
class StatusWriter:
    """Writes status and Events on the Package objects of ``objects`` as the ``book`` changes; ``acting()``:
    only the acting instance writes; ``spawn`` runs the writes as background tasks; ``instance``: this replica's
    identity, its Events' ``reportingInstance``."""

    api: client.ApiClient
    book: ReleaseBook
    objects: PackageObjects
    acting: Callable[[], bool]
    spawn: Callable[[Coroutine[Any, Any, None]], object]
    problems: Callable[[], list[PackageError]]  # the loader's current refusals
    controller: dict[str, str] = field(default_factory=dict)  # status.controller: {replica, shard}
    instance: str = COMPONENT
    delay: float = 0.2  # a burst of signals for one release makes one write (a pass's end is written at once)
    handled: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)  # request annotations acked
    _written: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    _pending: dict[tuple[str, str], asyncio.Event] = field(default_factory=dict)  # set: write now, not after delay
    _writing: dict[tuple[str, str], asyncio.Lock] = field(default_factory=dict)  # one write per object at a time
    _invalid: dict[tuple[str, str], PackageError] = field(default_factory=dict)
    _warned: dict[tuple[str, str], str] = field(default_factory=dict)
    _observed: dict[tuple[str, str], int] = field(default_factory=dict)  # generation of the last finished pass
    # --shards auto: is the Package object placed on this replica (only its replica writes its status)?
    mine: Callable[[tuple[str, str]], bool] = lambda _ref: True
    # --shards auto: a package gained from another replica keeps that replica's status until a pass here
    # finished (else the book's view, made before any pass here, is written with observedGeneration 0).
    after_pass_only: bool = False
    # Static shards: the Package object of a release whose Package left this shard (relabelled) while its
    # action ran here, so that action's end Event is still recorded on it.
    left: Callable[[ReleaseKey], tuple[str, str] | None] = lambda _key: None
    _inflight: set[asyncio.Task[Any]] = field(default_factory=set)  # the writes (statuses, Events) under way

    def _spawn(self, write: Coroutine[Any, Any, None]) -> None:
        """Run ``write`` in the background, kept until it ends (:meth:`flush` waits for it)."""
        task = self.spawn(write)
        if isinstance(task, asyncio.Task):
            self._inflight.add(task)
            task.add_done_callback(self._inflight.discard)

    async def flush(self, timeout: float) -> bool:
        """Wait, at most ``timeout`` seconds, for the writes under way (statuses, Events), the burst delay
        cut short. A stopping controller calls it after its actions ended or were cancelled and before it gives
        the Lease up, so a cancelled action's status (Released=False, its failed revision, the failure counted)
        reaches its Package object: else readers see the status of the pass before until another controller's
        first pass. True when every write ended."""
        self.delay = 0.0
        for wake in self._pending.values():
            wake.set()
        pending = set(self._inflight)
        if not pending:
            return True
        _done, late = await asyncio.wait(pending, timeout=timeout)
        if late:
            log.warning("%d status or Event write(s) on Package objects not finished within %.0fs", len(late),
                        timeout)
        return not late

    def start(self) -> Callable[[], None]:
        """Follow the book; returns the unsubscribe function."""
        return self.book.subscribe(self.on_signal)

    def on_signal(self, signal: EngineSignal) -> None:
        if isinstance(signal, LeaseChanged) and signal.leader:
            self.catch_up()
        if not self.acting():
            return
        if isinstance(signal, ReleaseUpdated) and signal.view.package is not None:
            ref = object_ref(signal.view.package.file)
            if ref is not None:
                self.touch(ref)
        elif isinstance(signal, PassFinished):
            ref = object_ref(signal.spec.file)
            generation = self.objects.generation(signal.spec)
            if ref is not None and generation is not None:
                self._observed[ref] = generation
                self.touch(ref, now=True)
        elif isinstance(signal, EntryLogged):
            self._on_entry(signal.event)
        elif isinstance(signal, PackageProblems):
            self._on_problems(signal.errors)

    def catch_up(self) -> None:
        """Write every object's status and the current refusals (at start, and on taking the Lease over: what
        happened before this instance acted)."""
        if not self.acting():
            return
        self._warned.clear()
        self._on_problems(tuple(self.problems()))
        for spec in self.book.packages.values():
            ref = object_ref(spec.file)
            if ref is not None:
                self.touch(ref)

    def reclaim(self, origins: frozenset[Path]) -> None:
        """After a burst of Package object changes (``origins``, ``--shards auto``): a Package placed here whose
        status another replica wrote since this one did is written again. Two replicas whose views of the members
        lag each other can both count a Package theirs for a moment (a pass without a helm action takes no claim)
        and the last status written would name the wrong one until the Package changes again. Per burst: a look at
        each object it changed."""
        me = self.controller.get("replica")
        if not me or not self.acting():
            return
        for origin in origins:
            ref = object_ref(origin)
            if ref is None or ref not in self._written:
                continue
            status = (self.objects.get(origin) or {}).get("status") or {}
            writer = (status.get("controller") or {}).get("replica") if isinstance(status, dict) else None
            if writer and writer != me and self.mine(ref):
                del self._written[ref]
                self.touch(ref)

    def forget(self, keys: Iterable[ReleaseKey]) -> None:
        """Packages gained from another replica (``--shards auto``): what this replica wrote on them before is
        no longer what their objects hold, so the next write is sent whatever it was."""
        for key in keys:
            spec = self.book.packages.get(key)
            ref = object_ref(spec.file) if spec is not None else None
            if ref is not None:
                self._written.pop(ref, None)
                self._observed.pop(ref, None)

    def acknowledge(self, ref: tuple[str, str], field_: str, value: str) -> None:
        """Record a request annotation as handled (``lastHandledReconcileAt``...) in ``ref``'s status."""
        self.handled.setdefault(ref, {})[field_] = value
        self.touch(ref)

    def touch(self, ref: tuple[str, str], *, now: bool = False) -> None:
        """Write ``ref``'s status soon (once per burst), when it is placed on this replica; ``now``: without
        waiting out the burst (a pass ended: its status is whole, and readers wait on its Ready and
        observedGeneration; the takeover bench counted the burst's 0.2 s in every takeover)."""
        if not self.mine(ref):
            return
        wake = self._pending.get(ref)
        if wake is None:
            wake = self._pending[ref] = asyncio.Event()
            self._spawn(self._write_later(ref, wake))
        if now:
            wake.set()

    def _spec(self, ref: tuple[str, str]) -> tuple[ReleaseKey, PackageSpec] | None:
        """The book's package of the object ``ref`` (the book may hold its previous spec for a moment), None
        when the book has none; looked up by its key: a write costs the same whatever the number of packages."""
        spec = self.objects.spec(_origin(ref))
        found = self.book.packages.get(spec.key) if spec is not None else None
        return (found.key, found) if found is not None and found.file == _origin(ref) else None

    async def _write_later(self, ref: tuple[str, str], wake: asyncio.Event) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), self.delay)
        self._pending.pop(ref, None)
        # One write per object at a time, its body made once the one before has landed: two writes in flight
        # could land out of order and leave the older status (an earlier observedGeneration) on the object.
        async with self._writing.setdefault(ref, asyncio.Lock()):
            await self._write(ref)

    async def _write(self, ref: tuple[str, str]) -> None:
        namespace, name = ref
        meta = self.objects.meta(_origin(ref))
        if meta is None:
            return  # deleted meanwhile
        found = self._spec(ref)
        invalid = self._invalid.get(ref)
        generation = int(meta.get("generation") or 0)  # a refusal is about the object as it is now
        if found is not None:
            key = found[0]
            if invalid is None and self.after_pass_only and ref not in self._observed:
                return  # the previous owner's status stands until this replica's first pass ends
            observed = generation if invalid is not None else self._observed.get(ref, 0)
            body = flux_status(self.book.status(key), observed, invalid, self.handled.get(ref), self.controller)
        elif invalid is not None:  # never valid: no spec, only the loader's refusal
            body = {"observedGeneration": generation, "conditions": [{
                "type": cond.READY, "status": "False", "reason": cond.INVALID_PACKAGE,
                "message": problem_text(invalid), "observedGeneration": generation,
                "lastTransitionTime": rfc3339(time.time())}], **self.handled.get(ref, {})}
            if self.controller:
                body["controller"] = dict(self.controller)
        else:
            return
        if self._written.get(ref) == body:
            return
        try:
            await asyncio.to_thread(client.CustomObjectsApi(self.api).patch_namespaced_custom_object_status,
                                    GROUP, VERSION, namespace, PACKAGES, name, {"status": body})
            self._written[ref] = body
        except ApiException as exc:
            if exc.status != 404:
                log.warning("status of Package %s/%s not written: %s", namespace, name, exc.reason)

    def _on_entry(self, entry: LogEntry) -> None:
        spec = self.book.packages.get(entry.key)
        ref = object_ref(spec.file) if spec is not None else self.left(entry.key)
        reason = event_reason(entry)
        if ref is None or reason is None:
            return
        warning = entry.outcome in ("failed", "cancelled")
        self._spawn(self.event(ref, reason, entry.message, warning=warning, action=entry.action, at=entry.at))

    def _on_problems(self, errors: tuple[PackageError, ...]) -> None:
        invalid: dict[tuple[str, str], PackageError] = {}
        for err in errors:
            ref = object_ref(err.file)
            if ref is not None:
                invalid.setdefault(ref, err)
        for ref in set(self._invalid) | set(invalid):
            if self._invalid.get(ref) != invalid.get(ref):
                self.touch(ref)
        self._invalid = invalid
        for ref, err in invalid.items():
            text = problem_text(err)
            if self._warned.get(ref) != text and self.mine(ref):  # once per problem, not at every reload
                self._warned[ref] = text
                self._spawn(self.event(ref, cond.INVALID_PACKAGE, text, warning=True, action="load"))
        for ref in set(self._warned) - set(invalid):
            del self._warned[ref]

    async def event(self, ref: tuple[str, str], reason: str, message: str, *, warning: bool = False,
                    action: str = "", at: float | None = None) -> None:
        """Record a Kubernetes Event on the Package ``ref`` (core/v1, as ``kubectl describe`` reads them), by this
        replica (``reportingInstance``), of ``action`` (the engine's action; ``reason`` when empty), that happened
        at ``at`` (epoch seconds; now when None)."""
        namespace, name = ref
        meta = self.objects.meta(_origin(ref)) or {}
        now = time.time() if at is None else at
        when = rfc3339(now)
        body: Any = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{name}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
            "involvedObject": {"apiVersion": API_VERSION, "kind": KIND, "name": name, "namespace": namespace,
                               "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")},
            "reason": reason, "message": message[:MAX_MESSAGE], "type": "Warning" if warning else "Normal",
            "source": {"component": COMPONENT}, "reportingComponent": COMPONENT,
            "reportingInstance": self.instance[:MAX_FIELD], "action": (action or reason)[:MAX_FIELD],
            "eventTime": micro_time(now), "firstTimestamp": when, "lastTimestamp": when, "count": 1,
        }
        try:
            await asyncio.to_thread(client.CoreV1Api(self.api).create_namespaced_event, namespace, body)
        except ApiException as exc:
            log.warning("event %s on Package %s/%s not recorded: %s", reason, namespace, name, exc.reason)


def _origin(ref: tuple[str, str]) -> Path:
    return object_origin(PACKAGES, *ref)
