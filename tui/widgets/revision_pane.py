"""What the detail tabs that show stored revisions share: status line, text view, reload on change."""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.reactive import reactive
from textual.widgets import Label

from engine.runtime.state import ReleaseKey
from tui.engine_client import EngineClient
from tui.widgets.text_view import TextView


class RevisionPane(Vertical):
    """Base of the Manifest, Values and Diff panes: whenever :attr:`revision` or :attr:`reveal`
    changes (subclasses add their own triggers), :meth:`reload` shows :meth:`status_line` at once,
    then :meth:`body` once loaded (a worker: the UI stays live meanwhile); a failure is shown in place."""

    revision: reactive[int | None] = reactive(None, init=False)
    reveal: reactive[bool] = reactive(False, init=False)

    def __init__(self, client: EngineClient, key: ReleaseKey, *, id: str | None = None):
        super().__init__(id=id)
        self._client = client
        self._key = key

    def compose(self) -> ComposeResult:
        yield Label(classes="pane-status")
        yield TextView()

    def watch_revision(self) -> None:
        self.reload()

    def watch_reveal(self) -> None:
        self.reload()

    def secrets_note(self) -> str:
        return "secrets REVEALED · x: mask" if self.reveal else "secrets masked · x: reveal"

    def status_line(self) -> str:
        """What the pane shows, said before it is loaded."""
        raise NotImplementedError

    async def body(self) -> str | Content:
        """The text to show ("" for nothing); may raise: :meth:`failure` then says what could not be done."""
        raise NotImplementedError

    def failure(self) -> str:
        raise NotImplementedError

    @work(exclusive=True, group="revision-pane")
    async def reload(self) -> None:
        self.query_one(".pane-status", Label).update(self.status_line())
        view = self.query_one(TextView)
        try:
            view.show(await self.body())
        except Exception as exc:  # any failure is shown in place; the app goes on
            view.show(f"{self.failure()}: {exc}")
