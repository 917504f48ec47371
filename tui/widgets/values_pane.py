"""The detail screen's Values tab: user-supplied or computed values of one revision, secrets masked."""

from __future__ import annotations

from textual.reactive import reactive

from tui.widgets.revision_pane import RevisionPane


class ValuesPane(RevisionPane):
    """Reloads whenever :attr:`revision`, :attr:`computed` or :attr:`reveal` changes."""

    computed: reactive[bool] = reactive(False, init=False)

    def watch_computed(self) -> None:
        self.reload()

    def status_line(self) -> str:
        if self.revision is None:
            return "no stored revision"
        kind = "computed values (chart defaults + user values) · a: user values only" if self.computed \
            else "user-supplied values · a: computed values"
        return f"revision {self.revision} · {kind} · {self.secrets_note()}"

    async def body(self) -> str:
        if self.revision is None:
            return ""
        return await self._client.values_text(self._key, self.revision, computed=self.computed, reveal=self.reveal)

    def failure(self) -> str:
        return f"Could not load the values of revision {self.revision}"
