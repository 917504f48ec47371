"""The detail screen's Manifest tab: what Helm stored for one revision, Secret data masked."""

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


class ManifestPane(Vertical):
    """Reloads whenever :attr:`revision` or :attr:`reveal` changes."""

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

    @work(exclusive=True, group="manifest")
    async def reload(self) -> None:
        """Load and show the manifest (a worker: the UI stays live meanwhile)."""
        status = self.query_one(".pane-status", Label)
        view = self.query_one(TextView)
        if self.revision is None:
            status.update("no stored revision")
            view.show("")
            return
        secrets = "Secret data REVEALED · x: mask" if self.reveal else "Secret data masked · x: reveal"
        status.update(f"revision {self.revision} · {secrets}")
        try:
            manifest = await self._client.manifest(self._key, self.revision)
        except Exception as exc:  # any failure is shown in place; the app goes on
            view.show(f"Could not load the manifest of revision {self.revision}: {exc}")
            return
        view.show((manifest if self.reveal else self._masker.mask_manifest(manifest)) or "(empty manifest)")
