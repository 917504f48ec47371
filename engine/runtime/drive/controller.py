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

from engine.base.fields import PackageError
from engine.helm import Helm, HelmError, ReleaseNotFound
from engine.kube.client import impersonating
from engine.package.flux import HELM_RELEASE
from engine.package.identity import storage_apart_reason
from engine.package.load import said_of
from engine.package.model import PackageSpec
from engine.package.order import dependency_order
from engine.reconcile import conditions as cond
from engine.reconcile.action import ActionContext
from engine.reconcile.atomic import LOCKED_RECHECK, AtomicRelease, PassResult
from engine.reconcile.drift import DriftDetector
from engine.reconcile.maintenance import Maintenance
from engine.reconcile.options import kube_user, uninstall_options
from engine.reconcile.request import Request
from engine.reconcile.state import STALLED, SUSPENDED, TARGET_CHANGED
from engine.reconcile.status import ActionOutcome, EngineStatus
from engine.resolve.release import resolve
from engine.runtime.drive.adoption import Adoption, Relabel
from engine.runtime.drive.charts import ChartLocator
from engine.runtime.drive.flux_ownership import FluxOwnership
from engine.runtime.drive.holds import DEPENDENCY_RETRY, DependencyHolds
from engine.runtime.drive.ports import InputUpdate, PackageInput, Triggers
from engine.runtime.drive.queue import RunResult, WorkQueue
from engine.runtime.drive.values_objects import ValuesObjects
from engine.runtime.ledger.book import ActionRefused, ReleaseBook, TargetChange
from engine.runtime.ledger.claims import ClaimRefused
from engine.runtime.ledger.gate import ActionGate, Suspended, no_package_reason
from engine.runtime.ledger.tasks import Background
from engine.runtime.package_set import OtherPackageSet, PackageSet
from engine.runtime.state import (
    EngineSignal,
    LeaseChanged,
    PackageProblems,
    PassFinished,
    ReleaseKey,
)
from engine.service import ReleaseService
from engine.service.types import PackageNotHelm
from engine.sources import SourceError
from engine.storage.codec import Driver
from engine.storage.observation import Observation
from engine.storage.observer import StorageChange
from engine.storage.writer import unlock_release

if TYPE_CHECKING:
    from engine.sources.source import ChartSource

log = logging.getLogger(__name__)

# How long a refused pass (another action runs on the release) waits before trying again, seconds.
_REFUSED_RETRY = 5.0
_SETTLE_REFUSED_RETRY = 1.0
# Followers re-read the persisted statuses this often (seconds).
_FOLLOWER_REFRESH = 3.0


def storage_unlocker(api: client.ApiClient, driver: Driver) -> Callable[[Observation, str], Awaitable[Observation]]:
    """The action context's ``unlock``: mark a pending revision failed in storage, only if it is still
    the record judged stale (its resourceVersion)."""
    async def unlock(obs: Observation, detail: str) -> Observation:
        storage_ns = obs.storage_key.namespace if obs.storage_key else obs.namespace
        return await asyncio.to_thread(unlock_release, api, storage_ns, obs.name, obs.version, driver=driver,
                                       detail=detail, resource_version=obs.resource_version or None)
    return unlock


def verdict(result: PassResult, interval: float) -> RunResult:
    """What the work queue does after a pass (the one translation of a pass's ``next``)."""
    if result.state == cond.DEPENDENCY_NOT_READY:  # woken when a dependency turns Ready; this is the fallback
        return RunResult("interval", min(interval, DEPENDENCY_RETRY))
    if result.next == "soon":
        return RunResult("interval", min(LOCKED_RECHECK, result.retry_after or LOCKED_RECHECK))
    if result.next == "interval":
        return RunResult("interval", interval)
    if result.next == "retry":  # RetryOnFailure: its retry interval, jittered by the queue as Flux's requeue
        return RunResult("interval", result.retry_after if result.retry_after is not None else interval)
    return {"now": RunResult("now"), "error": RunResult("error"), "stop": RunResult("stop")}[result.next]


@dataclasses.dataclass(eq=False, repr=False)
class PackageController:
    """Queue, triggers, prune and passes of one engine's packages (see the module docstring).

    ``package_input`` None: no packages (the engine only shows storage).
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
    package_input: PackageInput | None  # the packages folder, a kustomize build, or the API server's Package objects
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
    holds: DependencyHolds = dataclasses.field(init=False)  # spec.dependsOn at pass time
    locator: ChartLocator = dataclasses.field(init=False)  # the chart pulled and verified
    flux: FluxOwnership = dataclasses.field(init=False)  # HelmRelease documents whose release Flux owns
    adoption: Adoption = dataclasses.field(init=False)  # the release this package set's before a pass

    def __post_init__(self) -> None:
        self.holds = DependencyHolds(self.book)
        self.locator = ChartLocator(self.book, self.helm, self.ctx.api, self.values)
        self.flux = FluxOwnership(self.book, self.ctx.api, self.locator.locate, self.service.values_from)
        self.adoption = Adoption(self.book, self.ctx, self.package_set, self.relabel)
        self.queue = WorkQueue(self._run_queued, concurrency=self.concurrency,
                               is_suspended=lambda key: self.gate.suspension(key) is not None)
        self.triggers = Triggers(enqueue=self.queue.add, reconciling=lambda: self.auto,
                                 acting=lambda: self.gate.acting, spawn=self.tasks.spawn)
        self.book.subscribe(self._on_event)
        self.service.identity = lambda ns, name: kube_user(self.book.packages.get((ns, name)))  # monitors
        self.service.notify_absent(self.on_absent)  # a monitor finding resources absent queues the package

    # -- packages ----------------------------------------------------------------
    def load_packages(self) -> None:
        """(Re)load the package input now; bad files are reported, the rest apply."""
        if self.package_input is not None:
            self.apply_input(self.package_input.load())

    async def load(self) -> None:
        """:meth:`load_packages` off the event loop (and the objects of valuesFrom read)."""
        if self.package_input is not None:
            self.apply_input(await asyncio.to_thread(self.package_input.load))
            await self.values.warm(self.book.packages.values())

    def apply_input(self, update: InputUpdate) -> None:
        """Take a (re)load of the package input: new specs, problems, changed and removed packages
        (pruned in reverse dependency order)."""
        book = self.book
        before_specs = {k: book.packages[k] for k in update.removed if k in book.packages}
        # A package still declared under another release target: its next pass uninstalls the old release first
        # (_uninstall_previous), neither orphaned nor pruned here.
        declared = {(s.namespace, s.name) for s in update.specs.values()}
        retargeted = {k for k, s in before_specs.items() if (s.namespace, s.name) in declared}
        for key in retargeted:
            book.log(key, "orphan", "info", "its package now drives another release: its next pass uninstalls this one")
        before_specs = {k: s for k, s in before_specs.items() if k not in retargeted}
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
            if not (self.prune and self.gate.acting) and self.package_input is not None and key in before_specs:
                book.log(key, "orphan", "info", self.package_input.removal(before_specs[key]))
        if self.prune and self.gate.acting and update.removed:
            gone = [before_specs[k] for k in update.removed if k in before_specs]
            self.tasks.spawn(self._prune_all(list(reversed(dependency_order(gone)))))
        for key in update.changed | update.removed:
            book.refresh(key)
        book.set_file_problems({err.file: str(err) for err in reversed(update.errors)})  # each file's first
        book.emit(PackageProblems(tuple(update.errors)))

    async def watch(self) -> None:
        """Apply every change of the package input (and of valuesFrom objects): changed packages reconcile at once."""
        if self.package_input is None:
            return
        self.tasks.spawn(self.values.run(self.triggers))
        async for update in self.package_input.watch():
            self.apply_input(update)
            self.tasks.spawn(self.flux.observe(update.changed))  # a new or changed HelmRelease document
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
        with its ``spec.uninstall`` options, under the release's guard; a suspended one's release is kept
        (``PackageSpec.kept_when_removed``). Only a release this engine installed
        (its status has history), or with ``stored`` any release storage holds. Returns None when it is
        uninstalled or there is nothing to uninstall, else helm's error. Raises ActionRefused (busy)."""
        key = spec.key
        if (kept := spec.kept_when_removed) is not None:
            self.book.log(key, "prune", "info", f"{why}: {kept}")
            return None
        status = self.book.status(key)
        if stored:
            if self.ctx.observer.latest(*key) is None:
                return None
        elif status is None or status.history.latest() is None:
            return None
        ns, release = key
        timeout = spec.action_timeout("uninstall")
        async with self.book.running(key, "uninstall", timeout):
            if self.ctx.fence is not None:  # --shards auto: the actor claim
                await self.ctx.fence(key, "uninstall", timeout, None)  # its object is deleted: no spec to check
            try:
                await self.helm.uninstall(release, ns, uninstall_options(spec))
            except HelmError as exc:
                self.book.log(key, "prune", "failed", f"uninstall failed: {exc.message}", exc.tail)
                return exc.message
            await self.book.drop_status(key, spec.storage_ns)  # re-adding the package installs afresh
        self.book.log(key, "prune", "succeeded", f"{why}: release uninstalled")
        return None

    def _on_event(self, event: EngineSignal) -> None:
        """A package's Ready turning True requeues the packages that depend on it at once."""
        for other in self.holds.released(event):
            if self.auto and self.gate.acting:
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
        """The monitor found resources of a release missing: reconcile its package (once), when it restores
        them (:attr:`PackageSpec.restores_absent`)."""
        key = (namespace, name)
        latest = self.ctx.observer.latest(*key)
        if latest is None or latest.status != "deployed" or self.gate.suspension(key) is not None:
            return  # uninstalled or being uninstalled, or the operator holds the package
        spec = self.book.packages.get(key)
        if spec is not None and spec.restores_absent and self.gate.acting and self.auto:
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

    @property
    def charts(self) -> ChartSource:
        """Charts from repositories (the chart locator's source)."""
        return self.locator.source

    # -- requests --------------------------------------------------------------------
    async def _request(self, key: ReleaseKey, force: bool) -> Request:
        """Everything a pass needs, from the resolution stage (nothing rendered here: the decision
        renders only when the spec changed), its status recording where the release is stored (the release
        target did not change: as Flux's internal/controller/helmrelease_controller.go ``reconcileRelease`` sets
        ``status.storageNamespace``). Raises PackageError for an unreadable chart or values."""
        spec = self.book.spec(key)
        oci_digest = await self.locator.locate(spec)
        resolved = await asyncio.to_thread(functools.partial(resolve, spec, values_from=self.service.values_from))
        status = dataclasses.replace(self.book.status(key) or EngineStatus(), storage_namespace=spec.storage_ns)
        req = Request.from_resolved(resolved, status, force=force,
                                    package_set=self.package_set.identity if self.package_set else None,
                                    oci_digest=oci_digest)
        req.post_renderer = await self.service.post_renderer_for(spec)
        self.service.take_absent_report(*key)
        req.absent = tuple(r.ref for r in self.service.absent(*key)) if spec.restores_absent else ()
        latest = self.ctx.observer.latest(*key)
        await self.adoption.adopt(req, latest)
        return req

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
        failed = result.next in ("error", "stop", "retry") or any(not o.ok for o in result.outcomes)
        self.book.emit(PassFinished(key, spec, "failure" if failed else "success", time.monotonic() - began))
        return result

    async def _reconcile(self, key: ReleaseKey, spec: PackageSpec, force: bool) -> PassResult:
        book = self.book
        async with book.running(key, "reconcile", spec.action_timeout("reconcile")):
            waiting = self.holds.waiting(spec)
            if waiting:
                result = self.holds.hold(key, waiting)
                await book.persist(key)
                book.refresh(key)
                return result
            held = await self.flux.held(key, spec) if spec.kind == HELM_RELEASE else None
            if held is not None:
                return held
            if (change := book.target_change(key, spec)) is not None:
                result = await self._uninstall_previous(key, spec, change)
                book.refresh(key)
                return result
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

    async def _uninstall_previous(self, key: ReleaseKey, spec: PackageSpec, change: TargetChange) -> PassResult:
        """Uninstall ``change.previous``, the release ``spec``'s package drove before its release target changed
        to ``key`` (its storage namespace, release namespace or name: :meth:`ReleaseBook.target_change`), from the
        storage it is in, with the package's ``spec.uninstall`` options, and forget its status (stored beside it);
        the install is the next pass's, as Flux's helm-controller requeues after it
        (internal/controller/helmrelease_controller.go ``reconcileRelease``, ``reconcileUninstall`` with the
        recorded ``status.storageNamespace``). A release already gone counts as uninstalled. One stored apart from
        its namespace is refused by name, as every helm action on it (helm's CLI cannot uninstall it from there):
        Stalled, nothing acts. Raises ActionRefused (``previous`` busy)."""
        previous, why = change.previous, change.why
        ns, release = previous
        refused = storage_apart_reason("uninstall", previous, change.stored_in)
        if refused is not None:
            message = f"{why}: {refused}"
            status = self.book.status(key) or EngineStatus()
            self.book.set_status(key, dataclasses.replace(status, conditions=cond.set_condition(
                status.conditions, cond.STALLED, True, cond.STORAGE_APART, message)))
            self.book.log(key, "uninstall", "failed", message)
            return PassResult(STALLED, "stop", message)
        # The pass holds its own key already (a storage namespace change keeps it).
        held = self.book.running(previous, "uninstall", spec.timeout) if previous != key else contextlib.nullcontext()
        async with held:
            if self.ctx.fence is not None:  # --shards auto: the actor claim on the release acted on
                await self.ctx.fence(previous, "uninstall", spec.timeout, None)
            try:
                await self.helm.uninstall(release, ns, uninstall_options(spec))
            except ReleaseNotFound:
                pass
            except HelmError as exc:
                self.book.log(key, "uninstall", "failed", f"{why}: {exc.message}", exc.tail)
                return PassResult(TARGET_CHANGED, "error", exc.message)
            await self.book.drop_status(previous, change.stored_in)
        message = f"{why}: release {ns}/{release} uninstalled"
        self.book.log(key, "uninstall", "succeeded", message)
        self.book.refresh(previous)
        return PassResult(TARGET_CHANGED, "now", message,
                          (ActionOutcome("uninstall", True, message, None, (), time.time()),))

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
        if self.gate.placed.why_not(key) is not None:
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
                dep_key = self.holds.key_of(dep.id)
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
