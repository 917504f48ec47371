"""The engine: observes release storage, loads packages, runs actions, reports.

Minimal reconcile for now: every package is reconciled once at start —
installed when absent, upgraded when its chart or values changed (a digest of
both is kept as a release label) or when its last revision is not deployed.
Outcomes are judged from what the observer saw written to storage after helm
returned, not from helm's exit status alone (as Flux's action reconcilers).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

from engine.helm import Helm, HelmError, RollbackOptions, UpgradeOptions
from engine.kube import KubeTarget, api_client
from engine.package import (
    PackageError,
    PackageSpec,
    load_chart,
    load_packages,
    merged_values,
)
from engine.runtime.state import (
    ActionOutcome,
    EngineEvent,
    PackageProblems,
    ReleaseKey,
    ReleaseRemoved,
    ReleaseState,
    ReleaseUpdated,
)
from engine.storage.observation import Observation, canonical_json
from engine.storage.observer import Observer, StorageChange

log = logging.getLogger(__name__)

LABEL_MANAGED_BY = "helmdeck.dev/managed-by"
LABEL_PACKAGE = "helmdeck.dev/package"
LABEL_SPEC_DIGEST = "helmdeck.dev/spec-digest"
MANAGER = "helmdeck"
# How long to wait for the observer to see a write helm reported done.
_OBSERVE_TIMEOUT = 10.0

Subscriber = Callable[[EngineEvent], None]


class ActionRefused(RuntimeError):
    """An action was not started (busy release, no package, read-only, ...)."""


def spec_digest(chart_digest: str, values: dict[str, object]) -> str:
    """32 hex characters identifying a chart content + values pair (fits a label value)."""
    h = hashlib.sha256(chart_digest.encode() + b"\0" + canonical_json(values))
    return h.hexdigest()[:32]


class Engine:
    """Drives the packages in ``packages_dir`` and reports every release in storage.

    ``observer`` may be given (e.g. an offline one fed with fixed records);
    by default one is built for ``target`` on :meth:`start`. Subscribers are
    called on the engine's event loop.
    """

    def __init__(
        self,
        target: KubeTarget,
        helm: Helm,
        packages_dir: Path | None = None,
        *,
        observer: Observer | None = None,
        namespaces: list[str] | None = None,
    ):
        self.target = target
        self.helm = helm
        self.packages_dir = packages_dir
        self.namespaces = namespaces
        self.observer = observer
        self.packages: dict[ReleaseKey, PackageSpec] = {}
        self.package_errors: list[PackageError] = []
        self._states: dict[ReleaseKey, ReleaseState] = {}
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
        if reconcile:
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

    def _on_storage_threadsafe(self, change: StorageChange) -> None:
        if self._loop is not None and self._loop.is_running():
            self._loop.call_soon_threadsafe(self._on_storage, change)
        else:
            self._on_storage(change)

    def _on_storage(self, change: StorageChange) -> None:
        if change.observation is not None:
            self._refresh(change.observation.release_key)
        elif change.type == "DELETED":
            for key in [k for k in self._states if k[0] == change.key.namespace]:
                self._refresh(key)
        for ev in self._storage_waiters:
            ev.set()

    # -- state ---------------------------------------------------------------
    def releases(self) -> list[ReleaseState]:
        """Every known release (stored or declared), sorted by namespace and name."""
        return [self._states[k] for k in sorted(self._states)]

    def release(self, key: ReleaseKey) -> ReleaseState | None:
        return self._states.get(key)

    def _refresh(self, key: ReleaseKey, **changes: object) -> None:
        obs = self.observer.latest(*key) if self.observer is not None else None
        pkg = self.packages.get(key)
        cur = self._states.get(key)
        if obs is None and pkg is None and cur is not None and cur.running is None and not changes:
            del self._states[key]
            self._emit(ReleaseRemoved(key))
            return
        if obs is None and pkg is None and cur is None:
            return
        base = cur or ReleaseState(namespace=key[0], name=key[1])
        new = dataclasses.replace(base, observation=obs, package=pkg, **changes)  # type: ignore[arg-type]
        if new != cur:
            self._states[key] = new
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

        Returns the outcome, or None when nothing needed doing. Raises
        ActionRefused when no package declares ``key`` or an action is running.
        """
        spec = self.packages.get(key)
        if spec is None:
            raise ActionRefused(f"no package declares release {key[0]}/{key[1]}")
        state = self._states.get(key)
        if state is not None and state.suspended and not force:
            return None
        try:
            chart = load_chart(spec.chart_path)
            values = merged_values(spec)
        except PackageError as exc:
            outcome = ActionOutcome("upgrade", False, str(exc), at=time.time())
            self._refresh(key, last=outcome)
            return outcome
        digest = spec_digest(chart.digest, values)
        obs = self.observer.latest(*key) if self.observer is not None else None
        if (not force and obs is not None and obs.status == "deployed"
                and obs.label_map.get(LABEL_SPEC_DIGEST) == digest):
            return None
        action = "install" if obs is None or obs.status == "uninstalled" else "upgrade"
        labels = {LABEL_MANAGED_BY: MANAGER, LABEL_PACKAGE: spec.name, LABEL_SPEC_DIGEST: digest}
        opts = UpgradeOptions(timeout=spec.timeout, labels=labels, install=True, create_namespace=True)
        outcome = await self._run(
            key, action, lambda: self.helm.upgrade(spec.release_name, spec.namespace, chart.path, values, opts),
        )
        if outcome.ok:
            self._refresh(key, suspended=False)
        return outcome

    async def rollback(self, key: ReleaseKey, revision: int = 0) -> ActionOutcome:
        """Roll back ``key`` to ``revision`` (0 = previous) and suspend its package.

        The suspension keeps the engine from undoing the rollback; an explicit
        upgrade lifts it. Raises ActionRefused while another action runs.
        """
        state = self._states.get(key)
        timeout = state.package.timeout if state and state.package else 300.0
        outcome = await self._run(
            key, "rollback", lambda: self.helm.rollback(key[1], key[0], revision, RollbackOptions(timeout=timeout)),
        )
        if outcome.ok and key in self.packages:
            self._refresh(key, suspended=True)
        return outcome

    async def _run(self, key: ReleaseKey, action: str, call: Callable[[], Awaitable[object]]) -> ActionOutcome:
        lock = self._locks.setdefault(key, asyncio.Lock())
        if lock.locked():
            running = self._states[key].running if key in self._states else action
            raise ActionRefused(f"{running} is already running on {key[0]}/{key[1]}")
        async with lock:
            before = self.observer.latest(*key) if self.observer is not None else None
            self._refresh(key, running=action)
            error: HelmError | None = None
            try:
                await call()
            except HelmError as exc:
                error = exc
            after = await self._await_write(key, before)
            outcome = self._judge(action, before, after, error)
            log.info("%s %s/%s: %s", action, key[0], key[1], outcome.message)
            self._refresh(key, running=None, last=outcome)
            return outcome

    async def _await_write(self, key: ReleaseKey, before: Observation | None) -> Observation | None:
        """Wait until the observer holds a revision different from ``before``, or time out."""
        deadline = time.monotonic() + _OBSERVE_TIMEOUT
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
        action: str, before: Observation | None, after: Observation | None, error: HelmError | None
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
