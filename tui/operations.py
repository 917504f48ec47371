"""The operator's actions as one table: each operation's key, precheck, confirmation, call and report.

The app runs every operation with one runner (``HelmdeckApp.action_operation``):
the engine's gate (read-only, lease, offline, no package, pending, busy: one
wording), the operation's own ``precheck`` (synchronous: what the gate does
not know, e.g. no earlier revision), then
``prepare`` (previews and choices; returns the :class:`Step` to run, or a
:class:`Notice` when there is nothing to run), the step's confirmation
dialog when it has one, its call, and its report. Footer, help and the
command palette are built from the same table.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from textual.binding import Binding

from engine.package.model import NO_RESOURCE_RECONCILIATION
from engine.runtime.engine import ActionRefused, NotAvailable
from engine.runtime.state import ActionOutcome, CleanupItem, ReleaseKey, ReleaseView, Requested
from engine.storage.observation import previous_deployed
from tui import confirmations
from tui.chart_origin import picker_rows, picker_title
from tui.confirmations import Confirmation
from tui.engine_client import EngineClient

Severity = Literal["information", "warning", "error"]


@dataclass(frozen=True)
class Notice:
    """A notification the runner shows."""

    message: str
    title: str = ""
    severity: Severity = "information"
    timeout: float | None = None


Report = Notice | ActionOutcome | None
"""What a call's result is reported as: a notice, an action's outcome (the runner words it), or nothing."""


@dataclass(frozen=True)
class Step:
    """An operation ready to run: ``what`` names it in refusals and failures ("Upgrade ns/web")."""

    what: str
    call: Callable[[], Awaitable[Any]]
    report: Callable[[Any], Report]
    confirmation: Confirmation | None = None
    starting: str = ""  # said as it starts, for calls that take a while
    alternative: Callable[[], Awaitable[Any]] | None = None  # the confirmation's second way (its ``b``)


Pick = Callable[[str, list[tuple[str, int]], int], Awaitable[int | None]]
"""Ask the operator to pick one of ``choices`` (title, choices, initially highlighted); None: cancelled."""


@dataclass(frozen=True)
class Context:
    """What an operation acts on: the selected release (None for cleanup) and the app's services."""

    client: EngineClient
    key: ReleaseKey
    view: ReleaseView | None
    now: float
    rollback_target: int | None  # the History tab's highlighted revision, when that tab is active
    pick: Pick

    @property
    def ref(self) -> str:
        return f"{self.key[0]}/{self.key[1]}"


def _outcome(result: Any) -> Report:
    return result if isinstance(result, ActionOutcome) else None


def _no_check(_ctx: Context) -> str | None:
    return None


@dataclass(frozen=True)
class Operation:
    """One action key: its Textual action name, keys, footer label, the gate's action name and summary."""

    name: str
    keys: str
    label: str
    summary: str
    prepare: Callable[[Context], Awaitable[Step | Notice]]
    precheck: Callable[[Context], str | None] = _no_check
    per_release: bool = True  # acts on the selected release (cleanup acts on all)
    preview: str = ""  # names a failing prepare ("Cleanup (dry run)"); the label otherwise

    @property
    def key_display(self) -> str:
        """``u`` or ``D / ctrl+d`` for help texts."""
        return " / ".join(self.keys.split(","))


# -- upgrade ------------------------------------------------------------------------------
async def _upgrade(ctx: Context) -> Step:
    flux = await _flux_step(ctx, "upgrade", "Force a reconcile of")
    if flux is not None:
        return flux
    step = Step(f"Upgrade {ctx.ref}", lambda: ctx.client.upgrade(ctx.key), _outcome, starting=f"Upgrading {ctx.ref} …")
    reason = ctx.client.why_not("diff", ctx.key)
    assert ctx.view is not None
    diff: str | None = None  # always asked: what changes when it can be told, else why not; of whom, attached
    if reason is None:
        try:
            diff = await ctx.client.desired_diff(ctx.key)
        except (ActionRefused, NotAvailable) as exc:  # the preview is optional: say why it is missing
            reason = str(exc)
        except Exception as exc:  # likewise, and still offer to upgrade
            reason = f"the diff failed ({exc})"
    return Step(step.what, step.call, step.report, confirmations.upgrade(ctx.view, diff, reason), step.starting)


# -- rollback -----------------------------------------------------------------------------
def _rollback_check(ctx: Context) -> str | None:
    return None if len(ctx.client.history(ctx.key)) >= 2 else f"{ctx.ref} has no earlier revision to roll back to"


async def _rollback(ctx: Context) -> Step | Notice:
    history = ctx.client.history(ctx.key)
    current = history[0]
    revision = ctx.rollback_target
    if revision is None or revision == current.version:
        choices = [(f"revision {o.version}  {o.status:<11} {o.chart_name}@{o.chart_version}  "
                    f"app {o.app_version or '-'}  {o.description}", o.version) for o in history[1:]]
        previous = previous_deployed(history)
        initial = next((i for i, o in enumerate(history[1:]) if previous and o.version == previous.version), 0)
        revision = await ctx.pick(f"Roll back {ctx.ref} (now revision {current.version}) to:", choices, initial)
        if revision is None:
            return Notice("")  # cancelled: nothing to say
    history = ctx.client.history(ctx.key)
    view = ctx.client.release(ctx.key)
    target = next((o for o in history if o.version == revision), None)
    if view is None or not history or target is None:
        return Notice(f"{ctx.ref} has no stored revision {revision}", severity="warning")
    if target.version == history[0].version:
        return Notice(f"Revision {revision} is the current revision of {ctx.ref}", severity="warning")
    return Step(f"Roll back {ctx.ref}", lambda: ctx.client.rollback(ctx.key, target.version), _outcome,
                confirmations.rollback(view, history[0], target),
                f"Rolling back {ctx.ref} to revision {target.version} …")


# -- test, monitor, maintenance, suspend --------------------------------------------------
async def _test(ctx: Context) -> Step:
    return Step(f"Test {ctx.ref}", lambda: ctx.client.test(ctx.key), _outcome, starting=f"Testing {ctx.ref} …")


async def _monitor(ctx: Context) -> Step:
    assert ctx.view is not None
    resume = ctx.view.monitor.state == "paused"

    def report(counter: int) -> Notice:  # the engine's count: the row's event may still be on its way
        state = f"paused ×{counter}" if counter else "active"
        return Notice(f"Monitor of {ctx.ref}: {state} (pause counter {counter})")

    call = (lambda: ctx.client.resume_monitor(ctx.key)) if resume else (lambda: ctx.client.pause_monitor(ctx.key))
    return Step(f"{'Resume' if resume else 'Pause'} monitor of {ctx.ref}", call, report)


async def _maintenance(ctx: Context) -> Step:
    assert ctx.view is not None
    mode = "" if ctx.view.maintenance else NO_RESOURCE_RECONCILIATION
    return Step(f"{'Enter' if mode else 'Leave'} maintenance of {ctx.ref}",
                lambda: ctx.client.set_maintenance(ctx.key, mode),
                lambda _: Notice(f"{ctx.ref}: {'in maintenance' if mode else 'out of maintenance'}"),
                confirmations.maintenance(ctx.view, bool(mode)))


async def _suspend(ctx: Context) -> Step:
    assert ctx.view is not None
    suspend = not ctx.view.suspended
    flux = await _flux_step(ctx, "suspend", "Suspend" if suspend else "Resume", suspend)
    if flux is not None:
        return flux
    return Step(f"{'Suspend' if suspend else 'Resume'} {ctx.ref}", lambda: ctx.client.suspend(ctx.key, suspend),
                lambda _: Notice(f"Reconciliation of {ctx.ref} {'suspended' if suspend else 'resumed'}"),
                None if suspend else confirmations.resume(ctx.view))


# -- unlock -------------------------------------------------------------------------------
async def _unlock(ctx: Context) -> Step:
    assert ctx.view is not None
    flux = await _flux_step(ctx, "unlock", "Reset")
    if flux is not None:
        return flux

    def report(result: Any) -> Report:
        return result if isinstance(result, ActionOutcome) else Notice(f"{ctx.ref} unlocked")

    return Step(f"Unlock {ctx.ref}", lambda: ctx.client.unlock(ctx.key), report,
                confirmations.unlock(ctx.view, ctx.now))


# -- cancel -------------------------------------------------------------------------------
async def _cancel(ctx: Context) -> Step:
    assert ctx.view is not None
    obs = ctx.view.observation
    # The last deployed revision, while helm writes a newer one: offered as the rollback after the cancel.
    target = previous_deployed(ctx.client.history(ctx.key)) if obs is not None and obs.status != "deployed" else None

    async def and_roll_back() -> ActionOutcome | Requested:
        await ctx.client.cancel(ctx.key)  # its outcome is in the release's log; the rollback's is reported
        assert target is not None
        return await ctx.client.rollback(ctx.key, target.version)

    return Step(f"Cancel the action on {ctx.ref}", lambda: ctx.client.cancel(ctx.key), _outcome,
                confirmations.cancel(ctx.view, ctx.now, target), f"Cancelling the action on {ctx.ref} …",
                and_roll_back if target is not None else None)


# -- releases Flux owns --------------------------------------------------------------------
async def _flux_step(ctx: Context, name: str, what: str, suspend: bool = True) -> Step | None:
    """The key ``name`` as Flux's request when a Flux HelmRelease owns the release (the engine's doors make it:
    engine.runtime.ledger.owners.FLUX_REQUESTS), confirmed in Flux's terms; None when Flux does not own it."""
    owner = ctx.client.owner(ctx.key)
    if owner.kind != "flux" or ctx.view is None:
        return None
    call = {"upgrade": lambda: ctx.client.upgrade(ctx.key), "unlock": lambda: ctx.client.unlock(ctx.key),
            "suspend": lambda: ctx.client.suspend(ctx.key, suspend)}[name]
    return Step(f"{what} {ctx.ref}", call, lambda _: None,
                confirmations.flux_request(ctx.view, owner.text, name, suspend))


# -- chart versions -----------------------------------------------------------------------
async def _versions(ctx: Context) -> Step | Notice:
    listed = await ctx.client.versions(ctx.key)
    if not listed.rows:
        return Notice(f"{listed.source} offers no version of the chart", severity="warning")
    initial = next((i for i, r in enumerate(listed.rows) if r.deployed), 0)
    picked = await ctx.pick(picker_title(ctx.ref, listed), list(zip(picker_rows(listed), range(len(listed.rows)),
                                                                       strict=True)), initial)
    if picked is None:
        return Notice("")
    if listed.by_digest:  # spec.ref.digest comes first: no version of the list can be pinned in its place
        return Notice(f"{ctx.ref}: the chart is {listed.range}; edit the OCIRepository's spec.ref by hand to move it",
                      title="Versions", severity="warning")
    row = listed.rows[picked]
    planned = ctx.client.plan_pin(ctx.key, row.version)
    diff, reason = None, None
    try:
        diff = await ctx.client.version_diff(ctx.key, row.version)
    except (ActionRefused, NotAvailable) as exc:  # the preview is optional: say why it is missing
        reason = str(exc)
    except Exception as exc:  # likewise, and still offer the pin
        reason = f"the diff failed ({exc})"
    view = ctx.client.release(ctx.key) or ctx.view
    assert view is not None

    def report(done: tuple[Any, ActionOutcome | Requested | str | None]) -> Report:
        pinned = f"{ctx.ref}: {planned.file.name} pins {row.version}"
        if isinstance(done[1], Requested):  # the object's spec patched: the controller deploys it
            return Notice(f"{ctx.ref}: {planned.kind} {planned.file.name} pins {row.version}; {done[1].text}")
        if isinstance(done[1], str):
            return Notice(f"{pinned}; not reconciled now ({done[1]}): queued", severity="warning")
        return done[1] or Notice(f"{pinned}; nothing ran yet" + (" (suspended)" if view.suspended else ""))

    return Step(f"Pin {ctx.ref} to {row.version}", lambda: ctx.client.pin(ctx.key, row.version), report,
                confirmations.pin(view, row.version, row.in_range, planned, diff, reason),
                f"Pinning {ctx.ref} to {row.version} and reconciling …")


# -- cleanup ------------------------------------------------------------------------------
def _cleanup_report(items: list[CleanupItem]) -> Notice:
    removed = [f"{i.namespace}/{i.name}" for i in items if i.result == "removed"]
    failed = [f"{i.namespace}/{i.name}: {i.message}" for i in items if i.result == "failed"]
    text = f"Removed {len(removed)}: {', '.join(removed) or '-'}"
    if failed:
        return Notice(f"{text}\nFailed {len(failed)}:\n" + "\n".join(failed), "Cleanup", "error", 20)
    return Notice(text, "Cleanup")


async def _cleanup(ctx: Context) -> Step | Notice:
    items = await ctx.client.cleanup(dry_run=True)
    confirmation = confirmations.cleanup(items)
    if not any(i.result == "would-remove" for i in items):
        return Notice(confirmation.body, confirmation.title)  # nothing to confirm
    listed = {f"{i.namespace}/{i.name}" for i in items if i.result == "would-remove"}
    return Step("Cleanup", lambda: ctx.client.cleanup(dry_run=False, confirmed=listed), _cleanup_report,
                confirmation)


# -- uninstall ----------------------------------------------------------------------------
def _uninstall_check(ctx: Context) -> str | None:
    obs = ctx.view.observation if ctx.view else None
    if obs is None or obs.status == "uninstalled":
        return f"{ctx.ref} is not installed: nothing to uninstall"
    return None


async def _uninstall(ctx: Context) -> Step:
    assert ctx.view is not None and ctx.view.observation is not None  # _uninstall_check
    try:
        found, problem = await ctx.client.objects(ctx.key, ctx.view.observation.version), None
    except Exception as exc:  # the list is informative: say why it is missing, still offer to uninstall
        found, problem = None, str(exc)
    return Step(f"Uninstall {ctx.ref}", lambda: ctx.client.uninstall(ctx.key), _outcome,
                confirmations.uninstall(ctx.view, found, problem), f"Uninstalling {ctx.ref} …")


OPERATIONS: tuple[Operation, ...] = (
    Operation("upgrade", "u", "Upgrade",
              "Upgrade now (a forced reconcile); asks first, showing what would change when the engine can tell; "
              "attached to a controller, the forced upgrade is requested of it, named; on a release a Flux "
              "HelmRelease owns, Flux's forced reconcile is requested (as flux reconcile helmrelease --force)",
              _upgrade),
    Operation("rollback", "r", "Rollback",
              "Roll back to a revision you pick; asks, naming both revisions; the package is then suspended "
              "so the engine does not undo it (refused on a release Flux owns: Flux rolls back only as upgrade "
              "remediation; the refusal says what to do)", _rollback, _rollback_check),
    Operation("test", "t", "Test", "Run the release's helm tests", _test),
    Operation("monitor", "p", "Pause", "Pause the resource monitor, or resume it one step (pauses are counted)",
              _monitor),
    Operation("maintenance", "m", "Maint",
              "Enter or leave maintenance mode (NoResourceReconciliation); asks, explaining what it means",
              _maintenance),
    Operation("suspend", "s", "Suspend", "Suspend or resume reconciliation of the package; on a release Flux "
              "owns, the HelmRelease's spec.suspend (as flux suspend / resume helmrelease)", _suspend),
    Operation("unlock", "l", "Unlock", "Unlock a release stuck in a pending state; asks first; on a release "
              "Flux owns, a reset of Flux's failure counters is requested (flux reconcile helmrelease --reset)",
              _unlock),
    Operation("cancel", "ctrl+k", "Cancel",
              "Cancel the action running on the release: stops helm, records it as the engine's own failed "
              "action (its pending revision unlocked; the objects keep what it applied); asks first, offering a "
              "rollback to the last deployed revision (b)", _cancel),
    Operation("versions", "v", "Version",
              "Pick a chart version from the package's repository (newest first, deployed and range marked); "
              "shows what upgrading to it changes, then pins it in the package file and reconciles", _versions),
    Operation("cleanup", "c", "Cleanup",
              "Uninstall helmdeck-managed releases no package declares; lists them and asks first", _cleanup,
              per_release=False, preview="Cleanup (dry run)"),
    Operation("uninstall", "D,ctrl+d", "Uninstall",
              "Uninstall the release; lists the resources it removes and asks first", _uninstall, _uninstall_check),
)
BY_NAME = {o.name: o for o in OPERATIONS}


# The footer has room for 160 columns: these rarer actions are left out of it (help and the palette list
# every key), so Context, Help and Quit stay visible.
FOOTER_HIDDEN = frozenset({"monitor", "unlock", "cleanup"})


def operation_bindings() -> list[Binding]:
    """Footer bindings for every operation, each followed by a hidden fallback on the same keys.

    Textual skips a binding whose ``check_action`` is not True and tries the
    next one for the key: the fallback then says why the action is refused
    instead of the key press doing nothing.
    """
    out: list[Binding] = []
    for o in OPERATIONS:
        out.append(Binding(o.keys, f"operation('{o.name}')", o.label, tooltip=o.summary,
                           show=o.name not in FOOTER_HIDDEN))
        out.append(Binding(o.keys, f"refuse('{o.name}')", show=False))
    return out
