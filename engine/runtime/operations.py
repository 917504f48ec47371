"""The operator's actions (the app's keys and the CLI's commands) and the reads behind the panes.

Each action asks the :class:`~engine.runtime.ledger.gate.ActionGate` first, runs
under the release's running-action guard when it runs helm, keeps what it
did in the release book (status, last outcome, event log) and persists the
status. Actions raise ActionRefused (cannot start now) or NotAvailable
(this engine cannot do it); helm failures are failed outcomes, not errors.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from engine.base import wire
from engine.base.fields import PackageError
from engine.base.masking import Masker
from engine.monitor import comparison
from engine.package.model import PackageSpec
from engine.package.order import removal_order
from engine.reconcile import conditions as cond
from engine.reconcile.action import ActionContext, ActionReconciler, Handover
from engine.reconcile.atomic import PassResult
from engine.reconcile.errors import ActionFailed
from engine.reconcile.request import Request
from engine.reconcile.rollback import Rollback
from engine.reconcile.status import ActionOutcome, EngineStatus
from engine.reconcile.test import Test
from engine.reconcile.uninstall import Uninstall
from engine.reconcile.unlock import Unlock
from engine.resolve.release import CACHE as RESOLVED
from engine.resolve.release import resolve
from engine.resolve.values import deep_merge
from engine.runtime.diff import manifest_diff
from engine.runtime.drive.controller import PackageController
from engine.runtime.ledger.book import BadPackageFiles, ReleaseBook
from engine.runtime.ledger.gate import ActionGate
from engine.runtime.ledger.tasks import Background
from engine.runtime.state import CleanupItem, ReleaseKey
from engine.sources import SourceError, SourceRef
from engine.sources.chart import Chart
from engine.storage.observation import Observation, previous_deployed
from engine.storage.writer import ReleaseNotPendingError

# Placeholder chart for actions on releases no package declares (rollback, test, unlock, uninstall need none).
_NO_CHART = Chart(Path("-"), "", "", "", "")


def bare_spec(key: ReleaseKey) -> PackageSpec:
    """A spec for a release no package declares (default options: timeout, history...)."""
    return PackageSpec(Path("-"), key[1], key[0], Path("-"), key[1])


class Operations:
    """The operator's actions on one engine (see the module docstring)."""

    def __init__(self, book: ReleaseBook, gate: ActionGate, controller: PackageController, masker: Masker,
                 tasks: Background):
        self.book = book
        self.gate = gate
        self.controller = controller
        self.service = controller.service
        self.observer = controller.ctx.observer
        self.masker = masker
        self.tasks = tasks

    # -- reconcile -----------------------------------------------------------------
    async def upgrade(self, key: ReleaseKey, *, force: bool = False) -> ActionOutcome | None:
        """Run one pass now; ``force`` upgrades even when in sync and lifts a suspension.

        Returns the last action's outcome, or None when nothing needed doing.
        """
        self.gate.check("upgrade", key)
        if force:
            self.set_suspended(key, False)
        elif self.gate.suspension(key) is not None:
            return None
        result = await self.controller.reconcile(key, force)
        if result.next == "now":
            self.controller.queue.add(key)
        elif result.next == "retry" and result.retry_after is not None:
            # RetryOnFailure's next attempt, as after a pass of the queue's own (a Flux force request is one)
            self.controller.queue.add(key, result.retry_after)
        return result.outcomes[-1] if result.outcomes else None

    async def set_maintenance(self, key: ReleaseKey, mode: str) -> PassResult:
        """Put ``key``'s package into maintenance (``NoResourceReconciliation``) or back (``""``) and
        reconcile once: each change costs exactly one upgrade. The choice is kept in the engine status
        (it survives restarts) until the package file's own mode changes."""
        self.gate.check("maintenance", key)
        self.book.update_status(key, maintenance=mode)
        self.book.log(key, "maintenance", "info", f"maintenance set to {mode or 'off'} from the app")
        return await self.controller.reconcile(key, False)

    def suspend(self, key: ReleaseKey, suspended: bool = True) -> None:
        """Suspend (or resume) reconciliation of ``key``'s package."""
        self.gate.check("suspend", key)
        self.set_suspended(key, suspended)
        self.book.log(key, "suspend" if suspended else "resume", "info",
                      "reconciliation suspended" if suspended else "reconciliation resumed")
        if not suspended:
            self.controller.queue.add(key)

    def set_suspended(self, key: ReleaseKey, suspended: bool) -> None:
        status = self.book.status(key) or EngineStatus()
        if status.suspended != suspended:
            self.book.set_status(key, dataclasses.replace(status, suspended=suspended))
            self.tasks.spawn(self.book.persist(key))
        else:
            self.book.refresh(key)

    # -- single actions --------------------------------------------------------------
    async def rollback(self, key: ReleaseKey, revision: int = 0) -> ActionOutcome:
        """Roll back ``key`` to ``revision`` (0 = previous) and suspend its package.

        The suspension keeps the engine from undoing the rollback; a forced
        reconcile (or resume) lifts it.
        """
        self.gate.check("rollback", key)
        declared = key in self.book.packages
        spec = self.book.packages.get(key) or bare_spec(key)
        async with self.book.running(key, "rollback", spec.timeout):
            status = self.book.status(key) or EngineStatus()
            req = Request(spec, _NO_CHART, {}, "", status)
            async with self.controller.kept_if_cancelled(req):
                outcome = await Rollback(self.controller.context(key), revision).reconcile(req)
            if declared:
                # Our revision: the release stays ours, not "changed outside". A rollback done by hand ends a
                # stall: the suspension, not exhausted retries, holds the release now (the row said Stalled).
                conditions = req.status.conditions
                if outcome.ok:
                    conditions = cond.summarize(cond.delete_condition(conditions, cond.STALLED),
                                                tests_count=spec.test.enable and not spec.test.ignore_failures)
                self.book.set_status(key, dataclasses.replace(
                    req.status, last=outcome, suspended=outcome.ok or status.suspended, conditions=conditions),
                    state=None, show=False)
            await self.controller.refresh_monitor(key)
        await self.book.persist(key)
        if declared:
            self.book.refresh(key)
        else:
            self.book.refresh(key, last=outcome)
        return outcome

    async def test(self, key: ReleaseKey) -> ActionOutcome:
        """Run ``helm test`` on ``key``; the outcome is read from the stored test hooks."""
        self.gate.check("test", key)
        return await self._single(key, "test", Test)

    async def unlock(self, key: ReleaseKey) -> ActionOutcome:
        """Mark ``key``'s pending release failed so it can move again (the operator's call:
        no staleness wait, but never while an action of ours runs on it)."""
        self.gate.check("unlock", key)
        return await self._single(key, "unlock", Unlock)

    async def cancel(self, key: ReleaseKey, by: str = "by the operator",
                     undo: str = "roll back to revision {revision}") -> ActionOutcome:
        """Stop the action running on ``key`` (helm is terminated, then killed after a grace period;
        fluxcd/helm-controller#1387: an upgrade stuck on ``--wait`` cannot be stopped) and record it as the
        engine's own failed action; ``by`` says who asked and ``undo`` how to roll back to ``{revision}``, in
        the outcome's words.

        The stopped install or upgrade records itself (:meth:`ReleaseReconciler.cancelled
        <engine.reconcile.action.ReleaseReconciler.cancelled>`): the revision its helm wrote joins the
        history, the release is Failed with the cancel as the reason (Released=False, ``UpgradeFailed``, as
        Flux records a failed upgrade) and the failure counts against the active remediation, which then
        follows the package's settings (no retries left: the package stalls); a ``by`` that is a
        :class:`~engine.reconcile.action.Handover` counts toward none (not the release's failure). A
        ``pending-*`` revision the stopped helm left is unlocked at once (marked failed, as Helm's own ctrl+c
        does; helmdeck ran that helm, so the lock is known stale without the timeout) and its snapshot follows.
        The objects keep what the cancelled revision applied: the outcome says so and names the last deployed
        revision to roll back to. Raises ActionRefused when nothing runs on ``key``.
        """
        self.gate.check("cancel", key)
        view = self.book.view(key)
        action = view.running.action if view is not None and view.running is not None else "action"
        before = self.book.status(key)
        self.book.cancel(key, by)
        await self.book.released(key)
        status = self.book.status(key)
        # The stopped action's own record (a new, failed last outcome), if it was an install or upgrade.
        last = status.last if status is not None else None
        recorded = last if last is not None and not last.ok and last is not (before and before.last) else None
        action = recorded.action if recorded is not None else action
        message = recorded.message if recorded is not None else f"{action} cancelled {by}"
        latest = self.observer.latest(*key)
        # Helm refuses to start on a pending release: a pending revision now is the stopped helm's own.
        if latest is not None and latest.is_pending and self.controller.ctx.unlock is not None:
            try:
                # No resourceVersion: the record is read afresh and unlocked only if still pending.
                unlocked = await self.controller.ctx.unlock(dataclasses.replace(latest, resource_version=""),
                                                            f"its helm {action} was cancelled {by}")
                message += f"; revision {latest.version} ({latest.status}) unlocked"
                if status is not None and isinstance(unlocked, Observation):
                    status = dataclasses.replace(status, history=status.history.updated(unlocked))
                    latest = unlocked
            except ReleaseNotPendingError:
                pass  # helm recorded its own outcome on SIGTERM
            except Exception as exc:  # the operator can still unlock by hand
                message += f"; unlocking revision {latest.version} failed: {exc}"
        message += _what_stays(latest, self.observer.history(*key), undo)
        outcome = ActionOutcome(action, False, message, latest.version if latest else None,
                                recorded.tail if recorded else (), time.time())
        if key in self.book.packages:
            self.book.set_status(key, dataclasses.replace(status or EngineStatus(), last=outcome), state=None)
            if not (isinstance(by, Handover) and self.gate.placed_elsewhere(key) is not None):
                # A handover's guard persisted before it cleared the claim: the status is the new owner's now.
                await self.book.persist(key)
        else:
            self.book.refresh(key, last=outcome)
        self.book.log(key, outcome.action, "cancelled", message)
        return outcome

    async def uninstall(self, key: ReleaseKey) -> ActionOutcome:
        """``helm uninstall`` the release; its package (if any) is suspended so it is not reinstalled."""
        self.gate.check("uninstall", key)
        outcome = await self._single(key, "uninstall", Uninstall)
        if outcome.ok:
            self.service.remove_monitor(*key)
            if key in self.book.packages:
                self.set_suspended(key, True)
                await self.book.persist(key)  # kept before this returns: a `reconcile --once` next must see it
        return outcome

    async def _single(
        self, key: ReleaseKey, action: str, kind: Callable[[ActionContext], ActionReconciler],
    ) -> ActionOutcome:
        """Run one action reconciler outside the loop, recording its result."""
        spec = self.book.packages.get(key) or bare_spec(key)
        async with self.book.running(key, action, spec.timeout):
            status = self.book.status(key) or EngineStatus()
            resolved = RESOLVED.last(spec)
            req = Request(spec, resolved.chart if resolved else _NO_CHART, {}, "", status)
            try:
                async with self.controller.kept_if_cancelled(req):
                    outcome = await kind(self.controller.context(key)).reconcile(req)
            except ActionFailed as exc:
                outcome = ActionOutcome(action, False, str(exc), at=time.time())
            if key in self.book.packages:
                tests = spec.test.enable and not spec.test.ignore_failures
                conds = cond.summarize(req.status.conditions, tests_count=tests)
                self.book.set_status(key, dataclasses.replace(req.status, last=outcome, conditions=conds),
                                     state=None, show=False)
            await self.controller.refresh_monitor(key)
        await self.book.persist(key)
        self.book.refresh(key, last=outcome)
        return outcome

    async def cleanup(
        self, *, dry_run: bool = False, ignore_namespaces: tuple[str, ...] = (),
        confirmed: Collection[str] | None = None, action: str = "cleanup",
    ) -> list[CleanupItem]:
        """Uninstall every release of this package set no package declares (``dry_run``: list them only).

        Only releases labelled by this package set (``wire.PACKAGE_SET``)
        are considered: other sets' and unmanaged releases are never touched;
        one failure does not stop the others. ``confirmed`` (``namespace/name``
        refs, as an operator approved a dry run's list) limits the removal to those: a release
        that became removable since is skipped. Releases an older helmdeck labelled with this
        folder's base name cannot be told apart from another folder's of the same name: they are
        listed as skipped, never removed. ``action`` names the sweep in each release's log ("prune" for
        ``--prune``'s).

        Raises what the gate raises, and BadPackageFiles (also for a dry run) while a package file has errors:
        its release would look removed.
        """
        self.gate.check("cleanup-plan" if dry_run else "cleanup")
        if self.controller.package_errors:
            raise BadPackageFiles(action, [err.file for err in self.controller.package_errors])
        keep = {f"{ns}/{name}" for ns, name in self.book.packages}
        package_set = self.controller.package_set
        scope = {wire.PACKAGE_SET: package_set.identity} if package_set else None
        report = await self.service.cleanup(keep, ignore_namespaces, dry_run=dry_run, selector=scope,
                                            order=self._removal_order, only=confirmed)
        items = [CleanupItem(*_split(ref), "would-remove" if dry_run else "removed") for ref in report.removed]
        items += [CleanupItem(*_split(ref), "failed", why) for ref, why in report.failed]
        items += [CleanupItem(*_split(ref), "skipped", why) for ref, why in report.skipped]
        if package_set is not None and package_set.legacy != package_set.identity:
            legacy = await self.service.cleanup(keep, ignore_namespaces, dry_run=True,
                                                selector={wire.PACKAGE_SET: package_set.legacy})
            items += [CleanupItem(*_split(ref), "skipped",
                                  f"labelled {package_set.legacy!r} by an older helmdeck, which other folders of "
                                  "that base name share: not removed (declare it here to adopt it, or uninstall "
                                  "it with helm)") for ref in legacy.removed]
        for item in items:
            if item.result == "removed" and not dry_run:
                await self.book.drop_status((item.namespace, item.name))
            if item.result in ("removed", "failed"):
                self.book.log((item.namespace, item.name), action, "succeeded" if item.result == "removed"
                              else "failed", item.message or f"{action} {item.result} the release")
        return items

    def _removal_order(self, keys: list[ReleaseKey]) -> list[ReleaseKey]:
        """Dependents before their dependencies, from the packages' ``dependsOn`` as last persisted."""
        def status(key: ReleaseKey) -> EngineStatus:
            return self.book.status(key) or EngineStatus()

        return removal_order(keys, lambda k: status(k).package, lambda k: status(k).depends_on)

    # -- monitors ------------------------------------------------------------------------
    def pause_monitor(self, key: ReleaseKey) -> int:
        """Pause the release's monitor once more (as nelm's PauseMonitor); returns the pause count."""
        self.gate.check("monitor", key)
        count = self.service.pause_monitor(*key)
        self.book.log(key, "monitor", "info", f"monitor paused (count {count})")
        return count

    def resume_monitor(self, key: ReleaseKey) -> int:
        """Take one pause off the release's monitor (never below zero); returns the pause count."""
        self.gate.check("monitor", key)
        count = self.service.resume_monitor(*key)
        self.book.log(key, "monitor", "info", "monitor resumed" if count == 0 else f"monitor paused (count {count})")
        return count

    # -- reading -------------------------------------------------------------------------
    async def render(self, key: ReleaseKey, *, reveal: bool = True) -> str:
        """The manifests an upgrade of ``key``'s package would apply (post-rendered), secrets masked unless
        ``reveal`` (by the values it was rendered from). Raises ActionRefused, NotAvailable, PackageError,
        HelmError."""
        self.gate.check("render", key)
        spec = self.book.spec(key)
        try:
            await self.controller.locator.locate(spec)
        except SourceError as exc:
            field = "spec.chartRef" if isinstance(spec.chart_source, SourceRef) else "spec.chart"
            raise PackageError(spec.file, field, str(exc), "check the repository and the version range") from None
        manifest = await self.service.render(spec.release_namespace, spec)
        if reveal:
            return manifest
        return await asyncio.to_thread(self.masker.mask_manifest, manifest, await self.desired_values(key))

    async def desired_values(self, key: ReleaseKey) -> dict[str, Any]:
        """The values ``key``'s package resolves to now (what a render uses; from the resolution cache)."""
        spec = self.book.spec(key)
        resolved = await asyncio.to_thread(functools.partial(resolve, spec, values_from=self.service.values_from))
        return dict(resolved.values)

    async def diff(self, key: ReleaseKey, *, reveal: bool = False) -> str:
        """What an upgrade would change: the deployed manifest against the desired render, per object
        (unified diff; "" when nothing would change), secrets masked unless ``reveal``."""
        self.gate.check("diff", key)
        return await self.diff_against(key, await self.render(key), reveal=reveal)

    async def diff_against(self, key: ReleaseKey, desired: str, *, reveal: bool = False) -> str:
        """The deployed manifest of ``key`` against the manifests ``desired`` (unified diff per object, ""
        when equal), secrets masked unless ``reveal``."""
        latest = self.observer.latest(*key)
        deployed = await self.recorded_manifest(key, latest.version) if latest is not None else ""
        deployed_values = await self.values(key, latest.version, computed=True) if latest is not None else {}
        if latest is not None:  # the masker learns the Secret values it was deployed with
            self.controller.values.remember(key, await self.values(key, latest.version))
        values = [] if reveal or key not in self.book.packages else [deployed_values, await self.desired_values(key)]
        return await asyncio.to_thread(
            manifest_diff, deployed, desired, f"revision {latest.version}" if latest else "nothing deployed",
            None if reveal else self.masker, values)

    def history(self, key: ReleaseKey) -> list[Observation]:
        """Every stored revision of ``key``, newest first."""
        return self.observer.history(*key)

    async def release_record(self, key: ReleaseKey, revision: int) -> dict[str, Any]:
        """The whole stored release of one revision (manifest, chart values, hooks...), loaded on demand.

        Raises KeyError when the revision is not stored.
        """
        return await asyncio.to_thread(self.observer.load_release, key[0], key[1], revision)

    async def manifest(self, key: ReleaseKey, revision: int) -> str:
        """The manifest Helm stored for ``revision`` of ``key``."""
        record_ = await self.release_record(key, revision)
        manifest = record_.get("manifest")
        return manifest if isinstance(manifest, str) else ""

    async def recorded_manifest(self, key: ReleaseKey, revision: int) -> str:
        """The manifest and hooks Helm stored for ``revision`` of ``key``, joined as a render prints them
        (:func:`engine.monitor.comparison.recorded_manifest`): the deployed side of every comparison."""
        return comparison.recorded_manifest(await self.release_record(key, revision))

    async def values(self, key: ReleaseKey, revision: int, *, computed: bool = False) -> dict[str, Any]:
        """User-supplied values of a revision, or with ``computed`` the chart defaults merged under them."""
        record_ = await self.release_record(key, revision)
        config = record_.get("config") if isinstance(record_.get("config"), dict) else {}
        if not computed:
            return dict(config or {})
        chart_values = (record_.get("chart") or {}).get("values") or {}
        return deep_merge(chart_values if isinstance(chart_values, dict) else {}, config or {})


def _what_stays(latest: Observation | None, history: list[Observation], undo: str) -> str:
    """What a cancel leaves live: the objects as the cancelled revision made them, and how to roll back to the
    last deployed revision (``undo``, a template of ``{revision}``)."""
    if latest is None or latest.status == "deployed":
        return ""
    target = previous_deployed(history)
    back = f"; {undo.format(revision=target.version)} (the last deployed) to undo them" if target else ""
    return f". The objects keep what revision {latest.version} applied{back}"


def _split(ref: str) -> tuple[str, str]:
    ns, _, name = ref.partition("/")
    return ns, name
