"""The detail screen's Manifest tab: what Helm stored for one revision, secrets masked (engine.base.masking)."""

from __future__ import annotations

from tui.widgets.revision_pane import RevisionPane


class ManifestPane(RevisionPane):
    """Reloads whenever :attr:`revision` or :attr:`reveal` changes."""

    def status_line(self) -> str:
        if self.revision is None:
            return "no stored revision"
        secrets = "Secret data REVEALED · x: mask" if self.reveal else "Secret data masked · x: reveal"
        return f"revision {self.revision} · {secrets}"

    async def body(self) -> str:
        if self.revision is None:
            return ""
        return await self._client.manifest_text(self._key, self.revision, reveal=self.reveal) or "(empty manifest)"

    def failure(self) -> str:
        return f"Could not load the manifest of revision {self.revision}"
