"""The drill-down of one object of a release (``enter`` in the Resources tab): as kubectl get -o yaml,
describe's events and, for workloads, its pods and their container logs."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Label, Static

from engine.monitor.events import KubeEvent
from engine.monitor.inspect import LOG_LINES, PodRow
from tui.engine_client import EngineClient, ObjectRef
from tui.messages import EngineSignals
from tui.screens.base import EngineScreen
from tui.widgets.event_log import kube_event_line
from tui.widgets.key_footer import KeyFooter
from tui.widgets.text_view import TextView

LOG_PODS = 2  # pods whose logs are shown (the first, by name)


def _section(title: str) -> Text:
    return Text(f"\n── {title} ──\n", style="bold")


def drill_text(ref: ObjectRef, yaml_text: str, pods: list[PodRow] | None, events: list[KubeEvent],
               logs: dict[str, str]) -> Text:
    """The drill-down's body: pods (workloads), events, logs, then the live YAML."""
    out = Text()
    if pods is not None:
        out.append(_section(f"Pods ({len(pods)})"))
        for pod in pods:
            out.append(f"{pod.name:<48} {pod.phase:<10} {' · '.join(pod.conditions) or '-'}\n")
        if not pods:
            out.append("no pods match its selector\n")
    out.append(_section(f"Events ({len(events)})"))
    for event in events:
        out.append(kube_event_line(event))
        out.append("\n")
    if not events:
        out.append("no recent events of this object or what it owns\n")
    for title, text in logs.items():
        out.append(_section(f"Logs {title} (last {LOG_LINES} lines)"))
        out.append((text if text.endswith("\n") else text + "\n") if text else "(no log lines)\n")
    out.append(_section(f"YAML ({ref[0]} {ref[1]}, managedFields hidden)"))
    out.append(yaml_text)
    return out


class ResourceScreen(EngineScreen):
    """One live object; ``r`` reads it again, ``x`` reveals or masks secrets."""

    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("r", "reload", "Refresh"),
        Binding("x", "reveal", "Secrets"),
    ]

    def __init__(self, client: EngineClient, signals: EngineSignals, clock: Callable[[], float], ref: ObjectRef):
        super().__init__(client, signals, clock)
        self.ref = ref
        self.reveal = False

    def compose(self) -> ComposeResult:
        _api_version, kind, namespace, name = self.ref
        yield Static(Text(f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}", style="bold"),
                     id="resource-title")
        yield Label(classes="pane-status")
        yield TextView()
        yield KeyFooter()

    def on_mount(self) -> None:
        self.action_reload()

    def action_reveal(self) -> None:
        self.reveal = not self.reveal
        self.action_reload()

    def action_reload(self) -> None:
        secrets = "secrets REVEALED · x: mask" if self.reveal else "secrets masked · x: reveal"
        self.query_one(".pane-status", Label).update(f"reading the live object… · r: refresh · {secrets}")
        self._load()

    @work(exclusive=True, group="resource")
    async def _load(self) -> None:
        _api_version, kind, namespace, name = self.ref
        status = self.query_one(".pane-status", Label)
        view = self.query_one(TextView)
        try:
            yaml_text, pods = await self._client.live_object(self.ref, reveal=self.reveal)
        except Exception as exc:  # shown in place: absent, offline, refused
            status.update("cannot read the live object")
            view.show(f"Could not read {kind}/{name}: {exc}")
            return
        events = self._client.kube_events(namespace, [(kind, namespace, name)])
        logs: dict[str, str] = {}
        for pod in (pods or [])[:LOG_PODS]:
            for container in pod.containers:
                try:
                    logs[f"{pod.name}/{container}"] = await self._client.logs(namespace, pod.name, container)
                except Exception as exc:  # kwok serves logs only with a ClusterLogs configuration
                    logs[f"{pod.name}/{container}"] = f"{exc}\n"
        secrets = "secrets REVEALED · x: mask" if self.reveal else "secrets masked · x: reveal"
        status.update(f"live · r: refresh · {secrets}")
        view.show(drill_text(self.ref, yaml_text, pods, events, logs))
