"""Diffs the operator reads: what an upgrade would change, and what changed between two revisions.

The one place diffs are made, and where their secrets are masked: with a
:class:`~engine.base.masking.Masker`, secrets are masked (engine.base.masking's rule)
before the comparison, so a changed secret still shows as a changed line
but its value never does.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

import yaml

from engine.base.masking import Masker
from engine.monitor.manifest import load_document, object_of, split_manifest


def unified(before: str, after: str, before_name: str, after_name: str, context: int = 3) -> str:
    """A unified diff of two texts, every line ending in a newline; ``""`` when they are equal."""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True),
        fromfile=before_name, tofile=after_name, n=context,
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _objects(manifest: str, masker: Masker | None = None, values: Any = None) -> dict[str, str]:
    """Documents by ``Kind/namespace/name`` (``Kind/name`` without a namespace), hooks dropped; with
    ``masker``, secrets masked (:meth:`Masker.mask_manifest`, ``values`` the values rendered from).

    Hook objects are left out because Helm stores them apart from the manifest;
    documents that are not YAML objects are left out too (as ``helm diff`` does).
    """
    if masker is not None:
        manifest = masker.mask_manifest(manifest, values)
    out: dict[str, str] = {}
    for text in split_manifest(manifest):
        try:
            doc = load_document(text)
        except yaml.YAMLError:
            continue
        if not isinstance(doc, dict) or "kind" not in doc:
            continue
        meta = doc.get("metadata") or {}
        if "helm.sh/hook" in (meta.get("annotations") or {}):
            continue
        obj = object_of(doc)
        ref = obj.ref if obj is not None else f"{doc['kind']}/{meta.get('name')}"
        body = "\n".join(ln for ln in text.strip("\n").splitlines() if not ln.startswith("# Source:"))
        out[ref] = body + "\n"
    return out


def object_changes(deployed: str, desired: str) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """``(added, changed, removed)`` object references (``Kind/namespace/name``, sorted) from ``deployed``
    to ``desired``, matched as :func:`manifest_diff` matches them (hooks left out)."""
    old, new = _objects(deployed), _objects(desired)
    return (tuple(sorted(set(new) - set(old))), tuple(sorted(r for r in set(old) & set(new) if old[r] != new[r])),
            tuple(sorted(set(old) - set(new))))


def manifest_diff(
    deployed: str, desired: str, deployed_label: str = "deployed", masker: Masker | None = None,
    values: Sequence[Any] = (),
) -> str:
    """Unified diff from ``deployed`` to ``desired``, one hunk group per changed object; "" if equal.

    Objects are matched by kind, namespace and name (``helm diff`` shows the
    same thing). With ``masker`` the secrets in both are masked first (``values``: the values trees
    both sides were rendered from, whose secrets are masked wherever they appear).
    """
    old, new = _objects(deployed, masker, list(values)), _objects(desired, masker, list(values))
    chunks: list[str] = []
    for ref in sorted(set(old) | set(new)):
        a, b = old.get(ref, ""), new.get(ref, "")
        if a == b:
            continue
        chunks.extend(difflib.unified_diff(
            a.splitlines(keepends=True), b.splitlines(keepends=True),
            fromfile=f"{ref} ({deployed_label})" if a else "/dev/null",
            tofile=f"{ref} (desired)" if b else "/dev/null",
        ))
    return "".join(chunks)


def revision_diff(
    before: tuple[int, str, dict[str, Any]], after: tuple[int, str, dict[str, Any]], masker: Masker,
    *, reveal: bool = False, secret_paths: Sequence[Sequence[str | int]] = (),
) -> str:
    """Manifest and user-values diff between two stored revisions, each ``(revision, manifest, values)``;
    "" when both are equal. Secrets masked unless ``reveal`` (``secret_paths``: values from Secrets)."""
    (a, a_manifest, a_values), (b, b_manifest, b_values) = before, after
    if not reveal:
        a_manifest, b_manifest = (masker.mask_manifest(a_manifest, [a_values, b_values]),
                                  masker.mask_manifest(b_manifest, [a_values, b_values]))
    return (unified(a_manifest, b_manifest, f"manifest (revision {a})", f"manifest (revision {b})")
            + unified(masker.values_yaml(a_values, reveal=reveal, secret_paths=secret_paths),
                      masker.values_yaml(b_values, reveal=reveal, secret_paths=secret_paths),
                      f"values (revision {a})", f"values (revision {b})"))
