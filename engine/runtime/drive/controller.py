"""The package controller: what makes packages reconcile, and one pass of a package.

Packages are reconciled from a work queue (:mod:`engine.runtime.drive.queue`):
at start, when their files change, at their interval, at once when a pass
asks for more, with backoff after errors. Triggers besides the interval: a
release written outside helmdeck (storage), resources found absent (the
monitor), taking over the engine lease, and the packages folder. A removed
package's release is uninstalled with pruning on, else reported orphaned.

One pass runs under the release's running-action guard: it builds the
:class:`~engine.reconcile.request.Request` (:meth:`PackageController._request`,
the one place a request is built), runs the atomic release loop (or, in
maintenance, the :class:`~engine.reconcile.maintenance.Maintenance` pass),
keeps the resulting status in the release book and persists it.
:meth:`PackageController.settle` drives a set of packages until they rest,
for ``helmdeck reconcile --once``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from engine.base import wire
from engine.base.fields import PackageError
from engine.base.paths import cache_root
from engine.base.wire import SOURCE_VERIFIED, SUCCEEDED, VERIFICATION_ERROR
from engine.helm import Helm, HelmError
from engine.kube.client import impersonating
from engine.package.depends import Dependency, PackageId
from engine.package.flux import HELM_RELEASE
from engine.package.load import said_of
from engine.package.model import PackageSpec
from engine.package.order import dependency_order, package_id, waiting_for
from engine.reconcile import conditions as cond
from engine.reconcile.action import ActionContext, ObservedReleases, record
from engine.reconcile.atomic import LOCKED_RECHECK, AtomicRelease, PassResult
from engine.reconcile.drift import DriftDetector
from engine.reconcile.maintenance import Maintenance
from engine.reconcile.options import kube_user, uninstall_options
from engine.reconcile.request import Request
from engine.reconcile.state import SUSPENDED
from engine.reconcile.status import EngineStatus
from engine.resolve.release import resolve
from engine.runtime.drive.folder import FolderUpdate
from engine.runtime.drive.ports import PackageInput, Triggers
from engine.runtime.drive.queue import RunResult, WorkQueue
from engine.runtime.drive.values_objects import ValuesObjects
from engine.runtime.ledger.book import ActionRefused, ReleaseBook
from engine.runtime.ledger.claims import ClaimRefused
from engine.runtime.ledger.gate import ActionGate, Suspended, no_package_reason
from engine.runtime.ledger.owners import FLUX_OWNED, FluxClient
from engine.runtime.ledger.tasks import Background
from engine.runtime.package_set import OtherPackageSet, PackageSet
from engine.runtime.state import (
    EngineSignal,
    LeaseChanged,
    PackageProblems,
    PassFinished,
    ReleaseKey,
    ReleaseUpdated,
)
from engine.service import ReleaseService
from engine.service.types import PackageNotHelm
from engine.sources import SourceError
from engine.sources.current import point
from engine.sources.verify import FAILED, Verification, VerifyError, verified_message
from engine.storage.codec import Driver
from engine.storage.observation import Observation
from engine.storage.observer import StorageChange
from engine.storage.writer import StorageWriteError, relabel_release, unlock_release

if TYPE_CHECKING:
    from engine.sources.source import ChartSource

log = logging.getLogger(__name__)

# How long a refused pass (another action runs on the release) waits before trying again, seconds.
_REFUSED_RETRY = 5.0
_SETTLE_REFUSED_RETRY = 1.0
# Followers re-read the persisted statuses this often (seconds).
_FOLLOWER_REFRESH = 3.0
# A package held for its dependencies looks again this often even without a trigger (Flux's
# --requeue-dependency default), seconds.
DEPENDENCY_RETRY = 30.0
# How long the answer "does the cluster serve Flux's HelmRelease API" holds: one discovery request per round of
# passes (reconcile --once, a plan, the start), not one per HelmRelease document.
FLUX_DISCOVERY_TTL = 30.0


def storage_unlocker(api: client.ApiClient, driver: Driver) -> Callable[[Observation, str], Awaitable[Observation]]:
    """The action context's ``unlock``: mark a pending revision failed in storage, only if it is still
    the record judged stale (its resourceVersion)."""
    async def unlock(obs: Observation, detail: str) -> Observation:
        storage_ns = obs.storage_key.namespace if obs.storage_key else obs.namespace
        return await asyncio.to_thread(unlock_release, api, storage_ns, obs.name, obs.version, driver=driver,
                                       detail=detail, resource_version=obs.resource_version or None)
    return unlock


# Relabels a release's records from one package-set label value to another; each record before and after.
Relabel = Callable[[Observation, str, str], Awaitable[list[tuple[Observation, Observation]]]]


def storage_relabeler(api: client.ApiClient, driver: Driver) -> Relabel:
    """The controller's ``relabel``: set the package-set label of every record of ``obs``'s release
    from ``old`` to ``new`` (engine.storage.writer.relabel_release, off the event loop)."""
    async def relabel(obs: Observation, old: str, new: str) -> list[tuple[Observation, Observation]]:
        storage_ns = obs.storage_key.namespace if obs.storage_key else obs.namespace
        return await asyncio.to_thread(relabel_release, api, storage_ns, obs.name, wire.PACKAGE_SET, old, new,
                                       driver=driver)
    return relabel


def verdict(result: PassResult, interval: float) -> RunResult:
    """What the work queue does after a pass (the one translation of a pass's ``next``)."""
    if result.state == cond.DEPENDENCY_NOT_READY:  # woken when a dependency turns Ready; this is the fallback
        return RunResult("interval", min(interval, DEPENDENCY_RETRY))
    if result.next == "soon":
        return RunResult("interval", min(LOCKED_RECHECK, result.retry_after or LOCKED_RECHECK))
    if result.next == "interval":
        return RunResult("interval", interval)
    return {"now": RunResult("now"), "error": RunResult("error"), "stop": RunResult("stop")}[result.next]


@dataclasses.dataclass(eq=False, repr=False)
class PackageController:
    """Queue, triggers, prune and passes of one engine's packages (see the module docstring).

    ``folder`` None: no packages folder (the engine only shows storage).
    ``package_set`` labels this set's releases (cleanup removes only its own) and ``relabel`` adopts
    the ones an older helmdeck labelled with the folder's base name (:meth:`_claim`);
    ``monitors`` False builds no resource monitors.
    """

    book: ReleaseBook
    gate: ActionGate
    ctx: ActionContext
    service: ReleaseService
    detector: DriftDetector | None
    helm: Helm
    folder: PackageInput | None  # the packages folder, or the API server's Package objects
    tasks: Background
    _: dataclasses.KW_ONLY
    concurrency: int = 4
    prune: bool = False
    package_set: PackageSet | None = None
    relabel: Relabel | None = None
    monitors: bool = True
    values: ValuesObjects  # spec.valuesFrom's objects, read before each resolution
    package_errors: list[PackageError] = dataclasses.field(init=False, default_factory=list)
    skipped: str = dataclasses.field(init=False, default="")  # the folder's objects of other kinds, one line
    left_out: tuple[str, ...] = dataclasses.field(init=False, default=())  # Flux fields left out: warnings
    auto: bool = dataclasses.field(init=False, default=False)  # reconcile on its own (queue), not on request only
    leading: asyncio.Event = dataclasses.field(init=False, default_factory=asyncio.Event)  # set while leading
    queue: WorkQueue[ReleaseKey] = dataclasses.field(init=False)
    triggers: Triggers = dataclasses.field(init=False)  # the port the triggers get, not this controller
    _ready: dict[ReleaseKey, bool | None] = dataclasses.field(init=False, default_factory=dict)
    _flux_said: dict[ReleaseKey, str] = dataclasses.field(init=False, default_factory=dict)
    _flux_served: tuple[float, bool] | None = dataclasses.field(init=False, default=None)  # (when asked, answer)

    def __post_init__(self) -> None:
        self.queue = WorkQueue(self._run_queued, concurrency=self.concurrency,
                               is_suspended=lambda key: self.gate.suspension(key) is not None)
        self.triggers = Triggers(enqueue=self.queue.add, reconciling=lambda: self.auto,
                                 acting=lambda: self.gate.acting, spawn=self.tasks.spawn)
        self.book.subscribe(self._on_event)
        self.service.identity = lambda ns, name: kube_user(self.book.packages.get((ns, name)))  # monitors
        self.service.notify_absent(self.on_absent)  # a monitor finding resources absent queues the package

    # -- packages ----------------------------------------------------------------
    def load_packages(self) -> None:
        """(Re)load the packages folder now; bad files are reported, the rest apply."""
        if self.folder is not None:
            self.apply_folder(self.folder.load())

    async def load(self) -> None:
        """:meth:`load_packages` off the event loop (and the objects of valuesFrom read)."""
        if self.folder is not None:
            self.apply_folder(await asyncio.to_thread(self.folder.load))
            await self.values.warm(self.book.packages.values())

    def apply_folder(self, update: FolderUpdate) -> None:
        """Take a (re)load of the packages folder: new specs, problems, changed and removed packages
        (pruned in reverse dependency order)."""
        book = self.book
        before_specs = {k: book.packages[k] for k in update.removed if k in book.packages}
        for key in update.changed:  # only these differ from the book's packages: the rest is left alone
            before, spec = book.packages.get(key), update.specs[key]
            status = book.status(key)
            if before is not None and before.maintenance != spec.maintenance and status is not None \
                    and status.maintenance is not None:
                # The package file changed its mode: the file decides again.
                book.set_status(key, dataclasses.replace(status, maintenance=None))
        book.set_packages(update.specs)
        self.package_errors = list(update.errors)
        self.skipped = update.skipped
        self.left_out = update.left_out
        for key in update.changed:
            book.set_state(key, None)
        for key in update.removed:
            book.set_state(key, None)
            if not (self.prune and self.gate.acting) and self.folder is not None and key in before_specs:
                book.log(key, "orphan", "info", self.folder.removal(before_specs[key]))
        if self.prune and self.gate.acting and update.removed:
            gone = [before_specs[k] for k in update.removed if k in before_specs]
            self.tasks.spawn(self._prune_all(list(reversed(dependency_order(gone)))))
        for key in update.changed | update.removed:
            book.refresh(key)
        book.set_file_problems({err.file: str(err) for err in reversed(update.errors)})  # each file's first
        book.emit(PackageProblems(tuple(update.errors)))

    async def watch(self) -> None:
        """Apply every change of the packages folder (and of valuesFrom objects): changed packages reconcile at once."""
        if self.folder is None:
            return
        self.tasks.spawn(self.values.run(self.triggers))
        async for update in self.folder.watch():
            self.apply_folder(update)
            self.tasks.spawn(self.observe_flux(update.changed))  # a new or changed HelmRelease document
            if self.gate.acting:
                for key in update.changed:
                    self.queue.add(key)

    async def _prune_all(self, specs: list[PackageSpec]) -> None:
        for spec in specs:  # one at a time: dependents before their dependencies
            try:
                await self.uninstall_removed(spec, "package file removed")
            except ActionRefused as exc:
                self.book.log(spec.key, "prune", "failed", f"not uninstalled: {exc}")

    async def uninstall_removed(self, spec: PackageSpec, why: str, *, stored: bool = False) -> str | None:
        """Uninstall the release of a package that is gone (``why``: a removed file, a deleted Package object),
        with its ``spec.uninstall`` options, under the release's guard. Only a release this engine installed
        (its status has history), or with ``stored`` any release storage holds. Returns None when it is
        uninstalled or there is nothing to uninstall, else helm's error. Raises ActionRefused (busy)."""
        key = spec.key
        status = self.book.status(key)
        if stored:
            if self.ctx.observer.latest(*key) is None:
                return None
        elif status is None or status.history.latest() is None:
            return None
        ns, release = key
        async with self.book.running(key, "uninstall", spec.timeout):
            if self.ctx.fence is not None:  # --shards auto: the actor claim
                await self.ctx.fence(key, "uninstall", spec.timeout, None)  # its object is deleted: no spec to check
            try:
                await self.helm.uninstall(release, ns, uninstall_options(spec))
            except HelmError as exc:
                self.book.log(key, "prune", "failed", f"uninstall failed: {exc.message}", exc.tail)
                return exc.message
            await self.book.drop_status(key, spec.storage_ns)  # re-adding the package installs afresh
        self.book.log(key, "prune", "succeeded", f"{why}: release uninstalled")
        return None

    # -- dependencies (spec.dependsOn) ---------------------------------------------------
    def key_of(self, pid: PackageId) -> ReleaseKey | None:
        """The release key of the package ``(namespace, metadata.name)``, None when none is loaded."""
        return next((k for k, s in self.book.packages.items() if package_id(s) == pid), None)

    def dependency_ready(self, pid: PackageId) -> bool | None:
        """Is the package ``pid`` Ready now (its Ready condition True)? None: no such package."""
        key = self.key_of(pid)
        if key is None:
            return None
        status = self.book.status(key)
        return status is not None and cond.is_true(status.conditions, cond.READY)

    def waiting(self, spec: PackageSpec) -> list[Dependency]:
        """The dependencies ``spec`` waits for (not Ready now)."""
        return waiting_for(spec, self.dependency_ready)

    def waiting_message(self, waiting: list[Dependency]) -> str:
        """``waiting for ns/base (not Ready: <its Ready message>)``, one clause per dependency."""
        parts = []
        for dep in waiting:
            key = self.key_of(dep.id)
            status = self.book.status(key) if key is not None else None
            ready = cond.get(status.conditions, cond.READY) if status is not None else None
            why = "not loaded" if key is None else f"not Ready: {ready.message}" if ready is not None and \
                ready.message else "not reconciled yet"
            parts.append(f"{dep} ({why})")
        return "waiting for " + ", ".join(parts)

    def _hold(self, key: ReleaseKey, waiting: list[Dependency]) -> PassResult:
        """Ready=False (DependencyNotReady) naming what ``key`` waits for; the release is left alone."""
        book = self.book
        message = self.waiting_message(waiting)
        status = book.status(key) or EngineStatus()
        before = cond.get(status.conditions, cond.READY)
        if before is None or before.reason != cond.DEPENDENCY_NOT_READY or before.message != message:
            book.log(key, "reconcile", "info", message)  # said once per change, not at every retry
        conds = cond.set_condition(status.conditions, cond.READY, False, cond.DEPENDENCY_NOT_READY, message)
        book.set_status(key, dataclasses.replace(status, conditions=conds))
        return PassResult(cond.DEPENDENCY_NOT_READY, "interval", message)

    async def _flux_held(self, key: ReleaseKey, spec: PackageSpec) -> PassResult | None:
        """A HelmRelease document whose HelmRelease exists in the cluster (Flux serving its API) is Flux's:
        helmdeck plans, diffs and shows its release and acts only through Flux's actions (F). None: helmdeck
        acts. When the cluster cannot say, helmdeck does not act either. The finding is kept in the book, and
        the release's standing against the document judged on a fresh resolution."""
        owned, message = await self.flux_owns(spec)
        await self._note_flux(key, spec, owned, message)
        if owned is False:
            self._flux_said.pop(key, None)
            return None
        await self.book.persist(key)
        return self._say_flux(key, PassResult(FLUX_OWNED, "interval" if owned else "error", message))

    async def observe_flux(self, keys: Iterable[ReleaseKey] | None = None) -> None:
        """Find whether Flux owns the release of each HelmRelease document of ``keys`` (default: every package)
        and keep it in the book (the gate and the app read it there), one discovery for them all."""
        for key in list(self.book.packages) if keys is None else list(keys):
            spec = self.book.packages.get(key)
            if spec is not None and spec.kind == HELM_RELEASE:
                await self._note_flux(key, spec, *await self.flux_owns(spec))

    async def _note_flux(self, key: ReleaseKey, spec: PackageSpec, owned: bool | None, message: str) -> None:
        """Keep whether Flux owns ``key``'s release, and say it in the Ready condition: Unknown with Flux's
        ``FluxOwned`` reason (helmdeck does not judge a release it leaves to Flux); dropped when Flux lets go.
        A release Flux owns is judged against the document on a fresh resolution (its chart pulled when the
        repository's interval asks, its valuesFrom read): :func:`engine.reconcile.state.flux_state`."""
        book = self.book
        if owned:
            with contextlib.suppress(PackageError, SourceError, PackageNotHelm):  # then the state stays unknown
                await self.locate(spec)
                await asyncio.to_thread(functools.partial(resolve, spec, values_from=self.service.values_from))
            book.set_state(key, None)
        status = book.status(key) or EngineStatus()
        ready = cond.get(status.conditions, cond.READY)
        if owned:
            if ready is None or (ready.reason, ready.message) != (FLUX_OWNED, message):
                conds = cond.set_condition(status.conditions, cond.READY, None, FLUX_OWNED, message)
                book.set_status(key, dataclasses.replace(status, conditions=conds))
        elif owned is False and ready is not None and ready.reason == FLUX_OWNED:
            book.set_status(key, dataclasses.replace(
                status, conditions=tuple(c for c in status.conditions if c.type != cond.READY)))
        if owned is not None:
            book.set_flux_owned(key, owned)

    async def flux_owns(self, spec: PackageSpec) -> tuple[bool | None, str]:
        """Whether Flux owns ``spec``'s release (see :meth:`FluxClient.owns`; always False for a Package or
        without a cluster), and the sentence saying so; None when the cluster cannot say (a refused read). The
        discovery of Flux's API is asked once per :data:`FLUX_DISCOVERY_TTL`."""
        api = self.ctx.api
        if api is None or spec.kind != HELM_RELEASE:
            return False, ""
        ref = f"HelmRelease {spec.namespace}/{spec.name}"
        flux = FluxClient(api)
        try:
            now = time.monotonic()
            if self._flux_served is None or now - self._flux_served[0] >= FLUX_DISCOVERY_TTL:
                self._flux_served = (now, await flux.present())
            owned = await flux.owns(spec.namespace, spec.name, served=self._flux_served[1])
        except ApiException as exc:
            return None, f"cannot tell whether Flux owns it ({ref}: {exc.status} {exc.reason}): helmdeck does not act"
        return owned, (f"Flux owns it: {ref} exists in the cluster; helmdeck plans and shows it and acts only "
                       "through Flux's actions (F)" if owned else "")

    def _say_flux(self, key: ReleaseKey, result: PassResult) -> PassResult:
        if self._flux_said.get(key) != result.message:  # said once per change, not at every pass
            self._flux_said[key] = result.message
            self.book.log(key, "reconcile", "info", result.message)
        return result

    def _on_event(self, event: EngineSignal) -> None:
        """A package's Ready turning True requeues the packages that depend on it at once."""
        if not isinstance(event, ReleaseUpdated) or event.view.package is None:
            return
        key, ready = event.view.key, event.view.ready
        was, self._ready[key] = self._ready.get(key), ready
        if ready is not True or was is True or not (self.auto and self.gate.acting):
            return
        pid = package_id(event.view.package)
        for other, spec in self.book.packages.items():
            if any(d.id == pid for d in spec.depends_on):
                self.queue.add(other)

    # -- triggers ------------------------------------------------------------------
    def start(self, *, reconcile: bool) -> None:
        """Start the queue; with ``reconcile`` every package is queued (when this instance acts)."""
        self.auto = reconcile
        self.queue.start()
        if reconcile and self.gate.acting:
            for key in self.book.packages:
                self.queue.add(key)

    def on_storage(self, change: StorageChange) -> None:
        """A storage change (on the engine's loop): refresh the view; a package's release written
        outside helmdeck is looked at again soon (the last pass's verdict no longer holds)."""
        book = self.book
        if change.observation is not None:
            key = change.observation.release_key
            if key in book.packages and not book.busy(key) and not book.ours(key, change.observation):
                book.set_state(key, None)
                if self.gate.acting and self.auto:
                    self.queue.add(key, 1.0)
            book.refresh(key)
        elif change.unreadable is not None:
            book.refresh((change.key.namespace, change.unreadable.release))
        elif change.type == "DELETED":
            for key in [k for k in book.known() if k[0] == change.key.namespace]:
                book.refresh(key)

    def on_absent(self, namespace: str, name: str) -> None:
        """The monitor found resources of a release missing: reconcile its package (once)."""
        key = (namespace, name)
        latest = self.ctx.observer.latest(*key)
        if latest is None or latest.status != "deployed" or self.gate.suspension(key) is not None:
            return  # uninstalled or being uninstalled, or the operator holds the package
        if key in self.book.packages and self.gate.acting and self.auto:
            self.book.log(key, "monitor", "info", "resources are absent: reconciling to restore them")
            self.queue.add(key)

    def on_lease(self, holder: str, leader: bool) -> None:
        """The lease changed hands; taking it over looks at every package now."""
        was = self.gate.leader
        self.gate.set_lease(holder, leader)
        if leader:
            self.leading.set()
        else:
            self.leading.clear()
        self.book.emit(LeaseChanged(holder, leader))
        if leader and not was and not self.gate.readonly and self.auto:
            for key in self.book.packages:
                self.queue.add(key)

    async def follow_statuses(self, namespaces: Callable[[], list[str] | None]) -> None:
        """While not the leader, keep the persisted statuses (written by the leader) in view."""
        while True:
            await asyncio.sleep(_FOLLOWER_REFRESH)
            if self.gate.leader:
                continue
            for key in await self.book.load_statuses(namespaces()):
                self.book.set_state(key, None)

    async def refresh_monitor(self, key: ReleaseKey) -> None:
        """(Re)build the monitor of a managed release after an action; drop it in maintenance, and when its
        package is placed on another replica (``--shards auto``: that one monitors it)."""
        if key not in self.book.packages or not self.monitors:
            return
        if self.book.maintenance(key) or self.gate.placed_elsewhere(key) is not None:
            self.service.remove_monitor(*key)
        else:
            await self.service.refresh_monitor(*key)

    @functools.cached_property
    def charts(self) -> ChartSource:
        """Charts from repositories (engine.sources), with helmdeck's cache and the cluster's Secrets."""
        from engine.sources.credentials import kube_key_reader, kube_secret_reader  # (a command that pulls
        from engine.sources.source import ChartSource  # nothing loads none of it)

        api = self.ctx.api
        return ChartSource(self.helm, cache_root(), secrets=kube_secret_reader(api) if api is not None else None,
                           keys=kube_key_reader(api) if api is not None else None)

    async def locate(self, spec: PackageSpec) -> None:
        """Point a remote chart's ``chart_path`` at the archive its source selects now (pulled only when
        new; no request within the repository's interval), and read its valuesFrom objects. Raises SourceError."""
        await self.values.fetch(spec)
        if spec.chart_request is not None:
            try:
                artifact = await self.charts.pull(spec.chart_request)
            except VerifyError as exc:  # the artifact is not used: the chart path keeps the last verified one
                self._note_verified(spec, exc.verification or Verification(
                    spec.chart_request.verify.provider if spec.chart_request.verify else "", FAILED,
                    message=exc.message.removeprefix(f"{exc.repository}: ")))
                raise
            self._note_verified(spec, artifact.verification)
            self.book.set_offered(spec.key, self.charts.available(spec.chart_request))  # the row's marker
            if point(spec.chart_path, artifact.path) and spec.key in self.book.packages:
                self.book.log(spec.key, "source", "info", f"chart {artifact.source} (revision {artifact.revision})")

    def _note_verified(self, spec: PackageSpec, verification: Verification) -> None:
        """Keep ``SourceVerified`` (Flux's condition and reasons) on the package's status: True with who signed,
        False with the tool's message, absent when the package asks no verification. Written only when it
        changes (a no-op pass writes nothing)."""
        key = spec.key
        if key not in self.book.packages:
            return
        status = self.book.status(key) or EngineStatus()
        before = cond.get(status.conditions, SOURCE_VERIFIED)
        if spec.chart_request is None or spec.chart_request.verify is None:
            if before is not None:
                self.book.set_status(key, dataclasses.replace(
                    status, conditions=cond.delete_condition(status.conditions, SOURCE_VERIFIED)))
            return
        ok = verification.verified
        reason = SUCCEEDED if ok else VERIFICATION_ERROR
        message = verified_message(verification)
        if before is not None and (before.status, before.reason, before.message) == (
                "True" if ok else "False", reason, message):
            return
        conds = cond.set_condition(status.conditions, SOURCE_VERIFIED, ok, reason, message)
        self.book.set_status(key, dataclasses.replace(status, conditions=conds))
        if ok:
            self.book.log(key, "source", "info", message)

    # -- requests --------------------------------------------------------------------
    async def _request(self, key: ReleaseKey, force: bool) -> Request:
        """Everything a pass needs, from the resolution stage (nothing rendered here: the decision
        renders only when the spec changed). Raises PackageError for an unreadable chart or values."""
        spec = self.book.spec(key)
        await self.locate(spec)
        resolved = await asyncio.to_thread(functools.partial(resolve, spec, values_from=self.service.values_from))
        req = Request.from_resolved(resolved, self.book.status(key) or EngineStatus(), force=force,
                                    package_set=self.package_set.identity if self.package_set else None)
        req.post_renderer = await self.service.post_renderer_for(spec)
        self.service.take_absent_report(*key)
        req.absent = tuple(r.ref for r in self.service.absent(*key))
        latest = self.ctx.observer.latest(*key)
        req.force_conflicts = latest is not None and latest.label_map.get(wire.MAINTENANCE) == "true"
        await self._claim(req, latest)
        return req

    async def _claim(self, req: Request, latest: Observation | None) -> None:
        """Make sure the release is this package set's before a pass acts on it.

        A release labelled by another package set is refused (PackageError naming the set and the
        fix): two folders never act on one release. One labelled with this folder's old identity
        (an older helmdeck's ``helmdeck-<base name>``) is relabelled now, every record, without a
        new revision; the history's snapshots of those records follow when they were ours (a
        release changed outside helmdeck stays Unmanaged).
        """
        pset = self.package_set
        label = latest.label_map.get(wire.PACKAGE_SET) if latest is not None else None
        if pset is None or latest is None or not label or label == pset.identity:
            return
        ns, name = req.key
        if not pset.adopts(label):
            raise OtherPackageSet(
                req.spec.file, "metadata.name",
                f"release {ns}/{name} belongs to package set {label!r}, not to this folder's ({pset.identity!r})",
                f"declare each release in one package set; if this folder is that set moved, "
                f"run with --package-set {label}")
        if self.relabel is None:
            return
        try:
            async with ObservedReleases(self.ctx, req) as seen:
                changed = await self.relabel(latest, label, pset.identity)
        except (StorageWriteError, ApiException) as exc:  # retried on the next pass
            self.book.log(req.key, "reconcile", "failed", f"relabelling the release for its package set: {exc}")
            return
        ours = {snap.version: snap.digest for snap in req.status.history}
        after = {new.version: seen.observed.get(new.version, new) for old, new in changed
                 if ours.get(old.version) == old.digest}
        record(req, after)
        self.book.log(req.key, "reconcile", "info",
                      f"adopted: {len(changed)} storage record(s) relabelled from package set {label!r} "
                      f"(an older helmdeck's name for this folder) to {pset.identity!r}")

    def detector_for(self, spec: PackageSpec) -> DriftDetector | None:
        """The drift detector reading as the package's ServiceAccount (impersonated), if it names one."""
        user = kube_user(spec)
        if self.detector is None or not user or self.ctx.api is None:
            return self.detector
        return DriftDetector(impersonating(self.ctx.api, user))  # the client is kept per user (engine.kube.client)

    def context(self, key: ReleaseKey) -> ActionContext:
        """The action context whose events go to ``key``'s log."""
        return dataclasses.replace(self.ctx, events=lambda a, o, m, t: self.book.log(key, a, o, m, t))

    # -- passes ----------------------------------------------------------------------
    async def run_pass(self, key: ReleaseKey, *, force: bool = False) -> PassResult:
        """Run one atomic pass on ``key`` now and return how it ended; ``force`` upgrades even in sync and
        runs on a suspended package (the operator's), else it is a ``reconcile`` (the gate's rule 9).

        Raises Suspended (not forced, suspended), ActionRefused (no package, busy, read-only) or
        NotAvailable (offline).
        """
        self.gate.check("upgrade" if force else "reconcile", key)
        return await self.reconcile(key, force)

    async def reconcile(self, key: ReleaseKey, force: bool) -> PassResult:
        """One pass on ``key`` under its guard; keeps and persists the status, then announces
        :class:`PassFinished`. Raises ActionRefused."""
        spec = self.book.packages.get(key)
        if spec is None:
            raise ActionRefused(no_package_reason(key))
        began = time.monotonic()
        result = await self._reconcile(key, spec, force)
        failed = result.next in ("error", "stop") or any(not o.ok for o in result.outcomes)
        self.book.emit(PassFinished(key, spec, "failure" if failed else "success", time.monotonic() - began))
        return result

    async def _reconcile(self, key: ReleaseKey, spec: PackageSpec, force: bool) -> PassResult:
        book = self.book
        async with book.running(key, "reconcile", spec.timeout):
            waiting = self.waiting(spec)
            if waiting:
                result = self._hold(key, waiting)
                await book.persist(key)
                book.refresh(key)
                return result
            held = await self._flux_held(key, spec) if spec.kind == HELM_RELEASE else None
            if held is not None:
                return held
            try:
                req = await self._request(key, force)
            except (PackageError, PackageNotHelm, SourceError) as exc:
                reason = getattr(exc, "reason", None) or cond.INVALID_PACKAGE  # Flux's: SourceError, ValuesError
                said = said_of(exc, spec)  # a --kustomize package's problem names its repository file
                status = book.status(key) or EngineStatus()
                conds = cond.set_condition(status.conditions, cond.READY, False, reason, said)
                book.set_status(key, dataclasses.replace(status, conditions=conds))  # the release is left as it is
                book.log(key, "reconcile", "failed", said)
                if not isinstance(exc, OtherPackageSet):  # the stored status is the owning set's
                    await book.persist(key)  # a viewer and the next start see why
                return PassResult("Failed", "error", said)
            async with self.kept_if_cancelled(req):
                if req.spec.maintenance:
                    result = await Maintenance(self.context(key), self.service).reconcile(req)
                else:
                    result = await AtomicRelease(self.context(key), self.detector_for(req.spec)).reconcile(req)
            last = result.outcomes[-1] if result.outcomes else None
            book.set_status(key, dataclasses.replace(req.status, last=last or req.status.last), state=result.state,
                            show=False)
            await self.refresh_monitor(key)
        await book.persist(key)
        book.refresh(key)
        return result

    @contextlib.asynccontextmanager
    async def kept_if_cancelled(self, req: Request) -> AsyncIterator[None]:
        """Around an action on ``req``: when it is cancelled (the operator, a request, a shutdown), what it
        recorded on ``req.status`` is kept and persisted (a declared package's), the revision a stopped helm
        wrote included, so that revision is never taken for a change made outside helmdeck. So too when a later
        action of the pass is refused its claim (``--shards auto``) after an earlier one wrote a revision."""
        before = req.status.history
        try:
            yield
        except (asyncio.CancelledError, ClaimRefused) as exc:
            wrote = req.status.history != before
            if req.key in self.book.packages and (wrote or not isinstance(exc, ClaimRefused)):
                self.book.set_status(req.key, req.status, state=None, show=False)
                await self.book.persist(req.key)
            raise

    async def _run_queued(self, key: ReleaseKey, force: bool) -> RunResult:
        spec = self.book.packages.get(key)
        if spec is None or not self.gate.acting or self.gate.placed_elsewhere(key) is not None:
            return RunResult("stop")  # a package placed on another replica (--shards auto) is its to reconcile
        if self.gate.shard_refusal is not None and self.gate.shard_refusal(key) is not None:
            # Another live controller's claim (as the watch shows it): not even the decision runs (its dry-run
            # render would meet that action's pending revision); the claim write decides again later.
            return RunResult("interval", _REFUSED_RETRY)
        try:
            result = await self.reconcile(key, force)
        except ClaimRefused as exc:  # another replica's claim, or a pass to start over: when the rule says
            return RunResult("interval", max(0.5, min(exc.retry_after, spec.interval)))
        except ActionRefused:
            return RunResult("interval", _REFUSED_RETRY)  # something else runs on it; look again shortly
        return verdict(result, spec.interval)

    async def settle(
        self, keys: Iterable[ReleaseKey], deadline: float, *, stop: asyncio.Event | None = None,
    ) -> dict[ReleaseKey, PassResult]:
        """Pass each of ``keys`` until it rests (at most :attr:`concurrency` at once); returns the last
        pass of each that finished.

        Dependencies among ``keys`` settle before their dependents (a
        dependent then passes, or is held when a dependency is not Ready). A
        pass asking for more work runs again at once, and one waiting on a
        lock waits, while ``deadline`` (seconds from now) is not reached; a
        refused pass (busy) retries each second. Setting ``stop`` ends the
        wait: the keys not finished are missing from the result. A suspended
        package is not passed: its result is ``Suspended`` (the gate's rule 9).
        """
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline
        results: dict[ReleaseKey, PassResult] = {}
        slots = asyncio.Semaphore(self.concurrency)
        keys = list(keys)
        done = {k: asyncio.Event() for k in keys}

        async def one(key: ReleaseKey) -> None:
            try:
                await passes(key)
            finally:
                done[key].set()

        async def passes(key: ReleaseKey) -> None:
            spec = self.book.packages.get(key)
            for dep in spec.depends_on if spec is not None else ():
                dep_key = self.key_of(dep.id)
                if dep_key in done and dep_key != key:
                    await done[dep_key].wait()
            async with slots:
                while True:
                    try:
                        result = await self.run_pass(key)
                    except Suspended as exc:
                        results[key] = PassResult(SUSPENDED, "stop", str(exc))
                        return
                    except ActionRefused:
                        await asyncio.sleep(_SETTLE_REFUSED_RETRY)
                        continue
                    remaining = end - loop.time()
                    if result.next == "now" and remaining > 0:
                        continue
                    if result.next == "soon" and remaining > 0:
                        await asyncio.sleep(min(result.retry_after or LOCKED_RECHECK, remaining))
                        continue
                    results[key] = result
                    return

        runner: asyncio.Future[Any] = asyncio.gather(*(one(k) for k in keys))
        waiter: asyncio.Future[Any] = asyncio.ensure_future(
            stop.wait() if stop is not None else asyncio.Event().wait())
        await asyncio.wait([runner, waiter], return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if not runner.done():
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await runner
        return results
