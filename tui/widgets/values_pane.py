"""The detail screen's Values tab: user-supplied or computed values of one revision, secrets masked."""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Label

from engine.masking import Masker
from engine.runtime.state import ReleaseKey
from tui.engine_client import EngineClient
from tui.widgets.text_view import TextView


class ValuesPane(Vertical):
    """Reloads whenever :attr:`revision`, :attr:`computed` or :attr:`reveal` changes."""

    revision: reactive[int | None] = reactive(None, init=False)
    computed: reactive[bool] = reactive(False, init=False)
    reveal: reactive[bool] = reactive(False, init=False)

    def __init__(self, client: EngineClient, key: ReleaseKey, masker: Masker, *, id: str | None = None):
        super().__init__(id=id)
        self._client = client
        self._key = key
        self._masker = masker

    def compose(self) -> ComposeResult:
        yield Label(classes="pane-status")
        yield TextView()

    def watch_revision(self) -> None:
        self.reload()

    def watch_computed(self) -> None:
        self.reload()

    def watch_reveal(self) -> None:
        self.reload()

    def status_line(self) -> str:
        kind = "computed values (chart defaults + user values) · a: user values only" if self.computed \
            else "user-supplied values · a: computed values"
        secrets = "secrets REVEALED · x: mask" if self.reveal else "secrets masked · x: reveal"
        return f"revision {self.revision} · {kind} · {secrets}"

    @work(exclusive=True, group="values")
    async def reload(self) -> None:
        """Load and show the values (a worker: the UI stays live meanwhile)."""
        status = self.query_one(".pane-status", Label)
        view = self.query_one(TextView)
        if self.revision is None:
            status.update("no stored revision")
            view.show("")
            return
        status.update(self.status_line())
        try:
            values = await self._client.values(self._key, self.revision, computed=self.computed)
        except Exception as exc:  # any failure is shown in place; the app goes on
            view.show(f"Could not load the values of revision {self.revision}: {exc}")
            return
        view.show(self._masker.values_yaml(values, reveal=self.reveal))
