"""The engine: observes release storage, watches the packages folder, reconciles, reports.

Each package is reconciled by the atomic release loop (engine.reconcile)
from a work queue: at start, when its files change, at its interval, at once
when a pass asks for more, with backoff after errors. Its engine status
(history, counters, conditions, overrides) is persisted in the cluster after
every pass, so a restart neither loses it nor triggers a needless upgrade.
With a lease configured only the holder acts; other instances show the
same state read-only.

The app talks to the engine only through this class's public methods and
the events it publishes (:data:`engine.runtime.state.EngineEvent`).
Methods that change the cluster raise :class:`ActionRefused` when the action
cannot start and :class:`NotAvailable` when this engine cannot do it at all;
:meth:`Engine.capabilities` says in advance which ones are unavailable and why.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client

from engine import labels
from engine.helm import Helm, HelmError, RollbackOptions
from engine.kube import KubeTarget, api_client
from engine.masking import Masker
from engine.monitor.status import MonitorStatus
from engine.package import Chart, PackageError, PackageSpec, deep_merge, load_chart, merged_values
from engine.reconcile import conditions as cond
from engine.reconcile import state as st
from engine.reconcile.action import ActionContext, ActionReconciler, ObservedReleases, record
from engine.reconcile.atomic import LOCKED_RECHECK, AtomicRelease, PassResult
from engine.reconcile.drift import DriftDetector
from engine.reconcile.errors import ActionFailed
from engine.reconcile.request import Request
from engine.reconcile.status import ActionOutcome, EngineStatus
from engine.reconcile.store import StatusStore
from engine.reconcile.test import Test
from engine.reconcile.uninstall import Uninstall
from engine.reconcile.unlock import Unlock
from engine.runtime.diff import manifest_diff
from engine.runtime.lease import LeaseElector, lease_name_for
from engine.runtime.queue import RunResult, WorkQueue
from engine.runtime.source import PackageSource, SourceUpdate
from engine.runtime.state import (
    CleanupItem,
    EngineEvent,
    EventLogged,
    LeaseChanged,
    PackageProblems,
    ReconcileEvent,
    ReleaseKey,
    ReleaseRemoved,
    ReleaseUpdated,
    ReleaseView,
    RunningAction,
)
from engine.service import ReleaseService
from engine.service.types import PackageNotHelm
from engine.storage.observation import PENDING_STATUSES, Observation, canonical_json
from engine.storage.observer import Observer, StorageChange
from engine.storage.snapshot import Snapshot
from engine.storage.writer import unlock_release

log = logging.getLogger(__name__)

_EVENT_LOG_SIZE = 200
# Mutating actions, by the name the app's keys use.
ACTIONS = (
    "upgrade", "rollback", "test", "monitor", "maintenance", "suspend", "unlock", "cleanup", "uninstall",
)
# Followers re-read the persisted statuses this often (seconds).
_FOLLOWER_REFRESH = 3.0

Subscriber = Callable[[EngineEvent], None]


class ActionRefused(RuntimeError):
    """An action was not started (busy release, no package, read-only, ...)."""


class NotAvailable(RuntimeError):
    """This engine cannot perform the action at all; the message says why."""


def spec_digest(chart_digest: str, values: dict[str, object]) -> str:
    """32 hex characters identifying a chart content + values pair (fits a label value)."""
    return labels.label_digest(chart_digest.encode() + b"\0" + canonical_json(values))


@dataclass(frozen=True)
class LeaseConfig:
    """Where the engine lease lives; ``duration`` and ``retry`` in seconds."""

    name: str
    namespace: str = "default"
    duration: float = 15.0
    retry: float = 2.0
    identity: str | None = None


class Engine:
    """Drives the packages in ``packages_dir`` and reports every release in storage.

    ``observer`` may be given (e.g. an offline one fed with fixed records);
    by default one is built for ``target`` on :meth:`start`. Subscribers are
    called on the engine's event loop. ``readonly`` refuses every mutating
    action. ``concurrency`` bounds reconciles running at once; ``prune``
    uninstalls the release of a removed package file (else it is reported as
    orphaned); ``lease`` makes this one of several instances of which only
    the lease holder acts.
    """

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
    ):
        self.target = target
        self.helm = helm
        self.packages_dir = packages_dir
        self.namespaces = namespaces
        self.observer = observer
        self.readonly = readonly
        self.prune = prune
        self.lease_config = lease
        self.watch_packages = watch_packages
        self.monitors = monitors
        self._monitor_tasks: list[asyncio.Task[None]] = []
        self.packages: dict[ReleaseKey, PackageSpec] = {}
        self.package_errors: list[PackageError] = []
        self.orphans: set[ReleaseKey] = set()
        self.lease_holder = ""
        self._leader = lease is None
        self._api: client.ApiClient | None = None
        self._store: StatusStore | None = None
        self._atomic: AtomicRelease | None = None
        self._ctx: ActionContext | None = None
        self._source = PackageSource(packages_dir) if packages_dir is not None else None
        # Which package set labels its releases (cleanup removes only its own): the lease's name.
        self.package_set = lease_name_for(str(packages_dir.resolve())) if packages_dir is not None else None
        self.service: ReleaseService | None = None
        self.masker = Masker()  # one per engine: a secret masks the same everywhere it is shown
        self._monitors: dict[ReleaseKey, MonitorStatus] = {}
        self._statuses: dict[ReleaseKey, EngineStatus] = {}
        self._states: dict[ReleaseKey, str] = {}
        self._views: dict[ReleaseKey, ReleaseView] = {}
        self._events: dict[ReleaseKey, deque[ReconcileEvent]] = {}
        self._subscribers: list[Subscriber] = []
        self._locks: dict[ReleaseKey, asyncio.Lock] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._elector: LeaseElector | None = None
        self._auto = False  # reconcile on its own (queue), as opposed to on request only
        self._leading = asyncio.Event()  # set while this instance holds the lease
        self.queue: WorkQueue[ReleaseKey] = WorkQueue(
            self._run_queued, concurrency=concurrency, is_suspended=self._is_suspended)
        if observer is not None:
            observer.subscribe(self._on_storage_threadsafe)

    # -- lifecycle -----------------------------------------------------------
    async def start(self, *, reconcile: bool = True) -> None:
        """Observe storage, read persisted statuses, load packages and start reconciling.

        With ``reconcile`` False nothing is queued (actions still work on
        request). Raises KubeConfigError when the kubeconfig cannot be loaded.
        """
        self._loop = asyncio.get_running_loop()
        if self._source is not None:
            self._apply_source(await asyncio.to_thread(self._source.load))
        if self.observer is None:
            self._api = api_client(self.target)
            self.observer = Observer(self._api, self._observed_namespaces())
            self.observer.subscribe(self._on_storage_threadsafe)
        self.observer.start()
        await asyncio.to_thread(self.observer.wait_synced, 30)
        if self._api is not None:
            self._store = StatusStore(self._api)
            self.service = ReleaseService(self.helm, self._api, on_absent=self._on_absent,
                                          on_status=self._on_monitor, namespaces=self.namespaces)
            self._ctx = ActionContext(helm=self.helm, observer=self.observer, api=self._api,
                                      unlock=self._unlock_record, driver=self.observer.driver,
                                      quiet=self.service.quiet, paused=self.service.monitor_paused)
            self._atomic = AtomicRelease(self._ctx, DriftDetector(self._api))
            await self._load_statuses()
        for key in [*self.observer.releases(), *self.packages]:
            self._refresh(key)
        for storage_ns, release in self.observer.unreadable_releases():
            self._refresh((storage_ns, release))
        if self._source is not None and self.watch_packages:
            self._spawn(self._watch_source())
        if self.lease_config is not None and self._api is not None:
            cfg = self.lease_config
            self._elector = LeaseElector(self._api, cfg.name, cfg.namespace, identity=cfg.identity,
                                         duration=cfg.duration, retry=cfg.retry, on_change=self._on_lease)
            self._elector.start()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._elector.decided.wait(), 10)
            self._spawn(self._follow_statuses())
        self._auto = reconcile
        if self.service is not None and self.monitors:
            for key in list(self.packages):
                task = asyncio.ensure_future(self._refresh_monitor(key))
                self._monitor_tasks.append(task)
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        self.queue.start()
        if reconcile and self.acting:
            for key in self.packages:
                self.queue.add(key)

    async def stop(self, deadline: float = 30.0) -> bool:
        """Stop: running helm actions may finish for up to ``deadline`` seconds, then are cancelled.

        Returns True when every running action finished on its own.
        """
        if self._source is not None:
            self._source.stop()
        clean = await self.queue.stop(deadline)
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._elector is not None:
            await self._elector.stop(release=True)
        if self.service is not None:
            await asyncio.to_thread(self.service.stop_monitors)
        if self.observer is not None:
            await asyncio.to_thread(self.observer.stop)
        return clean

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _observed_namespaces(self) -> list[str] | None:
        if not self.namespaces:
            return None
        extra = {s.storage_ns for s in self.packages.values()}
        return sorted(set(self.namespaces) | extra)

    async def monitors_ready(self) -> None:
        """Wait until the monitors started at :meth:`start` have listed their resources."""
        await asyncio.gather(*self._monitor_tasks, return_exceptions=True)

    async def wait_for_lease(self) -> bool:
        """Wait until this instance leads, or the holder proves alive for a lease duration; True if leading.

        A lease left by a killed instance expires after its duration, so a
        new instance takes over then.
        """
        if self._elector is None or self.lease_config is None:
            return self.acting
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._leading.wait(), self.lease_config.duration + 2 * self.lease_config.retry)
        return self.acting

    @property
    def acting(self) -> bool:
        """True when this instance may change the cluster (not read-only, and holding the lease if any)."""
        return not self.readonly and self._leader

    # -- events ----------------------------------------------------------------
    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback`` with every :data:`EngineEvent`; returns an unsubscribe function."""
        self._subscribers.append(callback)
        return lambda: self._subscribers.remove(callback) if callback in self._subscribers else None

    def _emit(self, event: EngineEvent) -> None:
        for cb in list(self._subscribers):
            try:
                cb(event)
            except Exception:
                log.exception("engine subscriber failed")

    def _log_event(self, key: ReleaseKey, action: str, outcome: str, message: str,
                   tail: tuple[str, ...] = ()) -> None:
        pkg = self.packages.get(key)
        event = ReconcileEvent(time.time(), key, pkg.name if pkg else "", action, outcome, message, tail)
        self._events.setdefault(key, deque(maxlen=_EVENT_LOG_SIZE)).append(event)
        view = self._views.get(key)
        if outcome == "started" and view is not None and view.running is not None:
            # Name the running action as it is ("upgrade", "test"...), not just "reconcile".
            self._refresh(key, running=dataclasses.replace(view.running, action=action))
        log.info("event %s/%s %s %s: %s", key[0], key[1], action, outcome, message)
        self._emit(EventLogged(event))

    def _on_storage_threadsafe(self, change: StorageChange) -> None:
        if self._loop is not None and self._loop.is_running():
            self._loop.call_soon_threadsafe(self._on_storage, change)
        else:
            self._on_storage(change)

    def _on_storage(self, change: StorageChange) -> None:
        if change.observation is not None:
            key = change.observation.release_key
            if key in self.packages and not self._busy(key) and not self._ours(key, change.observation):
                # Written outside helmdeck: the last pass's verdict no longer holds; look again soon.
                self._states.pop(key, None)
                if self.acting and self._auto:
                    self.queue.add(key, 1.0)
            self._refresh(key)
        elif change.unreadable is not None:
            self._refresh((change.key.namespace, change.unreadable.release))
        elif change.type == "DELETED":
            for key in [k for k in self._views if k[0] == change.key.namespace]:
                self._refresh(key)

    async def _unlock_record(self, obs: Observation, detail: str) -> Observation:
        """Mark a pending revision failed in storage (only if it is still the record judged stale)."""
        assert self._api is not None and self.observer is not None
        storage_ns = obs.storage_key.namespace if obs.storage_key else obs.namespace
        return await asyncio.to_thread(unlock_release, self._api, storage_ns, obs.name, obs.version,
                                       driver=self.observer.driver, detail=detail,
                                       resource_version=obs.resource_version or None)

    def _busy(self, key: ReleaseKey) -> bool:
        lock = self._locks.get(key)
        return lock is not None and lock.locked()

    def _ours(self, key: ReleaseKey, obs: Observation) -> bool:
        """True when ``obs`` is a revision the engine's own history holds as it is (our write)."""
        status = self._statuses.get(key)
        if status is None:
            return False
        digest = Snapshot.from_observation(obs).digest
        return any(s.digest == digest for s in status.history.snapshots)

    def _on_absent(self, namespace: str, name: str) -> None:
        """The monitor found resources of a release missing: reconcile its package (once)."""
        key = (namespace, name)
        latest = self.observer.latest(*key) if self.observer is not None else None
        if latest is None or latest.status != "deployed" or self._is_suspended(key):
            return  # uninstalled or being uninstalled, or the operator holds the package
        if key in self.packages and self.acting and self._auto:
            self._log_event(key, "monitor", "info", "resources are absent: reconciling to restore them")
            self.queue.add(key)

    def _on_monitor(self, namespace: str, name: str, status: MonitorStatus) -> None:
        key = (namespace, name)
        self._monitors[key] = status
        self._refresh(key)

    async def _refresh_monitor(self, key: ReleaseKey) -> None:
        """(Re)build the monitor of a managed release after an action; drop it in maintenance."""
        if self.service is None or key not in self.packages or not self.monitors:
            return
        if self._maintenance(key):
            self.service.remove_monitor(*key)
        else:
            await self.service.refresh_monitor(*key)

    def _on_lease(self, holder: str, leader: bool) -> None:
        was = self._leader
        self.lease_holder = holder
        self._leader = leader
        if leader:
            self._leading.set()
        else:
            self._leading.clear()
        self._emit(LeaseChanged(holder, leader))
        if leader and not was and not self.readonly and self._auto:
            for key in self.packages:  # taking over: look at everything now
                self.queue.add(key)

    # -- reading ---------------------------------------------------------------
    def releases(self) -> list[ReleaseView]:
        """Every known release (stored or declared), sorted by namespace and name."""
        return [self._views[k] for k in sorted(self._views)]

    def release(self, key: ReleaseKey) -> ReleaseView | None:
        return self._views.get(key)

    def status(self, key: ReleaseKey) -> EngineStatus | None:
        """The package's engine status (history, counters, conditions), if any."""
        return self._statuses.get(key)

    def history(self, key: ReleaseKey) -> list[Observation]:
        """Every stored revision of ``key``, newest first."""
        return self.observer.history(*key) if self.observer is not None else []

    def events(self, key: ReleaseKey) -> list[ReconcileEvent]:
        """The package's event log, oldest first (at most the last 200)."""
        return list(self._events.get(key, ()))

    async def release_record(self, key: ReleaseKey, revision: int) -> dict[str, Any]:
        """The whole stored release of one revision (manifest, chart values, hooks...).

        Loaded on demand from storage; raises NotAvailable without an
        observer and KeyError when the revision is not stored.
        """
        if self.observer is None:
            raise NotAvailable("not connected to a cluster")
        return await asyncio.to_thread(self.observer.load_release, key[0], key[1], revision)

    async def manifest(self, key: ReleaseKey, revision: int) -> str:
        """The manifest Helm stored for ``revision`` of ``key``."""
        record_ = await self.release_record(key, revision)
        manifest = record_.get("manifest")
        return manifest if isinstance(manifest, str) else ""

    async def values(self, key: ReleaseKey, revision: int, *, computed: bool = False) -> dict[str, Any]:
        """User-supplied values of a revision, or with ``computed`` the chart defaults merged under them."""
        record_ = await self.release_record(key, revision)
        config = record_.get("config") if isinstance(record_.get("config"), dict) else {}
        if not computed:
            return dict(config or {})
        chart_values = (record_.get("chart") or {}).get("values") or {}
        return deep_merge(chart_values if isinstance(chart_values, dict) else {}, config or {})

    def capabilities(self) -> dict[str, str | None]:
        """For each mutating action (see ACTIONS), and ``diff`` (read-only): None when available, else why not."""
        offline = "not connected to a cluster"
        diff = None if self.service is not None else offline
        if self.readonly:
            return {**dict.fromkeys(ACTIONS, "read-only mode"), "diff": diff}
        if not self._leader:
            holder = self.lease_holder or "another instance"
            return {**dict.fromkeys(ACTIONS, f"read-only: {holder} holds the engine lease"), "diff": diff}
        out: dict[str, str | None] = dict.fromkeys(ACTIONS)
        if self.service is None:
            for name in ("monitor", "maintenance", "cleanup"):
                out[name] = offline
        if self._ctx is None:
            out["unlock"] = offline
        out["diff"] = diff
        return out

    # -- state -----------------------------------------------------------------
    def _maintenance(self, key: ReleaseKey) -> str:
        """The effective maintenance mode: set from the app (kept in the status), else the package file's."""
        status = self._statuses.get(key)
        if status is not None and status.maintenance is not None:
            return status.maintenance
        pkg = self.packages.get(key)
        return pkg.maintenance if pkg else ""

    def _is_suspended(self, key: ReleaseKey) -> bool:
        pkg = self.packages.get(key)
        status = self._statuses.get(key)
        return bool((pkg and pkg.suspend) or (status and status.suspended))

    def _refresh(self, key: ReleaseKey, **changes: Any) -> None:
        obs = self.observer.latest(*key) if self.observer is not None else None
        pkg = self.packages.get(key)
        cur = self._views.get(key)
        status = self._statuses.get(key)
        bad = self.observer.unreadable_releases().get(key) if self.observer is not None else None
        if obs is None and pkg is None and bad is None and cur is not None and cur.running is None and not changes:
            del self._views[key]
            self._emit(ReleaseRemoved(key))
            return
        if obs is None and pkg is None and bad is None and cur is None:
            return
        base = cur or ReleaseView(namespace=key[0], name=key[1])
        fields: dict[str, Any] = {
            "observation": obs,
            "package": pkg,
            "maintenance": self._maintenance(key),
            "suspended": self._is_suspended(key),
            "monitor": self._monitors.get(key) or MonitorStatus(),
            "unreadable": f"revision {bad.revision}: {bad.reason}" if bad is not None else None,
        }
        if status is not None:
            ready = cond.get(status.conditions, cond.READY)
            fields.update(
                conditions=status.conditions,
                failures=status.failures,
                last=status.last,
                ready=None if ready is None or ready.status == "Unknown" else ready.status == "True",
            )
        state = self._states.get(key)
        if state is None and pkg is not None:
            # Until a pass decides (or after storage changed under it): a quick verdict, kept so that
            # later refreshes (monitor, progress) do not hash the chart again.
            state = self._quick_state(key, obs)
            if state is not None:
                self._states[key] = state
        fields["state"] = state if pkg is not None or status is not None else None
        fields.update(changes)
        new = dataclasses.replace(base, **fields)
        if new != cur:
            self._views[key] = new
            self._emit(ReleaseUpdated(new))

    def _quick_state(self, key: ReleaseKey, obs: Observation | None) -> str | None:
        """The release state before the first pass (cheap: no chart rendering, no drift)."""
        spec = self.packages.get(key)
        if spec is None:
            return None
        try:
            chart = load_chart(spec.chart_path)
            values = merged_values(spec)
        except PackageError:
            return None
        req = Request(spec, chart, values, spec_digest(chart.digest, values),
                      self._statuses.get(key) or EngineStatus())
        if cond.is_true(req.status.conditions, cond.STALLED):
            return st.STALLED
        return st.determine_state(req, obs).status

    async def _load_statuses(self) -> None:
        if self._store is None:
            return
        try:
            stored = await asyncio.to_thread(self._store.list, self._observed_namespaces())
        except Exception as exc:  # the engine still works without persisted status
            log.warning("cannot read persisted engine status: %s", exc)
            return
        for item in stored:
            self._statuses[(item.namespace, item.release)] = item.status

    async def _follow_statuses(self) -> None:
        """While not the leader, keep the persisted statuses (written by the leader) in view."""
        while True:
            await asyncio.sleep(_FOLLOWER_REFRESH)
            if self._leader or self._store is None:
                continue
            before = dict(self._statuses)
            await self._load_statuses()
            for key in set(before) | set(self._statuses):
                if before.get(key) != self._statuses.get(key):
                    self._states.pop(key, None)
                    self._refresh(key)

    async def _persist(self, key: ReleaseKey) -> None:
        spec = self.packages.get(key)
        status = self._statuses.get(key)
        if self._store is None or status is None or not self.acting:
            return
        ns = spec.storage_ns if spec else key[0]
        try:
            await asyncio.to_thread(self._store.save, ns, key[1], spec.name if spec else "", status)
        except Exception as exc:  # keep reconciling; the next pass writes again
            log.warning("cannot persist engine status of %s/%s: %s", key[0], key[1], exc)

    # -- packages --------------------------------------------------------------
    def load_packages(self) -> None:
        """(Re)load the packages folder now; bad files are reported, the rest apply."""
        if self._source is not None:
            self._apply_source(self._source.load())

    def _apply_source(self, update: SourceUpdate) -> None:
        old = set(self.packages)
        for key, spec in update.specs.items():
            before = self.packages.get(key)
            status = self._statuses.get(key)
            if before is not None and before.maintenance != spec.maintenance and status is not None \
                    and status.maintenance is not None:
                # The package file changed its mode: the file decides again.
                self._statuses[key] = dataclasses.replace(status, maintenance=None)
        self.packages = dict(update.specs)
        self.package_errors = list(update.errors)
        for key in update.changed:
            self._states.pop(key, None)
            self.orphans.discard(key)
        for key in update.removed:
            self._states.pop(key, None)
            if self.prune and self.acting:
                self._spawn(self._prune(key))
            else:
                self.orphans.add(key)
                self._log_event(key, "orphan", "info", "its package file was removed; the release is kept "
                                "(run with --prune to uninstall such releases)")
        for key in old | set(self.packages):
            self._refresh(key)
        self._emit(PackageProblems(tuple(update.errors)))

    async def _watch_source(self) -> None:
        assert self._source is not None
        async for update in self._source.watch():
            self._apply_source(update)
            if self.acting:
                for key in update.changed:
                    self.queue.add(key)

    async def _prune(self, key: ReleaseKey) -> None:
        status = self._statuses.get(key)
        last = status.history.latest() if status else None
        if last is None:
            return
        ns, release = key
        try:
            await self.helm.uninstall(release, ns)
            self._log_event(key, "prune", "succeeded", "package file removed: release uninstalled")
        except HelmError as exc:
            self._log_event(key, "prune", "failed", f"uninstall failed: {exc.message}", exc.tail)

    # -- reconcile -------------------------------------------------------------
    def _spec(self, key: ReleaseKey) -> PackageSpec:
        """The package spec with the effective maintenance mode."""
        spec = self.packages[key]
        mode = self._maintenance(key)
        return spec if spec.maintenance == mode else dataclasses.replace(spec, maintenance=mode)

    async def _request(self, key: ReleaseKey, force: bool) -> Request:
        """Everything a pass needs; raises PackageError for an unreadable chart or values."""
        spec = self._spec(key)
        chart = await asyncio.to_thread(load_chart, spec.chart_path)
        values = merged_values(spec)
        digest = spec_digest(chart.digest, values)
        release_labels = {labels.MANAGED_BY: labels.MANAGER, labels.PACKAGE: spec.name, labels.SPEC_DIGEST: digest}
        if self.package_set:
            release_labels[labels.PACKAGE_SET] = self.package_set
        req = Request(spec, chart, values, digest, self._statuses.get(key) or EngineStatus(), force, release_labels)
        if self.service is not None:
            # A chart that does not render has no checksum: the install or upgrade reports the error.
            with contextlib.suppress(HelmError):
                release_labels[labels.MANIFEST_CHECKSUM] = await self.service.checksum(spec.namespace, spec)
            release_labels[labels.MAINTENANCE] = "true" if spec.maintenance else "false"
            req.post_renderer = await self.service.post_renderer_for(spec)
            self.service.take_absent_report(*key)
            req.absent = tuple(r.ref for r in self.service.absent(*key))
        latest = self.observer.latest(*key) if self.observer is not None else None
        req.force_conflicts = latest is not None and latest.label_map.get(labels.MAINTENANCE) == "true"
        return req

    def _context(self, key: ReleaseKey) -> ActionContext:
        if self._ctx is None:
            raise NotAvailable("not connected to a cluster")
        return dataclasses.replace(self._ctx, events=lambda a, o, m, t: self._log_event(key, a, o, m, t))

    async def _run_queued(self, key: ReleaseKey, force: bool) -> RunResult:
        spec = self.packages.get(key)
        if spec is None or not self.acting:
            return RunResult("stop")
        try:
            result = await self._pass(key, force)
        except ActionRefused:
            return RunResult("interval", 5.0)  # something else runs on it; look again shortly
        if result.next == "soon":
            return RunResult("interval", min(LOCKED_RECHECK, result.retry_after or LOCKED_RECHECK))
        mapping = {"interval": RunResult("interval", spec.interval), "now": RunResult("now"),
                   "error": RunResult("error"), "stop": RunResult("stop")}
        return mapping[result.next]

    async def run_pass(self, key: ReleaseKey, *, force: bool = False) -> PassResult:
        """Run one atomic pass on ``key`` now and return how it ended (headless use and tests).

        Raises ActionRefused (no package, busy, read-only).
        """
        self._check_mutable()
        return await self._pass(key, force)

    async def _pass(self, key: ReleaseKey, force: bool) -> PassResult:
        """One atomic pass on ``key`` under its lock; persists the status. Raises ActionRefused."""
        if self._atomic is None:
            raise NotAvailable("not connected to a cluster")
        spec = self.packages.get(key)
        if spec is None:
            raise ActionRefused(f"no package declares release {key[0]}/{key[1]}")
        async with self._locked(key, "reconcile", spec.timeout):
            try:
                req = await self._request(key, force)
            except (PackageError, PackageNotHelm) as exc:
                status = self._statuses.get(key) or EngineStatus()
                conds = cond.set_condition(status.conditions, cond.READY, False, cond.INVALID_PACKAGE, str(exc))
                self._statuses[key] = dataclasses.replace(status, conditions=conds)
                self._log_event(key, "reconcile", "failed", str(exc))
                return PassResult("Failed", "error", str(exc))
            if req.spec.maintenance:
                result = await self._maintenance_pass(key, req)
            else:
                atomic = AtomicRelease(self._context(key), self._atomic.detector)
                result = await atomic.reconcile(req)
            last = result.outcomes[-1] if result.outcomes else None
            self._statuses[key] = dataclasses.replace(req.status, last=last or req.status.last)
            self._states[key] = result.state
            await self._refresh_monitor(key)
        await self._persist(key)
        self._refresh(key)
        return result

    async def _maintenance_pass(self, key: ReleaseKey, req: Request) -> PassResult:
        """In maintenance only the release service acts (as nelm's Service): entering costs one
        upgrade that stamps the maintenance label; after that nothing is rendered or upgraded, and
        the reconcile loop neither upgrades, remediates nor corrects drift."""
        assert self.service is not None
        ctx = self._context(key)
        spec = req.spec
        outcomes: tuple[ActionOutcome, ...] = ()
        async with ObservedReleases(ctx, spec.storage_ns, key[1], key[0]) as seen:
            try:
                extra = {k: v for k, v in req.release_labels.items() if k in (labels.SPEC_DIGEST, labels.PACKAGE_SET)}
                result = await self.service.upgrade(spec.namespace, spec, release_labels=extra)
            except (HelmError, PackageError) as exc:
                message = f"entering maintenance failed: {exc}"
                ctx.events("maintenance", "failed", message, getattr(exc, "tail", ()))
                return PassResult(st.FAILED, "error", message)
        record(req, seen.observed)
        if result.action in ("install", "upgrade"):
            message = (f"entered maintenance: revision {result.revision} stamps the maintenance label; "
                       "resources are no longer reconciled")
            ctx.events("maintenance", "succeeded", message, ())
            outcomes = (ActionOutcome("maintenance", True, message, result.revision, (), time.time()),)
        message = "package is in maintenance (NoResourceReconciliation): the release is left as it is"
        conds = cond.set_condition(req.status.conditions, cond.READY, None, cond.IN_MAINTENANCE, message)
        conds = cond.delete_condition(conds, cond.RECONCILING)
        req.status = dataclasses.replace(req.status, conditions=conds)
        latest = self.observer.latest(*key) if self.observer is not None else None
        return PassResult(st.determine_state(req, latest).status, "interval", message, outcomes)

    @contextlib.asynccontextmanager
    async def _locked(self, key: ReleaseKey, action: str, timeout: float) -> Any:
        lock = self._locks.setdefault(key, asyncio.Lock())
        if lock.locked():
            view = self._views.get(key)
            running = view.running.action if view and view.running else "an action"
            raise ActionRefused(f"{running} is already running on {key[0]}/{key[1]}")
        async with lock:
            self._refresh(key, running=RunningAction(action, time.time(), timeout))
            try:
                yield
            finally:
                self._refresh(key, running=None)

    # -- actions (the app's keys) ------------------------------------------------
    def _check_mutable(self) -> None:
        if self.readonly:
            raise ActionRefused("helmdeck runs read-only: actions are disabled")
        if not self._leader:
            raise ActionRefused(f"read-only: {self.lease_holder or 'another instance'} holds the engine lease")

    async def reconcile(self, key: ReleaseKey, *, force: bool = False) -> ActionOutcome | None:
        """Run one pass now; ``force`` upgrades even when in sync and lifts a suspension.

        Returns the last action's outcome, or None when nothing needed doing.
        Raises ActionRefused (no package, busy, read-only).
        """
        self._check_mutable()
        if key not in self.packages:
            raise ActionRefused(f"no package declares release {key[0]}/{key[1]}")
        if force:
            self._set_suspended(key, False)
        elif self._is_suspended(key):
            return None
        result = await self._pass(key, force)
        if result.next in ("now",):
            self.queue.add(key)
        return result.outcomes[-1] if result.outcomes else None

    async def rollback(self, key: ReleaseKey, revision: int = 0) -> ActionOutcome:
        """Roll back ``key`` to ``revision`` (0 = previous) and suspend its package.

        The suspension keeps the engine from undoing the rollback; a forced
        reconcile (or resume) lifts it. Raises ActionRefused while another action runs.
        """
        self._check_mutable()
        view = self._views.get(key)
        spec = view.package if view else None
        timeout = spec.timeout if spec else 300.0
        ns, release = key
        async with self._locked(key, "rollback", timeout):
            before = self.observer.latest(ns, release) if self.observer else None
            opts = RollbackOptions(timeout=timeout, wait=True)
            self._log_event(key, "rollback", "started", f"rolling back to revision {revision or 'previous'}")
            ctx = self._context(key)
            async with ObservedReleases(ctx, spec.storage_ns if spec else ns, release, ns) as seen:
                error: HelmError | None = None
                try:
                    await self.helm.rollback(release, ns, revision, opts)
                except HelmError as exc:
                    error = exc
            after = seen.newest
            ok = error is None and after is not None and after != before and after.status == "deployed"
            if ok and after is not None:
                message = f"rolled back {ns}/{release} to revision {revision or 'previous'}: revision {after.version}"
            else:
                message = f"rollback failed: {error.message if error else 'no new revision stored'}"
            outcome = ActionOutcome("rollback", ok, message, after.version if after else None,
                                    error.tail if error else (), time.time())
            self._log_event(key, "rollback", "succeeded" if ok else "failed", message, outcome.tail)
            if key in self.packages:
                status = self._statuses.get(key) or EngineStatus()
                req = Request(spec or self.packages[key], _NO_CHART, {}, "", status)
                record(req, seen.observed)  # our revision: the release stays ours, not "changed outside"
                self._statuses[key] = dataclasses.replace(req.status, last=outcome,
                                                          suspended=ok or status.suspended)
                self._states.pop(key, None)
            await self._refresh_monitor(key)
        await self._persist(key)
        if key not in self.packages:
            self._refresh(key, last=outcome)
        else:
            self._refresh(key)
        return outcome

    async def test(self, key: ReleaseKey) -> ActionOutcome:
        """Run ``helm test`` on ``key``; the outcome is read from the stored test hooks."""
        self._check_mutable()
        return await self._single(key, "test", Test)

    async def unlock(self, key: ReleaseKey) -> ActionOutcome:
        """Mark ``key``'s pending release failed so it can move again (the operator's call:
        no staleness wait, but never while an action of ours runs on it). Raises ActionRefused."""
        self._check_mutable()
        latest = self.observer.latest(*key) if self.observer else None
        if latest is None or latest.status not in PENDING_STATUSES:
            raise ActionRefused(f"{key[0]}/{key[1]} is not pending: nothing to unlock")
        return await self._single(key, "unlock", Unlock)

    async def uninstall(self, key: ReleaseKey) -> ActionOutcome:
        """``helm uninstall`` the release; its package (if any) is suspended so it is not reinstalled."""
        self._check_mutable()
        outcome = await self._single(key, "uninstall", Uninstall)
        if outcome.ok:
            if self.service is not None:
                self.service.remove_monitor(*key)
            if key in self.packages:
                self._set_suspended(key, True)
        return outcome

    async def _single(
        self, key: ReleaseKey, action: str, kind: Callable[[ActionContext], ActionReconciler],
    ) -> ActionOutcome:
        """Run one action reconciler outside the loop (the app's keys), recording its result."""
        spec = self.packages.get(key)
        if spec is None:
            spec = PackageSpec(Path("-"), key[1], key[0], Path("-"), key[1])  # a bare release, no package
        async with self._locked(key, action, spec.timeout):
            status = self._statuses.get(key) or EngineStatus()
            chart_path = spec.chart_path
            req = Request(spec, load_chart(chart_path) if chart_path.exists() else _NO_CHART, {}, "", status)
            try:
                outcome = await kind(self._context(key)).reconcile(req)
            except ActionFailed as exc:
                outcome = ActionOutcome(action, False, str(exc), at=time.time())
            if key in self.packages:
                tests = spec.test.enable and not spec.test.ignore_failures
                conds = cond.summarize(req.status.conditions, tests_count=tests)
                self._statuses[key] = dataclasses.replace(req.status, last=outcome, conditions=conds)
                self._states.pop(key, None)
            await self._refresh_monitor(key)
        await self._persist(key)
        self._refresh(key, last=outcome)
        return outcome

    def suspend(self, key: ReleaseKey, suspended: bool = True) -> None:
        """Suspend (or resume) reconciliation of ``key``'s package. Raises ActionRefused."""
        self._check_mutable()
        if key not in self.packages:
            raise ActionRefused(f"no package declares release {key[0]}/{key[1]}")
        self._set_suspended(key, suspended)
        self._log_event(key, "suspend" if suspended else "resume", "info",
                        "reconciliation suspended" if suspended else "reconciliation resumed")
        if not suspended:
            self.queue.add(key)

    def _set_suspended(self, key: ReleaseKey, suspended: bool) -> None:
        status = self._statuses.get(key) or EngineStatus()
        if status.suspended != suspended:
            self._statuses[key] = dataclasses.replace(status, suspended=suspended)
            if self._loop is not None:
                self._spawn(self._persist(key))
        self._refresh(key)

    async def cleanup(self, *, dry_run: bool = False, ignore_namespaces: tuple[str, ...] = ()) -> list[CleanupItem]:
        """Uninstall every release of this package set no package declares (``dry_run``: list them only).

        Only releases labelled by this package set (``helmdeck.dev/package-set``)
        are considered: other sets' and unmanaged releases are never touched;
        one failure does not stop the others. Raises ActionRefused (read-only)
        or NotAvailable.
        """
        if not dry_run:
            self._check_mutable()
        if self.service is None:
            raise NotAvailable("not connected to a cluster")
        keep = {f"{ns}/{name}" for ns, name in self.packages}
        scope = {labels.PACKAGE_SET: self.package_set} if self.package_set else None
        report = await self.service.cleanup(keep, ignore_namespaces, dry_run=dry_run, selector=scope)
        items = [CleanupItem(*_split(ref), "would-remove" if dry_run else "removed") for ref in report.removed]
        items += [CleanupItem(*_split(ref), "failed", why) for ref, why in report.failed]
        items += [CleanupItem(*_split(ref), "skipped", why) for ref, why in report.skipped]
        for item in items:
            if item.result in ("removed", "failed"):
                self._log_event((item.namespace, item.name), "cleanup", "succeeded" if item.result == "removed"
                                else "failed", item.message or f"cleanup {item.result} the release")
        return items

    def pause_monitor(self, key: ReleaseKey) -> int:
        """Pause the release's monitor once more (as nelm's PauseMonitor); returns the pause count."""
        if self.service is None:
            raise NotAvailable("not connected to a cluster")
        count = self.service.pause_monitor(*key)
        self._log_event(key, "monitor", "info", f"monitor paused (count {count})")
        return count

    def resume_monitor(self, key: ReleaseKey) -> int:
        """Take one pause off the release's monitor (never below zero); returns the pause count."""
        if self.service is None:
            raise NotAvailable("not connected to a cluster")
        count = self.service.resume_monitor(*key)
        self._log_event(key, "monitor", "info", "monitor resumed" if count == 0 else f"monitor paused (count {count})")
        return count

    async def set_maintenance(self, key: ReleaseKey, mode: str) -> PassResult:
        """Put ``key``'s package into maintenance (``NoResourceReconciliation``) or back (``""``) and
        reconcile once: each change costs exactly one upgrade. The choice is kept in the engine status
        (it survives restarts) until the package file's own mode changes. Raises ActionRefused."""
        self._check_mutable()
        if key not in self.packages:
            raise ActionRefused(f"no package declares release {key[0]}/{key[1]}")
        status = self._statuses.get(key) or EngineStatus()
        self._statuses[key] = dataclasses.replace(status, maintenance=mode)
        self._log_event(key, "maintenance", "info", f"maintenance set to {mode or 'off'} from the app")
        self._refresh(key)
        return await self._pass(key, False)

    async def render(self, key: ReleaseKey) -> str:
        """The manifests an upgrade of ``key``'s package would apply (post-rendered). Raises ActionRefused,
        NotAvailable, PackageError, HelmError."""
        if key not in self.packages:
            raise ActionRefused(f"no package declares release {key[0]}/{key[1]}")
        if self.service is None:
            raise NotAvailable("not connected to a cluster")
        spec = self._spec(key)
        return await self.service.render(spec.namespace, spec)

    async def diff(self, key: ReleaseKey, *, reveal: bool = False) -> str:
        """What an upgrade would change: the deployed manifest against the desired render, per object
        (unified diff; "" when nothing would change), secrets masked unless ``reveal``.
        Raises like :meth:`render`."""
        desired = await self.render(key)
        latest = self.observer.latest(*key) if self.observer is not None else None
        deployed = await self.manifest(key, latest.version) if latest is not None else ""
        return manifest_diff(deployed, desired, f"revision {latest.version}" if latest else "nothing deployed",
                             None if reveal else self.masker)



# Placeholder chart for actions on releases no package declares (test, unlock, uninstall need none).
_NO_CHART = Chart(Path("-"), "", "", "", "")


def _split(ref: str) -> tuple[str, str]:
    ns, _, name = ref.partition("/")
    return ns, name
