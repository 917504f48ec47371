"""The builders of :class:`~engine.runtime.engine.Engine`: one per way of being given packages, each part given
its collaborators at construction.

:func:`build_engine` takes what the engine is given (the command line's options) and builds, by mode:

- the packages folder (:class:`~engine.runtime.drive.folder.PackageFolder`), or a repository path built with
  kustomize (``kustomize``, :mod:`engine.runtime.drive.kustomized`), or none (the app over storage alone);
- the API server's Package objects (``cluster_packages``, ``helmdeck controller``): their status and Events, their
  finalizers and their request annotations too (:func:`_controller_parts`), and with a Lease and a shard
  (``--watch-label-selector``) or ``auto_shards`` (``--shards auto``) the replica's shards, which the gate, the
  guard, the action context and the writers ask through the placement port
  (:mod:`engine.runtime.ledger.placed`; :data:`~engine.runtime.ledger.placed.ALL_HERE` on the local path);
- attached (``attach``, the app): the cluster's controllers followed (:mod:`engine.runtime.cockpit.attach`), and
  Flux's HelmRelease objects (:mod:`engine.runtime.cockpit.flux`).

:func:`offline_engine` builds one without a cluster (fixtures, snapshots). The parts only an operator's action,
the version picker or the pulses use are built on first use: a headless command imports only what it runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from kubernetes import client

from engine.base.masking import Masker
from engine.base.wire import CONTROLLER, PACKAGE_SET, ROLE
from engine.helm import Helm
from engine.kube.client import KubeTarget, api_client
from engine.reconcile.action import ActionContext
from engine.reconcile.drift import DriftDetector
from engine.reconcile.status import FailureCounts
from engine.reconcile.store import StatusStore
from engine.runtime.drive.adoption import storage_relabeler
from engine.runtime.drive.controller import PackageController, storage_unlocker
from engine.runtime.drive.folder import PackageFolder
from engine.runtime.drive.lease import LeaseConfig, LeaseElector
from engine.runtime.drive.ports import PackageInput
from engine.runtime.drive.values_objects import ValuesObjects
from engine.runtime.engine import STATUS_FLUSH, Engine, Given, Later, Parts, observed_namespaces, package_releases
from engine.runtime.ledger.book import ActionRefused, NotAvailable, ReleaseBook
from engine.runtime.ledger.gate import ActionGate
from engine.runtime.ledger.placed import ALL_HERE, Placed, PlacedLater
from engine.runtime.ledger.running import Running, Starting, Step
from engine.runtime.ledger.tasks import Background
from engine.runtime.package_set import cluster_package_set, package_set_for
from engine.runtime.release_events import ReleaseEvents
from engine.service import ReleaseService
from engine.service.records import ReleaseRecord
from engine.storage.observer import LabelsAhead, Observer

if TYPE_CHECKING:  # the parts of a controller, the app, --kustomize and actions are imported when built
    from engine.package.substitute import Variables
    from engine.runtime.chart_versions import ChartVersions
    from engine.runtime.cluster.annotation_requests import Requests
    from engine.runtime.cluster.finalizer import Finalizers
    from engine.runtime.cluster.objects import PackageObjects
    from engine.runtime.cluster.shard_selector import Shard
    from engine.runtime.cluster.shards import Shards
    from engine.runtime.cockpit.attach import Attachment
    from engine.runtime.cockpit.flux import FluxCockpit
    from engine.runtime.operations import Operations

__all__ = ["build_engine", "offline_engine"]

log = logging.getLogger(__name__)


def build_engine(
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
    kustomize: Path | None = None,
    kustomize_variables: Variables | None = None,
    vars_from: tuple[Path, ...] = (),
    vars_from_cluster: str = "",
    kustomize_root: Path | None = None,
    shard: Shard | None = None,
    auto_shards: bool = False,
    stop_deadline: float = 30.0,
    api: client.ApiClient | None = None,
    records_of: Literal["packages", "package set"] | None = None,
    labels_ahead: LabelsAhead | None = None,
) -> Engine:
    """An engine driving the packages in ``packages_dir`` and reporting every release in storage.

    Builds an API client for ``target`` at once (raises KubeConfigError when the kubeconfig cannot be loaded);
    ``api``: a client of ``target`` made already (the command line's, which asked the API server about access
    with it first), so the kubeconfig is loaded once. ``observer`` may be given (default: one for the cluster).
    ``readonly`` refuses every mutating action. ``concurrency`` bounds reconciles running at once; ``prune``
    uninstalls the release of a removed package file (else it is reported as orphaned); ``lease`` makes this one
    of several instances of which only the lease holder acts. ``allow_unsupported`` reads Flux documents with
    fields helmdeck does not implement, those fields left out with a warning (:mod:`engine.package.flux`).
    ``package_set`` names the folder's package set (``--package-set``; default: its base name and a digest of its
    resolved path, :mod:`engine.runtime.package_set`); raises PackageSetNameError when it is not a valid name.
    ``cluster_packages``: the packages are the API server's Package objects of ``namespaces`` (``helmdeck
    controller``) instead of a folder; their set is :func:`~engine.runtime.package_set.cluster_package_set`.
    Raises ApiException when they cannot be listed. ``shard`` (with ``cluster_packages``): only the Package
    objects its label selector matches (``--watch-label-selector``, :mod:`engine.runtime.cluster.shard_selector`);
    with a ``lease`` it takes the actor claim, hands a relabelled Package's running action over within
    ``stop_deadline`` seconds and leaves alone a Package another live controller also takes
    (:mod:`engine.runtime.cluster.static_shards`). ``default_service_account`` (with ``cluster_packages``): the
    ServiceAccount a Package without ``spec.serviceAccountName`` acts as, Flux's ``--default-service-account``.
    ``attach``: follow the cluster's ``helmdeck controller``s (:mod:`engine.runtime.cockpit.attach`).
    ``controller_metrics``: the metrics URLs of controller replicas, read for :meth:`Engine.pulses`.
    ``kustomize``: the packages are the objects of a repository path built with kustomize and Flux's post-build
    substitution (:mod:`engine.runtime.drive.kustomized`); ``packages_dir`` is then that path. Its variables:
    ``kustomize_variables`` (``--var``), the files ``vars_from`` (``--vars-from``), ``vars_from_cluster`` (the Flux
    Kustomization ``namespace/name`` read, ``--vars-from-cluster``) and ``kustomize_root``, the repository's
    folder (``plan --base``'s copy of a commit; default: the git checkout holding the path). ``auto_shards``
    (with ``cluster_packages`` and a ``lease``: this replica's membership Lease): ``helmdeck controller --shards
    auto`` (:mod:`engine.runtime.cluster.shards`). ``records_of``: storage holds the records of the packages'
    releases and no other (``"packages"``: the folder read once by a command that acts on its packages alone,
    ``reconcile --once``), or those and the records of the package set's other releases (``"package set"``:
    ``plan``, which lists those it would prune); None: every release. An empty folder's ``reconcile --once``
    reads no release record. ``labels_ahead``: storage's labels listed already (the app), handed to the
    observer.
    """
    given = Given(namespaces=namespaces, lease=lease, watch_packages=watch_packages, monitors=monitors,
                  online=online, readonly=readonly, controller_metrics=controller_metrics)
    masker = Masker()  # one per engine: a secret masks the same everywhere it is shown
    tasks = Background()
    own_api = (api or api_client(target)) if online else None
    api = own_api or client.ApiClient()  # offline: a client that is never called (the gate refuses)
    # Which package set labels its releases (cleanup removes only its own); its Lease is named after it.
    pset = (package_set_for(packages_dir, package_set) if packages_dir is not None
            else cluster_package_set(package_set, namespaces) if cluster_packages else None)
    objects: PackageObjects | None = None
    if cluster_packages:
        from engine.runtime.cluster.objects import PackageObjects

        objects = PackageObjects(api, namespaces, default_service_account=default_service_account,
                                 label_selector=shard.selector if shard else "")
    source: PackageInput | None
    if kustomize is not None:
        from engine.package.substitute import NO_VARIABLES
        from engine.runtime.drive.kustomized import KustomizeInput, KustomizeSource

        built = KustomizeSource(kustomize, kustomize_variables or NO_VARIABLES, vars_from, vars_from_cluster,
                                kustomize_root)
        source = KustomizeInput(built, own_api, masker.remember, allow_unsupported=allow_unsupported)
    else:
        source = (PackageFolder(packages_dir, allow_unsupported=allow_unsupported) if packages_dir is not None
                  else objects)
    # The packages are read now: their storage namespaces are watched too.
    first = source.load() if source is not None else None
    specs = first.specs if first else {}
    observer = observer or Observer(
        own_api, observed_namespaces(namespaces, specs),
        releases=package_releases(specs.values()) if records_of else None,
        labelled={PACKAGE_SET: pset.identity} if records_of == "package set" and pset else None, ahead=labels_ahead)
    sharded = objects is not None and lease is not None and online and (auto_shards or shard is not None)
    placed: Placed = PlacedLater() if sharded else ALL_HERE
    gate: ActionGate | None = None  # the book asks the gate, built next (the writable rule)
    book = ReleaseBook(observer, store=StatusStore(api, lease.namespace if lease is not None else "default")
                       if online else None,  # kept beside the Lease when the release's namespace does not exist yet
                       writable=lambda: gate is not None and gate.acting,
                       let_go=placed.let_go if sharded else None)
    kube_events = ReleaseEvents(own_api, book, tasks.on_loop)  # offline: fed by hand
    attachment: Attachment | None = None
    if attach and online:
        from engine.runtime.cockpit.attach import Attachment

        # The namespace's Events may be watched already (a monitor's Warnings): the controller's Events from
        # before the attachment found it come first, or its running action would be missed.
        attachment = Attachment(api, book, namespaces, lambda ns, callback: kube_events.watch(ns, callback,
                                                                                               replay=True))
    flux: FluxCockpit | None = None
    if attach and online:  # the app: the releases Flux's HelmRelease objects own, shown from them
        from engine.runtime.cockpit.flux import FluxCockpit

        flux = FluxCockpit(api, book, namespaces, lambda ns, callback: kube_events.watch(ns, callback, replay=True))
    gate = ActionGate(book, observer.latest, readonly=readonly, online=online, leader=lease is None,
                      attached=attachment.attached if attachment is not None else None, placed=placed,
                      flux_served=flux.served if flux is not None else None)
    values_objects = ValuesObjects(own_api, book, masker)  # spec.valuesFrom's objects
    service = ReleaseService(helm, api, on_status=lambda ns, n, s: book.set_monitor((ns, n), s),
                             namespaces=namespaces, values_from=values_objects.layers,
                             latest=lambda ns, n: ReleaseRecord.from_observation(observer.latest(ns, n)))
    driver = observer.driver
    ctx = ActionContext(helm=helm, observer=observer, api=own_api, driver=driver,
                        unlock=storage_unlocker(own_api, driver) if own_api else None,
                        quiet=service.quiet, paused=service.monitor_paused,
                        checksum=lambda req: service.checksum(req.spec.release_namespace, req.spec),
                        fence=placed.fence if sharded else None, recheck=placed.recheck if sharded else None)
    controller = PackageController(
        book, gate, ctx, service, DriftDetector(api) if online else None, helm, source, tasks,
        concurrency=concurrency, prune=prune, package_set=pset, monitors=monitors, values=values_objects,
        relabel=storage_relabeler(own_api, driver) if own_api else None)
    elector = (LeaseElector(api, lease.name, lease.namespace, identity=lease.identity, duration=lease.duration,
                            retry=lease.retry, on_change=controller.on_lease, labels=dict(lease.labels),
                            annotations=dict(lease.annotations))
               if lease is not None and online else None)

    def new_operations() -> Operations:
        from engine.runtime.operations import Operations

        return Operations(book, gate, controller, masker, tasks)

    operations = Later(new_operations)

    def new_versions() -> ChartVersions:
        from engine.runtime.chart_versions import ChartVersions

        return ChartVersions(book, gate, controller, operations(),
                             attachment.patch if attachment is not None else None)

    parts = Parts(given=given, masker=masker, tasks=tasks, api=own_api, package_set=pset, observer=observer,
                  book=book, gate=gate, values_objects=values_objects, service=service, controller=controller,
                  kube_events=kube_events, objects=objects, attachment=attachment, elector=elector,
                  operations=operations, versions=Later(new_versions), flux=flux)
    if objects is not None and online:
        _controller_parts(parts, api, objects, placed, shard=shard, auto_shards=auto_shards, sharded=sharded)
    if sharded:
        assert lease is not None and elector is not None and objects is not None
        parts.shards = _shards(parts, api, lease, objects, elector, shard, stop_deadline)
        assert isinstance(placed, PlacedLater)
        placed.bind(parts.shards)
    parts.running, parts.stopping, parts.monitors_ready = _lifecycle(parts, lambda: engine, prune=prune)
    engine = Engine(parts)
    if first is not None:
        controller.apply_input(first)
    return engine


class _MonitorsAtStart:
    """The monitors of the packages placed here, started at start (``--no-monitors``: none), and stopped with
    the release service's other monitors."""

    def __init__(self, parts: Parts, start: bool):
        self._parts = parts
        self._start = start
        self._started: list[asyncio.Task[Any]] = []

    async def start(self, how: Starting) -> None:
        if not self._start:
            return
        book, gate, controller, tasks = self._parts.book, self._parts.gate, self._parts.controller, self._parts.tasks
        for key in [k for k in book.packages if gate.placed_elsewhere(k) is None]:
            task = tasks.spawn(controller.refresh_monitor(key))
            if task is not None:
                self._started.append(task)

    async def stop(self, deadline: float) -> bool:
        await asyncio.to_thread(self._parts.service.stop_monitors)
        return True

    async def ready(self) -> None:
        """Wait until the monitors started at start have listed their resources."""
        await asyncio.gather(*self._started, return_exceptions=True)


def _lifecycle(parts: Parts, engine: Callable[[], Engine], *, prune: bool,
               ) -> tuple[list[Running], list[Running], Callable[[], Awaitable[None]]]:
    """The parts ``parts``' mode runs: in start order, in stop order, and the wait for the monitors started at
    start. ``engine``: the facade built over them (the prune at start is its action)."""
    given, book, controller, tasks = parts.given, parts.book, parts.controller, parts.tasks
    running: list[Running] = []
    stopping: list[Running] = []
    status_writer, objects = parts.status_writer, parts.objects
    if status_writer is not None:
        async def write_status(_how: Starting) -> None:
            status_writer.start()
            status_writer.catch_up()

        running.append(Step("status", write_status))
    if objects is not None and parts.finalizers is not None and parts.requests is not None:
        for part in (parts.finalizers, parts.requests):  # after each burst of object changes, and on the Lease
            running.append(Step(type(part).__name__.lower(), _sweeping(book, objects, part)))

    async def refresh(_how: Starting) -> None:
        book.refresh_all()

    running.append(Step("views", refresh))
    package_input = controller.package_input
    if package_input is not None:
        async def watch(_how: Starting) -> None:
            if given.watch_packages:
                tasks.spawn(controller.watch())

        async def stop_input(_deadline: float) -> bool:
            package_input.stop()
            return True

        running.append(input_step := Step("input", watch, stop_input))
        stopping.append(input_step)

    async def start_queue(how: Starting) -> None:
        controller.start(reconcile=how.reconcile)

    async def stop_queue(deadline: float) -> bool:
        return await controller.queue.stop(deadline)

    queue = Step("queue", start_queue, stop_queue)
    stopping.append(queue)
    if status_writer is not None:
        # A cancelled action's status reaches its Package before the Lease goes: the passes' first, then those
        # of the actions cancelled with the background tasks (the operator's, requested by annotation); both
        # within STATUS_FLUSH seconds.
        flush_by: list[float] = []

        async def flush_passes(_deadline: float) -> bool:
            flush_by.append(time.monotonic() + STATUS_FLUSH)
            await status_writer.flush(STATUS_FLUSH)
            return True

        async def flush_cancelled(_deadline: float) -> bool:
            await status_writer.flush(max(0.0, flush_by[-1] - time.monotonic()))
            return True

        stopping.append(Step("status flush", on_stop=flush_passes))

    async def cancel_tasks(_deadline: float) -> bool:
        await tasks.cancel()
        return True

    stopping.append(Step("background", on_stop=cancel_tasks))
    if status_writer is not None:
        stopping.append(Step("status flush after cancel", on_stop=flush_cancelled))
    elector = parts.elector
    if elector is not None:
        async def elect(_how: Starting) -> None:
            elector.start()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(elector.decided.wait(), 10)

        async def give_up(_deadline: float) -> bool:
            await elector.stop(release=True)
            return True

        running.append(lease_step := Step("lease", elect, give_up))
        stopping.append(lease_step)
        shards = parts.shards
        if shards is not None:
            async def members(_how: Starting) -> None:  # the members before the first pass: each acts on its share
                await shards.membership.refresh()
                shards.on_members(shards.membership.live())
                tasks.spawn(shards.membership.run())

            running.append(Step("members", members))
        else:
            async def follow(_how: Starting) -> None:  # --shards auto: read as packages are gained, never polled
                tasks.spawn(controller.follow_statuses(lambda: observed_namespaces(given.namespaces,
                                                                                   book.packages)))

            running.append(Step("statuses", follow))
    monitors = _MonitorsAtStart(parts, given.monitors)
    if given.online:
        running.append(monitors)
        stopping.append(monitors)
    running.append(queue)
    if prune and given.online and not given.readonly:
        async def prune_at_start(how: Starting) -> None:
            if how.reconcile:
                tasks.spawn(_prune_at_start(engine(), leading=controller.leading if elector is not None else None))

        running.append(Step("prune", prune_at_start))
    attachment = parts.attachment
    if attachment is not None:
        async def attach(_how: Starting) -> None:
            tasks.spawn(attachment.run())

        running.append(Step("attachment", attach))
    flux = parts.flux
    if flux is not None:
        async def follow_flux(_how: Starting) -> None:
            tasks.spawn(flux.run())

        running.append(Step("flux", follow_flux))
    if given.online:
        async def repositories(how: Starting) -> None:  # on their own interval (engine.runtime.drive.repositories)
            if how.reconcile:
                from engine.runtime.drive.repositories import RepositoryRefresh

                tasks.spawn(RepositoryRefresh(book, lambda: controller.charts, controller.triggers).run())

        running.append(Step("repositories", repositories))

    async def stop_observer(_deadline: float) -> bool:
        await asyncio.to_thread(parts.observer.stop)
        return True

    async def stop_events(_deadline: float) -> bool:
        await asyncio.to_thread(parts.kube_events.stop)
        return True

    stopping += [Step("observer", on_stop=stop_observer), Step("events", on_stop=stop_events)]
    return running, stopping, monitors.ready


def _sweeping(book: ReleaseBook, objects: PackageObjects, part: Finalizers | Requests,
              ) -> Callable[[Starting], Awaitable[None]]:
    """A finalizer's or request's sweep started: on the book's signals, after each burst of object changes, and
    once now."""
    async def start(_how: Starting) -> None:
        book.subscribe(part.on_signal)
        objects.on_burst(part.sweep)
        part.sweep()

    return start


async def _prune_at_start(engine: Engine, *, leading: asyncio.Event | None) -> None:
    """A long-running engine with prune (``reconcile --prune``, the app with ``--prune``) sweeps once it acts
    (``leading``: once it holds the Lease), as ``reconcile --once --prune`` does after its pass; later removals are
    pruned as the folder says them."""
    if leading is not None:
        await leading.wait()
    try:
        await engine.prune_removed()
    except (ActionRefused, NotAvailable) as exc:
        log.warning("prune at start skipped: %s", exc)


def _controller_parts(parts: Parts, api: client.ApiClient, objects: PackageObjects, placed: Placed, *,
                      shard: Shard | None, auto_shards: bool, sharded: bool) -> None:
    """What ``helmdeck controller`` adds over the Package objects: their status and Events written back,
    finalizers, and the operator's actions requested by annotation (each on the replica's own Packages only)."""
    from engine.runtime.cluster.annotation_requests import Actions, Requests
    from engine.runtime.cluster.finalizer import Finalizers
    from engine.runtime.cluster.object_status import StatusWriter

    book, gate, controller, tasks = parts.book, parts.gate, parts.controller, parts.tasks
    identity = {} if parts.elector is None else {"instance": parts.elector.identity, "controller": {
        "replica": parts.elector.identity, "shard": shard.name if shard else "auto" if auto_shards else ""}}
    status_writer = StatusWriter(api, book, objects, acting=lambda: gate.acting, spawn=tasks.spawn,
                                 problems=lambda: controller.package_errors, mine=placed.mine,
                                 after_pass_only=sharded,
                                 left=placed.left, **identity)  # type: ignore[arg-type]

    async def record(ref: tuple[str, str], reason: str, message: str, warning: bool) -> None:
        await status_writer.event(ref, reason, message, warning=warning)

    finalizers = Finalizers(api, objects, lambda spec, why: controller.uninstall_removed(spec, why, stored=True),
                            record, acting=lambda: gate.acting, spawn=tasks.spawn, mine=placed.mine)
    ops = parts.operations()

    def reset_failures(key: tuple[str, str]) -> None:
        """Zero ``key``'s failure counters (a resetAt request), so a stalled package is attempted again."""
        book.update_status(key, failures=FailureCounts())

    actions = Actions(run=lambda key, force: ops.upgrade(key, force=force), reset=reset_failures,
                      rollback=ops.rollback, unlock=ops.unlock, cancel=ops.cancel, pause=ops.pause_monitor,
                      resume=ops.resume_monitor)
    requests = Requests(objects, book, actions, acknowledge=status_writer.acknowledge, acting=lambda: gate.acting,
                        spawn=tasks.spawn, mine=placed.mine)
    parts.status_writer, parts.finalizers, parts.requests = status_writer, finalizers, requests


def _shards(parts: Parts, api: client.ApiClient, lease: LeaseConfig, objects: PackageObjects,
            elector: LeaseElector, shard: Shard | None, stop_deadline: float) -> Shards:
    """The replica's shards: ``--shards auto`` (engine.runtime.cluster.shards) or a static shard
    (``--watch-label-selector``, engine.runtime.cluster.static_shards: the same claim and hand-over, with every live
    controller's Lease as the members, and no Package another live controller also takes acted on)."""
    from engine.runtime.cluster.handover import Handover
    from engine.runtime.cluster.members import Membership
    from engine.runtime.cluster.shards import Shards
    from engine.runtime.cluster.static_shards import StaticShards

    assert parts.status_writer is not None and parts.finalizers is not None and parts.requests is not None
    book, status_writer = parts.book, parts.status_writer
    handover = Handover(book, parts.gate, parts.controller, objects, parts.service, status_writer,
                        parts.finalizers, parts.requests, parts.tasks.spawn)
    shards: Shards | None = None  # the membership calls it once built

    def on_members(live: frozenset[str]) -> None:
        assert shards is not None
        shards.on_members(live)

    def on_return() -> None:
        assert shards is not None
        shards.on_return()

    def cancel(key: tuple[str, str], by: str) -> Awaitable[object]:
        return parts.operations().cancel(key, by=by)

    if shard is None:
        membership = Membership(api, lease.namespace, elector.identity, duration=lease.duration, retry=lease.retry,
                                on_change=on_members, on_return=on_return)
        shards = Shards(api, objects, book, membership, elector, parts.observer.latest, parts.tasks.spawn,
                        stop_deadline=stop_deadline, gained=handover.gained, lost=handover.lost, cancel=cancel)
        objects.on_burst(shards.on_packages)  # a Package created or deleted may move another
        objects.on_burst(status_writer.reclaim)  # then a status another replica wrote on a Package placed here
        return shards
    membership = Membership(api, lease.namespace, elector.identity, duration=lease.duration, retry=lease.retry,
                            selector=f"{ROLE}={CONTROLLER}", forget=False, on_change=on_members,
                            on_return=on_return)

    async def warn(ref: tuple[str, str], reason: str, message: str) -> None:
        await status_writer.event(ref, reason, message, warning=True)

    shards = StaticShards(api, objects, book, membership, elector, parts.observer.latest, parts.tasks.spawn,
                          stop_deadline=stop_deadline, gained=handover.gained, lost=handover.lost, cancel=cancel,
                          shard=shard, lease=lease.name, warn=warn)
    objects.on_burst(shards.sweep)
    return shards


def offline_engine(packages_dir: Path | None = None, *, observer: Observer | None = None,
                   readonly: bool = False) -> Engine:
    """An engine without a cluster over an offline ``observer`` (fed fixed records) and the packages in
    ``packages_dir``: it shows state and keeps its own, and acts on nothing (fixtures, snapshots)."""
    return build_engine(KubeTarget(), Helm("helm"), packages_dir, observer=observer or Observer(None),
                        readonly=readonly, watch_packages=False, monitors=False, online=False)
