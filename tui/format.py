"""Plain-text renderings of engine values for the views.

Every rendering is a symbol plus a word, so a status reads the same without
colour; :data:`Tone` is a hint the views map to theme colours.
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

from engine.monitor.status import MonitorStatus
from engine.runtime.state import ActionOutcome, ReleaseView, RunningAction
from engine.storage.helmtime import helm_time, parse_helm_time

Tone = Literal["ok", "warn", "bad", "busy", "plain"]
"""How a value should be coloured: success, warning, error, in progress, or not at all."""

_STATUS: dict[str, tuple[str, Tone]] = {
    "deployed": ("✔", "ok"),
    "superseded": ("○", "plain"),
    "failed": ("✖", "bad"),
    "uninstalled": ("⊘", "plain"),
    "uninstalling": ("…", "warn"),
    "pending-install": ("⧗", "warn"),
    "pending-upgrade": ("⧗", "warn"),
    "pending-rollback": ("⧗", "warn"),
    "unknown": ("?", "warn"),
}

# Engine release states (engine.runtime.state.RELEASE_STATES).
STATE_SYMBOLS: dict[str, tuple[str, Tone]] = {
    "InSync": ("✔", "ok"),
    "OutOfSync": ("↻", "warn"),
    "Drifted": ("≠", "warn"),
    "Locked": ("⧗", "warn"),
    "Untested": ("◌", "warn"),
    "Failed": ("✖", "bad"),
    "Unmanaged": ("◇", "warn"),
    "Absent": ("∅", "plain"),
    "Stalled": ("‼", "bad"),
    "TargetChanged": ("⇄", "warn"),
}


def helm_status_text(state: ReleaseView) -> tuple[str, Tone]:
    """``✔ deployed``, ``⧗ pending-upgrade``; ``- not installed`` without a revision."""
    if state.unreadable:
        return "! unreadable", "bad"
    if state.observation is None:
        return "- not installed", "plain"
    status = state.observation.status
    symbol, tone = _STATUS.get(status, ("?", "warn"))
    return f"{symbol} {status}", tone


def status_symbol(status: str) -> str:
    """The symbol of one Helm status (``?`` for unknown ones)."""
    return _STATUS.get(status, ("?", "warn"))[0]


def status_tone(status: str) -> Tone:
    """The colour hint of one Helm status (``warn`` for unknown ones)."""
    return _STATUS.get(status, ("?", "warn"))[1]


FLUX_OWNS = " (Flux owns it)"


def engine_state_text(state: str | None, *, flux_owned: bool = False) -> tuple[str, Tone]:
    """``✔ InSync``, ``‼ Stalled``, ``↻ OutOfSync (Flux owns it)`` for a release Flux owns (its state against
    the document); ``-`` when the engine reports no state for the release."""
    if state is None:
        return ("-" + FLUX_OWNS if flux_owned else "-"), "plain"
    symbol, tone = STATE_SYMBOLS.get(state, ("?", "warn"))
    return f"{symbol} {state}{FLUX_OWNS if flux_owned else ''}", tone


FLUX_MARK = "⚑"  # a release Flux owns, where the STATE column has no room for FLUX_OWNS


def engine_state_cell(state: str | None, *, flux_owned: bool = False) -> tuple[str, Tone]:
    """The STATE column's text (11 cells): :func:`engine_state_text`, where a release Flux owns shows
    :data:`FLUX_MARK` in place of its state's symbol (``⚑ OutOfSync``: Flux acts on it, not helmdeck), its
    tone the state's: ``↻ OutOfSync (Flux owns it)`` does not fit, and was shown as ``↻ OutOfSync``, which
    reads as helmdeck's next upgrade."""
    if not flux_owned:
        return engine_state_text(state)
    if state is None:
        return FLUX_MARK, "plain"
    return f"{FLUX_MARK} {state}", STATE_SYMBOLS.get(state, ("?", "warn"))[1]


def acting_on_stalled(view: ReleaseView) -> bool:
    """Whether an action runs on a release its last pass left Stalled (the operator's upgrade or reset, a
    controller's pass after a spec change): the Stalled verdict no longer holds while it runs, as Flux's
    helm-controller lifts Stalled when a new reconciliation starts (its Reconciling condition shows instead)."""
    return view.running is not None and view.state == "Stalled"


def state_text(view: ReleaseView, *, cell: bool = False) -> tuple[str, Tone]:
    """What a release's STATE says, the one decision for the table's cell (``cell``: :func:`engine_state_cell`),
    the Overview and the detail's title (:func:`engine_state_text`): the engine's state, but the running
    action (``⟳ upgrade``, as the LAST ACTION column says it) on a release left Stalled (:func:`acting_on_stalled`):
    ``‼ Stalled`` beside an upgrade under way read as if the engine had given up on it."""
    if view.running is not None and acting_on_stalled(view):
        return f"⟳ {view.running.action}", "busy"
    if cell:
        return engine_state_cell(view.state, flux_owned=view.flux_owned)
    return engine_state_text(view.state, flux_owned=view.flux_owned)


def ready_text(ready: bool | None) -> tuple[str, Tone]:
    """``✔ yes``, ``✖ no`` or ``-`` (unknown)."""
    if ready is None:
        return "-", "plain"
    return ("✔ yes", "ok") if ready else ("✖ no", "bad")


def monitor_text(monitor: MonitorStatus) -> tuple[str, Tone]:
    """``● active``, ``‖ paused ×2``, ``! 3 absent``, ``! cannot watch``, ``○ off``."""
    summary = monitor.summary()
    if monitor.state == "off":
        return f"○ {summary}", "plain"
    if monitor.state == "paused":
        return f"‖ {summary}", "warn"
    if monitor.absent or monitor.problem:
        return f"! {summary}", "bad"
    return f"● {summary}", "ok"


def maintenance_text(mode: str) -> tuple[str, Tone]:
    """``✎ on`` while in maintenance (``NoResourceReconciliation``), else ``-``."""
    return ("✎ on", "warn") if mode else ("-", "plain")


def suspended_text(suspended: bool) -> tuple[str, Tone]:
    """``⏸ yes`` when reconciliation is suspended, else ``-``."""
    return ("⏸ yes", "warn") if suspended else ("-", "plain")


def duration(seconds: float, *, coarse: bool = False) -> str:
    """A short duration: ``45s``, ``2m``, ``2m30s``, ``3h4m``, ``2d5h``; ``coarse`` drops seconds past a minute."""
    total = max(0, int(seconds))
    if coarse and total >= 60:
        total -= total % 60
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h" if hours else f"{days}d"
    if hours:
        return f"{hours}h{minutes}m" if minutes else f"{hours}h"
    if minutes:
        return f"{minutes}m{secs}s" if secs else f"{minutes}m"
    return f"{secs}s"


def progress_text(running: RunningAction, now: float) -> str:
    """``upgrade 12s / 2m`` — the action, time elapsed and its timeout."""
    return f"{running.action} {duration(now - running.started)} / {duration(running.timeout)}"


def last_action_text(state: ReleaseView, now: float) -> tuple[str, Tone]:
    """What the engine is doing or last did: ``⟳ upgrade 12s / 2m``, ``✔ rollback``, ``✖ upgrade``."""
    if state.running is not None:
        return f"⟳ {progress_text(state.running, now)}", "busy"
    if state.last is not None:
        return outcome_text(state.last), "ok" if state.last.ok else "bad"
    return "-", "plain"


def outcome_text(outcome: ActionOutcome) -> str:
    """``✔ upgrade`` or ``✖ upgrade``."""
    return f"{'✔' if outcome.ok else '✖'} {outcome.action}"


def helm_time_text(value: str) -> str:
    """A Helm timestamp as ``YYYY-MM-DD HH:MM:SS`` UTC; ``-`` when unset or unparsable."""
    when = parse_helm_time(value)
    return when.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S") if when else "-"


def unix_time(value: float) -> str:
    """Unix seconds as ``YYYY-MM-DD HH:MM:SS`` UTC (``-`` for 0)."""
    if not value:
        return "-"
    return dt.datetime.fromtimestamp(value, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def deployed_at(state: ReleaseView) -> float | None:
    """Unix time of the latest revision's last deploy, None without one."""
    obs = state.observation
    return helm_time(obs.last_deployed) if obs else None


def age_text(state: ReleaseView, now: float) -> str:
    """How long ago the latest revision was deployed (``-`` without one)."""
    at = deployed_at(state)
    return duration(now - at, coarse=True) if at is not None else "-"
