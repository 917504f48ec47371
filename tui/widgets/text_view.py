"""A scrollable, read-only block of text (values, manifests, diffs), and how a diff is coloured in it."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static


class TextView(VerticalScroll):
    """Shows plain text (never parsed as markup) or styled text; scrolls with the keyboard."""

    def compose(self) -> ComposeResult:
        yield Static(classes="text-body", markup=False)

    def show(self, text: str | Text | Content) -> None:
        """Replace the text and scroll back to the top."""
        self.query_one(".text-body", Static).update(text)
        self.scroll_home(animate=False)


def styled_diff(diff: str) -> Content:
    """A unified diff with added, removed and hunk lines in theme colours (``+``/``-`` keep it readable without)."""
    parts: list[str | tuple[str, str]] = []
    for line in diff.splitlines(keepends=True):
        if line.startswith(("+++", "---")):
            parts.append((line, "bold"))
        elif line.startswith("+"):
            parts.append((line, "$text-success"))
        elif line.startswith("-"):
            parts.append((line, "$text-error"))
        elif line.startswith("@@"):
            parts.append((line, "$text-accent"))
        else:
            parts.append(line)
    return Content.assemble(*parts)
