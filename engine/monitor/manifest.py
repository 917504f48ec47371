"""The objects a release manifest declares (what its monitor expects to exist)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import yaml

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True, order=True)
class ManifestObject:
    """One object as written in a manifest; ``namespace`` is "" when the manifest gives none."""

    api_version: str
    kind: str
    namespace: str
    name: str


def manifest_objects(manifest: str) -> list[ManifestObject]:
    """Objects of a multi-document manifest, in order, each once.

    Empty documents, non-mappings and objects without apiVersion, kind or
    ``metadata.name`` (e.g. ``generateName`` only) are skipped; the items of
    a ``*List`` kind are expanded (the list itself is not an object). Raises
    yaml.YAMLError when the manifest is not YAML.
    """
    out: dict[ManifestObject, None] = {}
    for doc in yaml.load_all(manifest, Loader=_Loader):
        for obj in _expand(doc):
            out[obj] = None
    return list(out)


def _expand(doc: Any) -> Iterable[ManifestObject]:
    if not isinstance(doc, dict):
        return
    kind, api_version = doc.get("kind"), doc.get("apiVersion")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(doc.get("items"), list):
        for item in doc["items"]:
            yield from _expand(item)
        return
    meta = doc.get("metadata")
    if not (isinstance(kind, str) and isinstance(api_version, str) and isinstance(meta, dict)):
        return
    name, namespace = meta.get("name"), meta.get("namespace")
    if isinstance(name, str) and name:
        yield ManifestObject(api_version, kind, namespace if isinstance(namespace, str) else "", name)
