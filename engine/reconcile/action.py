"""What every action reconciler shares: its context, and observing storage during the action.

An action reconciler runs one helm action, then reads the outcome from what
the storage observer saw written while it ran (Flux's observing driver):
helm can fail and still have written a release, or report success for a
release it never stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from kubernetes import client

from engine.helm import HelmError, ReleaseNotFound
from engine.helm.options import uninstall_options
from engine.reconcile import conditions as cond
from engine.reconcile.errors import ActionFailed
from engine.reconcile.request import Request
from engine.reconcile.status import ActionOutcome, FailureCounts
from engine.storage.codec import OWNER_SELECTOR
from engine.storage.observation import Observation
from engine.storage.observer import Observer, StorageChange, decode_object
from engine.storage.snapshot import History, Snapshot

ReconcilerType = Literal["release", "remediate", "test", "unlock", "drift correction"]
EventSink = Callable[[str, str, str, tuple[str, ...]], None]  # (action, outcome, message, helm tail)
# Upper bound on how long the observer may lag behind a consistent read.
_SETTLE_TIMEOUT = 5.0


class ActionReconciler(Protocol):
    """One helm action with its judgement (Flux's ActionReconciler)."""

    name: str
    type: ReconcilerType

    async def reconcile(self, req: Request) -> ActionOutcome:
        """Run the action, record what storage holds on ``req.status``, return the outcome.

        Raises ActionFailed when the action failed and wrote nothing (nothing
        to remediate; the caller retries with backoff).
        """
        ...


@dataclass
class ActionContext:
    """Shared by the action reconcilers of one engine."""

    helm: Any  # engine.helm.Helm (Any keeps this module free of the runner's details)
    observer: Observer
    api: client.ApiClient | None
    events: EventSink = lambda _a, _o, _m, _t: None
    # Marks a pending revision failed in storage; the string is a detail for its description.
    unlock: Callable[[Observation, str], Awaitable[object]] | None = None
    # Monitor guards (release service): ``quiet`` around installs and upgrades (absence not reported),
    # ``paused`` around every other action (the monitor reports nothing).
    quiet: Callable[[str, str], AbstractContextManager[None]] = lambda _n, _r: contextlib.nullcontext()
    paused: Callable[[str, str], AbstractContextManager[None]] = lambda _n, _r: contextlib.nullcontext()
    driver: str = "secret"
    now: Callable[[], float] = time.time
    # The manifest checksum of a request's render (the release service's, cached); None: no renderer.
    checksum: Callable[[Request], Awaitable[str]] | None = None


class ObservedReleases:
    """Collects the revisions of one release written while an action runs.

    Use as an async context manager around the helm call; on exit it makes a
    consistent read of the release's storage records and waits (briefly) for
    the observer to catch up, so ``observed`` holds every revision the action
    left, by version.
    """

    def __init__(self, ctx: ActionContext, storage_namespace: str, release: str, namespace: str):
        self._ctx = ctx
        self._storage_ns = storage_namespace
        self._release = release
        self._namespace = namespace
        self.observed: dict[int, Observation] = {}
        self._unsubscribe: Callable[[], None] | None = None

    def _on_change(self, change: StorageChange) -> None:
        obs = change.observation
        if obs is not None and obs.release_key == (self._namespace, self._release):
            self.observed[obs.version] = obs

    async def __aenter__(self) -> ObservedReleases:
        self._unsubscribe = self._ctx.observer.subscribe(self._on_change)
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            truth = await asyncio.to_thread(self._consistent_read)
            for obs in truth:
                self.observed[obs.version] = obs
            if self._ctx.api is not None:
                await self._settle(max(truth, key=lambda o: o.version) if truth else None)
        finally:
            if self._unsubscribe is not None:
                self._unsubscribe()

    def _consistent_read(self) -> list[Observation]:
        """The release's records as the API holds them now (a quorum list)."""
        if self._ctx.api is None:
            return []
        core = client.CoreV1Api(self._ctx.api)
        selector = f"{OWNER_SELECTOR},name={self._release}"
        lister: Any = (core.list_namespaced_secret if self._ctx.driver == "secret"
                       else core.list_namespaced_config_map)
        body = json.loads(lister(self._storage_ns, label_selector=selector, _preload_content=False).data)
        out = []
        for obj in body.get("items") or []:
            _, obs, _error = decode_object(obj, self._ctx.driver)  # type: ignore[arg-type]
            if obs is not None and obs.release_key == (self._namespace, self._release):
                out.append(obs)
        return out

    async def _settle(self, newest: Observation | None) -> None:
        """Wait (briefly) until the observer's latest revision is ``newest`` (None: the release is gone)."""
        deadline = time.monotonic() + _SETTLE_TIMEOUT
        while time.monotonic() < deadline:
            if self._ctx.observer.latest(self._namespace, self._release) == newest:
                return
            await asyncio.sleep(0.05)

    @property
    def newest(self) -> Observation | None:
        return self.observed[max(self.observed)] if self.observed else None


def record(req: Request, observed: dict[int, Observation]) -> None:
    """Record observed revisions on the status history (Flux's recordOnObject).

    A revision already in the history is updated in place (status changes,
    test hook runs); a higher one becomes the newest snapshot. History is then
    truncated to the package's maxHistory (at least the newest and the
    rollback target are kept).
    """
    snaps = list(req.status.history.snapshots)
    for version in sorted(observed):
        snap = Snapshot.from_observation(observed[version])
        for i, cur in enumerate(snaps):
            if cur.version == version:
                snaps[i] = snap
                break
        else:
            if not snaps or version > snaps[0].version:
                snaps.insert(0, snap)
    keep = max(2, req.spec.max_history) if req.spec.max_history else len(snaps)
    req.status = dataclasses.replace(req.status, history=History(tuple(snaps)).truncate(keep))


def set_conditions(req: Request, *changes: tuple[str, bool | None, str, str]) -> None:
    """Apply ``(type, status, reason, message)`` changes to the request's conditions."""
    conds = req.status.conditions
    for type_, status, reason, message in changes:
        conds = cond.set_condition(conds, type_, status, reason, message)
    req.status = dataclasses.replace(req.status, conditions=conds)


def drop_conditions(req: Request, *types: str) -> None:
    conds = req.status.conditions
    for type_ in types:
        conds = cond.delete_condition(conds, type_)
    req.status = dataclasses.replace(req.status, conditions=conds)


def count_failure(req: Request) -> None:
    """Count a failure on the active remediation (install or upgrade) and in the total."""
    f = req.status.failures
    action = req.status.last_attempted_release_action
    req.status = dataclasses.replace(req.status, failures=FailureCounts(
        install=f.install + (action == "install"),
        upgrade=f.upgrade + (action == "upgrade"),
        total=f.total + 1,
    ))


def outcome(action: str, ok: bool, message: str, newest: Observation | None,
            error: HelmError | None = None) -> ActionOutcome:
    return ActionOutcome(action, ok, message, newest.version if newest else None,
                         error.tail if error else (), time.time())


def release_ref(req: Request, revision: Observation | int | None) -> str:
    """``ns/name.vN`` for a revision (an observation or its number), ``ns/name`` without one."""
    ns, name = req.key
    version = revision.version if isinstance(revision, Observation) else revision
    return f"{ns}/{name}.v{version}" if version else f"{ns}/{name}"


async def run_helm(call: Callable[[], Awaitable[object]]) -> HelmError | None:
    """Await a helm call; return its HelmError instead of raising it."""
    try:
        await call()
    except HelmError as exc:
        return exc
    return None


def newer(observed: ObservedReleases, before: Observation | None) -> Observation | None:
    """The newest revision written by the action, or None when it stored nothing new."""
    newest = observed.newest
    if newest is None or (before is not None and newest == before):
        return None
    return newest


async def observed_run(
    ctx: ActionContext, req: Request, guard: Callable[[str, str], AbstractContextManager[None]],
    call: Callable[[], Awaitable[object]],
) -> tuple[ObservedReleases, HelmError | None]:
    """Run one helm call under a monitor ``guard``, observing storage; record what it wrote on the status."""
    ns, release = req.key
    async with ObservedReleases(ctx, req.spec.storage_ns, release, ns) as seen:
        with guard(ns, release):
            error = await run_helm(call)
    record(req, seen.observed)
    return seen, error


async def release_action(
    ctx: ActionContext, req: Request, name: str, verb: str, call: Callable[[], Awaitable[object]],
    *, succeeded: str, failed: str,
) -> ActionOutcome:
    """What Install and Upgrade share (Flux's release-type reconcilers).

    Records ``name`` as the last attempted release action, runs ``call``
    with the monitor quiet, and judges the newest revision stored: deployed
    is success (Released=True ``succeeded``); anything else is failure
    (Released=False ``failed``) that counts against the active remediation —
    unless nothing was stored, which raises ActionFailed (nothing to
    remediate, retry with backoff).
    """
    ns, release = req.key
    before = ctx.observer.latest(ns, release)
    req.status = dataclasses.replace(req.status, last_attempted_release_action=name)
    ctx.events(name, "started", f"{verb} {req.chart.name}@{req.chart.version}", ())
    seen, error = await observed_run(ctx, req, ctx.quiet, call)
    written = newer(seen, before)
    if written is not None and before is not None and written.version <= before.version:
        written = None  # only an older revision changed (superseded): no new release
    if error is not None or written is None or written.status != "deployed":
        reason = error.message if error else f"stored as {written.status}" if written else "nothing stored"
        message = f"Helm {name} failed for release {release_ref(req, written)}: {reason}"
        set_conditions(req, (cond.RELEASED, False, failed, message))
        ctx.events(name, "failed", message, error.tail if error else ())
        if written is None:
            raise ActionFailed(message)
        count_failure(req)
        return outcome(name, False, message, written, error)
    message = (f"Helm {name} succeeded for release {release_ref(req, written)} "
               f"with chart {req.chart.name}@{req.chart.version}")
    set_conditions(req, (cond.RELEASED, True, succeeded, message))
    drop_conditions(req, cond.REMEDIATED, cond.TEST_SUCCESS)
    ctx.events(name, "succeeded", message, ())
    return outcome(name, True, message, written)


async def uninstall_release(ctx: ActionContext, req: Request, name: str, started: str) -> tuple[
        HelmError | None, Observation | None]:
    """``helm uninstall`` with the package's uninstall options, the monitor paused.

    Returns helm's error (None on success; ReleaseNotFound counts as success:
    there is nothing to remove) and the latest revision storage holds after
    (None or ``uninstalled`` when the release is gone).
    """
    spec = req.spec
    ns, release = req.key
    opts = uninstall_options(spec)
    ctx.events(name, "started", started, ())
    _, error = await observed_run(ctx, req, ctx.paused, lambda: ctx.helm.uninstall(release, ns, opts))
    if isinstance(error, ReleaseNotFound):
        error = None
    return error, ctx.observer.latest(ns, release)
