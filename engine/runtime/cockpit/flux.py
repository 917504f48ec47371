"""Flux's cockpit: the app on a cluster where Flux's helm-controller runs shows each release a HelmRelease owns
from that object, and its keys make Flux's own requests.

- Finding them: while the cluster serves the HelmRelease API (``helm.toolkit.fluxcd.io/v2``, asked every
  ``every`` seconds until it does), the HelmRelease objects of the app's namespaces are listed and watched.
  Each owns the release helm-controller names for it: ``spec.targetNamespace`` (else its own namespace) and
  ``spec.releaseName`` (else ``<targetNamespace>-<name>`` or its name), shortened over 53 characters (api/v2
  ``HelmRelease.GetReleaseName``, internal/release ``ShortenName``).
- The row (:func:`flux_fields`): Ready and the conditions, the failure counters, ``spec.suspend``,
  ``status.history`` and the request annotations with the last handled ones
  (:class:`~engine.runtime.state.FluxObject`); without a package its state is a projection of the conditions,
  as a ``helmdeck controller``'s Package is shown (:func:`engine.runtime.cockpit.attach.attached_state`).
  helm-controller's Events on the object are the release's log, the last one ending an action its LAST ACTION.
- Requests: the keys are decided in one place (:data:`engine.runtime.ledger.owners.FLUX_REQUESTS`) and
  written by :meth:`engine.runtime.ledger.owners.FluxClient.request`, through the engine's doors.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from engine.base.handoff import LoopHandoff
from engine.base.wire import FLUX_FORCE_REQUEST, FLUX_RECONCILE_REQUEST, FLUX_RESET_REQUEST
from engine.kube import rest
from engine.kube.stream import WatchThread, describe, list_all, open_watch
from engine.monitor.events import KubeEvent
from engine.package.identity import default_release_name
from engine.package.model import shorten_release_name
from engine.reconcile import conditions as cond
from engine.reconcile.conditions import Condition
from engine.reconcile.status import ActionOutcome, FailureCounts
from engine.runtime.cockpit.attach import LOGGED, attached_state
from engine.runtime.ledger.book import ReleaseBook
from engine.runtime.ledger.owners import FLUX_GROUP, FLUX_PLURAL, FLUX_VERSION, FluxClient
from engine.runtime.state import FluxObject, FluxRevision, LogEntry, ReleaseKey
from engine.storage.helmtime import helm_time

log = logging.getLogger(__name__)

EVERY = 30.0  # seconds between two asks whether the cluster serves the HelmRelease API, until it does
KIND = "HelmRelease"


def release_key(obj: dict[str, Any]) -> ReleaseKey:
    """The release a HelmRelease object owns, ``(namespace, name)``, as helm-controller names it (api/v2
    ``HelmRelease.GetReleaseName``, ``GetReleaseNamespace``; names over 53 characters shortened)."""
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    target = str(spec.get("targetNamespace") or "")
    name = str(spec.get("releaseName") or default_release_name(str(meta.get("name") or ""), target))
    return (target or str(meta.get("namespace") or ""), shorten_release_name(name))


def _conditions(status: dict[str, Any]) -> tuple[Condition, ...]:
    return tuple(
        Condition(str(c.get("type")), "True" if c.get("status") == "True" else "False" if c.get("status") == "False"
                  else "Unknown",
                  str(c.get("reason") or ""), str(c.get("message") or ""),
                  helm_time(str(c.get("lastTransitionTime") or "")) or 0.0)
        for c in status.get("conditions") or () if isinstance(c, dict))


def _history(status: dict[str, Any]) -> tuple[FluxRevision, ...]:
    return tuple(
        FluxRevision(int(h.get("version") or 0), str(h.get("status") or ""), str(h.get("chartName") or ""),
                     str(h.get("chartVersion") or ""), str(h.get("appVersion") or ""), str(h.get("digest") or ""),
                     str(h.get("configDigest") or ""), helm_time(str(h.get("lastDeployed") or "")) or 0.0)
        for h in status.get("history") or () if isinstance(h, dict))


def flux_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """The release view's fields (``ReleaseView``) a HelmRelease object and its status give, as helm-controller
    writes them (api/v2 ``HelmReleaseStatus``); the conditions, Ready and state only once it wrote a condition."""
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    notes = meta.get("annotations") or {}
    conditions = _conditions(status)
    generation, observed = int(meta.get("generation") or 0), int(status.get("observedGeneration") or 0)
    ready = cond.get(conditions, cond.READY)
    suspended = spec.get("suspend") is True
    said: dict[str, Any] = {  # nothing before helm-controller wrote a condition: a document's own status stays
        "conditions": conditions,
        "ready": None if ready is None or ready.status == "Unknown" else ready.status == "True",
        "state": attached_state(conditions, generation, observed),
    } if conditions else {}
    return {
        **said,
        "flux": FluxObject((str(meta.get("namespace")), str(meta.get("name"))), generation, observed, suspended,
                           _history(status), str(notes.get(FLUX_RECONCILE_REQUEST) or ""),
                           str(notes.get(FLUX_FORCE_REQUEST) or ""), str(notes.get(FLUX_RESET_REQUEST) or ""),
                           str(status.get("lastHandledReconcileAt") or ""),
                           str(status.get("lastHandledForceAt") or ""), str(status.get("lastHandledResetAt") or ""),
                           str(status.get("lastAttemptedRevision") or "")),
        "suspended": suspended,
        "failures": FailureCounts(int(status.get("installFailures") or 0), int(status.get("upgradeFailures") or 0),
                                  int(status.get("failures") or 0)),
    }


class _HelmReleases(WatchThread):
    """A list+watch of the HelmRelease objects at ``path`` (a namespace's, or all), each change handed on."""

    def __init__(self, api: client.ApiClient, path: str, put: Callable[[tuple[str, str, Any]], None]):
        super().__init__("flux-helmreleases", f"HelmReleases {path}")
        self._api, self._path, self._put = api, path, put

    def _relist(self) -> str:
        found: dict[tuple[str, str], dict[str, Any]] = {}
        rv = list_all(self._api, self._path, lambda o: found.__setitem__(_ref(o), o))
        self._put(("LISTED", self._path, found))
        return rv

    def _watch(self, rv: str) -> str:
        return self._stream(open_watch(self._api, self._path, rv), rv,
                            lambda kind, obj: self._put((kind, self._path, obj)))

    def _retry(self, exc: Exception) -> bool:
        if isinstance(exc, ApiException) and exc.status in (401, 403):  # asked again, it is refused again
            log.warning("%s refused: %s; releases Flux owns are shown from storage", self._what, describe(exc))
            return False
        return super()._retry(exc)


def _ref(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


class FluxCockpit:
    """Shows the releases HelmRelease objects own from those objects (see the module docstring). ``namespaces``:
    the app's scope (None: all); ``events(namespace, callback)`` watches a namespace's Kubernetes Events,
    those already seen first (returns the unsubscribe)."""

    def __init__(self, api: client.ApiClient, book: ReleaseBook, namespaces: list[str] | None,
                 events: Callable[[str, Callable[[KubeEvent], None]], Callable[[], None]], *, every: float = EVERY):
        self._api, self._book, self._namespaces, self._events = api, book, namespaces, events
        self.every = every
        self._objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}  # by watched path
        self._keys: dict[tuple[str, str], ReleaseKey] = {}  # object ref -> its release
        self._last: dict[ReleaseKey, ActionOutcome] = {}  # helm-controller's last action, from its Events
        self._logged: dict[tuple[str, float], None] = {}
        self._event_watches: dict[str, Callable[[], None]] = {}
        self._handoff: LoopHandoff[tuple[str, str, Any]] = LoopHandoff(self._apply)
        self._watches: list[_HelmReleases] = []
        # ref -> (resourceVersion, its release, its fields): an event projects only the object it changed
        self._projected: dict[tuple[str, str], tuple[str, ReleaseKey, dict[str, Any]]] = {}
        self.problem = ""
        self._served: bool | None = None

    def served(self) -> bool | None:
        """Does the cluster serve the HelmRelease API, as the last discovery (every :attr:`every` seconds until it
        does) said; None before the first answer or after a failed ask. The gate asks it (rule 5)."""
        return self._served

    async def run(self) -> None:
        """Wait until the HelmRelease API is served, then follow its objects until cancelled."""
        self._handoff.bind(asyncio.get_running_loop())
        flux = FluxClient(self._api)
        try:
            while True:
                try:
                    self._served = await flux.present()
                    if self._served:
                        break
                except (ApiException, OSError, HTTPError) as exc:
                    self._served = None
                    self.problem = f"Flux's HelmRelease API unreadable: {getattr(exc, 'reason', exc)}"
                await asyncio.sleep(self.every)
            group = f"{FLUX_GROUP}/{FLUX_VERSION}"
            paths = [rest.path(group, FLUX_PLURAL)] if self._namespaces is None else [
                rest.path(group, FLUX_PLURAL, ns) for ns in self._namespaces]
            self._watches = [_HelmReleases(self._api, p, self._handoff.put) for p in paths]
            for watch in self._watches:
                watch.start()
            await asyncio.Event().wait()
        finally:
            for watch in self._watches:
                watch.stop()
            for unsubscribe in self._event_watches.values():
                unsubscribe()
            self._event_watches.clear()

    def _apply(self, change: tuple[str, str, Any]) -> None:
        """One change of a watch: a (re)list replaces every row; an object added, changed or deleted changes
        its own row only (a burst of status writes at 1,000 objects costs no pass over them all)."""
        kind, path, obj = change
        if kind == "LISTED":
            self._objects[path] = obj
            self._show()
            return
        ref = _ref(obj)
        before = self._keys.pop(ref, None)
        if kind == "DELETED":
            self._objects.setdefault(path, {}).pop(ref, None)
            self._projected.pop(ref, None)
        else:
            self._objects.setdefault(path, {})[ref] = obj
            key, fields = self._project(ref, obj)
            self._keys[ref] = key
            self._watch_events(ref[0])
            self._book.put_flux(key, fields)
        if before is not None and before != self._keys.get(ref) and before not in self._keys.values():
            self._book.put_flux(before, None)

    def _project(self, ref: tuple[str, str], obj: dict[str, Any]) -> tuple[ReleaseKey, dict[str, Any]]:
        """``obj``'s release and its row's fields, projected again only when the object changed."""
        version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        cached = self._projected.get(ref)
        if cached is None or cached[0] != version:
            cached = self._projected[ref] = (version, release_key(obj), flux_fields(obj))
        key = cached[1]
        return key, {**cached[2], **({"last": self._last[key]} if key in self._last else {})}

    def _watch_events(self, namespace: str) -> None:
        if namespace not in self._event_watches:
            self._event_watches[namespace] = self._events(namespace, self._on_event)

    def _show(self) -> None:
        """Every row from the objects known now (after a list)."""
        fields: dict[ReleaseKey, dict[str, Any]] = {}
        self._keys = {}
        for objects in self._objects.values():
            for ref, obj in objects.items():
                key, fields[key] = self._project(ref, obj)
                self._keys[ref] = key
        self._projected = {ref: p for ref, p in self._projected.items() if ref in self._keys}
        for namespace in {ref[0] for ref in self._keys}:
            self._watch_events(namespace)
        self._book.set_flux(fields)

    def _on_event(self, event: KubeEvent) -> None:
        """helm-controller's Event on a HelmRelease object: an entry in its release's log; one ending an action
        (``UpgradeSucceeded``, a Warning) its LAST ACTION."""
        key = self._keys.get((event.namespace, event.name)) if event.kind == KIND else None
        if key is None:
            return
        outcome = "failed" if event.warning else "succeeded" if event.reason.endswith("Succeeded") else "info"
        if (event.uid, event.at) not in self._logged:  # replayed to a watch joined late: logged once
            self._logged[(event.uid, event.at)] = None
            if len(self._logged) > LOGGED:
                del self._logged[next(iter(self._logged))]
            self._book.add_event(LogEntry(event.at, key, event.name, event.reason, outcome, event.message))
        last = self._last.get(key)
        if outcome != "info" and (last is None or event.at >= last.at):
            action = event.reason.removesuffix("Succeeded").removesuffix("Failed").lower() or event.reason
            self._last[key] = ActionOutcome(action, outcome == "succeeded", event.message, at=event.at)
            self._book.update_flux(key, last=self._last[key])

