"""The engine: the one object the app and the CLI talk to.

It builds its collaborators at construction (those only the app or an operator's action uses, on first
use: a headless command imports what it runs), starts and stops them, and delegates to them:

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
for tests, and a test (tests/test_facade.py) keeps the app and the CLI off them.

Actions raise :class:`ActionRefused` (cannot start now) or :class:`NotAvailable`
(this engine cannot do it); :meth:`Engine.why_not` says so in advance.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from kubernetes import client

from engine.base.fields import PackageError
from engine.base.handoff import LoopHandoff
from engine.base.masking import Masker
from engine.base.strvals import Path as ValuesPath
from engine.base.wire import CONTROLLER, ROLE
from engine.helm import Helm
from engine.kube.client import KubeTarget, api_client
from engine.monitor.events import KubeEvent
from engine.package.model import PackageSpec
from engine.reconcile.action import ActionContext
from engine.reconcile.atomic import PassResult
from engine.reconcile.drift import DriftDetector
from engine.reconcile.status import ActionOutcome, EngineStatus, FailureCounts
from engine.reconcile.store import StatusStore
from engine.runtime.drive.controller import PackageController, storage_relabeler, storage_unlocker
from engine.runtime.drive.folder import PackageFolder
from engine.runtime.drive.lease import LeaseConfig, LeaseElector
from engine.runtime.drive.ports import PackageInput
from engine.runtime.drive.values_objects import ValuesObjects
from engine.runtime.ledger.book import ActionRefused, NotAvailable, ReleaseBook, Subscriber
from engine.runtime.ledger.gate import ACTIONS, OFFLINE, ActionGate
from engine.runtime.ledger.owners import FLUX_OWNED, NONE, FluxClient, Owner, owner_of
from engine.runtime.ledger.tasks import Background
from engine.runtime.package_set import PackageSet, cluster_package_set, package_set_for
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
from engine.service.records import ReleaseRecord
from engine.storage.observation import Observation
from engine.storage.observer import Observer
from engine.storage.records import ListedRevision, UnreadableRecord

if TYPE_CHECKING:  # the parts of a controller, the app, --kustomize, plan and actions are imported when built
    from engine.monitor.inspect import Inspector, PodRow
    from engine.runtime.chart_versions import ChartVersions, Pin, VersionList
    from engine.runtime.drive.attach import Attachment
    from engine.runtime.drive.finalizer import Finalizers
    from engine.runtime.drive.kustomized import KustomizeSource
    from engine.runtime.drive.object_status import StatusWriter
    from engine.runtime.drive.objects import PackageObjects
    from engine.runtime.drive.requests import Requests
    from engine.runtime.drive.shards import Shards
    from engine.runtime.operations import Operations
    from engine.runtime.plan import Plan
    from engine.runtime.pulses import PulseMeter
    from engine.runtime.shard import Shard

log = logging.getLogger(__name__)
# Seconds the storage list thread waits for the labels' views to be made, then again for the app to draw
# them (engine.start, preview_shown).
PREVIEW_WAIT = 5.0
# Seconds a stopping controller waits, at most, for its Package status and Event writes (within the chart's grace:
# the stop deadline plus 15 s, which also covers helm's stop grace and the unlock).
STATUS_FLUSH = 5.0

__all__ = ["ACTIONS", "FLUX_OWNED", "ActionRefused", "Engine", "LeaseConfig", "NotAvailable"]

class Engine:
    """Drives the packages in ``packages_dir`` and reports every release in storage.

    Builds an API client for ``target`` at once (raises KubeConfigError when
    the kubeconfig cannot be loaded); :meth:`offline` builds one without a
    cluster. ``observer`` may be given (default: one for the cluster, or an
    empty offline one). Subscribers are called on the engine's event loop.
    ``readonly`` refuses every mutating action. ``concurrency`` bounds
    reconciles running at once; ``prune`` uninstalls the release of a
    removed package file (else it is reported as orphaned); ``lease`` makes
    this one of several instances of which only the lease holder acts.
    ``allow_unsupported`` reads Flux documents with fields helmdeck does not implement, those fields
    left out with a warning (:mod:`engine.package.flux`); else they are errors.
    ``package_set`` names the folder's package set (``--package-set``; default: its base name and a
    digest of its resolved path, :mod:`engine.runtime.package_set`); raises PackageSetNameError
    when it is not a valid name. ``cluster_packages``: the packages are the API server's Package objects
    of ``namespaces`` (``helmdeck controller``) instead of a folder; their set is
    :func:`~engine.runtime.package_set.cluster_package_set`. Raises ApiException when they cannot be listed.
    ``shard`` (with ``cluster_packages``): only the Package objects its label selector matches, and the
    sources they name (``--watch-label-selector``, :mod:`engine.runtime.shard`); with a ``lease`` it takes the
    actor claim, hands a relabelled Package's running action over within ``stop_deadline`` seconds and leaves
    alone a Package another live controller also takes (:mod:`engine.runtime.drive.static_shards`).
    ``default_service_account`` (with ``cluster_packages``): the ServiceAccount a Package without
    ``spec.serviceAccountName`` acts as, Flux's ``--default-service-account``.
    ``attach``: follow the cluster's ``helmdeck controller``s; while one is live, its Package objects show as
    packages and the actions on them become requests it carries out (:mod:`engine.runtime.drive.attach`).
    ``controller_metrics``: the metrics URLs of controller replicas (checked by
    :func:`engine.runtime.pulses.check_url`), read for :meth:`pulses` beside those the controllers' Leases give.
    ``kustomize``: the packages are the objects of a repository path built with kustomize and Flux's
    post-build substitution (:mod:`engine.runtime.drive.kustomized`); ``packages_dir`` is then that path
    (it names the package set).
    ``auto_shards`` (with ``cluster_packages`` and a ``lease``: this replica's membership Lease,
    :func:`engine.runtime.drive.members.member_lease`): ``helmdeck controller --shards auto``, every replica acts
    on the packages placed on it, under the actor claim (:mod:`engine.runtime.drive.shards`); an action on a
    package that moves away finishes here (cancelled only past the package's timeout).
    ``api``: a client of ``target`` made already (the command line's, which asked the API server about access
    with it first), so the kubeconfig is loaded once; None builds one.
    """

    # Built on first use (a headless command imports only what it runs): the operator's actions
    # (engine.runtime.operations), the version picker (attached, it pins in the Package objects) and the
    # controller replicas' metrics read for pulses().
    operations: Operations
    versions: ChartVersions
    pulse_meter: PulseMeter

    def __init__(
        self,
        target: KubeTarget,
        helm: Helm,
        packages_dir: Path | None = None,
        *,
        observer: Observer | None = None,
        namespaces: list[str] | None = None,
        readonly: bool = False,
        concurrency: int = 4,
        prune: bool = False,
        lease: LeaseConfig | None = None,
        watch_packages: bool = True,
        monitors: bool = True,
        online: bool = True,
        package_set: str | None = None,
        allow_unsupported: bool = False,
        cluster_packages: bool = False,
        default_service_account: str = "",
        attach: bool = False,
        controller_metrics: tuple[str, ...] = (),
        kustomize: KustomizeSource | None = None,
        shard: Shard | None = None,
        auto_shards: bool = False,
        stop_deadline: float = 30.0,
        api: client.ApiClient | None = None,
    ):
        self.namespaces = namespaces
        self.lease_config = lease
        self.watch_packages = watch_packages
        self.monitors = monitors
        self.online = online
        self.masker = Masker()  # one per engine: a secret masks the same everywhere it is shown
        self.tasks = Background()
        self._monitor_tasks: list[asyncio.Task[Any]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._preview_made: threading.Event | None = None  # the last page of storage labels made into views
        self._preview_shown = threading.Event()  # the app drew the views the labels made (preview_shown)
        self._preview_shown.set()  # nothing to draw yet
        # Set by whoever narrowed ``namespaces`` (e.g. the command line's fall-back): see AccessProblems.
        self.scope_note = ""
        # Which package set labels its releases (cleanup removes only its own); its Lease is named after it.
        self._api = (api or api_client(target)) if online else None
        api = self._api or client.ApiClient()  # offline: a client that is never called (the gate refuses)
        self.package_set: PackageSet | None = (
            package_set_for(packages_dir, package_set) if packages_dir is not None
            else cluster_package_set(package_set, namespaces) if cluster_packages else None)
        self.objects: PackageObjects | None = None
        if cluster_packages:
            from engine.runtime.drive.objects import PackageObjects

            self.objects = PackageObjects(api, namespaces, default_service_account=default_service_account,
                                          label_selector=shard.selector if shard else "")
        source: PackageInput | None = (
            self._kustomized(kustomize, allow_unsupported) if kustomize is not None else
            PackageFolder(packages_dir, allow_unsupported=allow_unsupported) if packages_dir is not None
            else self.objects)
        # The packages are read now: their storage namespaces are watched too.
        first = source.load() if source is not None else None
        self.observer = observer or Observer(self._api, self._observed_namespaces(first.specs if first else {}))
        # Statuses of releases whose namespace does not exist yet are kept beside the Lease (engine.reconcile.store).
        home = lease.namespace if lease is not None else "default"
        self.book = ReleaseBook(self.observer, store=StatusStore(api, home) if online else None,
                                writable=lambda: self.gate.acting)
        self.gate = ActionGate(self.book, self.observer.latest, readonly=readonly, online=online,
                               leader=lease is None)
        self.values_objects = ValuesObjects(self._api, self.book, self.masker)  # spec.valuesFrom's objects
        self.service = ReleaseService(helm, api, on_status=lambda ns, n, s: self.book.set_monitor((ns, n), s),
                                      namespaces=namespaces, values_from=self.values_objects.layers,
                                      latest=lambda ns, n: ReleaseRecord.from_observation(self.observer.latest(ns, n)))
        driver = self.observer.driver
        ctx = ActionContext(helm=helm, observer=self.observer, api=self._api, driver=driver,
                            unlock=storage_unlocker(self._api, driver) if self._api else None,
                            quiet=self.service.quiet, paused=self.service.monitor_paused,
                            checksum=lambda req: self.service.checksum(req.spec.release_namespace, req.spec))
        self.controller = PackageController(
            self.book, self.gate, ctx, self.service, DriftDetector(api) if online else None, helm, source,
            self.tasks, concurrency=concurrency, prune=prune, package_set=self.package_set, monitors=monitors,
            values=self.values_objects, relabel=storage_relabeler(self._api, driver) if self._api else None)
        self._inspector: Inspector | None = None  # built on first use (_live)
        self.kube_events = ReleaseEvents(self._api, self.book, self._on_loop)  # offline: fed by hand
        self.status_writer: StatusWriter | None = None
        self.finalizers: Finalizers | None = None
        self.requests: Requests | None = None
        if self.objects is not None and online:
            self._controller_parts(api, self.objects)
        self.attachment: Attachment | None = None
        if attach and online:
            from engine.runtime.drive.attach import Attachment

            # The namespace's Events may be watched already (a monitor's Warnings): the controller's Events
            # from before the attachment found it come first, or its running action would be missed.
            self.attachment = Attachment(api, self.book, namespaces,
                                         lambda ns, callback: self.kube_events.watch(ns, callback, replay=True))
        self._metrics_urls = controller_metrics
        self.gate.attached = self.attachment.attached if self.attachment is not None else None
        self.elector = (LeaseElector(api, lease.name, lease.namespace, identity=lease.identity,
                                     duration=lease.duration, retry=lease.retry, on_change=self.controller.on_lease,
                                     labels=dict(lease.labels), annotations=dict(lease.annotations))
                        if lease is not None and online else None)
        if self.status_writer is not None and self.elector is not None:  # status.controller: who reconciles
            self.status_writer.instance = self.elector.identity  # its Events' reportingInstance
            self.status_writer.controller = {"replica": self.elector.identity,
                                             "shard": shard.name if shard else "auto" if auto_shards else ""}
        self.shards = (self._shards(api, lease, stop_deadline)
                       if auto_shards and lease is not None and self.elector is not None and self.objects is not None
                       else self._static_shards(api, lease, shard, stop_deadline)
                       if shard is not None and lease is not None and self.elector is not None
                       and self.objects is not None else None)
        # Observer callbacks come from its watch threads: handled on the engine's loop.
        # In batches: a list of 10,000 records wakes the loop a few times, not 10,000 (engine.base.handoff).
        self._storage_changes = LoopHandoff(self.controller.on_storage)
        self.observer.subscribe(self._storage_changes.put)
        self.observer.on_problems(lambda: self._on_loop(self._emit_access))
        if first is not None:
            self.controller.apply_folder(first)

    if not TYPE_CHECKING:  # for mypy they are the attributes annotated on the class

        def __getattr__(self, name: str) -> Any:
            """``operations``, ``versions`` and ``pulse_meter``: built on first use, then plain attributes."""
            builders = {"operations": self._new_operations, "versions": self._new_versions,
                        "pulse_meter": self._new_pulse_meter}
            if name not in builders:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            value = builders[name]()
            setattr(self, name, value)
            return value

    def _new_operations(self) -> Operations:
        from engine.runtime.operations import Operations

        return Operations(self.book, self.gate, self.controller, self.masker, self.tasks)

    def _new_versions(self) -> ChartVersions:
        from engine.runtime.chart_versions import ChartVersions

        return ChartVersions(self.book, self.gate, self.controller, self.operations,
                             self.attachment.patch if self.attachment is not None else None)

    def _new_pulse_meter(self) -> PulseMeter:
        from engine.runtime.pulses import PulseMeter

        return PulseMeter(self._pulse_endpoints)

    def _kustomized(self, kustomize: KustomizeSource, allow_unsupported: bool) -> PackageInput:
        from engine.runtime.drive.kustomized import KustomizeInput

        return KustomizeInput(kustomize, self._api, self.masker.remember, allow_unsupported=allow_unsupported)

    def _controller_parts(self, api: client.ApiClient, objects: PackageObjects) -> None:
        """What ``helmdeck controller`` adds over the Package objects: their status and Events written back,
        finalizers, and the operator's actions requested by annotation."""
        from engine.runtime.drive.finalizer import Finalizers
        from engine.runtime.drive.object_status import StatusWriter
        from engine.runtime.drive.requests import Actions, Requests

        self.status_writer = StatusWriter(api, self.book, objects, acting=lambda: self.gate.acting,
                                          spawn=self.tasks.spawn, problems=lambda: self.controller.package_errors)
        self.finalizers = Finalizers(
            api, objects, lambda spec, why: self.controller.uninstall_removed(spec, why, stored=True),
            self._record, acting=lambda: self.gate.acting, spawn=self.tasks.spawn)
        ops = self.operations
        actions = Actions(run=lambda key, force: ops.upgrade(key, force=force), reset=self._reset_failures,
                          rollback=ops.rollback, unlock=ops.unlock, cancel=ops.cancel, pause=ops.pause_monitor,
                          resume=ops.resume_monitor)
        self.requests = Requests(objects, self.book, actions, acknowledge=self.status_writer.acknowledge,
                                 acting=lambda: self.gate.acting, spawn=self.tasks.spawn)

    def _shards(self, api: client.ApiClient, lease: LeaseConfig, stop_deadline: float) -> Shards:
        """``--shards auto``'s parts, wired: the gate, the guard, the action context and the writers on the
        Package objects ask them (engine.runtime.drive.shards)."""
        from engine.runtime.drive.members import Membership
        from engine.runtime.drive.shards import Shards

        assert self.elector is not None and self.objects is not None
        membership = Membership(api, lease.namespace, self.elector.identity, duration=lease.duration,
                                retry=lease.retry)
        shards = Shards(api, self.objects, self.book, membership, self.elector, self.observer.latest,
                        self.tasks.spawn, stop_deadline=stop_deadline, gained=self._gained, lost=self._lost)
        self.objects.on_burst(shards.on_packages)  # a Package created or deleted may move another
        if self.status_writer is not None:  # then a status another replica wrote on a Package placed here
            self.objects.on_burst(self.status_writer.reclaim)
        return self._wire_shards(shards)

    def _static_shards(self, api: client.ApiClient, lease: LeaseConfig, shard: Shard,
                       stop_deadline: float) -> Shards:
        """A static shard's parts (``--watch-label-selector``): the same claim and hand-over as ``--shards
        auto``, with every live controller's Lease as the members, and no Package another live controller also
        takes acted on (engine.runtime.drive.static_shards)."""
        from engine.runtime.drive.members import Membership
        from engine.runtime.drive.static_shards import StaticShards

        assert self.elector is not None and self.objects is not None
        membership = Membership(api, lease.namespace, self.elector.identity, duration=lease.duration,
                                retry=lease.retry, selector=f"{ROLE}={CONTROLLER}", forget=False)
        shards = StaticShards(api, self.objects, self.book, membership, self.elector, self.observer.latest,
                              self.tasks.spawn, stop_deadline=stop_deadline, gained=self._gained, lost=self._lost,
                              shard=shard,
                              lease=lease.name,
                              warn=lambda ref, reason, message: self._record(ref, reason, message, True))
        self.objects.on_burst(shards.sweep)
        if self.status_writer is not None:
            self.status_writer.left = shards.ref
        return self._wire_shards(shards)

    def _wire_shards(self, shards: Shards) -> Shards:
        """The gate, the guard, the action context and the writers on the Package objects ask ``shards``."""
        shards.membership.on_change = shards.on_members
        shards.membership.on_return = shards.on_return
        self.gate.shard_refusal = shards.why_not
        self.gate.placement = shards.placed_elsewhere
        self.book.let_go = shards.let_go
        self.controller.ctx.fence = shards.fence
        self.controller.ctx.recheck = shards.recheck
        shards.cancel = lambda key, by: self.operations.cancel(key, by=by)
        for writer in (self.status_writer, self.finalizers, self.requests):
            if writer is not None:
                writer.mine = shards.mine
        if self.status_writer is not None:
            self.status_writer.after_pass_only = True
        return shards

    def _gained(self, keys: set[ReleaseKey]) -> None:
        """Packages placed on this replica now (``--shards auto``): their objects looked at; once started (which
        reads every status, queues and monitors what is placed here), :meth:`_take` them."""
        if self.status_writer is not None:
            self.status_writer.forget(keys)
            self.status_writer.catch_up()
        for part in (self.finalizers, self.requests):
            if part is not None:
                part.sweep()
        if self.controller.auto:
            self.tasks.spawn(self._take(keys))

    async def _take(self, keys: set[ReleaseKey]) -> None:
        """Gained packages: the status the replica that had them persisted is read where it acted since this one
        last did (:meth:`ReleaseBook.reload_status`: no read when storage's latest revision is known here; none
        for a package whose action still runs here), then each is queued at once, not on its interval (the
        takeover after a replica's departure), and monitored."""
        book = self.book
        await asyncio.gather(*(book.reload_status(key) for key in keys if not book.busy(key)))
        if self.gate.acting:
            for key in sorted(keys, key=self._settled):  # equal due times run in the order added
                self.controller.queue.add(key)
        for key in keys:
            self.tasks.spawn(self.controller.refresh_monitor(key))

    def _settled(self, key: ReleaseKey) -> bool:
        """Was ``key``'s Package object reconciled at its current spec (``PackageObjects.settled``)? False sorts
        first: after a takeover the edited packages wait for no look at the settled ones."""
        spec = self.book.packages.get(key)
        return self.objects is None or spec is None or self.objects.settled(spec.file)

    def _lost(self, keys: set[ReleaseKey]) -> None:
        """Packages placed on another replica now (``--shards auto``): their monitors stop at the pass boundary
        (at once, or when the action running here ends), the new owner's monitor takes over."""
        for key in keys:
            if self.book.busy(key):
                self.tasks.spawn(self._unmonitor_after(key))
            else:
                self.service.remove_monitor(*key)

    async def _unmonitor_after(self, key: ReleaseKey) -> None:
        await self.book.released(key)
        if self.gate.placed_elsewhere(key) is not None:
            self.service.remove_monitor(*key)

    def _reset_failures(self, key: ReleaseKey) -> None:
        """Zero ``key``'s failure counters (a resetAt request), so a stalled package is attempted again."""
        self.book.update_status(key, failures=FailureCounts())

    async def _record(self, ref: tuple[str, str], reason: str, message: str, warning: bool) -> None:
        """An Event on the Package object ``ref`` (the status writer's)."""
        if self.status_writer is not None:
            await self.status_writer.event(ref, reason, message, warning=warning)

    @classmethod
    def offline(cls, packages_dir: Path | None = None, *, observer: Observer | None = None,
                readonly: bool = False) -> Engine:
        """An engine without a cluster over an offline ``observer`` (fed fixed records) and the packages
        in ``packages_dir``: it shows state and keeps its own, and acts on nothing (fixtures, snapshots)."""
        return cls(KubeTarget(), Helm("helm"), packages_dir, observer=observer or Observer(None),
                   readonly=readonly, watch_packages=False, monitors=False, online=False)

    # -- lifecycle -----------------------------------------------------------
    async def start(self, *, reconcile: bool = True, preview: bool = False) -> None:
        """Observe storage, read persisted statuses, load packages and start reconciling.

        With ``reconcile`` False nothing is queued (actions still work on request). With ``preview``
        (the app) every stored release is announced from its storage labels first, before its records
        are decoded (:meth:`ReleaseBook.preview`; one more list, metadata only).
        """
        self._loop = self._storage_changes.loop = asyncio.get_running_loop()
        self.book.reading = True  # no row until storage is listed and the statuses read (but the labels')
        unlisten = ([self.observer.on_listed(self._preview), self.observer.on_labels_done(self._previewed)]
                    if preview else [])
        try:
            # Storage is listed first: its labels' rows (preview) may then be in hand for the app's first frame,
            # while the packages folder loads in a thread. The book makes no view while reading, so the
            # packages and the labels may come in either order (refresh_all remakes every view after).
            self.observer.start()
            await self.controller.load()
            await asyncio.to_thread(self.observer.wait_synced, 30)
            if self.scope_note or self.observer.denied() or self.observer.unlisted():
                self._emit_access()
            for key in await self.book.load_statuses(self._observed_namespaces(self.book.packages)):
                self.book.set_state(key, None)  # a verdict made before the status was read does not hold
            await self.controller.observe_flux()  # which HelmRelease documents' releases Flux owns
        finally:
            self.book.reading = False
            for stop in unlisten:
                stop()
        if self.status_writer is not None:
            self.status_writer.start()
            self.status_writer.catch_up()
        if self.objects is not None and self.finalizers is not None and self.requests is not None:
            for part in (self.finalizers, self.requests):  # after each burst of object changes, and on the Lease
                self.book.subscribe(part.on_signal)
                self.objects.on_burst(part.sweep)
                part.sweep()
        self.book.refresh_all()
        if self.controller.folder is not None and self.watch_packages:
            self.tasks.spawn(self.controller.watch())
        if self.elector is not None:
            self.elector.start()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.elector.decided.wait(), 10)
            if self.shards is not None:  # the members before the first pass: each acts on its own share
                await self.shards.membership.refresh()
                self.shards.on_members(self.shards.membership.live())
                self.tasks.spawn(self.shards.membership.run())
            if self.shards is None:  # --shards auto: read as packages are gained (_take), never polled
                self.tasks.spawn(self.controller.follow_statuses(
                    lambda: self._observed_namespaces(self.book.packages)))
        if self.online and self.monitors:
            for key in [k for k in self.book.packages if self.gate.placed_elsewhere(k) is None]:
                task = self.tasks.spawn(self.controller.refresh_monitor(key))
                if task is not None:
                    self._monitor_tasks.append(task)
        self.controller.start(reconcile=reconcile)
        if reconcile and self.controller.prune and self.online and not self.readonly:
            self.tasks.spawn(self._prune_at_start())
        if self.attachment is not None:
            self.tasks.spawn(self.attachment.run())
        if reconcile and self.online:  # repositories on their own interval (engine.runtime.drive.repositories)
            from engine.runtime.drive.repositories import RepositoryRefresh

            self.tasks.spawn(RepositoryRefresh(self.book, lambda: self.controller.charts,
                                               self.controller.triggers).run())

    async def stop(self, deadline: float = 30.0) -> bool:
        """Stop: running helm actions may finish for up to ``deadline`` seconds, then are cancelled; a controller
        then writes their Package objects' status and Events (at most :data:`STATUS_FLUSH` seconds) before it
        gives the Lease up.

        Returns True when every running action finished on its own.
        """
        if self.controller.folder is not None:
            self.controller.folder.stop()
        clean = await self.controller.queue.stop(deadline)
        # A cancelled action's status reaches its Package before the Lease goes: the passes' first, then those of
        # the actions cancelled with the background tasks (the operator's, requested by annotation); both within
        # STATUS_FLUSH seconds.
        flushed = time.monotonic() + STATUS_FLUSH
        if self.status_writer is not None:
            await self.status_writer.flush(STATUS_FLUSH)
        await self.tasks.cancel()
        if self.status_writer is not None:
            await self.status_writer.flush(max(0.0, flushed - time.monotonic()))
        if self.elector is not None:
            await self.elector.stop(release=True)
        if self.online:
            await asyncio.to_thread(self.service.stop_monitors)
        await asyncio.to_thread(self.observer.stop)
        await asyncio.to_thread(self.kube_events.stop)
        return clean

    def _observed_namespaces(self, packages: dict[ReleaseKey, PackageSpec]) -> list[str] | None:
        if not self.namespaces:
            return None
        return sorted(set(self.namespaces) | {s.storage_ns for s in packages.values()})

    async def monitors_ready(self) -> None:
        """Wait until the monitors started at :meth:`start` have listed their resources."""
        await asyncio.gather(*self._monitor_tasks, return_exceptions=True)

    async def wait_for_lease(self) -> bool:
        """Wait until this instance leads, or the holder proves alive for a lease duration; True if leading
        (a lease left by a killed instance expires after its duration: a new instance takes over then)."""
        if self.elector is None or self.lease_config is None:
            return self.acting
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.controller.leading.wait(),
                                   self.lease_config.duration + 2 * self.lease_config.retry)
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
        self._on_loop(make)

    def _previewed(self) -> None:
        """The labels are listed (in the observer's list thread): it goes on to list and decode the records
        once the loop has made every page's views and the app has drawn them (:meth:`preview_shown`; each
        wait bounded: :data:`PREVIEW_WAIT`), so that decoding does not compete for the interpreter with the
        first table (at 10,000 releases its last 0.1-1.6 s under load, bench/tui_bench.py)."""
        made = self._preview_made
        if made is not None:
            made.wait(PREVIEW_WAIT)  # the pages' views are made in order: the last one's is the last
            self._preview_shown.wait(PREVIEW_WAIT)

    def preview_shown(self) -> None:
        """The app drew every view the storage labels made so far (:meth:`start` with ``preview``): the
        records are listed and decoded now."""
        self._preview_shown.set()

    def _on_loop(self, call: Callable[..., None], *args: Any) -> None:
        """Run ``call`` on the engine's loop once started (before: at once, e.g. records fed offline)."""
        if self._loop is not None and self._loop.is_running():
            self._loop.call_soon_threadsafe(call, *args)
        else:
            call(*args)

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
        return await self.operations.manifest(key, revision)

    async def recorded_manifest(self, key: ReleaseKey, revision: int) -> str:
        """The manifest and hooks Helm stored for ``revision`` of ``key``, as a render prints them (the
        deployed side of diff and plan)."""
        return await self.operations.recorded_manifest(key, revision)

    async def values(self, key: ReleaseKey, revision: int, *, computed: bool = False) -> dict[str, Any]:
        """User-supplied values of a revision, or with ``computed`` the chart defaults merged under them."""
        return await self.operations.values(key, revision, computed=computed)

    async def render(self, key: ReleaseKey, *, reveal: bool = True) -> str:
        """The manifests an upgrade of ``key``'s package would apply (post-rendered), secrets masked unless
        ``reveal``."""
        return await self.operations.render(key, reveal=reveal)

    async def diff(self, key: ReleaseKey, *, reveal: bool = False) -> str:
        """What an upgrade would change (unified diff, "" = nothing), secrets masked unless ``reveal``."""
        return await self.operations.diff(key, reveal=reveal)

    def history(self, key: ReleaseKey) -> list[Observation]:
        """Every readable stored revision of ``key``, newest first ([] when none)."""
        return self.operations.history(key)

    async def release_record(self, key: ReleaseKey, revision: int) -> dict[str, Any]:
        """The whole stored release JSON of one revision (manifest, chart, values, ``info.notes``, hooks),
        loaded on demand in a thread. Raises KeyError when the revision is not stored."""
        return await self.operations.release_record(key, revision)

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
    async def reconcile(self, key: ReleaseKey, *, force: bool = False) -> ActionOutcome | None:
        """Run one pass now; ``force`` upgrades even when in sync and lifts a suspension.

        Returns the last action's outcome, or None when nothing needed doing.
        """
        self._acts_itself(key)
        return await self.operations.upgrade(key, force=force)

    async def rollback(self, key: ReleaseKey, revision: int = 0) -> ActionOutcome:
        """Roll back ``key`` to ``revision`` (0 = previous) and suspend its package."""
        self._acts_itself(key)
        return await self.operations.rollback(key, revision)

    async def test(self, key: ReleaseKey) -> ActionOutcome:
        """Run ``helm test`` on ``key``."""
        return await self.operations.test(key)

    async def cancel(self, key: ReleaseKey) -> ActionOutcome:
        """Stop the action running on ``key`` and record it as the engine's own failed action (see
        Operations.cancel)."""
        self._acts_itself(key)
        return await self.operations.cancel(key)

    # -- attached to a controller (engine.runtime.drive.attach) -------------------------
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

    async def by_controller(self, key: ReleaseKey, action: str, *, revision: int = 0,
                            value: bool | str = True) -> Requested | None:
        """When ``key``'s package is a Package object a live controller reconciles: :meth:`check` (the one gate),
        then the request the controller carries out (``action`` one of ``upgrade``, ``reconcile``,
        ``rollback`` (to ``revision``), ``unlock``, ``cancel``, ``pause``/``resume`` (the monitor), ``suspend``
        (``value`` True/False), ``maintenance`` (``value`` the mode, "" leaves)); None when this engine acts
        itself. Raises ActionRefused/NotAvailable, ApiException."""
        if self.attachment is None or self.attachment.attached(key) is None:
            return None
        self.gate.check("monitor" if action in ("pause", "resume") else action, key)
        return await self.attachment.request(key, action, revision=revision, value=value)

    def _pulse_endpoints(self) -> list[tuple[str, str]]:
        out = {url: urlsplit(url).netloc for url in self._metrics_urls}
        if self.controllers:  # the app asks at start: the metrics reader is imported once a controller is seen
            from engine.runtime.pulses import reachable

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
        reachable from here (:mod:`engine.runtime.pulses`); () when none is known."""
        return await self.pulse_meter.sample()

    def _acts_itself(self, key: ReleaseKey) -> None:
        """Raise ActionRefused when a live controller reconciles ``key``'s package: it carries the operator's
        actions out, asked through :meth:`by_controller` (this engine has no spec of its own to act with)."""
        found = self.attachment.attached(key) if self.attachment is not None else None
        if found is not None:
            raise ActionRefused(f"Package {found.ref[0]}/{found.ref[1]} is reconciled by helmdeck controller "
                                f"{found.controller}: request the action from it")

    def advertise(self, annotations: Mapping[str, str]) -> None:
        """Annotations this engine's Lease carries from its next renewal (``helmdeck controller``: where its
        metrics are served, :mod:`engine.runtime.drive.lease`). Without a Lease, nothing."""
        if self.elector is not None:
            self.elector.annotations.update(annotations)

    def placed_here(self, key: ReleaseKey) -> bool:
        """Is ``key``'s package reconciled by this controller replica? False when it stands by for its Lease,
        or ``--shards auto`` places the package on another live member (:meth:`ActionGate.placed_here`)."""
        return self.gate.placed_here(key)

    def owner(self, key: ReleaseKey) -> Owner:
        """Who owns ``key``: its helmdeck package, a Flux HelmRelease, or none (engine.runtime.ledger.owners)."""
        view = self.book.view(key)
        return owner_of(view) if view is not None else NONE

    async def flux(self, key: ReleaseKey, action: str) -> str:
        """Flux's own action on the HelmRelease owning ``key``: "reconcile" (request one), "suspend" or
        "resume"; returns what was done in one sentence. Raises ActionRefused (not Flux-owned, the
        HelmRelease API is not served) or NotAvailable (offline), ApiException for API errors."""
        self.gate.check("flux", key)
        owner = self.owner(key)
        if self._api is None:  # the gate refuses Flux on a release without a Flux owner, and offline
            raise NotAvailable(OFFLINE)
        try:
            said = await FluxClient(self._api).act(owner, action)
        except LookupError as exc:
            raise ActionRefused(str(exc)) from None
        self.book.log(key, "flux", "info", said)
        return said

    async def unlock(self, key: ReleaseKey) -> ActionOutcome:
        """Mark ``key``'s pending release failed so it can move again."""
        self._acts_itself(key)
        return await self.operations.unlock(key)

    def suspend(self, key: ReleaseKey, suspended: bool = True) -> None:
        """Suspend (or with ``suspended`` False resume, which queues a pass) reconciliation of ``key``'s
        package; kept in its engine status. Raises ActionRefused/NotAvailable as :meth:`check` ("suspend")."""
        self._acts_itself(key)
        self.operations.suspend(key, suspended)

    async def set_maintenance(self, key: ReleaseKey, mode: str) -> PassResult:
        """Enter (``"NoResourceReconciliation"``) or leave (``""``) maintenance mode and reconcile once (each
        change costs exactly one upgrade); returns that pass. Raises ActionRefused/NotAvailable."""
        self._acts_itself(key)
        return await self.operations.set_maintenance(key, mode)

    def pause_monitor(self, key: ReleaseKey) -> int:
        """The release monitor's pause counter +1 (as nelm's PauseMonitor); returns the new count.
        Raises ActionRefused/NotAvailable as :meth:`check` ("monitor")."""
        return self.operations.pause_monitor(key)

    def resume_monitor(self, key: ReleaseKey) -> int:
        """The release monitor's pause counter -1 (never below 0; at 0 it checks again); returns the new
        count. Raises ActionRefused/NotAvailable as :meth:`check` ("monitor")."""
        return self.operations.resume_monitor(key)

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
        return await self.versions.list(key)

    def plan_pin(self, key: ReleaseKey, version: str) -> Pin:
        """The file edit pinning ``key``'s chart to ``version`` (nothing written). Raises ActionRefused,
        PinError (a digest-selecting OCIRepository, a field not editable in place), OSError."""
        return self.versions.plan_pin(key, version)

    async def version_diff(self, key: ReleaseKey, version: str, *, reveal: bool = False) -> str:
        """What upgrading ``key`` to chart ``version`` would change (unified diff, "" = nothing), secrets
        masked unless ``reveal``. Raises ActionRefused, NotAvailable, SourceError, PackageError, HelmError."""
        return await self.versions.diff(key, version, reveal=reveal)

    async def pin(self, key: ReleaseKey, version: str) -> Pin:
        """Write :meth:`plan_pin`'s edit and reload the packages folder (the next pass deploys it); returns
        the edit. Raises ActionRefused (read-only, lease, no package, local chart), PinError, OSError."""
        return await self.versions.pin(key, version)

    async def uninstall(self, key: ReleaseKey) -> ActionOutcome:
        """``helm uninstall`` the release; its package (if any) is suspended."""
        return await self.operations.uninstall(key)

    async def diff_against(self, key: ReleaseKey, desired: str, *, reveal: bool = False) -> str:
        """The deployed manifest of ``key`` against the manifests ``desired`` (unified diff per object, "" when
        equal), secrets masked unless ``reveal``. See Operations.diff_against."""
        return await self.operations.diff_against(key, desired, reveal=reveal)

    async def cleanup(
        self, *, dry_run: bool = False, ignore_namespaces: tuple[str, ...] = (),
        confirmed: Collection[str] | None = None,
    ) -> list[CleanupItem]:
        """Uninstall every release of this package set no package declares (``dry_run``: list them only;
        ``confirmed``: only these ``namespace/name`` refs, as listed to the operator). See Operations.cleanup."""
        return await self.operations.cleanup(dry_run=dry_run, ignore_namespaces=ignore_namespaces, confirmed=confirmed)

    async def prune_removed(self) -> list[CleanupItem]:
        """``--prune``'s sweep of what no event says: uninstall the releases of this package set that no package
        declares, also those whose files went before the start, as :meth:`cleanup` does (each release's log says
        "prune"). Raises ActionRefused (read-only, lease held elsewhere, no packages folder: without a package set
        every release helmdeck manages would look removed; BadPackageFiles while a package file has errors: its
        release would look removed) or NotAvailable (offline)."""
        if self.controller.package_set is None:
            raise ActionRefused("prune needs a packages folder (--packages): it removes only its package set's "
                                "releases")
        return await self.operations.cleanup(action="prune")

    async def _prune_at_start(self) -> None:
        """A long-running engine with prune (``reconcile --prune``, the app with ``--prune``) sweeps once it acts,
        as ``reconcile --once --prune`` does after its pass; later removals are pruned as the folder says them."""
        if self.elector is not None:
            await self.controller.leading.wait()
        try:
            await self.prune_removed()
        except (ActionRefused, NotAvailable) as exc:
            log.warning("prune at start skipped: %s", exc)

