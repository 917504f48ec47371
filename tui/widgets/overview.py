"""The detail screen's Overview tab: state, conditions, snapshots, failure counters, monitor."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from engine.helm.cli import go_duration
from engine.package.model import InstallSpec, UpgradeSpec
from engine.runtime.ledger.owners import owner_of
from engine.runtime.state import ControllerInfo, ReleaseView
from engine.storage.observation import Observation, previous_deployed
from tui import format as fmt
from tui.chart_origin import newer_line, origin_line, update_text, verification_line
from tui.widgets.header_bar import TONE_STYLE

Part = str | tuple[str, str]


def _allowed(section: InstallSpec | UpgradeSpec) -> str:
    """An install or upgrade section's retries, or under RetryOnFailure its interval (no retry budget then)."""
    if section.retry is None:
        return str(section.retries)
    return f"unlimited (RetryOnFailure, every {go_duration(section.retry)})"


def _row(label: str, *value: Part) -> list[Part]:
    return [(f"{label:<13}", "bold"), *value, "\n"]


def _toned(pair: tuple[str, fmt.Tone]) -> Part:
    return (pair[0], TONE_STYLE[pair[1]])


def _snapshot(label: str, obs: Observation | None) -> list[Part]:
    if obs is None:
        return [f"  {label:<9} -\n"]
    return [f"  {label:<9} rev {obs.version:<4} ", (f"{fmt.status_symbol(obs.status)} {obs.status:<12}", ""),
            f" {obs.chart_name}@{obs.chart_version}  app {obs.app_version or '-'}  "
            f"values {obs.config_digest[:19]}…  deployed {fmt.helm_time_text(obs.last_deployed)}\n"]


def _controller_rows(view: ReleaseView, controller: ControllerInfo | None, now: float) -> list[Part]:
    """Who reconciles an attached release (the controller, its Lease and heartbeat) and how far it got."""
    found = view.attached
    if found is None:
        return []
    parts: list[Part] = []
    if controller is not None:
        beat = fmt.duration(max(0.0, now - controller.renewed))
        shard = f"   shard {controller.shard}" + (f" ({controller.selector})" if controller.selector else "")
        parts += _row("Controller", (controller.holder, "bold"), shard if controller.shard else "",
                      f"   Lease {controller.lease} (holder)", f"   last heartbeat {beat} ago")
    else:
        parts += _row("Controller", (f"{found.controller} (its Lease is no longer renewed)", TONE_STYLE["warn"]))
    behind = found.generation > found.observed
    parts += _row("Object", f"generation {found.generation}, observed ",
                  (str(found.observed), TONE_STYLE["warn" if behind else "ok"]),
                  f"   last attempted {found.attempted or '-'}   last applied {found.applied or '-'}")
    if found.requested:
        parts += _row("Requested", (", ".join(found.requested), TONE_STYLE["busy"]),
                      "   (waiting for the controller to handle them)")
    return parts


def _flux_rows(view: ReleaseView) -> list[Part]:
    """The HelmRelease object owning the release (Flux's cockpit): generation, the requests made and handled,
    its history as helm-controller recorded it, and what its keys do."""
    found = view.flux
    if found is None:
        return []
    behind = found.generation > found.observed
    parts = _row("HelmRelease", f"{found.ref[0]}/{found.ref[1]}   generation {found.generation}, observed ",
                 (str(found.observed), TONE_STYLE["warn" if behind else "ok"]),
                 f"   last attempted {found.attempted or '-'}")
    parts += _row("Handled", f"reconcile {found.handled_reconcile or '-'}   force {found.handled_force or '-'}   "
                  f"reset {found.handled_reset or '-'}")
    if found.requested:
        parts += _row("Requested", (", ".join(found.requested), TONE_STYLE["busy"]),
                      "   (waiting for Flux's helm-controller to handle them)")
    parts += _row("Flux's keys", "u forced reconcile · l reset of the failure counters · s suspend / resume "
                  "(the flux CLI's requests); r, D, m refused")
    for i, h in enumerate(found.history[:3]):
        parts += _row("History" if i == 0 else "", f"rev {h.version:<4} ", (f"{fmt.status_symbol(h.status)} "
                      f"{h.status:<12}", ""), f" {h.chart_name}@{h.chart_version}  app {h.app_version or '-'}  "
                      f"config {h.config_digest[:19]}…")
    return parts


def overview_content(view: ReleaseView, history: list[Observation], now: float,
                     controller: ControllerInfo | None = None) -> Content:
    """Everything the Overview tab says about one release, as text readable without colour; ``controller``:
    the live controller reconciling its Package object, when the app is attached to one."""
    obs = view.observation
    pkg = view.package
    parts: list[Part] = []
    parts += _row("Release", f"{view.namespace}/{view.name}",
                  f"   package {pkg.name} ({pkg.declared_in})" if pkg else "   no package declares it")
    parts += _row("Owner", owner_of(view).text)
    parts += _controller_rows(view, controller, now)
    parts += _flux_rows(view)
    if pkg is not None:
        parts += _row("Source", origin_line(pkg))
    verified = verification_line(view)
    if verified is not None:
        parts += _row("Verified", (verified[0], TONE_STYLE[verified[1]]), f"   {_continued(verified[2])}")
    if obs is not None:
        parts += _row("Chart", f"{obs.chart_name}@{obs.chart_version}   app version {obs.app_version or '-'}")
        if view.chart_update is not None:
            parts += _row("Newer", (update_text(view.chart_update), TONE_STYLE["warn"]),
                          f"   {newer_line(view.chart_update)}")
        parts += _row("Revision", f"{obs.version}  ", _toned(fmt.helm_status_text(view)),
                      f"   last deployed {fmt.helm_time_text(obs.last_deployed)} UTC ({fmt.age_text(view, now)} ago)")
        if obs.description:
            parts += _row("Description", obs.description)
    else:
        parts += _row("Revision", _toned(fmt.helm_status_text(view)))
    parts += _row("State", _toned(fmt.state_text(view)), "   ready ",
                  _toned(fmt.ready_text(view.ready)))
    if view.flux_owned:  # the cluster holds its HelmRelease: helmdeck shows and diffs it, Flux acts
        parts += _row("Flux", "Flux acts on this release: see what differs in the Diff tab (5); "
                      "u, l and s are Flux's requests")
    if pkg is not None and pkg.depends_on:
        held = view.condition("Ready")
        parts += _row("Depends on", ", ".join(str(d) for d in pkg.depends_on),
                      (f"   {held.message}", TONE_STYLE["warn"])
                      if held is not None and held.reason == "DependencyNotReady" else "")
    parts += _row("Maintenance", _toned(fmt.maintenance_text(view.maintenance)),
                  f" ({view.maintenance})" if view.maintenance else "",
                  "   suspended ", _toned(fmt.suspended_text(view.suspended)))
    if view.running is not None:
        parts += _row("Running", (f"⟳ {fmt.progress_text(view.running, now)}", TONE_STYLE["busy"]),
                      "   (follow it in the Events tab)")
    if view.last is not None:
        last = view.last
        parts += _row("Last action", (fmt.outcome_text(last), TONE_STYLE["ok" if last.ok else "bad"]),
                      f": {_continued(last.message)}" + (f" (at {fmt.unix_time(last.at)} UTC)" if last.at else ""))
    if view.unreadable:
        parts += _row("Unreadable", (view.unreadable, TONE_STYLE["bad"]))

    parts.append(("\nConditions\n", "bold $text-primary"))
    if view.conditions:
        width = max(12, *(len(c.type) for c in view.conditions))  # SourceVerified is longer than the rest
        parts.append((f"  {'TYPE':<{width}} {'STATUS':<8} {'REASON':<22} {'SINCE':<20} MESSAGE\n", "bold"))
        for c in view.conditions:
            tone: fmt.Tone = "ok" if c.status == "True" else "bad" if c.status == "False" else "warn"
            if c.type in ("Stalled", "Reconciling", "Remediated"):
                tone = "warn" if c.status == "True" else "plain"
            parts += [f"  {c.type:<{width}} ", (f"{c.status:<8}", TONE_STYLE[tone]),
                      f" {c.reason:<22} {fmt.unix_time(c.last_transition):<20} {_continued(c.message)}\n"]
    else:
        parts.append("  none reported by the engine\n")

    parts.append(("\nSnapshots\n", "bold $text-primary"))
    parts += _snapshot("current", history[0] if history else obs)
    parts += _snapshot("previous", previous_deployed(history))

    f = view.failures
    parts.append(("\nFailure counters", "bold $text-primary"))
    parts.append(f"   install {f.install} · upgrade {f.upgrade} · total {f.total}")
    if pkg is not None:
        parts.append(f"   (retries allowed: install {_allowed(pkg.install)}, upgrade {_allowed(pkg.upgrade)}; "
                     "negative = unlimited)")
    parts.append("\n")

    mon = view.monitor
    parts.append(("\nMonitor", "bold $text-primary"))
    parts += ["   ", _toned(fmt.monitor_text(mon)), f"   pause counter {mon.paused}\n"]
    if mon.problem:
        parts.append((f"  {mon.problem}\n", TONE_STYLE["bad"]))
    if mon.resources:
        parts.append((f"  {'RESOURCE':<44} {'PRESENT':<8} {'READY':<7} REASON\n", "bold"))
        for r in mon.resources:
            ready_tone: fmt.Tone = "ok" if r.ready else "bad" if r.ready is False else "plain"
            present = ("✔ yes   ", TONE_STYLE["ok"]) if r.present else ("✖ no    ", TONE_STYLE["bad"])
            ready = (f"{fmt.ready_text(r.ready)[0]:<7}", TONE_STYLE[ready_tone])
            parts += [f"  {r.ref:<44} ", present, " ", ready, f" {r.reason}\n"]
    else:
        parts.append("  no resources reported (see the Resources tab)\n")
    return Content.assemble(*parts)


class OverviewPanel(VerticalScroll):
    """Scrollable overview of one release; the screen calls :meth:`show` on every change."""

    def compose(self) -> ComposeResult:
        yield Static(id="overview-text")

    def show(self, view: ReleaseView, history: list[Observation], now: float,
             controller: ControllerInfo | None = None) -> None:
        self.query_one("#overview-text", Static).update(overview_content(view, history, now, controller))


def _continued(message: str) -> str:
    """A multi-line message (a chart's ``fail``) with its further lines indented under the table."""
    return message.rstrip("\n").replace("\n", "\n    ")
