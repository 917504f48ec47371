"""The controller view (``P``), like k9s' pulses: live sparklines of each ``helmdeck controller`` replica.

Per replica: reconciles per minute that succeeded and that failed, the queue depth, and the p50 and p99 of
its helm actions' durations, one value per reading of its metrics endpoint (every :data:`EVERY` seconds,
:mod:`engine.runtime.cockpit.pulses`). A rising failure rate turns its line and the replica's name to the error
colour. Above them: the controllers holding the cluster's Leases (holder, shard, Lease, last heartbeat).
"""

from __future__ import annotations

from collections.abc import Callable

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.reactive import reactive
from textual.widgets import Label, Static

from engine.runtime.state import ControllerChanged, Pulse
from tui import format as fmt
from tui.engine_client import EngineClient
from tui.messages import EngineSignals
from tui.screens.base import EngineScreen
from tui.widgets.key_footer import KeyFooter
from tui.widgets.pulse_row import PulseRow

EVERY = 5.0  # seconds between two readings of the metrics
NONE_KNOWN = ("No controller metrics known. A helmdeck controller running on this machine is found through its "
              "Lease; one in a pod: kubectl port-forward its metrics Service, then start the app with "
              "--controller-metrics http://127.0.0.1:PORT/metrics (repeatable, one per replica).")


class PulsesScreen(EngineScreen):
    """Every known controller replica's pulses, read anew every :data:`EVERY` seconds."""

    BINDINGS = [Binding("escape,P", "app.pop_screen", "Back")]
    pulses: reactive[tuple[Pulse, ...] | None] = reactive(None, recompose=True)

    def __init__(self, client: EngineClient, signals: EngineSignals, clock: Callable[[], float]):
        super().__init__(client, signals, clock)

    def compose(self) -> ComposeResult:
        yield Static(self._controllers_text(), id="pulses-controllers")
        with VerticalScroll(id="pulses"):
            if self.pulses is None:
                yield Label("reading the controllers' metrics …")
            elif not self.pulses:
                yield Label(NONE_KNOWN, id="pulses-none")
            for pulse in self.pulses or ():
                alarm = pulse.failing_more
                title = Content.assemble((pulse.replica, "bold"), f"  {pulse.url}",
                                         ("  ▲ failures rising" if alarm else "", "bold $text-error"))
                yield Label(title, classes="pulse-replica -alarm" if alarm else "pulse-replica")
                if pulse.problem:
                    yield Label(pulse.problem, classes="pulse-problem")
                yield PulseRow("reconciles/min ✔ succeeded", pulse.succeeded, "/min")
                yield PulseRow("reconciles/min ✖ failed", pulse.failed, "/min", failures=True, alarm=alarm)
                yield PulseRow("queue depth", pulse.queue, "")
                yield PulseRow("helm actions p50", pulse.p50, "s")
                yield PulseRow("helm actions p99", pulse.p99, "s")
        yield KeyFooter()

    def on_mount(self) -> None:
        self._signals.controller.subscribe(self, self._controller_changed, immediate=True)
        self.sample()
        self.set_interval(EVERY, self.sample)

    def _controllers_text(self) -> Content:
        found, problem = self._client.controllers(), self._client.controllers_problem()
        said: tuple[str, str] = (f"\n⚠ {problem}", "$text-error") if problem else ("", "")
        if not found:
            return Content.assemble(("Controller view", "bold $text-primary"), "   no helmdeck controller holds a "
                                    "Lease of this cluster now", said)
        now = self._clock()
        parts: list[str | tuple[str, str]] = [("Controller view", "bold $text-primary")]
        for c in found:
            parts += ["\n", ("● ", "$text-success"), (c.holder, "bold"), f"   shard {c.shard}" if c.shard else "",
                      f"   Lease {c.lease}   last heartbeat ",
                      f"{fmt.duration(max(0.0, now - c.renewed))} ago   namespaces {', '.join(c.namespaces) or 'all'}"]
        return Content.assemble(*parts, said)

    def _controller_changed(self, _event: ControllerChanged) -> None:
        self.query_one("#pulses-controllers", Static).update(self._controllers_text())

    @work(exclusive=True, group="pulses", exit_on_error=False)
    async def sample(self) -> None:
        """Read every replica's metrics once more; the view is made again from the new series."""
        self.pulses = await self._client.pulses()
