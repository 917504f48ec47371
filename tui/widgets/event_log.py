"""The detail screen's Events tab: the package's reconcile events, live, with helm's last lines on failure."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import RichLog

from engine.runtime.state import ReconcileEvent
from tui.format import unix_time

_SYMBOL = {"started": "⟳", "succeeded": "✔", "failed": "✖", "info": "•"}


def event_lines(event: ReconcileEvent) -> list[Text]:
    """One line for the event, then helm's output tail indented under it."""
    symbol = _SYMBOL.get(event.outcome, "•")
    head = Text(f"{unix_time(event.at)}  {symbol} {event.action:<12} {event.outcome:<10} {event.message}")
    return [head, *(Text(f"{'':21}│ {line}") for line in event.tail)]


class EventLog(RichLog):
    """Oldest first; :meth:`append` adds one as it is logged."""

    def __init__(self, *, id: str | None = None):
        super().__init__(id=id, wrap=True, markup=False, highlight=False, auto_scroll=True)
        self.logged = 0

    def show(self, events: list[ReconcileEvent]) -> None:
        """Replace the log with ``events``."""
        self.clear()
        self.logged = 0
        if not events:
            self.write(Text("No events yet: actions on this release appear here as they run."))
        for event in events:
            self.append(event)

    def append(self, event: ReconcileEvent) -> None:
        if self.logged == 0 and self.lines:
            self.clear()  # drop the "no events yet" line
        self.logged += 1
        for line in event_lines(event):
            self.write(line)
