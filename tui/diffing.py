"""Unified diffs between two texts (manifests, values), for the Diff tab and the upgrade preview."""

from __future__ import annotations

import difflib

from textual.content import Content


def unified(before: str, after: str, before_name: str, after_name: str, context: int = 3) -> str:
    """A unified diff of two texts; ``""`` when they are equal."""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True),
        fromfile=before_name, tofile=after_name, n=context,
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def styled(diff: str) -> Content:
    """``diff`` with added, removed and hunk lines in theme colours (``+``/``-`` keep it readable without)."""
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
