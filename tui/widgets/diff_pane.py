"""The detail screen's Diff tab: any two revisions, or desired vs deployed (what an upgrade would change)."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.content import Content
from textual.widgets import Label, Select

from engine.runtime.state import ReleaseKey
from engine.storage.observation import Observation
from tui.engine_client import EngineClient
from tui.widgets.revision_pane import RevisionPane
from tui.widgets.text_view import styled_diff

DESIRED = -1  # the "to" choice meaning: what an upgrade would deploy now


class DiffPane(RevisionPane):
    """Two revision choosers and the unified diff of their manifests and values."""

    def __init__(self, client: EngineClient, key: ReleaseKey, *, id: str | None = None):
        super().__init__(client, key, id=id)
        self._revisions: list[int] = []

    def compose(self) -> ComposeResult:
        with Horizontal(classes="diff-choosers"):
            yield Label("from ", classes="chooser-label")
            yield Select[int]([], allow_blank=True, prompt="revision", id="diff-from")
            yield Label(" to ", classes="chooser-label")
            yield Select[int]([], allow_blank=True, prompt="revision", id="diff-to")
        yield from super().compose()

    def show_history(self, history: list[Observation]) -> None:
        """Offer the stored revisions (and "desired"); default: previous → latest."""
        revisions = [o.version for o in history]
        if revisions == self._revisions:
            return
        self._revisions = revisions
        labels = [(f"{o.version} ({o.status})", o.version) for o in history]
        reason = self._client.why_not("diff", self._key)
        desired_label = "desired (upgrade preview)" if reason is None else "desired (unavailable)"
        source = self.query_one("#diff-from", Select)
        target = self.query_one("#diff-to", Select)
        with self.prevent(Select.Changed):
            old_from, old_to = source.value, target.value
            source.set_options(labels)
            target.set_options([*labels, (desired_label, DESIRED)])
            if old_from in revisions:
                source.value = old_from
            elif len(revisions) > 1:
                source.value = revisions[1]
            elif revisions:
                source.value = revisions[0]
            if old_to in revisions or old_to == DESIRED:
                target.value = old_to
            elif revisions:
                target.value = revisions[0]
        self.reload()

    @on(Select.Changed)
    def _chosen(self) -> None:
        self.reload()

    def _chosen_pair(self) -> tuple[object, object]:
        return self.query_one("#diff-from", Select).value, self.query_one("#diff-to", Select).value

    def status_line(self) -> str:
        before, after = self._chosen_pair()
        if after == DESIRED:
            if self._client.why_not("diff", self._key) is not None:
                return "desired vs deployed: unavailable"
            return f"deployed → desired (what an upgrade would change now) · {self.secrets_note()}"
        if not isinstance(before, int) or not isinstance(after, int):
            return "choose two revisions"
        return f"revision {before} → revision {after} · manifests and user values · {self.secrets_note()}"

    async def body(self) -> str | Content:
        before, after = self._chosen_pair()
        if after == DESIRED:
            reason = self._client.why_not("diff", self._key)
            if reason is not None:
                return (f"What an upgrade would change cannot be shown: {reason}.\n"
                        "Compare two stored revisions meanwhile.")
            text = await self._client.desired_diff(self._key, reveal=self.reveal)
            return styled_diff(text) if text else Content("An upgrade now would change nothing.")
        if not isinstance(before, int) or not isinstance(after, int):
            return ""
        text = await self._client.revision_diff(self._key, before, after, reveal=self.reveal)
        return styled_diff(text) if text else Content(f"Revisions {before} and {after} have the same manifest "
                                                      "and values.")

    def failure(self) -> str:
        before, after = self._chosen_pair()
        if after == DESIRED:
            return "Could not compute the upgrade diff"
        return f"Could not compare revisions {before} and {after}"
