"""The one comparison of manifests: what ``diff``, ``plan`` and the smart upgrade's checksum compare.

A manifest is compared as Helm records a release: the release's objects (its
``manifest``) and its hooks (its ``hooks``, test hooks included, since ``helm
test`` runs the hooks the deployed revision recorded, so a changed test needs a
new revision to reach it). A render (``helm template``, or a dry run) prints
both; a stored release gives them apart and :func:`recorded_manifest` joins
them the way ``helm template`` prints them.

Normalisation, the same for every caller:

- an object is keyed by ``Kind/namespace/name`` and compared by its text
  without helm's ``# Source:`` comments; documents that are not objects are
  left out (as ``helm diff`` does);
- a hook is keyed by its kind and the template it comes from (the ``path``
  Helm records for each hook; ``#2``, ``#3``... for further hooks of one kind
  from one template) and compared with its ``metadata.name`` left out. Charts
  name hooks anew on each render (podinfo's test Pods end in ``randAlphaNum
  5``): counted by name, every render would differ and a value the chart
  ignores would make a revision. A hook whose name alone changed is
  unchanged; one whose spec changed is changed.

:func:`checksum` digests the normalised manifest, so two renders have equal
checksums exactly when :func:`changes` finds nothing between them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import yaml

from engine.base import wire
from engine.monitor.manifest import load_document, object_of, split_manifest

HOOK_ANNOTATION = "helm.sh/hook"
_SOURCE = "# Source: "
_HOOK_NAME = "(name generated per render: not compared)"


def normalised(manifest: str) -> dict[str, str]:
    """The compared form of ``manifest``: reference -> normalised text (ending in a newline).

    References: ``Kind/namespace/name`` for an object (``Kind/name`` without a
    namespace), ``Kind hook <template path>`` for a hook (see the module
    docstring). Documents that are not YAML objects are left out. Bounded by
    :func:`engine.monitor.manifest.load_document`'s limits.
    """
    out: dict[str, str] = {}
    for text in split_manifest(manifest):
        source = ""
        lines = []
        for line in text.strip("\n").splitlines():
            if line.startswith(_SOURCE):
                source = source or line[len(_SOURCE):].strip()
            else:
                lines.append(line)
        try:
            doc = load_document(text)
        except yaml.YAMLError:
            continue
        if not isinstance(doc, dict) or not isinstance(doc.get("kind"), str):
            continue
        meta = _mapping(doc.get("metadata"))
        annotations = _mapping(meta.get("annotations"))
        if HOOK_ANNOTATION in annotations:
            ref = _hook_ref(out, doc["kind"], source or str(meta.get("name")))
            out[ref] = _without_name(doc)
            continue
        obj = object_of(doc)
        ref = obj.ref if obj is not None else f"{doc['kind']}/{meta.get('name')}"
        out[ref] = "\n".join(lines) + "\n"
    return out


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _hook_ref(seen: Mapping[str, str], kind: str, source: str) -> str:
    ref = f"{kind} hook {source}"
    n = 1
    while (ref if n == 1 else f"{ref}#{n}") in seen:
        n += 1
    return ref if n == 1 else f"{ref}#{n}"


def _without_name(doc: dict[str, Any]) -> str:
    """A hook's YAML with its ``metadata.name`` replaced by a fixed note (keys kept in their order)."""
    meta = dict(doc["metadata"])
    meta["name"] = _HOOK_NAME
    return str(yaml.safe_dump({**doc, "metadata": meta}, sort_keys=False, allow_unicode=True, width=10_000))


def changes(before: str, after: str) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """``(added, changed, removed)`` references from ``before`` to ``after`` (each sorted), by :func:`normalised`."""
    old, new = normalised(before), normalised(after)
    return (tuple(sorted(set(new) - set(old))), tuple(sorted(r for r in set(old) & set(new) if old[r] != new[r])),
            tuple(sorted(set(old) - set(new))))


def checksum(manifest: str) -> str:
    """The release label ``wire.MANIFEST_CHECKSUM``: 32 hex characters of sha256 over the
    normalised manifest (references sorted), so a hook's generated name does not change it."""
    return wire.label_digest(json.dumps(sorted(normalised(manifest).items())).encode())


def recorded_manifest(record: Mapping[str, Any]) -> str:
    """A stored release's ``manifest`` and ``hooks`` as ``helm template`` prints them (the manifest, then
    each hook as ``---``, ``# Source: <path>`` and its manifest), for comparing with a render."""
    manifest = record.get("manifest")
    parts = [manifest.strip("\n") if isinstance(manifest, str) else ""]
    hooks = record.get("hooks")
    for hook in hooks if isinstance(hooks, list) else ():
        if isinstance(hook, dict) and isinstance(hook.get("manifest"), str):
            parts.append(f"---\n{_SOURCE}{hook.get('path') or ''}\n{hook['manifest'].strip(chr(10))}")
    return "\n".join(p for p in parts if p) + "\n"
