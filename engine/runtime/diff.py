"""Diffs the operator reads: what an upgrade would change, and what changed between two revisions.

The one place diffs are made, and where their secrets are masked: what
changed is decided on the manifests as they are (the one comparison,
:mod:`engine.monitor.comparison`); with a :class:`~engine.base.masking.Masker`
only what is shown is masked (engine.base.masking's rule), so a changed secret
still shows as a changed object but its value never does; both sides are masked
together (``Masker.mask_pair``), so an object's layout never shows as changed.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

from engine.base.masking import Masker
from engine.monitor import comparison


def unified(before: str, after: str, before_name: str, after_name: str, context: int = 3) -> str:
    """A unified diff of two texts, every line ending in a newline; ``""`` when they are equal."""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True),
        fromfile=before_name, tofile=after_name, n=context,
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def manifest_diff(
    deployed: str, desired: str, deployed_label: str = "deployed", masker: Masker | None = None,
    values: Sequence[Any] = (),
) -> str:
    """Unified diff from ``deployed`` to ``desired``, one hunk group per changed object; "" if equal.

    What changed is decided by the one comparison (:mod:`engine.monitor.comparison`: objects by kind,
    namespace and name as ``helm diff`` matches them, hooks by kind and template, a hook's generated
    name not compared), so an empty diff is exactly a plan and a smart upgrade that change nothing.
    With ``masker`` the secrets in both are masked in what is shown (``values``: the values trees
    both sides were rendered from, whose secrets are masked wherever they appear).
    """
    old, new = comparison.normalised(deployed), comparison.normalised(desired)
    shown_old, shown_new = old, new
    if masker is not None:
        masked = masker.mask_pair(deployed, desired, list(values))
        shown_old, shown_new = comparison.normalised(masked[0]), comparison.normalised(masked[1])
    chunks: list[str] = []
    for ref in sorted(set(old) | set(new)):
        if old.get(ref, "") == new.get(ref, ""):
            continue
        a, b = shown_old.get(ref, ""), shown_new.get(ref, "")
        lines = list(difflib.unified_diff(
            a.splitlines(keepends=True), b.splitlines(keepends=True),
            fromfile=f"{ref} ({deployed_label})" if a else "/dev/null",
            tofile=f"{ref} (desired)" if b else "/dev/null",
        ))
        # A changed secret may mask to the same text: still say the object changes.
        chunks.extend(lines or [f"--- {ref} ({deployed_label})\n", f"+++ {ref} (desired)\n",
                                "@@ secret values changed (masked) @@\n"])
    return "".join(chunks)


def revision_diff(
    before: tuple[int, str, dict[str, Any]], after: tuple[int, str, dict[str, Any]], masker: Masker,
    *, reveal: bool = False, secret_paths: Sequence[Sequence[str | int]] = (),
) -> str:
    """Manifest and user-values diff between two stored revisions, each ``(revision, manifest, values)``;
    "" when both are equal. Secrets masked unless ``reveal`` (``secret_paths``: values from Secrets)."""
    (a, a_manifest, a_values), (b, b_manifest, b_values) = before, after
    if not reveal:
        a_manifest, b_manifest = masker.mask_pair(a_manifest, b_manifest, [a_values, b_values])
    return (unified(a_manifest, b_manifest, f"manifest (revision {a})", f"manifest (revision {b})")
            + unified(masker.values_yaml(a_values, reveal=reveal, secret_paths=secret_paths),
                      masker.values_yaml(b_values, reveal=reveal, secret_paths=secret_paths),
                      f"values (revision {a})", f"values (revision {b})"))
