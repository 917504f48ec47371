"""The helmdeck app: live Helm releases with keys to upgrade and roll back."""

from __future__ import annotations

from pathlib import Path

from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Footer, Header

from engine.kube import KubeConfigError
from engine.runtime import Engine, EngineEvent, PackageProblems, ReleaseRemoved, ReleaseUpdated
from engine.runtime.engine import ActionRefused
from engine.runtime.state import ActionOutcome, ReleaseKey
from tui.screens.confirm import ConfirmScreen
from tui.widgets.release_table import ReleaseTable


class EngineMessage(Message):
    """An engine event, carried into Textual's message queue."""

    def __init__(self, event: EngineEvent):
        super().__init__()
        self.event = event


class HelmdeckApp(App[None]):
    """Shows every release the engine knows; ``u`` upgrades, ``r`` rolls back."""

    CSS_PATH = "app.tcss"
    TITLE = "helmdeck"
    BINDINGS = [
        Binding("u", "upgrade", "Upgrade"),
        Binding("r", "rollback", "Roll back"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, engine: Engine, *, context: str = "", start_engine: bool = True):
        super().__init__()
        self.engine = engine
        self.context = context
        self._start_engine = start_engine
        self._unsubscribe = engine.subscribe(self._on_engine_event)

    def compose(self) -> ComposeResult:
        yield Header()
        yield ReleaseTable(id="releases")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = self.context
        table = self.query_one(ReleaseTable)
        for view in self.engine.releases():
            table.upsert(view)
        table.focus()
        if self._start_engine:
            self.start_engine()

    @work(exclusive=True, group="engine")
    async def start_engine(self) -> None:
        try:
            await self.engine.start()
        except KubeConfigError as exc:
            self.notify(str(exc), title="Cannot reach the cluster", severity="error", timeout=30)

    async def on_unmount(self) -> None:
        self._unsubscribe()
        if self._start_engine:
            await self.engine.stop()

    # -- engine events -------------------------------------------------------
    def _on_engine_event(self, event: EngineEvent) -> None:
        self.post_message(EngineMessage(event))

    def on_engine_message(self, message: EngineMessage) -> None:
        event = message.event
        table = self.query_one(ReleaseTable)
        if isinstance(event, ReleaseUpdated):
            table.upsert(event.view)
        elif isinstance(event, ReleaseRemoved):
            table.remove_release(event.key)
        elif isinstance(event, PackageProblems):
            for err in event.errors:
                self.notify(str(err), title="Package file error", severity="error", timeout=20)

    # -- actions -------------------------------------------------------------
    def _selected(self) -> ReleaseKey | None:
        key = self.query_one(ReleaseTable).selected_key()
        if key is None:
            self.notify("No release selected", severity="warning")
        return key

    def action_upgrade(self) -> None:
        key = self._selected()
        if key is None:
            return
        if key not in self.engine.packages:
            self.notify(f"No package declares {key[0]}/{key[1]}: nothing to upgrade it to "
                        f"(add a package file for it)", severity="warning")
            return
        self.run_upgrade(key)

    @work(group="actions")
    async def run_upgrade(self, key: ReleaseKey) -> None:
        self.notify(f"Upgrading {key[0]}/{key[1]} …")
        try:
            outcome = await self.engine.reconcile(key, force=True)
        except ActionRefused as exc:
            self.notify(str(exc), severity="warning")
            return
        if outcome is not None:
            self._report(key, outcome)

    def action_rollback(self) -> None:
        key = self._selected()
        if key is None:
            return
        state = self.engine.release(key)
        obs = state.observation if state else None
        if obs is None or obs.version < 2:
            self.notify(f"{key[0]}/{key[1]} has no earlier revision to roll back to", severity="warning")
            return
        target = obs.version - 1
        body = (f"Roll back release {key[1]} in namespace {key[0]}\n"
                f"from revision {obs.version} ({obs.status}) to revision {target}.\n\n"
                "Helm writes a new revision with the old chart and values.")
        if state is not None and state.package is not None:
            body += "\nThe package is then suspended so helmdeck does not undo the rollback."

        def confirmed(ok: bool | None) -> None:
            if ok:
                self.run_rollback(key, target)

        self.push_screen(ConfirmScreen("Roll back?", body, "Roll back"), confirmed)

    @work(group="actions")
    async def run_rollback(self, key: ReleaseKey, revision: int) -> None:
        self.notify(f"Rolling back {key[0]}/{key[1]} to revision {revision} …")
        try:
            outcome = await self.engine.rollback(key, revision)
        except ActionRefused as exc:
            self.notify(str(exc), severity="warning")
            return
        self._report(key, outcome)

    def _report(self, key: ReleaseKey, outcome: ActionOutcome) -> None:
        title = f"{outcome.action} {key[0]}/{key[1]}"
        if outcome.ok:
            self.notify(outcome.message, title=title)
        else:
            detail = "\n".join(outcome.tail[-4:])
            self.notify(f"{outcome.message}\n{detail}".strip(), title=title, severity="error", timeout=20)


def default_packages_dir() -> Path:
    """The examples/packages folder of a source checkout."""
    return Path(__file__).resolve().parent.parent / "examples" / "packages"
