"""The detail screen's Events tab: the package's reconcile events and the Kubernetes Events of the release's
objects (and what they own), merged by time, live; helm's last lines under a failure, Warnings standing out."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import RichLog

from engine.monitor.events import KubeEvent
from engine.runtime.state import LogEntry
from tui.format import unix_time

_SYMBOL = {"started": "⟳", "succeeded": "✔", "failed": "✖", "info": "•"}
WARNING_STYLE = "bold red"
WHAT = 18  # the action / reason column: Kubernetes' reasons run to 17 (ScalingReplicaSet); longer ones are cut
KIND = 10  # the outcome / type column
_INDENT = " " * 21  # under the time


def _column(text: str, width: int) -> str:
    return f"{text[:width - 1]}…" if len(text) > width else text.ljust(width)


def event_lines(event: LogEntry) -> list[Text]:
    """One line for the event (a multi-line message continues under it), then helm's output tail indented."""
    symbol = _SYMBOL.get(event.outcome, "•")
    first, *more = event.message.splitlines() or [""]
    head = Text(f"{unix_time(event.at)}  {symbol} {_column(event.action, WHAT)} {_column(event.outcome, KIND)} "
                f"{first}")
    return [head, *(Text(f"{_INDENT}  {line}") for line in more), *(Text(f"{_INDENT}│ {line}") for line in event.tail)]


def kube_event_line(event: KubeEvent) -> Text:
    """``time  ⚠ Reason  Warning  Kind/name: message (×count)`` (reason and type where a reconcile event has
    its action and outcome); a Warning in bold red."""
    symbol = "⚠" if event.warning else "☸"
    count = f" (×{event.count})" if event.count > 1 else ""
    line = Text(f"{unix_time(event.at)}  {symbol} {_column(event.reason, WHAT)} {_column(event.type, KIND)} "
                f"{event.ref}: {event.message}{count}")
    if event.warning:
        line.stylize(WARNING_STYLE)
    return line


class EventLog(RichLog):
    """Oldest first; :meth:`append` adds a reconcile event as it is logged, :meth:`set_kube` replaces the
    Kubernetes Events shown (both kinds are drawn merged by time)."""

    def __init__(self, *, id: str | None = None):
        super().__init__(id=id, wrap=True, markup=False, highlight=False, auto_scroll=True)
        self._reconcile: list[LogEntry] = []
        self._kube: list[KubeEvent] = []

    @property
    def logged(self) -> int:
        return len(self._reconcile)

    @property
    def warnings(self) -> int:
        """Kubernetes Warning events shown."""
        return sum(e.warning for e in self._kube)

    def show(self, events: list[LogEntry]) -> None:
        """Replace the reconcile events with ``events``."""
        self._reconcile = list(events)
        self._redraw()

    def append(self, event: LogEntry) -> None:
        self._reconcile.append(event)
        if self._kube and event.at < self._kube[-1].at:
            self._redraw()
            return
        if len(self._reconcile) == 1 and not self._kube:
            self.clear()  # drop the "no events yet" line
        for line in event_lines(event):
            self.write(line)

    def set_kube(self, events: list[KubeEvent]) -> None:
        """Show these Kubernetes Events (oldest first) with the reconcile events."""
        if events == self._kube:
            return
        self._kube = list(events)
        self._redraw()

    def _redraw(self) -> None:
        self.clear()
        if not self._reconcile and not self._kube:
            self.write(Text("No events yet: actions on this release and Kubernetes Events of its objects "
                            "appear here as they happen."))
            return
        merged: list[tuple[float, int, list[Text]]] = [(e.at, 0, event_lines(e)) for e in self._reconcile]
        merged += [(e.at, 1, [kube_event_line(e)]) for e in self._kube]
        merged.sort(key=lambda item: (item[0], item[1]))
        for _at, _kind, lines in merged:
            for line in lines:
                self.write(line)
