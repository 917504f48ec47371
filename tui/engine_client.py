"""The app's one door to the engine: reads, texts with secrets masked, availability, actions.

An action on a package a live ``helmdeck controller`` reconciles is the engine's too: its one door
routes it (the gate's check, then a request on the Package object) and returns the ``Requested``.

Every screen, widget and operation reaches :class:`~engine.runtime.engine.Engine`
through here and nowhere else, so the views never depend on how the engine
does it. Whether an action may run, and why not, is the engine's answer
(``why_not``), worded once. Texts shown to the operator (manifests, values,
diffs) are masked here, by the engine's masking rule, unless revealed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.base.masking import Masker
from engine.monitor.events import KubeEvent, belongs
from engine.monitor.manifest import ManifestObject, manifest_objects
from engine.runtime.engine import ActionRefused, Engine, NotAvailable
from engine.runtime.ledger.owners import Owner
from engine.runtime.state import (
    AccessProblems,
    ActionOutcome,
    Attached,
    CleanupItem,
    ControllerInfo,
    EngineSignal,
    LogEntry,
    PackageProblems,
    Pulse,
    ReleaseKey,
    ReleaseView,
    Requested,
)
from engine.storage.observation import Observation
from tui.manifest import Scopes, kinds, placed

if TYPE_CHECKING:  # the drill-down's, diff's and picker's modules are imported when first used
    from engine.monitor.inspect import PodRow
    from engine.runtime.chart_versions import Pin, VersionList

log = logging.getLogger(__name__)
DISCOVERY_RETRY = 60.0  # seconds the built-in scope list serves after discovery could not be read


@dataclass(frozen=True)
class ContextSwitch:
    """How the app switches cluster context: ``names()`` lists the kubeconfig's contexts (raises on a bad
    kubeconfig), ``build(name)`` makes an engine (not started) on that context, ``note(name)`` what the switch
    to it changes beyond the view ("" nothing), said as it switches."""

    names: Callable[[], list[str]]
    build: Callable[[str], Engine]
    note: Callable[[str], str] = lambda _name: ""


ObjectRef = tuple[str, str, str, str]
"""``(apiVersion, kind, namespace, name)`` of a live object."""


class EngineClient:
    """Wraps one :class:`Engine` for the app; ``masker`` masks what is shown (the engine's by default)."""

    def __init__(self, engine: Engine, masker: Masker | None = None):
        self.engine = engine
        self.masker = masker or engine.masker
        self._engine_masker = masker is None
        self._subscribers: dict[Callable[[EngineSignal], None], Callable[[], None]] = {}
        self._discovery_retry = 0.0  # monotonic time before which discovery is not asked (it failed)

    # -- lifecycle -------------------------------------------------------------
    async def start(self) -> None:
        await self.engine.start(preview=True)  # rows from storage's labels before the records are decoded

    async def stop(self) -> None:
        await self.engine.stop()

    def preview_shown(self, in_view: Sequence[ReleaseKey] = ()) -> None:
        """The table drew the releases listed from storage's labels, ``in_view`` on screen: the engine decodes the
        records now, theirs first."""
        self.engine.preview_shown(in_view)

    def subscribe(self, callback: Callable[[EngineSignal], None]) -> Callable[[], None]:
        """Call ``callback`` with every engine event (of this engine and of any it is switched to);
        returns the unsubscribe function."""
        self._subscribers[callback] = self.engine.subscribe(callback)

        def unsubscribe() -> None:
            self._subscribers.pop(callback, lambda: None)()
        return unsubscribe

    async def switch(self, engine: Engine) -> None:
        """Stop the current engine and start ``engine`` in its place (another cluster context); the
        subscribers follow. Raises what ``engine.start`` raises (the new engine stays in place)."""
        await self.engine.stop()
        for callback, unsubscribe in list(self._subscribers.items()):
            unsubscribe()
            self._subscribers[callback] = engine.subscribe(callback)
        self.engine = engine
        self._discovery_retry = 0.0
        if self._engine_masker:
            self.masker = engine.masker
        await engine.start(preview=True)

    def access(self) -> AccessProblems:
        """Refused storage permissions now, and the scope note (the engine also publishes changes)."""
        return self.engine.access()

    def watched_namespaces(self) -> tuple[str, ...] | None:
        """The namespaces whose releases the engine watches (``-n``), or None for all."""
        return self.engine.watched_namespaces

    def package_problems(self) -> PackageProblems:
        """The package files' errors now (the engine also publishes each reload's)."""
        return PackageProblems(tuple(self.engine.package_errors))

    # -- availability ----------------------------------------------------------
    @property
    def readonly(self) -> bool:
        return self.engine.readonly

    def why_not(self, action: str, key: ReleaseKey | None = None) -> str | None:
        """None when ``action`` may run now (on ``key``), else one sentence saying why not (the engine's gate)."""
        return self.engine.why_not(action, key)

    def check(self, action: str, key: ReleaseKey | None = None) -> None:
        """Raise ActionRefused or NotAvailable with :meth:`why_not`'s sentence when ``action`` may not run now."""
        self.engine.check(action, key)

    # -- reading -----------------------------------------------------------------
    def releases(self) -> list[ReleaseView]:
        return self.engine.releases()

    def release(self, key: ReleaseKey) -> ReleaseView | None:
        return self.engine.release(key)

    def history(self, key: ReleaseKey) -> list[Observation]:
        """Stored revisions, newest first."""
        return self.engine.history(key)

    def events(self, key: ReleaseKey) -> list[LogEntry]:
        return self.engine.events(key)

    async def objects(self, key: ReleaseKey, revision: int) -> list[ManifestObject]:
        """The objects the manifest of ``revision`` declares, placed in their namespaces: each kind's scope
        from the API server's discovery, else the built-in list (:mod:`tui.manifest`). Parsed off the loop.

        Raises yaml.YAMLError when the manifest is not YAML, and what ``Engine.manifest`` raises.
        """
        found = await asyncio.to_thread(manifest_objects, await self.engine.manifest(key, revision))
        return placed(found, key[0], await self._scopes(kinds(found)))

    async def _scopes(self, wanted: set[tuple[str, str]]) -> Scopes:
        if not wanted or time.monotonic() < self._discovery_retry:
            return {}
        try:
            return await self.engine.kind_scopes(wanted)
        except NotAvailable:  # offline: the built-in list
            return {}
        except Exception as exc:  # the built-in list, and no discovery call (each may wait out a timeout) for a while
            log.warning("discovery unreadable, cluster-scoped kinds from the built-in list: %s", exc)
            self._discovery_retry = time.monotonic() + DISCOVERY_RETRY
            return {}

    def watch_kube_events(self, namespace: str, callback: Callable[[KubeEvent], None]) -> Callable[[], None]:
        """Call ``callback`` (on the engine's loop) with each Kubernetes Event of ``namespace``; returns the
        unsubscribe function. The engine shares one watch per namespace."""
        return self.engine.watch_kube_events(namespace, callback)

    def kube_events(self, namespace: str, objects: list[tuple[str, str, str]]) -> list[KubeEvent]:
        """The recent Kubernetes Events of ``objects`` (``(kind, namespace, name)``) and of what they own,
        oldest first (see :func:`engine.monitor.events.belongs`)."""
        return [e for e in self.engine.recent_kube_events(namespace) if belongs(e, objects)]

    async def live_object(self, ref: ObjectRef, *, reveal: bool = False) -> tuple[str, list[PodRow] | None]:
        """An object's live YAML (managedFields hidden, secrets masked unless ``reveal``) and, for a
        workload, its pods. Raises KeyError (absent) or NotAvailable (offline)."""
        from engine.monitor.inspect import object_yaml

        obj = await self.engine.live_object(*ref)
        return object_yaml(obj, self.masker, reveal=reveal), await self.engine.live_pods(obj)

    async def logs(self, namespace: str, pod: str, container: str) -> str:
        """A container's last log lines; RuntimeError("logs not served: ...") when the kubelet has none."""
        return await self.engine.container_logs(namespace, pod, container)

    # -- texts shown (masked unless revealed) ----------------------------------------
    async def manifest_text(self, key: ReleaseKey, revision: int, *, reveal: bool = False) -> str:
        manifest = await self.engine.manifest(key, revision)
        if reveal:
            return manifest
        await self._remember(key, revision)
        values = await self.engine.values(key, revision, computed=True)
        # Off the event loop: masking parses the manifest (once per revision: the masker caches it).
        return await asyncio.to_thread(self.masker.mask_manifest, manifest, values)

    async def values_text(self, key: ReleaseKey, revision: int, *, computed: bool, reveal: bool = False) -> str:
        """A revision's values as YAML; secrets masked unless ``reveal``, values from Secrets
        (``valuesFrom``) by their path whatever their key."""
        values = await self.engine.values(key, revision, computed=computed)
        paths = self.engine.secret_paths(key)
        # Off the event loop: dumping and masking ~1 MB of values takes seconds.
        return await asyncio.to_thread(self.masker.values_yaml, values, reveal=reveal, secret_paths=paths)

    async def _remember(self, key: ReleaseKey, revision: int) -> None:
        """The masker learns the Secret-sourced values ``revision`` was deployed with (they may be older
        than the Secret now), so texts of that revision mask them too."""
        if self.engine.secret_paths(key):
            values = await self.engine.values(key, revision)
            # Off the event loop: a large Secret's values make a large pattern to compile.
            await asyncio.to_thread(self.engine.remember_secret_values, key, values)

    async def notes_text(self, key: ReleaseKey, revision: int, *, reveal: bool = False) -> str:
        """The chart's NOTES Helm stored for ``revision`` (``info.notes``), its values' secrets masked unless
        ``reveal`` ("" when the chart has none)."""
        record = await self.engine.release_record(key, revision)
        info = record.get("info")
        notes = info.get("notes") if isinstance(info, dict) else None
        if not isinstance(notes, str) or not notes:
            return ""
        if reveal:
            return notes
        await self._remember(key, revision)
        return self.masker.mask_text(notes, await self.engine.values(key, revision, computed=True))

    async def revision_diff(self, key: ReleaseKey, before: int, after: int, *, reveal: bool = False) -> str:
        """Manifests and user values of two stored revisions compared ("" = equal)."""
        from engine.runtime.diff import revision_diff

        sides = [(rev, await self.engine.manifest(key, rev), await self.engine.values(key, rev, computed=False))
                 for rev in (before, after)]
        if not reveal:
            for rev in (before, after):
                await self._remember(key, rev)
        return await asyncio.to_thread(revision_diff, sides[0], sides[1], self.masker, reveal=reveal,
                                       secret_paths=self.engine.secret_paths(key))

    async def desired_diff(self, key: ReleaseKey, *, reveal: bool = False) -> str:
        """What an upgrade would change now (a unified diff, "" = nothing), secrets masked unless ``reveal``."""
        self.check("diff", key)
        return await self.engine.diff(key, reveal=reveal)

    # -- acting ------------------------------------------------------------------
    async def upgrade(self, key: ReleaseKey) -> ActionOutcome | Requested | None:
        return await self.engine.reconcile(key, force=True)

    async def rollback(self, key: ReleaseKey, revision: int) -> ActionOutcome | Requested:
        return await self.engine.rollback(key, revision)

    async def test(self, key: ReleaseKey) -> ActionOutcome:
        return await self.engine.test(key)

    async def suspend(self, key: ReleaseKey, suspended: bool) -> Requested | None:
        """Suspend or resume reconciliation (attached to a controller: its spec.suspend patched)."""
        return await self.engine.suspend(key, suspended)

    async def uninstall(self, key: ReleaseKey) -> ActionOutcome:
        return await self.engine.uninstall(key)

    async def cleanup(self, *, dry_run: bool, confirmed: Collection[str] | None = None) -> list[CleanupItem]:
        """Cleanup's list (``dry_run``) or the removal of ``confirmed`` refs only (what the dialog listed)."""
        return await self.engine.cleanup(dry_run=dry_run, confirmed=confirmed)

    async def pause_monitor(self, key: ReleaseKey) -> int | Requested:
        """The monitor's pause counter +1; returns the new count (attached: the request made)."""
        self.check("monitor", key)
        return await self.engine.pause_monitor(key)

    async def resume_monitor(self, key: ReleaseKey) -> int | Requested:
        """The monitor's pause counter -1 (never below 0); returns the new count (attached: the request made)."""
        self.check("monitor", key)
        return await self.engine.resume_monitor(key)

    async def set_maintenance(self, key: ReleaseKey, mode: str) -> object:
        """Enter (``"NoResourceReconciliation"``) or leave (``""``) maintenance mode."""
        self.check("maintenance", key)
        return await self.engine.set_maintenance(key, mode)

    async def cancel(self, key: ReleaseKey) -> ActionOutcome | Requested:
        """Stop the action running on ``key``; it is recorded as the engine's own failed action."""
        self.check("cancel", key)
        return await self.engine.cancel(key)

    # -- the cluster's helmdeck controller -------------------------------------------------
    def controller(self, attached: Attached) -> ControllerInfo | None:
        """The live controller reconciling the Package object of ``attached`` (its Lease's; None: none live)."""
        return next((c for c in self.engine.controllers
                     if c.lease == attached.lease or (not attached.lease and c.covers(attached.ref[0]))), None)

    def controllers(self) -> tuple[ControllerInfo, ...]:
        return self.engine.controllers

    def controllers_problem(self) -> str:
        """Why the controllers cannot be found now ("" when they can)."""
        return self.engine.controllers_problem

    def pulse_sources(self) -> bool:
        """Are controller metrics known (URLs given, or a live controller's reachable from here)?"""
        return self.engine.pulse_sources()

    async def pulses(self) -> tuple[Pulse, ...]:
        """Each controller replica's pulses, read once more from its metrics endpoint."""
        return await self.engine.pulses()

    def owner(self, key: ReleaseKey) -> Owner:
        """Who owns ``key``: a helmdeck package, a Flux HelmRelease or none."""
        return self.engine.owner(key)

    # -- chart versions (the version picker) ------------------------------------------
    async def versions(self, key: ReleaseKey) -> VersionList:
        """The versions ``key``'s repository offers, newest first (deployed and range marked)."""
        return await self.engine.chart_versions(key)

    def plan_pin(self, key: ReleaseKey, version: str) -> Pin:
        """The file edit pinning ``key``'s chart to ``version`` (nothing written). Raises PinError."""
        return self.engine.plan_pin(key, version)

    async def version_diff(self, key: ReleaseKey, version: str, *, reveal: bool = False) -> str:
        """What upgrading ``key`` to chart ``version`` would change ("" = nothing), masked unless ``reveal``."""
        return await self.engine.version_diff(key, version, reveal=reveal)

    async def pin(self, key: ReleaseKey, version: str) -> tuple[Pin, ActionOutcome | Requested | str | None]:
        """Pin ``key``'s chart to ``version`` in its package file, then reconcile it (a suspended package
        waits for its resume): the edit and the pass's outcome (None: nothing ran; a text: why it could not
        run now, the package is then queued). Attached to a controller: the object patched, a reconcile
        requested."""
        pinned = await self.engine.pin(key, version)
        try:  # attached: the object was patched, a reconcile is requested
            return pinned, await self.engine.reconcile(key)
        except ActionRefused as exc:  # an action runs on it: the pin is written, the next pass takes it
            self.engine.enqueue(key)
            return pinned, str(exc)

    async def unlock(self, key: ReleaseKey) -> ActionOutcome | Requested:
        """Make a release stuck in a pending state actionable again."""
        self.check("unlock", key)
        return await self.engine.unlock(key)
