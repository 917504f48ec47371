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
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from engine.base import wire
from engine.helm import BEFORE_SPAWN, HelmError, ReleaseNotFound
from engine.kube import rest
from engine.monitor import comparison
from engine.package.model import InstallSpec, PackageSpec, UpgradeSpec
from engine.reconcile import conditions as cond
from engine.reconcile.errors import ActionFailed
from engine.reconcile.options import uninstall_options
from engine.reconcile.request import Request
from engine.reconcile.status import ActionOutcome, FailureCounts
from engine.storage.codec import OWNER_SELECTOR, StorageDecodeError
from engine.storage.observation import Observation
from engine.storage.observer import Observer, StorageChange, decode_object
from engine.storage.writer import StorageWriteError, label_revision

ReconcilerType = Literal["release", "remediate", "test", "unlock", "drift correction"]
EventSink = Callable[[str, str, str, tuple[str, ...]], None]  # (action, outcome, message, helm tail)
# Upper bound on how long the observer may lag behind a consistent read.
_SETTLE_TIMEOUT = 5.0


class Handover(str):
    """Why an action was cancelled, when it was cancelled because its package moved to another controller
    replica (``helmdeck controller --shards auto`` or static shards: the task's cancel message). As Flux, a
    release's failure counts toward its remediation; a cancel by handover is not the release's failure, so it
    counts toward none and the new owner installs or upgrades as it would have (:meth:`ReleaseReconciler.cancelled`)."""


class ActionReconciler(Protocol):
    """One helm action with its judgement (Flux's ActionReconciler)."""

    @property
    def name(self) -> str: ...
    @property
    def type(self) -> ReconcilerType: ...

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
    # Awaited before each helm action (and storage write) on a release, with the release key, the action's name,
    # its timeout (seconds) and the package spec it acts on (None: not checked): raises (an ActionRefused of the
    # runtime's) when this engine may not start it now, or not on that spec (``--shards auto``: the actor claim,
    # engine.runtime.cluster.shards). None: it always may.
    fence: Callable[[tuple[str, str], str, float, PackageSpec | None], Awaitable[None]] | None = None
    # Called right before each helm process is spawned on a release, after the fence let the action start: raises
    # (an ActionRefused of the runtime's) when this engine may no longer start it (``--shards auto``: its
    # membership Lease lapsed since the fence, a freeze, so another replica may hold the claim now). None: it may.
    recheck: Callable[[tuple[str, str]], None] | None = None


class ObservedReleases:
    """Collects the revisions of one release written while an action runs.

    Use as an async context manager around the helm call; on exit it makes a
    consistent read of the release's storage records and waits (briefly) for
    the observer to catch up, so ``observed`` holds every revision the action
    left, by version.
    """

    def __init__(self, ctx: ActionContext, req: Request):
        self._ctx = ctx
        self._storage_ns = req.spec.storage_ns
        self._namespace, self._release = req.key
        self.observed: dict[int, Observation] = {}
        self._unsubscribe: Callable[[], None] | None = None

    def _on_change(self, change: StorageChange) -> None:
        obs = change.observation
        if obs is not None and obs.release_key == (self._namespace, self._release) \
                and obs.storage_namespace == self._storage_ns:  # another storage's records are another history
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
        resource = "secrets" if self._ctx.driver == "secret" else "configmaps"
        body = rest.get_json(self._ctx.api, rest.path("v1", resource, self._storage_ns),
                             [("labelSelector", f"{OWNER_SELECTOR},name={self._release}")])
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


def record(req: Request, observed: dict[int, Observation], action: str) -> None:
    """Record the revisions ``observed`` after ``action`` (an action reconciler's name) on the status history, as
    Flux's action reconcilers do (:meth:`engine.storage.snapshot.History.record`): an install's or upgrade's new
    revision with the OCI digest of the pass (``last_attempted_revision_digest``). The history is trimmed where
    Flux trims it, before an action (:func:`engine.reconcile.next_action.trimmed_history`), not here."""
    req.status = dataclasses.replace(req.status, history=req.status.history.record(
        observed, action, req.status.last_attempted_revision_digest))


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


async def fenced(ctx: ActionContext, req: Request, action: str) -> None:
    """Ask the context's fence (:attr:`ActionContext.fence`) whether ``action`` may start on ``req``'s release;
    raises what the fence raises."""
    if ctx.fence is not None:
        await ctx.fence(req.key, action, req.spec.action_timeout(action), req.spec)


async def observed_run(
    ctx: ActionContext, req: Request, guard: Callable[[str, str], AbstractContextManager[None]],
    call: Callable[[], Awaitable[object]], *, action: str,
) -> tuple[ObservedReleases, HelmError | None]:
    """Run one helm call (of ``action``, started) under a monitor ``guard``, observing storage; record what it
    wrote on the status. Raises what the context's :attr:`~ActionContext.recheck` raises, before helm runs, with
    ``action``'s ``cancelled`` event (its start's end, for an audit of who acted when)."""
    ns, release = req.key
    recheck = ctx.recheck

    def before_spawn() -> None:
        if recheck is not None:
            try:
                recheck(req.key)
            except Exception as exc:
                ctx.events(action, "cancelled", f"Helm {action} not run: {exc}", ())
                raise

    before_spawn()
    seen = ObservedReleases(ctx, req)
    # Asked again right before helm's process is spawned: the awaits between here and there (the observer, the
    # values file, the post-renderer) are where a starved process froze for seconds in the takeover bench.
    spawning = BEFORE_SPAWN.set(before_spawn)
    try:
        async with seen:
            with guard(ns, release):
                error = await run_helm(call)
    finally:  # also when the action is cancelled: what the stopped helm wrote is the engine's own
        BEFORE_SPAWN.reset(spawning)
        record(req, seen.observed, action)
    return seen, error


def not_deployed(error: HelmError | None, written: Observation | None) -> str | None:
    """Why an action did not release: helm's error, the status it stored, or that it stored nothing.

    None when helm succeeded and the revision written is ``deployed`` (as Flux's
    release-type reconcilers judge a release by what storage holds).
    """
    if error is None and written is not None and written.status == "deployed":
        return None
    return error.message if error else f"stored as {written.status}" if written else "nothing stored"


Condition = tuple[str, bool | None, str]  # (type, status, reason); the message is the outcome's


@dataclass
class Reconciler:
    """Base of the action reconcilers: their name and type, context, and how they report.

    Each reconciler module holds one subclass (as Flux's ``internal/reconcile``),
    a dataclass whose fields after ``ctx`` are its own collaborators; every
    outcome is told as events (``started``, then ``failed`` or ``succeeded``)
    and, where the action owns one, a condition.
    """

    name: ClassVar[str]
    type: ClassVar[ReconcilerType]
    ctx: ActionContext

    def latest(self, req: Request) -> Observation | None:
        """The newest revision storage holds for the request's release (None: no record)."""
        return self.ctx.observer.latest(*req.key)

    def apply_method(self, req: Request, version: int) -> str:
        """The ``apply_method`` helm stored on revision ``version`` of the request's release ("" when it is not
        stored: helm then refuses the rollback to it)."""
        return next((o.apply_method for o in self.ctx.observer.history(*req.key) if o.version == version), "")

    def started(self, message: str) -> None:
        self.ctx.events(self.name, "started", message, ())

    async def begin(self, req: Request, message: str) -> None:
        """Start the action: once the fence lets it (:func:`fenced`; raises what it raises), the ``started``
        event."""
        await fenced(self.ctx, req, self.name)
        self.started(message)

    def failed(self, req: Request, message: str, condition: Condition | None = None,
               error: HelmError | None = None) -> str:
        """Set ``condition`` (if any) with ``message``, tell the failure (helm's tail with it); return message."""
        if condition is not None:
            set_conditions(req, (*condition, message))
        self.ctx.events(self.name, "failed", message, error.tail if error else ())
        return message

    def succeeded(self, req: Request, message: str, revision: Observation | None,
                  condition: Condition | None = None) -> ActionOutcome:
        """Set ``condition`` (if any) with ``message``, tell the success; the successful outcome."""
        if condition is not None:
            set_conditions(req, (*condition, message))
        self.ctx.events(self.name, "succeeded", message, ())
        return outcome(self.name, True, message, revision)


class ReleaseReconciler(Reconciler):
    """What Install and Upgrade share (Flux's release-type reconcilers).

    Records its name as the last attempted release action, runs the helm call
    with the monitor quiet, and judges the newest revision stored: deployed
    is success (Released=True ``reasons[0]``); anything else is failure
    (Released=False ``reasons[1]``) that counts against the active
    remediation, unless nothing was stored, which raises ActionFailed
    (nothing to remediate, retry with backoff; counted in the total only, as Flux).
    """

    type = "release"
    verb: ClassVar[str]  # "installing", for the started event
    reasons: ClassVar[tuple[str, str]]  # (succeeded, failed)

    def helm_call(self, req: Request) -> Callable[[], Awaitable[object]]:
        """The helm call that makes the release (options from the request)."""
        raise NotImplementedError

    def section(self, req: Request) -> InstallSpec | UpgradeSpec:
        """The package's section of this action (``spec.install`` or ``spec.upgrade``)."""
        raise NotImplementedError

    async def reconcile(self, req: Request) -> ActionOutcome:
        helm_call = self.helm_call(req)

        async def call() -> object:
            release = await helm_call()
            await self.label_checksum(req, release)
            return release

        before = self.latest(req)
        req.status = dataclasses.replace(req.status, last_attempted_release_action=self.name)
        await self.begin(req, f"{self.verb} {req.chart.name}@{req.chart.version}")
        try:
            seen, error = await observed_run(self.ctx, req, self.ctx.quiet, call, action=self.name)
        except asyncio.CancelledError as exc:
            why = exc.args[0] if exc.args else "as helmdeck stopped"
            self.cancelled(req, before, str(why), counts=not isinstance(why, Handover))
            raise
        written = newer(seen, before)
        if written is not None and before is not None and written.version <= before.version:
            written = None  # only an older revision changed (superseded): no new release
        reason = not_deployed(error, written)
        if reason is not None:
            message = self.failed(req, f"Helm {self.name} failed for release {release_ref(req, written)}: {reason}",
                                  (cond.RELEASED, False, self.reasons[1]), error)
            if written is None:
                # As Flux: counted in the total (status.failures) but not against the remediation (nothing was
                # stored to remediate: retried with backoff), and kept as the last outcome, which the row shows.
                failures = dataclasses.replace(req.status.failures, total=req.status.failures.total + 1)
                req.status = dataclasses.replace(req.status, failures=failures,
                                                 last=outcome(self.name, False, message, None, error))
                raise ActionFailed(message)
            count_failure(req)
            return outcome(self.name, False, message, written, error)
        drop_conditions(req, cond.REMEDIATED, cond.TEST_SUCCESS)
        if self.section(req).retry is not None:
            # Under RetryOnFailure failures matter only while the release is failed: a success clears them, as
            # Flux's Install and Upgrade ``success`` do (internal/reconcile/install.go, upgrade.go: ClearFailures).
            req.status = dataclasses.replace(req.status, failures=FailureCounts())
        message = (f"Helm {self.name} succeeded for release {release_ref(req, written)} "
                   f"with chart {req.chart.name}@{req.chart.version}")
        return self.succeeded(req, message, written, (cond.RELEASED, True, self.reasons[0]))

    async def label_checksum(self, req: Request, release: object) -> None:
        """Label the revision helm just wrote (``release``: helm's JSON view of it) with its manifest checksum,
        computed from that view as a render's is (:func:`engine.monitor.comparison.recorded_manifest`), so an
        install or upgrade costs one helm process, not a server dry run first. Done before the action's
        consistent read, so the history records the labelled revision. A failed write is told as an event and
        leaves the revision without the label (a later spec change then renders and upgrades once more);
        nothing is labelled without an API client or a revision in the answer."""
        if self.ctx.api is None or not isinstance(release, dict) or not isinstance(release.get("version"), int):
            return
        version: int = release["version"]
        checksum = comparison.checksum(comparison.recorded_manifest(release))
        try:
            await asyncio.to_thread(label_revision, self.ctx.api, req.spec.storage_ns, req.key[1], version,
                                    {wire.MANIFEST_CHECKSUM: checksum}, driver=self.ctx.driver)  # type: ignore[arg-type]
        except (ApiException, StorageWriteError, StorageDecodeError) as exc:
            self.ctx.events(self.name, "info", f"cannot label revision {version} with its manifest checksum: "
                                               f"{getattr(exc, 'reason', None) or exc}", ())

    def cancelled(self, req: Request, before: Observation | None, why: str, *, counts: bool = True) -> None:
        """Record a cancelled action as a failed one (as Flux records a failed upgrade): the revision the stopped
        helm wrote is already in the history (:func:`observed_run`); Released=False with ``reasons[1]``, the
        failure counted against the active remediation (which then follows the package's settings) unless not
        ``counts`` (a cancel by :class:`Handover`), and the outcome kept as the status's ``last`` (a cancelled call
        returns none). ``why``: who cancelled it."""
        latest = self.latest(req)
        written = latest if latest is not None and (before is None or latest.version > before.version) else None
        state = f"revision {written.version} is {written.status}" if written else "nothing was stored"
        message = self.failed(req, f"Helm {self.name} cancelled {why} for release {release_ref(req, written)}: "
                                   f"{state}", (cond.RELEASED, False, self.reasons[1]))
        if written is not None and counts:
            count_failure(req)
        req.status = dataclasses.replace(req.status, last=outcome(self.name, False, message, written))


class UninstallReconciler(Reconciler):
    """What Uninstall and UninstallRemediation share: ``helm uninstall``, then storage's verdict."""

    async def uninstall(self, req: Request, started: str) -> tuple[
            Observation | None, HelmError | None, str | None]:
        """``helm uninstall`` with the package's uninstall options, the monitor paused.

        Returns the latest revision storage holds after (None or
        ``uninstalled`` when the release is gone), helm's error, and why the
        release is not gone (None: it is; ReleaseNotFound counts as gone).
        """
        ns, release = req.key
        opts = uninstall_options(req.spec)
        await self.begin(req, started)
        _, error = await observed_run(self.ctx, req, self.ctx.paused,
                                      lambda: self.ctx.helm.uninstall(release, ns, opts), action=self.name)
        if isinstance(error, ReleaseNotFound):
            error = None
        latest = self.latest(req)
        if error is not None:
            return latest, error, error.message
        if latest is not None and latest.status != "uninstalled":
            return latest, None, f"revision {latest.version} is still {latest.status}"
        return latest, None, None
