"""What the detail tabs that show one stored revision share: status line, text view, reload on change."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Label

from engine.masking import Masker
from engine.runtime.state import ReleaseKey
from tui.engine_client import EngineClient
from tui.widgets.text_view import TextView


class RevisionPane(Vertical):
    """Base of the Manifest and Values panes: :meth:`reload` runs whenever
    :attr:`revision` or :attr:`reveal` changes (subclasses add their own triggers)."""

    revision: reactive[int | None] = reactive(None, init=False)
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

    def watch_reveal(self) -> None:
        self.reload()

    def reload(self) -> object:
        """Show the current revision (subclasses run this as a worker)."""
        raise NotImplementedError
