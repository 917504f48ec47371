"""What each confirmation dialog says: what the action will touch, in the operator's terms.

Pure builders, so every dialog's text is tested and snapshot without an engine.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.base.wire import RESOURCE_MAINTENANCE
from engine.monitor.manifest import ManifestObject
from engine.runtime.state import CleanupItem, ReleaseView
from engine.storage.helmtime import helm_time
from engine.storage.observation import Observation
from tui.format import duration, helm_time_text

if TYPE_CHECKING:  # the picker's module, imported when it is first opened
    from engine.runtime.chart_versions import Pin

BODY_WIDTH = 88  # the dialog is 96 wide, less border and padding


@dataclass(frozen=True)
class Details:
    """A dialog's scrollable part under its own title: a list, or a unified diff (coloured as one)."""

    title: str
    text: str
    diff: bool = False


@dataclass(frozen=True)
class Confirmation:
    """A dialog: title, body, the confirm button's label, and optional :class:`Details`."""

    title: str
    body: str
    confirm_label: str
    details: Details | None = None
    alternative_label: str = ""  # a second way to confirm (key ``b``), e.g. stop and roll back
    dismiss_label: str = "Cancel"  # the button (key ``n``) that closes the dialog and does nothing


def _bullets(*items: str) -> str:
    """A bulleted list wrapped with a hanging indent to the dialog's width."""
    return "\n".join(textwrap.fill(i, BODY_WIDTH, initial_indent="• ", subsequent_indent="  ") for i in items)


def _name(view: ReleaseView) -> str:
    return f"{view.name} in namespace {view.namespace}"


def _revision(obs: Observation) -> str:
    chart = f"{obs.chart_name}@{obs.chart_version}" if obs.chart_name else "no chart"
    return f"revision {obs.version} ({obs.status}, {chart}, app {obs.app_version or '-'})"


def rollback(view: ReleaseView, current: Observation, target: Observation) -> Confirmation:
    """Roll back from the latest revision to ``target``."""
    body = (f"Roll back release {_name(view)}\n"
            f"  from {_revision(current)}\n"
            f"  to   {_revision(target)}, deployed {helm_time_text(target.last_deployed)} UTC.\n\n"
            f"Helm writes revision {current.version + 1} with the chart and values of revision {target.version}.")
    if view.package is not None:
        body += ("\nThe package is then suspended so helmdeck does not undo the rollback; "
                 "`s` resumes it, `u` upgrades it back to the package.")
    return Confirmation("Roll back?", body, f"Roll back to {target.version}")


def upgrade(view: ReleaseView, diff: str | None, no_diff_reason: str | None) -> Confirmation:
    """Upgrade now: what it would change (or why that cannot be shown), a warning in maintenance; attached, what
    is requested of which controller."""
    installing = view.observation is None or view.observation.status == "uninstalled"
    verb = "Install" if installing else "Upgrade"
    attached = view.attached
    if attached is not None:
        who = attached.replica or attached.controller
        shard = f", shard {attached.shard}" if attached.shard else ""
        lines = [f"Request a forced {verb.lower()} of release {_name(view)} from helmdeck controller {who}{shard}: "
                 f"a request annotation on Package {attached.ref[0]}/{attached.ref[1]}, which that controller "
                 "carries out and acknowledges (this app runs nothing itself)."]
    else:
        lines = [f"{verb} release {_name(view)} to its package now (a forced reconcile)."]
    if view.maintenance:
        lines.append(
            f"\nThe package is in maintenance mode ({view.maintenance}): its resources may have been edited "
            "by hand and the engine leaves them alone. Upgrading now re-applies the chart over those edits.")
    noun = verb.lower()
    if diff is None:
        lines.append(f"\nWhat the {noun} changes cannot be shown: {no_diff_reason}.")
    elif not diff:
        lines.append(f"\nThe rendered manifests equal the deployed ones: the {noun} writes a new revision only.")
    title = f"{verb} in maintenance?" if view.maintenance else f"{verb}?"
    if attached is not None:
        title, verb = f"Request {noun}{' in maintenance' if view.maintenance else ''}?", "Request"
    shown = Details(f"What the {noun} would change (deployed → desired)", diff, diff=True) if diff else None
    return Confirmation(title, "\n".join(lines), verb, shown)


def pin(view: ReleaseView, version: str, in_range: bool | None, planned: Pin, diff: str | None,
        no_diff_reason: str | None) -> Confirmation:
    """Pin the chart to ``version`` in the package file, then reconcile (the version picker). What follows is what
    the engine's next pass does with the edited package: an upgrade when ``version`` is not the deployed one (a
    changed chart version is OutOfSync, engine.reconcile.state.content_state), none while the package is suspended
    or in maintenance (the pass leaves the release as it is), none by helmdeck on a release Flux owns."""
    deployed = view.observation.chart_version if view.observation is not None else ""
    where = {True: "inside", False: "outside", None: "not comparable with"}[in_range]
    edit, then = ("the object's spec patched; the controller reconciles it", "the controller reconciles it") \
        if view.attached is not None else ("one value edited in place; comments and layout kept",
                                           "the package is reconciled")
    items = [f"{planned.file.name}: {planned.kind} {planned.field}: {planned.before} → {planned.after} ({edit});",
             f"deployed now: {deployed or 'nothing'}; {version} is "
             f"{where} the range {planned.before};"]
    now = deployed or "nothing"
    if view.flux_owned:
        items.append(f"Flux owns the release: only the file changes here, and helmdeck does not upgrade it; Flux "
                     f"deploys {version} once its HelmRelease in the cluster says so (commit and push the file).")
    elif version == deployed:
        items.append(f"then {then}: {version} is deployed already, so the pin only holds it there (no upgrade).")
    elif view.suspended:
        items.append(f"the package is suspended: nothing is upgraded now; the release stays at {now} until it is "
                     f"resumed (s), which upgrades it to {version}.")
    elif view.maintenance:
        items.append(f"the package is in maintenance: nothing is upgraded now; the release stays at {now} until "
                     f"you leave maintenance (m), which upgrades it to {version}.")
    else:
        items.append(f"then {then}: the release is upgraded to {version}.")
    if planned.shared:
        items.append(f"the {planned.kind} is shared: the pin moves {', '.join(planned.shared)} too.")
    lines = [f"Pin the chart of {_name(view)} to {version}.\n", _bullets(*items)]
    if diff is None:
        lines.append(f"\nWhat the upgrade changes cannot be shown: {no_diff_reason}.")
    elif not diff:
        lines.append(f"\nThe manifests {version} renders equal the deployed ones.")
    shown = Details(f"What upgrading to {version} would change (deployed → {version})", diff, diff=True) \
        if diff else None
    upgrades = version != deployed and not (view.flux_owned or view.suspended or view.maintenance)
    return Confirmation(f"Pin {version}?", "\n".join(lines), "Pin and reconcile" if upgrades else "Pin", shown)


def maintenance(view: ReleaseView, entering: bool) -> Confirmation:
    """Enter or leave maintenance mode (NoResourceReconciliation)."""
    if entering:
        body = (f"Put package {_name(view)} into maintenance (NoResourceReconciliation).\n\n" + _bullets(
            f"helmdeck upgrades the release once, to label every resource {RESOURCE_MAINTENANCE}=true;",
            "then it stops the resource monitor: resources you edit or delete by hand stay as you leave them, "
            "also across restarts;",
            "the engine does not upgrade, remediate or correct drift for this package until you leave maintenance."))
        return Confirmation("Enter maintenance?", body, "Enter maintenance")
    body = (f"Take package {_name(view)} out of maintenance.\n\n" + _bullets(
        "helmdeck upgrades the release once, to the package as declared: hand edits to its resources are "
        "overwritten and deleted resources come back;",
        "the resource monitor starts again and the engine reconciles the package as usual."))
    return Confirmation("Leave maintenance?", body, "Leave maintenance")


def unlock(view: ReleaseView, now: float) -> Confirmation:
    """Unlock a release stuck in a pending state."""
    obs = view.observation
    if obs is None:
        what = "It has no stored revision."
    else:
        what = f"Revision {obs.version} is {obs.status} since {helm_time_text(obs.last_deployed)} UTC"
        at = helm_time(obs.last_deployed)
        what += f" ({duration(now - at)} ago)." if at is not None else "."
    body = (f"Unlock release {_name(view)}.\n{what}\n\n"
            "helmdeck marks that revision failed in Helm's storage so helm can act on the release again "
            "(helm would otherwise refuse with \"another operation is in progress\").\n"
            "Only do this when no helm process is still working on it.")
    return Confirmation("Unlock?", body, "Unlock")


def _after_failure(view: ReleaseView, action: str) -> str:
    """What the engine does after a failed ``action`` (install or upgrade) of ``view``'s package, in the words of
    its settings: RetryOnFailure's wait, else the remediation (Flux's: the strategy, the retries counted since
    the last success, remediateLastFailure for the last one; engine.reconcile.next_action)."""
    assert view.package is not None
    section = view.package.install if action == "install" else view.package.upgrade
    if section.retry is not None:
        return (f"then, as after any failed {action}, it is tried again after {duration(section.retry)}, nothing "
                f"undone meanwhile ({action}.strategy RetryOnFailure).")
    strategy = "uninstall" if action == "install" else view.package.upgrade.strategy
    undo = "rolled back to the revision before" if strategy == "rollback" else "uninstalled"
    setting = f"{action}.remediation: retries {section.retries}, strategy {strategy}"
    if section.retries < 0:
        return f"then, as after any failed {action}, the release is {undo} and the {action} tried again, without " \
            f"limit ({setting})."
    if section.retries > 0:
        return (f"then, as after any failed {action}, the release is {undo} and the {action} tried again, "
                f"{section.retries} times at most since the last success ({setting}).")
    if section.remediate_last:
        return (f"then, as after any failed {action}, the release is {undo} and the package stalls: no retry "
                f"({setting}, remediateLastFailure).")
    return (f"then, as after any failed {action}, nothing more: no retry and nothing undone; the release stays "
            f"failed and the package Stalled until you upgrade it again (u) ({action}.remediation.retries 0).")


def cancel(view: ReleaseView, now: float, target: Observation | None) -> Confirmation:
    """Stop the action running on a release; ``target``: the last deployed revision, offered as a rollback.
    The buttons say stop and let run, not cancel: "Cancel" beside "Cancel upgrade" read both ways."""
    running = view.running
    obs = view.observation
    pending = obs is not None and obs.status.startswith("pending-")
    # A pass holds the release as "reconcile": what helm does is in the pending revision's status.
    action = obs.status.removeprefix("pending-") if obs is not None and pending else \
        running.action if running is not None else "action"
    since = f" has been running for {duration(now - running.started)}" if running is not None else " is running"
    revision = f"revision {obs.version}" if obs is not None and pending else "the revision it writes"
    items = [f"the objects keep what {revision} applied before helm stopped: nothing is undone;" if pending
             else "the objects keep what helm applied before it stopped: nothing is undone;"]
    if action not in ("install", "upgrade"):
        items.append(f"the {action} is recorded as stopped; what it wrote stays the engine's own (a pending "
                     "revision is marked failed at once, so helm can act again).")
    else:
        items.append(f"{revision}{'' if pending else ', if any,'} is marked failed at once (so helm can act "
                     f"again) and counts as a failed {action}, the stop its reason;")
        if view.package is not None:
            items.append(_after_failure(view, action))
    body = (f"The {action} of release {_name(view)}{since}. helmdeck stops helm now (terminate, then kill after "
            "a grace period). Then:\n\n" + _bullets(*items))
    alternative = ""
    if target is not None:
        body += (f"\n\nStop and roll back (b): then roll back to {_revision(target)}, the last deployed, so its "
                 "objects come back" + (", and suspend the package so helmdeck does not upgrade it again "
                                        "(resume with s)." if view.package is not None else "."))
        alternative = f"Stop and roll back to {target.version}"
    return Confirmation(f"Stop the {action}?", body, f"Stop {action}", alternative_label=alternative,
                        dismiss_label="Let it run")


def flux_request(view: ReleaseView, owner_text: str, action: str, suspend: bool = True) -> Confirmation:
    """A key on a release a Flux HelmRelease owns (``owner_text``): Flux's own request, as the flux CLI makes it
    (``action`` the app's: upgrade, unlock, or suspend with ``suspend`` False to resume)."""
    name = owner_text.removeprefix("Flux ")
    if action == "upgrade":
        title, label = "Request a forced reconcile?", "Request"
        what = [f"Annotate {name} with reconcile.fluxcd.io/requestedAt and forceAt (one token), as flux "
                "reconcile helmrelease --force: Flux's helm-controller installs or upgrades the release once, "
                "even when it is in sync."]
    elif action == "unlock":
        title, label = "Request a reset?", "Request"
        what = [f"Annotate {name} with reconcile.fluxcd.io/requestedAt and resetAt (one token), as flux "
                "reconcile helmrelease --reset: Flux's helm-controller resets its failure counters (install, "
                "upgrade, total), so a release that ran out of retries is tried again."]
    elif suspend:
        title, label = "Suspend the HelmRelease?", "Suspend"
        what = [f"Set spec.suspend: true on {name}, as flux suspend helmrelease: Flux's helm-controller stops "
                "reconciling it (hand changes stay) until it is resumed (s)."]
    else:
        title, label = "Resume the HelmRelease?", "Resume"
        what = [f"Remove spec.suspend from {name}, as flux resume helmrelease: Flux's helm-controller "
                "reconciles it again and undoes hand changes to the release."]
    body = (f"Release {_name(view)} is owned by {owner_text}: its keys are Flux's requests.\n\n"
            + _bullets(*what, "Flux carries it out; this app runs no helm. The row follows the HelmRelease's "
                              "status and Events."))
    return Confirmation(title, body, label)


def cleanup(items: list[CleanupItem]) -> Confirmation:
    """Uninstall every helmdeck-managed release no package declares (``items`` from a dry run)."""
    would = [i for i in items if i.result == "would-remove"]
    kept = [i for i in items if i.result != "would-remove"]
    listed = "\n".join(f"{i.namespace}/{i.name}" + (f"  ({i.message})" if i.message else "") for i in would)
    note = ("\nLeft alone: " + ", ".join(f"{i.namespace}/{i.name}" + (f" ({i.message})" if i.message else "")
                                     for i in kept) + ".") if kept else ""
    if not would:
        return Confirmation("Nothing to clean up",
                            "Every helmdeck-managed release is declared by a package: nothing would be uninstalled."
                            + note, "OK")
    body = (f"Uninstall these {len(would)} helmdeck-managed release(s) that no package declares.\n"
            "Releases not managed by helmdeck are never touched." + note)
    return Confirmation("Clean up?", body, f"Uninstall {len(would)}",
                        Details("Releases that would be uninstalled", listed))


def uninstall(view: ReleaseView, objects: list[ManifestObject] | None, problem: str | None) -> Confirmation:
    """Uninstall one release; ``objects`` from its manifest (None when it could not be read: ``problem``)."""
    keep = bool(view.package and view.package.uninstall.keep_history)
    lines = [f"Uninstall release {_name(view)}."]
    lines.append("Helm keeps its history (uninstall.keepHistory)." if keep
                 else "Helm deletes its stored history too.")
    if view.package is not None:
        lines.append("Its package is then suspended so the engine does not reinstall it; `u` installs it again.")
    if objects is None:
        lines.append(f"\nThe resources cannot be listed: {problem}.")
    listed = Details(f"Resources deleted ({len(objects)})", "\n".join(o.ref for o in objects)) if objects is not None \
        else None
    return Confirmation("Uninstall?", "\n".join(lines), "Uninstall", listed)


def resume(view: ReleaseView) -> Confirmation:
    """Resume reconciliation of a suspended package: the engine's next pass (queued at once) compares the release
    with the package as every pass does, and acts only on a difference (engine.reconcile.state); in maintenance it
    leaves the release as it is, and a Stalled package's retries stay exhausted (a forced upgrade resets them)."""
    pkg = view.package
    if pkg is not None and pkg.suspend:
        body = (f"Package {_name(view)} is suspended by its file: spec.suspend: true in {pkg.declared_in}.\n\n"
                + _bullets("resuming here lifts only the app's suspension (a hand rollback's or an uninstall's); "
                           "the file's keeps it suspended, and nothing is reconciled;",
                           "to resume it, set spec.suspend: false in the file."))
        return Confirmation("Resume?", body, "Resume")
    items = ["helmdeck reconciles the package now, then on its interval: the release is compared with the package;"]
    if view.maintenance:
        items.append("the package is in maintenance: the release is left as it is until you leave maintenance (m).")
    elif view.state == "Stalled":
        items.append("its retries are exhausted (Stalled): it is not upgraded again until you force an upgrade (u), "
                     "which resets them.")
    else:
        items.append("only if they differ is the release upgraded (a hand rollback undone) or installed again "
                     "(after an uninstall); a release that matches the package is left as it is.")
    body = f"Resume reconciliation of package {_name(view)}.\n\n" + _bullets(*items)
    return Confirmation("Resume?", body, "Resume")
