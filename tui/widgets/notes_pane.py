"""The detail screen's Notes tab: the chart's NOTES of one revision as Helm stored them, secrets masked."""

from __future__ import annotations

from tui.widgets.revision_pane import RevisionPane


class NotesPane(RevisionPane):
    """Reloads whenever :attr:`revision` or :attr:`reveal` changes."""

    def status_line(self) -> str:
        if self.revision is None:
            return "no stored revision"
        return f"revision {self.revision} · NOTES rendered by the chart (info.notes) · {self.secrets_note()}"

    async def body(self) -> str:
        if self.revision is None:
            return ""
        notes = await self._client.notes_text(self._key, self.revision, reveal=self.reveal)
        return notes or "(this revision has no NOTES: the chart has no templates/NOTES.txt)"

    def failure(self) -> str:
        return f"Could not load the notes of revision {self.revision}"
