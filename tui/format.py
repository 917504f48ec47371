"""Plain-text renderings of engine values for the views (no colour needed to read them)."""

from __future__ import annotations

import datetime as dt

from engine.runtime.state import ActionOutcome, ReleaseView

# Symbol + word, so a status reads the same without colour.
_STATUS_SYMBOL = {
    "deployed": "✔",
    "superseded": "○",
    "failed": "✖",
    "uninstalled": "⊘",
    "uninstalling": "…",
    "pending-install": "⧗",
    "pending-upgrade": "⧗",
    "pending-rollback": "⧗",
    "unknown": "?",
}


def status_text(state: ReleaseView) -> str:
    """``✔ deployed``, ``⧗ pending-upgrade``; ``- not installed`` without a revision."""
    if state.unreadable:
        return "! unreadable"
    if state.observation is None:
        return "- not installed"
    status = state.observation.status
    return f"{_STATUS_SYMBOL.get(status, '?')} {status}"


def status_style(state: ReleaseView) -> str:
    """A CSS-ish class name for the status: ok, warn, bad or idle."""
    if state.observation is None:
        return "idle"
    status = state.observation.status
    if status == "deployed":
        return "ok"
    if status == "failed" or state.unreadable:
        return "bad"
    if status.startswith("pending") or status == "uninstalling":
        return "warn"
    return "idle"


def helm_time(value: str) -> str:
    """A Helm RFC 3339 timestamp as ``YYYY-MM-DD HH:MM:SS`` UTC; ``-`` when unset or unparsable."""
    if not value:
        return "-"
    text = value.replace("Z", "+00:00")
    # Helm writes nanoseconds; fromisoformat takes at most microseconds.
    if "." in text:
        head, rest = text.split(".", 1)
        frac = "".join(ch for ch in rest if ch.isdigit())
        zone = rest[len(frac):]
        text = f"{head}.{frac[:6].ljust(6, '0')}{zone}"
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        return "-"
    if when.tzinfo is not None:
        when = when.astimezone(dt.UTC)
    return when.strftime("%Y-%m-%d %H:%M:%S")


def action_text(state: ReleaseView) -> str:
    """What the engine is doing or last did: ``⟳ upgrade…``, ``✔ rollback``, ``✖ upgrade``."""
    parts = []
    if state.running:
        parts.append(f"⟳ {state.running}…")
    elif state.last is not None:
        parts.append(outcome_text(state.last))
    if state.suspended:
        parts.append("⏸ suspended")
    return "  ".join(parts) or "-"


def outcome_text(outcome: ActionOutcome) -> str:
    return f"{'✔' if outcome.ok else '✖'} {outcome.action}"
