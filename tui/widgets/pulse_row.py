"""One line of the controller view: a series' name, its live sparkline and its last value."""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Label, Sparkline


class PulseRow(Horizontal):
    """``title`` (fixed), a sparkline of ``values`` and the last one with ``unit``. ``failures``: a failure series
    (drawn in the error colour, dim); ``alarm`` (set by the screen) makes it bright on a tinted line: a rising
    failure rate stands out without reading a number."""

    def __init__(self, title: str, values: Sequence[float], unit: str, *, failures: bool = False,
                 alarm: bool = False, id: str | None = None):
        super().__init__(id=id, classes=" ".join(c for c, on in (("-failures", failures), ("-alarm", alarm)) if on))
        self._title, self._values, self._unit = title, list(values), unit

    def compose(self) -> ComposeResult:
        yield Label(self._title, classes="pulse-title")
        # Textual draws a single value (and so a first reading of zeros) at full height: before two readings
        # there is no change to show, so the line is flat.
        values = self._values if len(self._values) >= 2 else [self._values[-1] if self._values else 0.0] * 2
        yield Sparkline(values, classes="pulse-line")
        last = f"{self._values[-1]:.1f}" if self._values else "-"
        yield Label(f"{last} {self._unit}".rstrip(), classes="pulse-last")
