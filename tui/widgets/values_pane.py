"""The detail screen's Values tab: user-supplied or computed values of one revision, secrets masked."""

from __future__ import annotations

from textual import work
from textual.reactive import reactive
from textual.widgets import Label

from tui.widgets.revision_pane import RevisionPane
from tui.widgets.text_view import TextView


class ValuesPane(RevisionPane):
    """Reloads whenever :attr:`revision`, :attr:`computed` or :attr:`reveal` changes."""

    computed: reactive[bool] = reactive(False, init=False)

    def watch_computed(self) -> None:
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
