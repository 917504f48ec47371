"""Flux's resource selector (``target``), as kustomize's ``Selector`` and fluxcd/pkg's ``jsondiff.Selector``.

``group``, ``version``, ``kind``, ``name`` and ``namespace`` are regular
expressions matched against the whole value (anchored, as Flux's
``anchorRegex``); an empty one matches anything. ``labelSelector`` and
``annotationSelector`` are Kubernetes label selector expressions
(``app=web,tier!=db``, ``env in (a,b)``, ``!canary``) over the object's labels
and annotations. A selector matches when every set field matches.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.base.fields import Fields
from engine.base.label_selector import SelectorError, matches
from engine.base.label_selector import parse as parse_label_selector
from engine.base.schema import allowed
from engine.package.schema import TARGET

_REGEX_FIELDS = ("group", "version", "kind", "name", "namespace")
FIELDS = allowed(TARGET)  # the regular expressions, then labelSelector and annotationSelector


@dataclass(frozen=True)
class Selector:
    """A ``target``: which objects a patch or an ignore rule applies to (all fields optional)."""

    group: str = ""
    version: str = ""
    kind: str = ""
    name: str = ""
    namespace: str = ""
    label_selector: str = ""
    annotation_selector: str = ""

    def document(self) -> dict[str, str]:
        """The set fields, camelCase, as kustomize's ``target`` reads them."""
        raw = {"group": self.group, "version": self.version, "kind": self.kind, "name": self.name,
               "namespace": self.namespace, "labelSelector": self.label_selector,
               "annotationSelector": self.annotation_selector}
        return {k: v for k, v in raw.items() if v}

    def matches(self, obj: Mapping[str, Any]) -> bool:
        """Does the Kubernetes object ``obj`` (a manifest or live dict) match every set field?"""
        meta = obj.get("metadata") or {}
        api_version = str(obj.get("apiVersion") or "")
        group, _, version = api_version.rpartition("/")
        actual = {"group": group, "version": version, "kind": str(obj.get("kind") or ""),
                  "name": str(meta.get("name") or ""), "namespace": str(meta.get("namespace") or "")}
        for field, pattern in zip(_REGEX_FIELDS, (self.group, self.version, self.kind, self.name, self.namespace),
                                  strict=True):
            if pattern and not _anchored(pattern).match(actual[field]):
                return False
        return (_holds(self.label_selector, meta.get("labels"))
                and _holds(self.annotation_selector, meta.get("annotations")))


def _holds(expression: str, values: Any) -> bool:
    if not expression:
        return True
    found = {str(k): str(v) for k, v in values.items()} if isinstance(values, Mapping) else {}
    return matches(parse_label_selector(expression), found)


@functools.lru_cache(maxsize=256)
def _anchored(pattern: str) -> re.Pattern[str]:
    return re.compile(rf"^(?:{pattern})\Z")


def parse_selector(raw: Any, path: str, doc: Fields) -> Selector | None:
    """A ``target`` mapping at ``path`` as a Selector (None when absent). Raises PackageError naming
    the field, e.g. a regular expression or a label selector that does not parse."""
    if raw is None:
        return None
    section = doc.mapping(raw, path, FIELDS)
    values = {f: doc.string(section.get(f), f"{path}.{f}") for f in FIELDS}
    for field in _REGEX_FIELDS:
        try:
            _anchored(values[field])
        except re.error as exc:
            raise doc.error(f"{path}.{field}", f"{values[field]!r} is not a regular expression ({exc})",
                            "write a regular expression matched against the whole value, e.g. web|api") from None
    for field in ("labelSelector", "annotationSelector"):
        try:
            if values[field]:
                parse_label_selector(values[field])
        except SelectorError as exc:
            raise doc.error(f"{path}.{field}", str(exc),
                            "write a label selector such as app=web,tier!=db or env in (a,b)") from None
    return Selector(values["group"], values["version"], values["kind"], values["name"], values["namespace"],
                    values["labelSelector"], values["annotationSelector"])
