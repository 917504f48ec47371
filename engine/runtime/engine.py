"""The engine: observes release storage, loads packages, runs actions, reports.

Minimal reconcile for now: every package is reconciled once at start —
installed when absent, upgraded when its chart or values changed (a digest of
both is kept as a release label) or when its last revision is not deployed.
Outcomes are judged from what the observer saw written to storage after helm
returned, not from helm's exit status alone (as Flux's action reconcilers).

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
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

from engine import labels
from engine.helm import Helm, HelmError, RollbackOptions, UninstallOptions, UpgradeOptions
from engine.kube import KubeTarget, api_client
from engine.package import (
    PackageError,
    PackageSpec,
    deep_merge,
    load_chart,
    load_packages,
    merged_values,
)
from engine.runtime.state import (
    ActionOutcome,
    CleanupItem,
    EngineEvent,
    EventLogged,
    PackageProblems,
    ReconcileEvent,
    ReleaseKey,
    ReleaseRemoved,
    ReleaseUpdated,
    ReleaseView,
    RunningAction,
)
from engine.storage.observation import Observation, canonical_json
from engine.storage.observer import Observer, StorageChange

log = logging.getLogger(__name__)

# How long to wait for the observer to see a write helm reported done.
_OBSERVE_TIMEOUT = 10.0
_EVENT_LOG_SIZE = 200
# Mutating actions, by the name the app's keys use.
ACTIONS = (
    "upgrade", "rollback", "test", "monitor", "maintenance", "suspend", "unlock", "cleanup", "uninstall",
)

Subscriber = Callable[[EngineEvent], None]


class ActionRefused(RuntimeError):
    """An action was not started (busy release, no package, read-only, ...)."""


class NotAvailable(RuntimeError):
    """This engine cannot perform the action at all; the message says why."""


def spec_digest(chart_digest: str, values: dict[str, object]) -> str:
    """32 hex characters identifying a chart content + values pair (fits a label value)."""
    return labels.label_digest(chart_digest.encode() + b"\0" + canonical_json(values))


class Engine:
    """Drives the packages in ``packages_dir`` and reports every release in storage.

    ``observer`` may be given (e.g. an offline one fed with fixed records);
    by default one is built for ``target`` on :meth:`start`. Subscribers are
    called on the engine's event loop. ``readonly`` refuses every mutating
    action.
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
    ):
        self.target = target
        self.helm = helm
        self.packages_dir = packages_dir
        self.namespaces = namespaces
        self.observer = observer
        self.readonly = readonly
        self.packages: dict[ReleaseKey, PackageSpec] = {}
        self.package_errors: list[PackageError] = []
        self._views: dict[ReleaseKey, ReleaseView] = {}
        self._suspended: set[ReleaseKey] = set()
        self._events: dict[ReleaseKey, deque[ReconcileEvent]] = {}
        self._subscribers: list[Subscriber] = []
        self._locks: dict[ReleaseKey, asyncio.Lock] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._storage_waiters: list[asyncio.Event] = []
        self._tasks: set[asyncio.Task[None]] = set()
        if observer is not None:
            observer.subscribe(self._on_storage_threadsafe)

    # -- lifecycle -----------------------------------------------------------
    async def start(self, *, reconcile: bool = True) -> None:
        """Start observing, load packages and (unless told not to) reconcile each once.

        Raises KubeConfigError when the kubeconfig cannot be loaded.
        """
        self._loop = asyncio.get_running_loop()
        if self.observer is None:
            self.observer = Observer(api_client(self.target), self.namespaces)
            self.observer.subscribe(self._on_storage_threadsafe)
        self.observer.start()
        await asyncio.to_thread(self.observer.wait_synced, 30)
        for key in self.observer.releases():
            self._refresh(key)
        self.load_packages()
        if reconcile and not self.readonly:
            self._spawn(self.reconcile_all())

    async def stop(self) -> None:
        """Cancel running work and stop the observer."""
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self.observer is not None:
            await asyncio.to_thread(self.observer.stop)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

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
        self._emit(EventLogged(event))

    def _on_storage_threadsafe(self, change: StorageChange) -> None:
        if self._loop is not None and self._loop.is_running():
            self._loop.call_soon_threadsafe(self._on_storage, change)
        else:
            self._on_storage(change)

    def _on_storage(self, change: StorageChange) -> None:
        if change.observation is not None:
            self._refresh(change.observation.release_key)
        elif change.type == "DELETED":
            for key in [k for k in self._views if k[0] == change.key.namespace]:
                self._refresh(key)
        for ev in self._storage_waiters:
            ev.set()

    # -- reading ---------------------------------------------------------------
    def releases(self) -> list[ReleaseView]:
        """Every known release (stored or declared), sorted by namespace and name."""
        return [self._views[k] for k in sorted(self._views)]

    def release(self, key: ReleaseKey) -> ReleaseView | None:
        return self._views.get(key)

    def history(self, key: ReleaseKey) -> list[Observation]:
        """Every stored revision of ``key``, newest first."""
        return self.observer.history(*key) if self.observer is not None else []

    def events(self, key: ReleaseKey) -> list[ReconcileEvent]:
        """The package's event log, oldest first (at most the last 200)."""
        return list(self._events.get(key, ()))

    async def release_record(self, key: ReleaseKey, revision: int) -> dict[str, Any]:
        """The whole stored release of one revision (manifest, chart values, hooks...).

        Loaded on demand from storage; raises NotAvailable offline and KeyError
        when the revision is not stored.
        """
        if self.observer is None:
            raise NotAvailable("not connected to a cluster")
        return await asyncio.to_thread(self.observer.load_release, key[0], key[1], revision)

    async def manifest(self, key: ReleaseKey, revision: int) -> str:
        """The manifest Helm stored for ``revision`` of ``key``."""
        record = await self.release_record(key, revision)
        manifest = record.get("manifest")
        return manifest if isinstance(manifest, str) else ""

    async def values(self, key: ReleaseKey, revision: int, *, computed: bool = False) -> dict[str, Any]:
        """User-supplied values of a revision, or with ``computed`` the chart defaults merged under them."""
        record = await self.release_record(key, revision)
        config = record.get("config") if isinstance(record.get("config"), dict) else {}
        if not computed:
            return dict(config or {})
        chart_values = (record.get("chart") or {}).get("values") or {}
        return deep_merge(chart_values if isinstance(chart_values, dict) else {}, config or {})

    def capabilities(self) -> dict[str, str | None]:
        """For each mutating action (see ACTIONS): None when available, else why not."""
        if self.readonly:
            return dict.fromkeys(ACTIONS, "read-only mode")
        out: dict[str, str | None] = dict.fromkeys(ACTIONS)
        for name in ("monitor", "maintenance", "unlock", "cleanup"):
            out[name] = "not supported by this engine yet"
        return out

    # -- state -----------------------------------------------------------------
    def _refresh(self, key: ReleaseKey, **changes: Any) -> None:
        obs = self.observer.latest(*key) if self.observer is not None else None
        pkg = self.packages.get(key)
        cur = self._views.get(key)
        if obs is None and pkg is None and cur is not None and cur.running is None and not changes:
            del self._views[key]
            self._emit(ReleaseRemoved(key))
            return
        if obs is None and pkg is None and cur is None:
            return
        base = cur or ReleaseView(namespace=key[0], name=key[1])
        new = dataclasses.replace(
            base, observation=obs, package=pkg,
            maintenance=pkg.maintenance if pkg else "",
            suspended=key in self._suspended or bool(pkg and pkg.suspend),
            **changes,
        )
        if new != cur:
            self._views[key] = new
            self._emit(ReleaseUpdated(new))

    def load_packages(self) -> None:
        """(Re)load the packages folder; bad files are reported, the rest apply."""
        if self.packages_dir is None:
            return
        specs, errors = load_packages(self.packages_dir)
        for err in errors:
            log.warning("package problem: %s", err)
        old = set(self.packages)
        self.packages = {s.key: s for s in specs}
        self.package_errors = errors
        for key in old | set(self.packages):
            self._refresh(key)
        self._emit(PackageProblems(tuple(errors)))

    # -- actions -------------------------------------------------------------
    def _check_mutable(self) -> None:
        if self.readonly:
            raise ActionRefused("helmdeck runs read-only: actions are disabled")

    async def reconcile_all(self) -> None:
        """Reconcile every package once, a few at a time."""
        sem = asyncio.Semaphore(4)

        async def one(spec: PackageSpec) -> None:
            async with sem:
                try:
                    await self.reconcile(spec.key)
                except ActionRefused as exc:
                    log.info("reconcile of %s skipped: %s", spec.key, exc)

        await asyncio.gather(*(one(s) for s in self.packages.values()))

    async def reconcile(self, key: ReleaseKey, *, force: bool = False) -> ActionOutcome | None:
        """Install or upgrade the package's release if needed (always when ``force``).

        A forced reconcile also lifts a suspension set by a hand rollback.
        Returns the outcome, or None when nothing needed doing. Raises
        ActionRefused when no package declares ``key`` or an action is running.
        """
        self._check_mutable()
        spec = self.packages.get(key)
        if spec is None:
            raise ActionRefused(f"no package declares release {key[0]}/{key[1]}")
        if (key in self._suspended or spec.suspend) and not force:
            return None
        try:
            chart = load_chart(spec.chart_path)
            values = merged_values(spec)
        except PackageError as exc:
            outcome = ActionOutcome("upgrade", False, str(exc), at=time.time())
            self._log_event(key, "upgrade", "failed", str(exc))
            self._refresh(key, last=outcome)
            return outcome
        digest = spec_digest(chart.digest, values)
        obs = self.observer.latest(*key) if self.observer is not None else None
        if (not force and obs is not None and obs.status == "deployed"
                and obs.label_map.get(labels.SPEC_DIGEST) == digest):
            return None
        action = "install" if obs is None or obs.status == "uninstalled" else "upgrade"
        release_labels = {labels.MANAGED_BY: labels.MANAGER, labels.PACKAGE: spec.name, labels.SPEC_DIGEST: digest}
        opts = UpgradeOptions(timeout=spec.timeout, labels=release_labels, install=True, create_namespace=True,
                              max_history=spec.max_history)
        outcome = await self._run(
            key, action, spec.timeout,
            lambda: self.helm.upgrade(spec.release_name, spec.namespace, chart.path, values, opts),
        )
        if outcome.ok:
            self._suspended.discard(key)
            self._refresh(key)
        return outcome

    async def rollback(self, key: ReleaseKey, revision: int = 0) -> ActionOutcome:
        """Roll back ``key`` to ``revision`` (0 = previous) and suspend its package.

        The suspension keeps the engine from undoing the rollback; a forced
        reconcile lifts it. Raises ActionRefused while another action runs.
        """
        self._check_mutable()
        view = self._views.get(key)
        timeout = view.package.timeout if view and view.package else 300.0
        outcome = await self._run(
            key, "rollback", timeout,
            lambda: self.helm.rollback(key[1], key[0], revision, RollbackOptions(timeout=timeout)),
        )
        if outcome.ok and key in self.packages:
            self._suspended.add(key)
            self._refresh(key)
        return outcome

    async def test(self, key: ReleaseKey) -> ActionOutcome:
        """Run ``helm test`` on ``key``; the outcome is read from the stored test hooks."""
        self._check_mutable()
        view = self._views.get(key)
        spec = view.package if view else None
        timeout = (spec.test.timeout or spec.timeout) if spec else 300.0
        filters = spec.test.helm_filters() if spec else []
        return await self._run(
            key, "test", timeout,
            lambda: self.helm.test(key[1], key[0], timeout=timeout, filters=filters),
            judge=self._judge_test,
        )

    def suspend(self, key: ReleaseKey, suspended: bool = True) -> None:
        """Suspend (or resume) reconciliation of ``key``'s package. Raises ActionRefused."""
        self._check_mutable()
        if key not in self.packages:
            raise ActionRefused(f"no package declares release {key[0]}/{key[1]}")
        if suspended:
            self._suspended.add(key)
        else:
            self._suspended.discard(key)
        self._log_event(key, "suspend" if suspended else "resume", "info",
                        "reconciliation suspended" if suspended else "reconciliation resumed")
        self._refresh(key)

    async def uninstall(self, key: ReleaseKey) -> ActionOutcome:
        """``helm uninstall`` the release (its package, if any, reinstalls it on the next reconcile
        unless suspended, so the package is suspended too)."""
        self._check_mutable()
        view = self._views.get(key)
        spec = view.package if view else None
        opts = UninstallOptions(timeout=spec.timeout if spec else 300.0,
                                keep_history=bool(spec and spec.uninstall.keep_history))
        outcome = await self._run(key, "uninstall", opts.timeout,
                                  lambda: self.helm.uninstall(key[1], key[0], opts),
                                  judge=self._judge_uninstall)
        if outcome.ok and key in self.packages:
            self._suspended.add(key)
            self._refresh(key)
        return outcome

    async def cleanup(self, *, dry_run: bool = False) -> list[CleanupItem]:
        """Uninstall helmdeck-managed releases no package declares. Not available yet."""
        raise NotAvailable("cleanup is not supported by this engine yet")

    async def _run(
        self, key: ReleaseKey, action: str, timeout: float, call: Callable[[], Awaitable[object]],
        judge: Callable[[str, Observation | None, Observation | None, HelmError | None], ActionOutcome] | None = None,
    ) -> ActionOutcome:
        lock = self._locks.setdefault(key, asyncio.Lock())
        if lock.locked():
            view = self._views.get(key)
            running = view.running.action if view and view.running else action
            raise ActionRefused(f"{running} is already running on {key[0]}/{key[1]}")
        async with lock:
            before = self.observer.latest(*key) if self.observer is not None else None
            self._refresh(key, running=RunningAction(action, time.time(), timeout))
            self._log_event(key, action, "started", f"{action} started (timeout {timeout:.0f}s)")
            error: HelmError | None = None
            try:
                await call()
            except HelmError as exc:
                error = exc
            after = await self._await_write(key, before, wait_for_change=judge is None)
            outcome = (judge or self._judge)(action, before, after, error)
            log.info("%s %s/%s: %s", action, key[0], key[1], outcome.message)
            self._log_event(key, action, "succeeded" if outcome.ok else "failed", outcome.message, outcome.tail)
            self._refresh(key, running=None, last=outcome)
            return outcome

    async def _await_write(
        self, key: ReleaseKey, before: Observation | None, wait_for_change: bool = True,
    ) -> Observation | None:
        """Wait until the observer holds a revision different from ``before``, or time out."""
        deadline = time.monotonic() + (_OBSERVE_TIMEOUT if wait_for_change else 1.0)
        ev = asyncio.Event()
        self._storage_waiters.append(ev)
        try:
            while True:
                cur = self.observer.latest(*key) if self.observer is not None else None
                if cur != before or time.monotonic() >= deadline:
                    return cur
                ev.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(ev.wait(), max(0.0, deadline - time.monotonic()))
        finally:
            self._storage_waiters.remove(ev)

    @staticmethod
    def _judge(
        action: str, before: Observation | None, after: Observation | None, error: HelmError | None,
    ) -> ActionOutcome:
        """Decide an action's outcome from storage (``after``) first, helm's error second."""
        rev = after.version if after is not None else None
        wrote = after is not None and after != before
        now = time.time()
        if error is not None:
            detail = f"; storage holds revision {rev} {after.status}" if wrote and after is not None else ""
            return ActionOutcome(action, False, f"{action} failed: {error.message}{detail}", rev, error.tail, now)
        if after is None or not wrote:
            return ActionOutcome(action, False, f"{action} returned but no new revision was stored", rev, at=now)
        if after.status == "deployed":
            return ActionOutcome(action, True, f"{action} succeeded: revision {rev} deployed", rev, at=now)
        return ActionOutcome(action, False, f"{action} stored revision {rev} as {after.status}", rev, at=now)

    @staticmethod
    def _judge_test(
        action: str, before: Observation | None, after: Observation | None, error: HelmError | None,
    ) -> ActionOutcome:
        rev = after.version if after is not None else None
        now = time.time()
        tests = [h for h in after.hooks if h.is_test] if after is not None else []
        failed = [h.name for h in tests if h.phase == "Failed"]
        if error is not None or failed:
            what = f"tests failed: {', '.join(failed)}" if failed else f"test failed: {error.message if error else ''}"
            return ActionOutcome(action, False, what, rev, error.tail if error else (), now)
        if not tests:
            return ActionOutcome(action, True, "no tests defined", rev, at=now)
        return ActionOutcome(action, True, f"{len(tests)} test(s) succeeded on revision {rev}", rev, at=now)

    @staticmethod
    def _judge_uninstall(
        action: str, before: Observation | None, after: Observation | None, error: HelmError | None,
    ) -> ActionOutcome:
        now = time.time()
        if error is not None:
            return ActionOutcome(action, False, f"uninstall failed: {error.message}", None, error.tail, now)
        if after is not None and after.status != "uninstalled":
            return ActionOutcome(action, False, f"revision {after.version} is still {after.status}", after.version,
                                 at=now)
        return ActionOutcome(action, True, "uninstalled", after.version if after else None, at=now)
