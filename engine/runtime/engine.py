"""The engine: the one object the app and the CLI talk to.

It is given its collaborators, built and wired by :mod:`engine.runtime.assemble` (one builder per mode; those
only the app or an operator's action uses are built on first call: a headless command imports what it runs),
starts and stops the parts its mode runs (lists the builder gives, in start and in stop order:
:mod:`engine.runtime.ledger.running`), and delegates to them. An action on a package a live controller
reconciles is routed by the action itself (:meth:`Engine._by_controller`): the outcome or the ``Requested``.

- :class:`~engine.runtime.ledger.book.ReleaseBook`: every per-release state, the
  :class:`~engine.runtime.state.ReleaseView` rows and the events
  (:data:`engine.runtime.state.EngineSignal`);
- :class:`~engine.runtime.ledger.gate.ActionGate`: whether an action may run, and why not;
- :class:`~engine.runtime.drive.controller.PackageController`: the work queue, its
  triggers and the passes (the atomic release loop, as Flux's helm-controller);
- :class:`~engine.runtime.operations.Operations`: the operator's actions;
- :class:`~engine.runtime.chart_versions.ChartVersions`, :class:`~engine.runtime.release_events.ReleaseEvents`,
  :class:`~engine.runtime.values_objects.ValuesObjects`, :class:`~engine.monitor.inspect.Inspector`;
- the storage observer, the release service (monitors, render, cleanup) and,
  with a lease configured, the lease elector (only the holder acts).

The app (``tui/``) and the command line (``helmdeck/``) use only the methods
and properties of :class:`Engine` (docs/ARCHITECTURE.md, "The engine API the
app uses"); the collaborator attributes are for the engine's own modules and
for tests, and a test (tests/engine/runtime/test_facade.py) keeps the app and the CLI off them.

Actions raise :class:`ActionRefused` (cannot start now) or :class:`NotAvailable`
(this engine cannot do it); :meth:`Engine.why_not` says so in advance.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar
from urllib.parse import urlsplit

from kubernetes import client

from engine.base.fields import PackageError
from engine.base.handoff import LoopHandoff
from engine.base.masking import Masker
from engine.base.strvals import Path as ValuesPath
from engine.monitor.events import KubeEvent
from engine.package.model import PackageSpec
from engine.reconcile.atomic import PassResult
from engine.reconcile.status import ActionOutcome, EngineStatus
from engine.runtime.drive.controller import PackageController
from engine.runtime.drive.lease import APP as APP  # the roles a LeaseConfig is labelled with, for the builder
from engine.runtime.drive.lease import RECONCILE as RECONCILE
from engine.runtime.drive.lease import LeaseConfig, LeaseElector, held_fix, holder_said
from engine.runtime.drive.values_objects import ValuesObjects
from engine.runtime.ledger.book import ActionRefused, NotAvailable, ReleaseBook, Subscriber
from engine.runtime.ledger.gate import ACTIONS, OFFLINE, ActionGate
from engine.runtime.ledger.owners import FLUX_OWNED, FLUX_REQUESTS, NONE, FluxClient, FluxRefused, Owner, owner_of
from engine.runtime.ledger.running import Running, Starting
from engine.runtime.ledger.tasks import Background
from engine.runtime.package_set import PackageSet
from engine.runtime.release_events import ReleaseEvents
from engine.runtime.state import (
    AccessProblems,
    CleanupItem,
    ControllerInfo,
    LogEntry,
    Pulse,
    ReleaseKey,
    ReleaseView,
    Requested,
)
from engine.service import ReleaseService
from engine.storage.observation import Observation
from engine.storage.observer import Observer
from engine.storage.records import ListedRevision, UnreadableRecord

if TYPE_CHECKING:  # the parts of a controller, the app, --kustomize, plan and actions are imported when built
    from engine.monitor.inspect import Inspector, PodRow
    from engine.runtime.chart_versions import ChartVersions, Pin, VersionList
    from engine.runtime.cluster.annotation_requests import Requests
    from engine.runtime.cluster.finalizer import Finalizers
    from engine.runtime.cluster.object_status import StatusWriter
    from engine.runtime.cluster.objects import PackageObjects
    from engine.runtime.cluster.shards import Shards
    from engine.runtime.cockpit.attach import Attachment
    from engine.runtime.cockpit.flux import FluxCockpit
    from engine.runtime.cockpit.pulses import PulseMeter
    from engine.runtime.operations import Operations
    from engine.runtime.plan import Plan

log = logging.getLogger(__name__)
T = TypeVar("T")
# Seconds the storage list thread waits for the labels' views to be made, then again for the app to draw
# them (engine.start, preview_shown).
PREVIEW_WAIT = 5.0
# Seconds a stopping controller waits, at most, for its Package status and Event writes (within the chart's grace:
# the stop deadline plus 15 s, which also covers helm's stop grace and the unlock).
STATUS_FLUSH = 5.0

__all__ = ["ACTIONS", "FLUX_OWNED", "ActionRefused", "Engine", "LeaseConfig", "NotAvailable"]

@dataclass(frozen=True)
class Given:
    """What an engine is given, as the command line says it (see :func:`engine.runtime.assemble.build_engine`):
    ``namespaces`` watched (None: all), the ``lease`` (None: it acts alone), whether it watches the packages
    folder and monitors the releases, whether it has a cluster (``online``), ``readonly``, and the metrics URLs of
    controller replicas read for :meth:`Engine.pulses`."""

    namespaces: list[str] | None = None
    lease: LeaseConfig | None = None
    watch_packages: bool = True
    monitors: bool = True
    online: bool = True
    readonly: bool = False
    controller_metrics: tuple[str, ...] = ()


async def _no_monitors() -> None:
    return None


@dataclass
class Parts:
    """An engine's parts, each built with its collaborators by :mod:`engine.runtime.assemble` (None: not in
    this mode). ``operations`` and ``versions`` are built on first call. ``running``: the parts this mode runs,
    in start order; ``stopping``: the same in stop order (with the controller's status flushes between them);
    ``monitors_ready``: awaits the monitors started at start having listed their resources."""

    given: Given
    masker: Masker
    tasks: Background
    api: client.ApiClient | None
    package_set: PackageSet | None
    observer: Observer
    book: ReleaseBook
    gate: ActionGate
    values_objects: ValuesObjects
    service: ReleaseService
    controller: PackageController
    kube_events: ReleaseEvents
    objects: PackageObjects | None
    attachment: Attachment | None
    elector: LeaseElector | None
    operations: Callable[[], Operations]
    versions: Callable[[], ChartVersions]
    running: Sequence[Running] = ()
    stopping: Sequence[Running] = ()
    monitors_ready: Callable[[], Awaitable[None]] = _no_monitors
    status_writer: StatusWriter | None = None
    finalizers: Finalizers | None = None
    requests: Requests | None = None
    shards: Shards | None = None
    flux: FluxCockpit | None = None  # the app: the releases Flux's HelmRelease objects own


class Later(Generic[T]):
    """A part built on first call, then kept (the operator's actions, the version picker, the pulses)."""

    def __init__(self, make: Callable[[], T]):
        self._make = make
        self._made: T | None = None

    def __call__(self) -> T:
        if self._made is None:
            self._made = self._make()
        return self._made


def observed_namespaces(namespaces: list[str] | None, packages: dict[ReleaseKey, PackageSpec]) -> list[str] | None:
    """The namespaces whose Helm storage (and helmdeck's statuses) are watched: ``namespaces``, the packages'
    storage namespaces and their release namespaces (None: all). A release stored apart from its namespace
    (a HelmRelease's) was stored in its namespace before a ``storageNamespace`` change: its status there names
    the release the change uninstalls (ReleaseBook.target_change)."""
    if not namespaces:
        return None
    return sorted(set(namespaces) | {ns for s in packages.values() for ns in (s.storage_ns, s.release_namespace)})


def package_releases(specs: Iterable[PackageSpec]) -> dict[str, set[str]]:
    """The releases ``specs`` name, as helm's storage holds them: storage namespace → release names (the
    ``releases`` of an observer that reads those alone), in the release namespace too (as
    :func:`observed_namespaces`)."""
    names: dict[str, set[str]] = {}
    for spec in specs:
        for ns in {spec.storage_ns, spec.release_namespace}:
            names.setdefault(ns, set()).add(spec.release_name)
    return names


class Engine:
    """Drives the packages it was given and reports every release in storage; built by
    :func:`engine.runtime.assemble.build_engine` (or ``offline_engine``), one builder per mode, from ``parts``
    already wired. Subscribers are called on the engine's event loop.
    """

    def __init__(self, parts: Parts):
        given = parts.given
        self.namespaces = given.namespaces
        self.lease_config = given.lease
        self._metrics_urls = given.controller_metrics
        self.masker = parts.masker
        self.tasks = parts.tasks
        self._api = parts.api
        self.package_set = parts.package_set
        self.observer = parts.observer
        self.book = parts.book
        self.gate = parts.gate
        self.values_objects = parts.values_objects
        self.service = parts.service
        self.controller = parts.controller
        self.kube_events = parts.kube_events
        self.attachment = parts.attachment
        self.elector = parts.elector
        self.shards = parts.shards
        # Built on first call (a headless command imports only what it runs): the operator's actions
        # (engine.runtime.operations), the version picker (attached, it pins in the Package objects) and the
        # controller replicas' metrics read for pulses().
        self.operations = parts.operations
        self.versions = parts.versions
        self.pulse_meter: Callable[[], PulseMeter] = Later(self._new_pulse_meter)
        self._running = parts.running
        self._stopping = parts.stopping
        self._monitors_ready = parts.monitors_ready
        self._inspector: Inspector | None = None  # built on first use (_live)
        self._preview_made: threading.Event | None = None  # the last page of storage labels made into views
        self._preview_shown = threading.Event()  # the app drew the views the labels made (preview_shown)
        self._preview_shown.set()  # nothing to draw yet
        self._in_view: tuple[ReleaseKey, ...] = ()  # the rows the app drew last (preview_shown)
        self._first_read = threading.Lock()  # one watch thread reads them (see _previewed)
        # Set by whoever narrowed ``namespaces`` (e.g. the command line's fall-back): see AccessProblems.
        self.scope_note = ""
        # Observer callbacks come from its watch threads: handled on the engine's loop.
        # In batches: a list of 10,000 records wakes the loop a few times, not 10,000 (engine.base.handoff).
        self._storage_changes = LoopHandoff(self.controller.on_storage)
        self.observer.subscribe(self._storage_changes.put)
        self.observer.on_problems(lambda: self.tasks.on_loop(self._emit_access))

    def _new_pulse_meter(self) -> PulseMeter:
        from engine.runtime.cockpit.pulses import PulseMeter

        return PulseMeter(self._pulse_endpoints)

    def _observed_namespaces(self, packages: dict[ReleaseKey, PackageSpec]) -> list[str] | None:
        return observed_namespaces(self.namespaces, packages)

    # -- lifecycle -----------------------------------------------------------
    async def start(self, *, reconcile: bool = True, preview: bool = False) -> None:
        """Observe storage, read persisted statuses, load packages and start reconciling.

        With ``reconcile`` False nothing is queued (actions still work on request). With ``preview``
        (the app) every stored release is announced from its storage labels first, before its records
        are decoded (:meth:`ReleaseBook.preview`; one more list, metadata only).
        """
        loop = asyncio.get_running_loop()
        self.tasks.bind(loop)
        self._storage_changes.bind(loop)
        # No row until storage is listed and the statuses read (but the labels').
        with self.book.reading_storage():
            unlisten = ([self.observer.on_listed(self._preview), self.observer.on_labels_done(self._previewed)]
                        if preview else [])
            try:
                # Storage is listed first: its labels' rows (preview) may then be in hand for the app's first
                # frame, while the packages folder loads in a thread. The book makes no view while reading, so
                # the packages and the labels may come in either order (refresh_all remakes every view after).
                self.observer.start()
                await self.controller.load()
                await asyncio.to_thread(self.observer.wait_synced, 30)
                if self.scope_note or self.observer.denied() or self.observer.unlisted():
                    self._emit_access()
                for key in await self.book.load_statuses(self._observed_namespaces(self.book.packages)):
                    self.book.set_state(key, None)  # a verdict made before the status was read does not hold
                await self.controller.flux.observe()  # which HelmRelease documents' releases Flux owns
            finally:
                for stop in unlisten:
                    stop()
        how = Starting(reconcile=reconcile)
        for part in self._running:  # the parts this mode has, in the builder's order (engine.runtime.assemble)
            await part.start(how)

    async def stop(self, deadline: float = 30.0) -> bool:
        """Stop: running helm actions may finish for up to ``deadline`` seconds, then are cancelled; a controller
        then writes their Package objects' status and Events (at most :data:`STATUS_FLUSH` seconds) before it
        gives the Lease up.

        Returns True when every running action finished on its own.
        """
        clean = True
        for part in self._stopping:  # in the builder's stop order (engine.runtime.assemble)
            clean = await part.stop(deadline) and clean
        return clean

    async def monitors_ready(self) -> None:
        """Wait until the monitors started at :meth:`start` have listed their resources."""
        await self._monitors_ready()

    async def wait_for_lease(self) -> bool:
        """Wait until this instance leads, the holder is seen renewing the lease (alive: it will not go by
        itself, :attr:`LeaseElector.holder_renews`, a round or two of its renew interval), or a lease duration
        passes; True if leading (a lease left by a killed instance expires after its duration: a new instance
        takes over then)."""
        if self.elector is None or self.lease_config is None:
            return self.acting
        waits = [asyncio.ensure_future(self.controller.leading.wait()),
                 asyncio.ensure_future(self.elector.holder_renews.wait())]
        try:
            await asyncio.wait(waits, timeout=self.lease_config.duration + 2 * self.lease_config.retry,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
        return self.acting

    def _live(self) -> Inspector:
        """Live objects, their pods and container logs (the app's drill-down). Raises NotAvailable offline."""
        if self._inspector is None:
            if self._api is None:
                raise NotAvailable("no cluster (offline): live objects cannot be read")
            from engine.monitor.inspect import Inspector

            self._inspector = Inspector(self._api)
        return self._inspector

    def _preview(self, found: list[ListedRevision]) -> None:
        """A page of the observer's labels (in its list thread): the views are made from it on the loop."""
        made = self._preview_made = threading.Event()

        def make() -> None:
            try:
                if self.book.preview(found):
                    self._preview_shown.clear()  # until the app says it drew them
            finally:
                made.set()
        self.tasks.on_loop(make)

    def _previewed(self) -> None:
        """The labels are listed (in the observer's list thread): it goes on to list and decode the records
        once the loop has made every page's views and the app has drawn them (:meth:`preview_shown`; each
        wait bounded: :data:`PREVIEW_WAIT`), so that decoding does not compete for the interpreter with the
        first table (at 10,000 releases its last 0.1-1.6 s under load, bench/tui_bench.py). The records of the
        rows on screen come first (:meth:`preview_shown`), and are drawn before the others are decoded; rows
        drawn meanwhile whose records were not read (the app drew an earlier page's rows first, then the table
        with every page: the rows on screen changed) are read next, until every row drawn was read."""
        made = self._preview_made
        if made is not None:
            made.wait(PREVIEW_WAIT)  # the pages' views are made in order: the last one's is the last
            self._preview_shown.wait(PREVIEW_WAIT)
        if not self._first_read.acquire(blocking=False):
            return  # another namespace's thread read them
        read: set[ReleaseKey] = set()
        while first := tuple(key for key in self._in_view if key not in read):
            read.update(first)
            self.observer.read_first(first)
            done = threading.Event()

            def show(first: tuple[ReleaseKey, ...] = first, done: threading.Event = done) -> None:
                try:
                    if self.book.preview_records(first):
                        self._preview_shown.clear()
                finally:
                    done.set()
            self.tasks.on_loop(show)
            done.wait(PREVIEW_WAIT)
            self._preview_shown.wait(PREVIEW_WAIT)

    def preview_shown(self, in_view: Sequence[ReleaseKey] = ()) -> None:
        """The app drew every view the storage labels made so far (:meth:`start` with ``preview``): the
        records are listed and decoded now, those of ``in_view`` (the releases whose rows are on screen)
        first; the last drawing's rows are those read next (:meth:`_previewed`)."""
        if in_view:
            self._in_view = tuple(in_view)
        self._preview_shown.set()

    def access(self) -> AccessProblems:
        """The storage permissions refused now, and the scope note (see :class:`AccessProblems`)."""
        problems = self.observer.problems()
        unread = tuple(f"cannot list Helm's storage in {f'namespace {ns!r}' if ns else 'all namespaces'}: {why}"
                       for ns, why in sorted(self.observer.unlisted().items()))
        return AccessProblems(tuple(problems.get(p.namespace or "", str(p)) for p in self.observer.denied()),
                              self.scope_note, unread)

    def _emit_access(self) -> None:
        # Other watch problems (a dropped connection) change nothing here: said only when it changed.
        self.book.emit_changed(self.access(), unsaid=AccessProblems())

    # -- access ----------------------------------------------------------------
    @property
    def acting(self) -> bool:
        """True when this instance may change the cluster (not read-only, and holding the lease if any)."""
        return self.gate.acting

    @property
    def readonly(self) -> bool:
        """True when every mutating action is refused (``--readonly``), whoever holds the lease."""
        return self.gate.readonly

    @property
    def lease_duration(self) -> float | None:
        """How long the engine lease lasts unrenewed, in seconds (None: no lease): what a wait for a held lease
        may take (:meth:`wait_for_lease`)."""
        return self.lease_config.duration if self.lease_config is not None else None

    @property
    def watched_namespaces(self) -> tuple[str, ...] | None:
        """The namespaces whose Helm storage is watched (``-n``, or the fall-back to the context's), or None for
        all."""
        return self.observer.namespaces

    @property
    def lease_holder(self) -> str:
        """The identity of the other instance holding the engine lease ("" when none known, or this one)."""
        return self.gate.holder

    @property
    def lease_held(self) -> tuple[str, str] | None:
        """When another instance holds the engine lease: what holds it in words (``helmdeck's app
        (host-4242-ab12)``, :func:`~engine.runtime.drive.lease.holder_said`) and what to do
        (:func:`~engine.runtime.drive.lease.held_fix`); None when this one leads or none is configured."""
        if self.elector is None or self.acting:
            return None
        role = self.elector.holder_role
        return holder_said(self.lease_holder, role), held_fix(role)

    def why_not(self, action: str, key: ReleaseKey | None = None) -> str | None:
        """None when ``action`` (one of :data:`ACTIONS`) may run now on ``key`` (or at all, without a key),
        else one sentence saying why not: read-only, lease held elsewhere, offline, no package, not
        pending, busy... (the one wording of :class:`~engine.runtime.gate.ActionGate`)."""
        return self.gate.why_not(action, key)

    def check(self, action: str, key: ReleaseKey | None = None) -> None:
        """Return when ``action`` may run now; else raise ActionRefused (cannot start now) or NotAvailable
        (this engine cannot do it, e.g. offline) with :meth:`why_not`'s sentence."""
        self.gate.check(action, key)

    @property
    def packages(self) -> dict[ReleaseKey, PackageSpec]:
        """The declared packages by release key (held by the release book)."""
        return self.book.packages

    @property
    def package_errors(self) -> list[PackageError]:
        return self.controller.package_errors

    @property
    def skipped(self) -> str:
        """One line: the packages folder's objects of kinds helmdeck does not read, how many of each."""
        return self.controller.skipped

    @property
    def left_out(self) -> tuple[str, ...]:
        """Flux fields helmdeck does not implement, left out with ``allow_unsupported``: one warning each."""
        return self.controller.left_out

    def queue_depth(self) -> int:
        """How many packages wait for a pass that is due now: the queue's depth, as controller-runtime's
        ``workqueue_depth`` (the controller's metric; :meth:`WorkQueue.depth`)."""
        return self.controller.queue.depth()[0]

    def queue_waiting(self) -> int:
        """How many packages are queued for a later pass: their next interval, or an error's backoff."""
        return self.controller.queue.depth()[1]

    def load_packages(self) -> None:
        """(Re)load the packages folder now; bad files are reported, the rest apply."""
        self.controller.load_packages()

    # -- reading ---------------------------------------------------------------
    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback`` with every :data:`EngineSignal`; returns an unsubscribe function."""
        return self.book.subscribe(callback)

    def releases(self) -> list[ReleaseView]:
        """Every known release (stored or declared), sorted by namespace and name."""
        return self.book.views()

    def release(self, key: ReleaseKey) -> ReleaseView | None:
        return self.book.view(key)

    def status(self, key: ReleaseKey) -> EngineStatus | None:
        """The package's engine status (history, counters, conditions), if any."""
        return self.book.status(key)

    def events(self, key: ReleaseKey) -> list[LogEntry]:
        """The package's event log, oldest first (at most the last 200)."""
        return self.book.events(key)

    async def manifest(self, key: ReleaseKey, revision: int) -> str:
        """The manifest Helm stored for ``revision`` of ``key``."""
        return await self.operations().manifest(key, revision)

    async def recorded_manifest(self, key: ReleaseKey, revision: int) -> str:
        """The manifest and hooks Helm stored for ``revision`` of ``key``, as a render prints them (the
        deployed side of diff and plan)."""
        return await self.operations().recorded_manifest(key, revision)

    async def values(self, key: ReleaseKey, revision: int, *, computed: bool = False) -> dict[str, Any]:
        """User-supplied values of a revision, or with ``computed`` the chart defaults merged under them."""
        return await self.operations().values(key, revision, computed=computed)

    async def render(self, key: ReleaseKey, *, reveal: bool = True) -> str:
        """The manifests an upgrade of ``key``'s package would apply (post-rendered), secrets masked unless
        ``reveal``."""
        return await self.operations().render(key, reveal=reveal)

    async def diff(self, key: ReleaseKey, *, reveal: bool = False) -> str:
        """What an upgrade would change (unified diff, "" = nothing), secrets masked unless ``reveal``."""
        return await self.operations().diff(key, reveal=reveal)

    def history(self, key: ReleaseKey) -> list[Observation]:
        """Every readable stored revision of ``key``, newest first ([] when none)."""
        return self.operations().history(key)

    async def release_record(self, key: ReleaseKey, revision: int) -> dict[str, Any]:
        """The whole stored release JSON of one revision (manifest, chart, values, ``info.notes``, hooks),
        loaded on demand in a thread. Raises KeyError when the revision is not stored."""
        return await self.operations().release_record(key, revision)

    def unreadable_releases(self) -> dict[ReleaseKey, UnreadableRecord]:
        """The releases whose newest stored record cannot be decoded, with the typed reason."""
        return self.observer.unreadable_releases()

    def secret_paths(self, key: ReleaseKey) -> tuple[ValuesPath, ...]:
        """The paths (tuples of keys and indexes) of ``key``'s values that came from Secrets through
        ``spec.valuesFrom``, as of its last resolution (() when none or unknown)."""
        return self.values_objects.secret_paths(key)

    def remember_secret_values(self, key: ReleaseKey, values: Mapping[str, Any]) -> None:
        """Have the engine's masker mask what ``values`` (e.g. a stored revision's user values) hold at
        ``key``'s :meth:`secret_paths`: a revision deployed from an older Secret shows its old values
        masked too. Blocking (compiles a pattern): call it in a thread for large values."""
        self.values_objects.remember(key, values)

    async def plan(self) -> Plan:
        """The plan of every package (state, next action, why, object changes), dependencies first; acts
        on nothing (:mod:`engine.runtime.plan`). Call it on a started engine."""
        from engine.runtime.plan import make_plan

        return await make_plan(self)

    async def plan_against(self, base: Engine, base_name: str) -> Plan:
        """What the change from ``base``'s packages (another started engine, e.g. over a git ref's tree) to
        this engine's would do, whatever the cluster holds (:func:`engine.runtime.plan.make_change_plan`)."""
        from engine.runtime.plan import make_change_plan

        return await make_change_plan(base, self, base_name)

    # -- Kubernetes Events and live objects (read-only) ---------------------------------
    def watch_kube_events(self, namespace: str, callback: Callable[[KubeEvent], None]) -> Callable[[], None]:
        """Call ``callback`` on the engine's loop with each Kubernetes Event of ``namespace`` (one shared
        watch per namespace; offline: only Events fed by hand); returns the unsubscribe function."""
        return self.kube_events.watch(namespace, callback)

    def recent_kube_events(self, namespace: str) -> list[KubeEvent]:
        """The recent Kubernetes Events of ``namespace`` kept (at most ``engine.monitor.events.KEEP``), oldest first."""
        return self.kube_events.recent(namespace)

    async def live_object(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any]:
        """The live object as the API server serves it (``namespace`` "" for a cluster-scoped kind).
        Raises KeyError (absent, or its kind not served), NotAvailable (offline), ApiException."""
        return await self._live().get(api_version, kind, namespace, name)

    async def live_pods(self, obj: dict[str, Any]) -> list[PodRow] | None:
        """The pods the workload ``obj`` (a live object) selects; None when its kind is not a workload.
        Raises NotAvailable (offline), ApiException."""
        return await self._live().pods(obj)

    async def container_logs(self, namespace: str, pod: str, container: str) -> str:
        """The last lines (``engine.monitor.inspect.LOG_LINES``) of a container's log. Raises RuntimeError("logs not
        served: ...") when the kubelet has none, NotAvailable (offline)."""
        return await self._live().logs(namespace, pod, container)

    async def kind_scopes(self, kinds: Iterable[tuple[str, str]]) -> dict[tuple[str, str], bool | None]:
        """Per ``(apiVersion, kind)``: True when served namespaced, False cluster-scoped, None not served
        (API discovery, cached per group version). Raises NotAvailable (offline), ApiException or urllib3's
        errors when discovery cannot be read."""
        return await self._live().scopes(kinds)

    # -- acting (see engine.runtime.operations) ----------------------------------
    async def reconcile(self, key: ReleaseKey, *, force: bool = False) -> ActionOutcome | Requested | None:
        """Run one pass now; ``force`` upgrades even when in sync and lifts a suspension.

        Returns the last action's outcome, or None when nothing needed doing; attached, the request made
        (:meth:`_by_controller`).
        """
        return (await self._by_controller(key, "upgrade" if force else "reconcile")
                or await self.operations().upgrade(key, force=force))

    async def rollback(self, key: ReleaseKey, revision: int = 0) -> ActionOutcome | Requested:
        """Roll back ``key`` to ``revision`` (0 = previous) and suspend its package (attached: requested)."""
        return (await self._by_controller(key, "rollback", revision=revision)
                or await self.operations().rollback(key, revision))

    async def test(self, key: ReleaseKey) -> ActionOutcome:
        """Run ``helm test`` on ``key``."""
        return await self.operations().test(key)

    async def cancel(self, key: ReleaseKey) -> ActionOutcome | Requested:
        """Stop the action running on ``key`` and record it as the engine's own failed action (see
        Operations.cancel); attached, the request made."""
        return await self._by_controller(key, "cancel") or await self.operations().cancel(key)

    # -- attached to a controller (engine.runtime.cockpit.attach) -------------------------
    @property
    def controllers(self) -> tuple[ControllerInfo, ...]:
        """The live ``helmdeck controller``s of the cluster (by Lease); () when none, or not following them."""
        return self.attachment.controllers if self.attachment is not None else ()

    async def controllers_read(self, timeout: float = 10.0) -> bool:
        """Wait (at most ``timeout`` seconds) until the controllers' Leases were read once and the Package
        objects of the live ones are shown (``helmdeck status`` then names their owners); False when this
        engine does not follow controllers, or not in time."""
        if self.attachment is None:
            return False
        try:
            await asyncio.wait_for(self.attachment.read.wait(), timeout)
        except TimeoutError:
            return False
        return True

    @property
    def controllers_problem(self) -> str:
        """Why the controllers' Leases or their Package objects cannot be read now ("" when they can, e.g. a 403:
        the app needs ``list`` on ``leases.coordination.k8s.io`` across namespaces)."""
        return self.attachment.problem if self.attachment is not None else ""

    async def _by_controller(self, key: ReleaseKey, action: str, *, revision: int = 0,
                             value: bool | str = True) -> Requested | None:
        """Every action's first step: when ``key``'s package is a Package object a live controller reconciles,
        :meth:`check` (the one gate), then the request the controller carries out (``action`` one of
        ``upgrade``, ``reconcile``, ``rollback`` (to ``revision``), ``unlock``, ``cancel``, ``pause``/``resume``
        (the monitor), ``suspend`` (``value`` True/False), ``maintenance`` (``value`` the mode, "" leaves));
        when a Flux HelmRelease owns the release, :meth:`check`, then Flux's own request for the actions
        :data:`~engine.runtime.ledger.owners.FLUX_REQUESTS` names (:meth:`_by_flux`); None when this engine acts
        itself. Raises ActionRefused/NotAvailable, ApiException."""
        if self.attachment is None or self.attachment.attached(key) is None:
            return await self._by_flux(key, action, value)
        self.gate.check("monitor" if action in ("pause", "resume") else action, key)
        return await self.attachment.request(key, action, revision=revision, value=value)

    async def _by_flux(self, key: ReleaseKey, action: str, value: bool | str) -> Requested | None:
        owner = self.gate.flux_owner(key)
        if owner is None or action not in FLUX_REQUESTS:
            return None  # the gate refuses the rest when the operations ask it
        self.gate.check(action, key)
        if self._api is None:  # the gate refuses offline
            raise NotAvailable(OFFLINE)
        request = FLUX_REQUESTS[action]
        try:
            said = await FluxClient(self._api).request(owner.namespace, owner.name, request, suspend=bool(value))
        except FluxRefused as exc:
            raise ActionRefused(str(exc)) from None
        what = {"force": "a forced reconcile (flux reconcile helmrelease --force)",
                "reset": "a reset of its failure counters (flux reconcile helmrelease --reset)",
                "suspend": "flux suspend helmrelease" if value else "flux resume helmrelease"}[request]
        text = f"requested of Flux: {what} on HelmRelease {owner.namespace}/{owner.name} ({said})"
        self.book.log(key, "request", "info", text)
        return Requested(key, (owner.namespace, owner.name), action, text)

    def _pulse_endpoints(self) -> list[tuple[str, str]]:
        out = {url: urlsplit(url).netloc for url in self._metrics_urls}
        if self.controllers:  # the app asks at start: the metrics reader is imported once a controller is seen
            from engine.runtime.cockpit.pulses import reachable

            for found in self.controllers:
                url = reachable(found)
                if url and url not in out:
                    out[url] = found.holder
        return [(replica, url) for url, replica in out.items()]

    def pulse_sources(self) -> bool:
        """True when :meth:`pulses` has an endpoint to read."""
        return bool(self._pulse_endpoints())

    async def pulses(self) -> tuple[Pulse, ...]:
        """Read each controller replica's metrics once more and return its pulses (reconciles per minute by
        result, queue depth, helm action p50/p99), one per replica: the URLs given, then the live controllers'
        reachable from here (:mod:`engine.runtime.cockpit.pulses`); () when none is known."""
        return await self.pulse_meter().sample()

    def advertise(self, annotations: Mapping[str, str]) -> None:
        """Annotations this engine's Lease carries from its next renewal (``helmdeck controller``: where its
        metrics are served, :mod:`engine.runtime.drive.lease`). Without a Lease, nothing."""
        if self.elector is not None:
            self.elector.advertise(annotations)

    def placed_here(self, key: ReleaseKey) -> bool:
        """Is ``key``'s package reconciled by this controller replica? False when it stands by for its Lease,
        or ``--shards auto`` places the package on another live member (:meth:`ActionGate.placed_here`)."""
        return self.gate.placed_here(key)

    def owner(self, key: ReleaseKey) -> Owner:
        """Who owns ``key``: its helmdeck package, a Flux HelmRelease, or none (engine.runtime.ledger.owners)."""
        view = self.book.view(key)
        return owner_of(view) if view is not None else NONE

    async def unlock(self, key: ReleaseKey) -> ActionOutcome | Requested:
        """Mark ``key``'s pending release failed so it can move again (attached: requested)."""
        return await self._by_controller(key, "unlock") or await self.operations().unlock(key)

    async def suspend(self, key: ReleaseKey, suspended: bool = True) -> Requested | None:
        """Suspend (or with ``suspended`` False resume, which queues a pass) reconciliation of ``key``'s
        package; kept in its engine status (attached: its ``spec.suspend`` patched, the request returned).
        Raises ActionRefused/NotAvailable as :meth:`check` ("suspend")."""
        requested = await self._by_controller(key, "suspend", value=suspended)
        if requested is None:
            self.operations().suspend(key, suspended)
        return requested

    async def set_maintenance(self, key: ReleaseKey, mode: str) -> PassResult | Requested:
        """Enter (``"NoResourceReconciliation"``) or leave (``""``) maintenance mode and reconcile once (each
        change costs exactly one upgrade); returns that pass (attached: its ``spec.maintenance`` patched, the
        request returned). Raises ActionRefused/NotAvailable."""
        return (await self._by_controller(key, "maintenance", value=mode)
                or await self.operations().set_maintenance(key, mode))

    async def pause_monitor(self, key: ReleaseKey) -> int | Requested:
        """The release monitor's pause counter +1 (as nelm's PauseMonitor); returns the new count (attached:
        the request made). Raises ActionRefused/NotAvailable as :meth:`check` ("monitor")."""
        return await self._by_controller(key, "pause") or self.operations().pause_monitor(key)

    async def resume_monitor(self, key: ReleaseKey) -> int | Requested:
        """The release monitor's pause counter -1 (never below 0; at 0 it checks again); returns the new
        count (attached: the request made). Raises ActionRefused/NotAvailable as :meth:`check` ("monitor")."""
        return await self._by_controller(key, "resume") or self.operations().resume_monitor(key)

    def enqueue(self, key: ReleaseKey) -> None:
        """Queue a pass of ``key``'s package (deduplicated; after the running one, if any). Never raises."""
        self.controller.queue.add(key)

    async def settle(
        self, keys: Iterable[ReleaseKey], deadline: float, *, stop: asyncio.Event | None = None,
    ) -> dict[ReleaseKey, PassResult]:
        """Pass each of ``keys`` until it rests, dependencies first, for at most ``deadline`` seconds
        (``helmdeck reconcile --once``); returns the last pass of each key that finished (setting ``stop``
        ends the wait: unfinished keys are missing). See PackageController.settle."""
        return await self.controller.settle(keys, deadline, stop=stop)

    # -- chart versions (the version picker, ``helmdeck versions``) ------------------------
    async def chart_versions(self, key: ReleaseKey) -> VersionList:
        """The versions ``key``'s repository offers, newest first, the deployed one, the range and the kept
        verifications marked (refreshes the row's newer-version marker). Raises ActionRefused (no package,
        local chart), SourceError."""
        return await self.versions().list(key)

    def plan_pin(self, key: ReleaseKey, version: str) -> Pin:
        """The file edit pinning ``key``'s chart to ``version`` (nothing written). Raises ActionRefused,
        PinError (a digest-selecting OCIRepository, a field not editable in place), OSError."""
        return self.versions().plan_pin(key, version)

    async def version_diff(self, key: ReleaseKey, version: str, *, reveal: bool = False) -> str:
        """What upgrading ``key`` to chart ``version`` would change (unified diff, "" = nothing), secrets
        masked unless ``reveal``. Raises ActionRefused, NotAvailable, SourceError, PackageError, HelmError."""
        return await self.versions().diff(key, version, reveal=reveal)

    async def pin(self, key: ReleaseKey, version: str) -> Pin:
        """Write :meth:`plan_pin`'s edit and reload the packages folder (the next pass deploys it); returns
        the edit. Raises ActionRefused (read-only, lease, no package, local chart), PinError, OSError."""
        return await self.versions().pin(key, version)

    async def uninstall(self, key: ReleaseKey) -> ActionOutcome:
        """``helm uninstall`` the release; its package (if any) is suspended."""
        return await self.operations().uninstall(key)

    async def diff_against(self, key: ReleaseKey, desired: str, *, reveal: bool = False) -> str:
        """The deployed manifest of ``key`` against the manifests ``desired`` (unified diff per object, "" when
        equal), secrets masked unless ``reveal``. See Operations.diff_against."""
        return await self.operations().diff_against(key, desired, reveal=reveal)

    async def cleanup(
        self, *, dry_run: bool = False, ignore_namespaces: tuple[str, ...] = (),
        confirmed: Collection[str] | None = None,
    ) -> list[CleanupItem]:
        """Uninstall every release of this package set no package declares (``dry_run``: list them only;
        ``confirmed``: only these ``namespace/name`` refs, as listed to the operator). See Operations.cleanup."""
        return await self.operations().cleanup(dry_run=dry_run, ignore_namespaces=ignore_namespaces,
                                               confirmed=confirmed)

    async def prune_removed(self) -> list[CleanupItem]:
        """``--prune``'s sweep of what no event says: uninstall the releases of this package set that no package
        declares, also those whose files went before the start, as :meth:`cleanup` does (each release's log says
        "prune"). Raises ActionRefused (read-only, lease held elsewhere, no packages folder: without a package set
        every release helmdeck manages would look removed; BadPackageFiles while a package file has errors: its
        release would look removed) or NotAvailable (offline)."""
        if self.controller.package_set is None:
            raise ActionRefused("prune needs a packages folder (--packages): it removes only its package set's "
                                "releases")
        return await self.operations().cleanup(action="prune")

