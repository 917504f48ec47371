"""The detail screen's Diff tab: any two revisions, or desired vs deployed (what an upgrade would change)."""

from __future__ import annotations

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.reactive import reactive
from textual.widgets import Label, Select

from engine.masking import Masker
from engine.runtime.state import ReleaseKey
from engine.storage.observation import Observation
from tui.diffing import styled, unified
from tui.engine_client import EngineClient
from tui.widgets.text_view import TextView

DESIRED = -1  # the "to" choice meaning: what an upgrade would deploy now


class DiffPane(Vertical):
    """Two revision choosers and the unified diff of their manifests and values."""

    reveal: reactive[bool] = reactive(False, init=False)

    def __init__(self, client: EngineClient, key: ReleaseKey, masker: Masker, *, id: str | None = None):
        super().__init__(id=id)
        self._client = client
        self._key = key
        self._masker = masker
        self._revisions: list[int] = []

    def compose(self) -> ComposeResult:
        with Horizontal(classes="diff-choosers"):
            yield Label("from ", classes="chooser-label")
            yield Select[int]([], allow_blank=True, prompt="revision", id="diff-from")
            yield Label(" to ", classes="chooser-label")
            yield Select[int]([], allow_blank=True, prompt="revision", id="diff-to")
        yield Label(classes="pane-status")
        yield TextView()

    def show_history(self, history: list[Observation]) -> None:
        """Offer the stored revisions (and "desired"); default: previous → latest."""
        revisions = [o.version for o in history]
        if revisions == self._revisions:
            return
        self._revisions = revisions
        labels = [(f"{o.version} ({o.status})", o.version) for o in history]
        reason = self._client.reason("diff")
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

    def watch_reveal(self) -> None:
        self.reload()

    @work(exclusive=True, group="diff")
    async def reload(self) -> None:
        """Compute and show the chosen diff (a worker: the UI stays live meanwhile)."""
        status = self.query_one(".pane-status", Label)
        view = self.query_one(TextView)
        before = self.query_one("#diff-from", Select).value
        after = self.query_one("#diff-to", Select).value
        secrets = "secrets REVEALED · x: mask" if self.reveal else "secrets masked · x: reveal"
        if after == DESIRED:
            await self._show_desired(status, view, secrets)
            return
        if not isinstance(before, int) or not isinstance(after, int):
            status.update("choose two revisions")
            view.show("")
            return
        status.update(f"revision {before} → revision {after} · manifests and user values · {secrets}")
        try:
            text = await self._revision_diff(before, after)
        except Exception as exc:  # any failure is shown in place; the app goes on
            view.show(f"Could not compare revisions {before} and {after}: {exc}")
            return
        view.show(styled(text) if text else Content(f"Revisions {before} and {after} have the same manifest "
                                                    "and values."))

    async def _revision_diff(self, before: int, after: int) -> str:
        mask = not self.reveal
        texts: list[str] = []
        for rev in (before, after):
            manifest = await self._client.manifest(self._key, rev)
            texts.append(self._masker.mask_manifest(manifest) if mask else manifest)
        values = [self._masker.values_yaml(await self._client.values(self._key, rev, computed=False),
                                           reveal=self.reveal) for rev in (before, after)]
        return (unified(texts[0], texts[1], f"manifest (revision {before})", f"manifest (revision {after})")
                + unified(values[0], values[1], f"values (revision {before})", f"values (revision {after})"))

    async def _show_desired(self, status: Label, view: TextView, secrets: str) -> None:
        reason = self._client.reason("diff")
        if reason is not None:
            status.update("desired vs deployed: unavailable")
            view.show(f"What an upgrade would change cannot be shown: {reason}.\n"
                      "Compare two stored revisions meanwhile.")
            return
        status.update(f"deployed → desired (what an upgrade would change now) · {secrets}")
        try:
            text = await self._client.desired_diff(self._key, reveal=self.reveal)
        except Exception as exc:  # any failure is shown in place; the app goes on
            view.show(f"Could not compute the upgrade diff: {exc}")
            return
        view.show(styled(text) if text else Content("An upgrade now would change nothing."))
