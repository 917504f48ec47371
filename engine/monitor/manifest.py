"""Release manifests: the one splitter, and the objects a manifest declares.

Helm stores a release's manifest as YAML documents joined by ``---`` lines
(Helm's ``releaseutil.SplitManifests`` splits on the same separator). The
monitor, drift detection, the upgrade diff and the app all read manifests
through this module. Each document goes through the bounded loader
(:mod:`engine.base.loader`): a chart's templates can emit anything, so an
alias bomb or a 10,000-level nesting is refused (:class:`ManifestLimitError`)
before it is built.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from engine.base.loader import YamlLimitError, manifest_limits, parse_text

_SEPARATOR = re.compile(r"^---[ \t]*$", re.MULTILINE)


class ManifestLimitError(yaml.YAMLError):
    """A rendered document over :func:`manifest_limits` or not YAML: a ``yaml.YAMLError``, so callers that
    skip or report a bad document handle it as before."""


@dataclass(frozen=True, order=True)
class ManifestObject:
    """One object of a manifest; ``namespace`` is as written ("" when the manifest gives none)
    until :func:`place` settles it ("" for cluster-scoped kinds)."""

    api_version: str
    kind: str
    namespace: str
    name: str

    @property
    def ref(self) -> str:
        """``Kind/namespace/name`` (``Kind/name`` without a namespace), as the monitor names resources."""
        return f"{self.kind}/{self.namespace}/{self.name}" if self.namespace else f"{self.kind}/{self.name}"


def split_manifest(manifest: str) -> list[str]:
    """The documents of a multi-document manifest as written, blank ones left out."""
    return [doc for doc in _SEPARATOR.split(manifest) if doc.strip()]


def load_document(text: str, what: str = "rendered manifest") -> Any:
    """One document parsed within :func:`manifest_limits` (libyaml when available). Raises ManifestLimitError
    (a yaml.YAMLError) naming ``what``, the line and the limit."""
    try:
        return parse_text(text, Path(what), manifest_limits()).data
    except YamlLimitError as exc:
        raise ManifestLimitError(str(exc)) from None


def manifest_bodies(manifest: str) -> Iterator[dict[str, Any]]:
    """The objects of a manifest as mappings, in order: ``*List`` kinds expanded, non-objects skipped.

    Raises yaml.YAMLError when a document is not YAML.
    """
    for text in split_manifest(manifest):
        yield from _expand(load_document(text))


def _expand(doc: Any) -> Iterator[dict[str, Any]]:
    if not isinstance(doc, dict) or not isinstance(doc.get("kind"), str):
        return
    if doc["kind"].endswith("List") and isinstance(doc.get("items"), list):
        for item in doc["items"]:
            yield from _expand(item)
    else:
        yield doc


def object_of(body: dict[str, Any]) -> ManifestObject | None:
    """The identity of one object mapping; None without ``kind`` or ``metadata.name`` (``generateName`` only)."""
    meta = body.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    kind, name, namespace = body.get("kind"), meta.get("name"), meta.get("namespace")
    if not (isinstance(kind, str) and isinstance(name, str) and name):
        return None
    api_version = body.get("apiVersion")
    return ManifestObject(api_version if isinstance(api_version, str) else "", kind,
                          namespace if isinstance(namespace, str) else "", name)


def manifest_objects(manifest: str) -> list[ManifestObject]:
    """Objects of a multi-document manifest, in order, each once (see :func:`manifest_bodies`).

    Raises yaml.YAMLError when the manifest is not YAML.
    """
    out: dict[ManifestObject, None] = {}
    for body in manifest_bodies(manifest):
        obj = object_of(body)
        if obj is not None:
            out[obj] = None
    return list(out)


def place(obj: ManifestObject, release_namespace: str, namespaced: bool | None) -> ManifestObject:
    """Where ``obj`` lives, as helm applies it: a namespaced object without a namespace is in the
    release namespace, a cluster-scoped one has none; an unknown kind (``namespaced`` None) stays as written."""
    if namespaced is None:
        return obj
    return replace(obj, namespace=(obj.namespace or release_namespace) if namespaced else "")
