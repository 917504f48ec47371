"""The main screen's header: cluster context, lease holder or read-only, counts per state, running actions."""

from __future__ import annotations

from collections import Counter

from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget

from engine.runtime.state import RELEASE_STATES, LeaseChanged
from tui.format import STATE_SYMBOLS, Tone

TONE_STYLE: dict[Tone, str] = {
    "ok": "$text-success", "warn": "$text-warning", "bad": "$text-error", "busy": "$text-accent", "plain": "",
}


def lease_text(lease: LeaseChanged | None, readonly: bool) -> tuple[str, Tone]:
    """``READ-ONLY``, ``lease: held by me@host (this instance)``, ``lease: x · watching``, or ``lease: -``."""
    if readonly:
        return "READ-ONLY (actions disabled)", "warn"
    if lease is None:
        return "lease: - (not reported by the engine)", "plain"
    if lease.leader:
        return f"lease: {lease.holder} (this instance acts)", "ok"
    return f"lease: held by {lease.holder} · this instance watches read-only", "warn"


class HeaderBar(Widget):
    """Two or three lines; every part is a reactive attribute the screen sets."""

    context: reactive[str] = reactive("")
    lease: reactive[LeaseChanged | None] = reactive(None)
    controllers: reactive[int] = reactive(0)  # live helmdeck controllers (their Leases): said when any
    readonly: reactive[bool] = reactive(False)
    counts: reactive[Counter[str]] = reactive(Counter, always_update=True)
    total: reactive[int] = reactive(0)
    shown: reactive[int] = reactive(0)
    # These may add or remove a line (or wrap one): the screen is laid out again when they change.
    view: reactive[str] = reactive("", layout=True)
    running: reactive[tuple[str, ...]] = reactive(())  # its progress changes each second: see watch_running
    package_errors: reactive[tuple[str, ...]] = reactive((), layout=True)
    access: reactive[tuple[str, ...]] = reactive((), layout=True)  # refused permissions, then a scope note

    def watch_running(self, old: tuple[str, ...], new: tuple[str, ...]) -> None:
        if bool(old) != bool(new):  # the running line comes or goes (not laid out again per progress tick)
            self.refresh(layout=True)

    def render(self) -> Content:
        sep = ("  │  ", "$text-muted")
        lease, lease_tone = lease_text(self.lease, self.readonly)
        parts: list[str | tuple[str, str]] = [
            ("helmdeck", "bold $text-primary"), sep,
            "context ", (self.context or "-", "bold"), sep,
            (lease, TONE_STYLE[lease_tone]),
        ]
        if self.controllers:  # the cluster's helmdeck controllers whose Leases are renewed
            parts += [sep, "controllers ", (str(self.controllers), "bold"), " live"]
        parts += ["\n", (f"{self.total} releases", "bold"), f" ({self.shown} shown)", sep]
        parts.extend(self._count_parts())
        parts.extend([sep, "view: ", (self.view, "bold")])
        if self.running:
            parts.extend(["\n", ("running: ", "bold $text-accent"), " · ".join(self.running)])
        if self.package_errors:
            # Kept in view until fixed: a toast alone is easy to miss.
            files = ", ".join(self.package_errors[:3]) + (" …" if len(self.package_errors) > 3 else "")
            parts.extend(["\n", (f"⚠ {len(self.package_errors)} bad package file(s): ", "bold $text-error"),
                          files, ("  (a file that was good keeps its last good spec; ctrl+p \"Package file "
                                  "errors\" says what is wrong)", "$text-muted")])
        for line in self.access:
            # A refused permission is not "no releases": said here until resolved.
            note = line.startswith("note: ")
            parts.extend(["\n", ("ⓘ " if note else "⚠ ", "bold $text-warning" if note else "bold $text-error"),
                          (line, "$text-warning" if note else "$text-error")])
        return Content.assemble(*parts)

    def _count_parts(self) -> list[str | tuple[str, str]]:
        out: list[str | tuple[str, str]] = []
        for state in (*RELEASE_STATES, "-"):
            n = self.counts.get(state, 0)
            if not n:
                continue
            if out:
                out.append("  ")
            if state == "-":
                out.append(f"- no state {n}")
                continue
            symbol, tone = STATE_SYMBOLS[state]
            out.append((f"{symbol} {state} {n}", TONE_STYLE[tone]))
        return out or ["no releases"]
