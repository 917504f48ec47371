"""The detail screen's Manifest tab: what Helm stored for one revision, secrets masked (engine.masking)."""

from __future__ import annotations

from textual import work
from textual.widgets import Label

from tui.widgets.revision_pane import RevisionPane
from tui.widgets.text_view import TextView


class ManifestPane(RevisionPane):
    """Reloads whenever :attr:`revision` or :attr:`reveal` changes."""

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
