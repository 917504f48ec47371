"""A scrollable, read-only block of text (values, manifests, diffs), and how a diff is coloured in it."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Log, Static

# Above this many lines the text goes to a Log, which draws only the lines in sight: a Static lays out every
# line (132,000 lines of values took ~16 s with the app unresponsive; a TextArea's wrap bookkeeping took seconds
# per page). Such a text is shown plain.
LARGE_LINES = 5_000


class TextView(VerticalScroll):
    """Shows plain text (never parsed as markup) or styled text; scrolls with the keyboard."""

    DEFAULT_CSS = """
    TextView > Log { height: 1fr; border: none; padding: 0; display: none; }
    """

    def compose(self) -> ComposeResult:
        yield Static(classes="text-body", markup=False)
        yield Log(highlight=False, auto_scroll=False, classes="text-large")

    def show(self, text: str | Text | Content) -> None:
        """Replace the text and scroll back to the top."""
        body = self.query_one(".text-body", Static)
        large = self.query_one(".text-large", Log)
        plain = text if isinstance(text, str) else text.plain
        big = plain.count("\n") >= LARGE_LINES
        had_focus = self.has_focus or large.has_focus
        body.update("" if big else text)
        large.clear()
        if big:
            large.write_lines(plain.splitlines())  # one refresh for all; write() refreshes per line
            large.scroll_home(animate=False)
        body.display, large.display = not big, big
        self.scroll_home(animate=False)
        if had_focus:
            self.focus()

    def focus(self, scroll_visible: bool = True) -> TextView:
        """Focus the view, or its Log when it shows a large text (its keys scroll it)."""
        large = self.query(".text-large")
        if large and large.first().display:
            large.first().focus(scroll_visible)
        else:
            super().focus(scroll_visible)
        return self


def fold_diff(diff: str, width: int) -> str:
    """``diff`` with every line longer than ``width`` cut into lines of ``width``, each continuation starting
    with its line's ``+``/``-``/`` `` marker, so a wrapped added line still reads as added (and is coloured
    so by :func:`styled_diff`). ``width`` below 2 leaves ``diff`` as it is."""
    if width < 2:
        return diff
    out: list[str] = []
    for line in diff.splitlines():
        if len(line) <= width:
            out.append(line)
            continue
        header = line.startswith(("+++", "---", "@@"))
        marker = " " if header or line[:1] not in ("+", "-", " ") else line[0]
        out.append(line[:width])
        rest = line[width:]
        while rest:
            out.append(marker + rest[:width - 1])
            rest = rest[width - 1:]
    return "\n".join(out) + ("\n" if diff.endswith("\n") else "")


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
