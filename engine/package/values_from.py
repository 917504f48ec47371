"""``spec.valuesFrom``: values read from ConfigMaps and Secrets (Flux's HelmRelease field).

::

    spec:
      valuesFrom:
        - kind: Secret              # or ConfigMap
          name: db-credentials      # in the package's namespace
          valuesKey: values.yaml    # the key of the object's data (default values.yaml)
          targetPath: db.password   # optional: set <targetPath>=<content> as helm's --set does (as Flux)
          optional: false           # true: a missing object (or key) is skipped
          literal: false            # true: with targetPath, the content is one string, verbatim

Without ``targetPath`` the key's content is YAML merged over the values
before it; with it, ``<targetPath>=<content>`` is read as helm's ``--set``
reads its argument, or with ``literal`` set verbatim as one string (as
``--set-literal``). Entries apply in order, after ``valuesFiles``, with inline
``values`` as Flux's chartutil composes them (:mod:`engine.resolve.values`). Load-time checks here:
shape, kind, names and the path's syntax, each error naming file, line,
field and fix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.base.fields import Fields, type_name
from engine.base.schema import allowed
from engine.base.strvals import PathError, parse_path
from engine.package.schema import PACKAGE_SPEC, VALUES_KINDS

KINDS = VALUES_KINDS
DEFAULT_KEY = "values.yaml"
_FIELDS = allowed(PACKAGE_SPEC, "valuesFrom")
# Flux's API validation: object names are DNS subdomains; keys and paths as its kubebuilder patterns.
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_KEY = re.compile(r"^[\-._a-zA-Z0-9]+\Z")
_TARGET = re.compile(r"^([a-zA-Z0-9_\-.\\/]|\[[0-9]{1,5}\])+\Z")


@dataclass(frozen=True)
class ValuesReference:
    """One ``spec.valuesFrom`` entry. ``index`` is its place in the list, ``line`` where it is written
    (0 unknown); neither is part of what it refers to."""

    kind: str
    name: str
    values_key: str = DEFAULT_KEY
    target_path: str = ""
    optional: bool = False
    index: int = field(default=0, compare=False)
    line: int = field(default=0, compare=False)
    literal: bool = False  # with target_path: the content verbatim (Flux's ReplacePathLiteralValue)

    @property
    def field(self) -> str:
        return f"spec.valuesFrom[{self.index}]"

    def describe(self, namespace: str) -> str:
        """``Secret ns/name`` (how errors and the log name it)."""
        return f"{self.kind} {namespace}/{self.name}"


def parse_values_from(raw: Any, *, file: Path, lines: Mapping[str, int]) -> tuple[ValuesReference, ...]:
    """``spec.valuesFrom`` of one package file. Raises PackageError naming file, line, field and fix."""
    doc = Fields(file, lines)
    out = []
    items = doc.sequence(raw, "spec.valuesFrom", "write a list of {kind: Secret|ConfigMap, name: ...}")
    for i, item in enumerate(items):
        path = f"spec.valuesFrom[{i}]"
        entry = doc.mapping(item, path, _FIELDS, required=True, fix="write {kind: Secret|ConfigMap, name: ...}")
        kind = doc.string(entry.get("kind"), f"{path}.kind", required=True, fix="use ConfigMap or Secret")
        if kind not in KINDS:
            raise doc.error(f"{path}.kind", f"unknown kind {kind!r}", "use ConfigMap or Secret")
        name = doc.string(entry.get("name"), f"{path}.name", required=True,
                          fix=f"name the {kind} (in the package's namespace)")
        if len(name) > 253 or not _NAME.match(name):
            raise doc.error(f"{path}.name", f"{name!r} is not a valid object name",
                            "use lower-case letters, digits, '-' and '.' (at most 253)")
        key = doc.string(entry.get("valuesKey"), f"{path}.valuesKey") or DEFAULT_KEY
        if len(key) > 253 or not _KEY.match(key):
            raise doc.error(f"{path}.valuesKey", f"{key!r} is not a valid data key",
                            "use letters, digits, '-', '_' and '.' (at most 253)")
        target = doc.string(entry.get("targetPath"), f"{path}.targetPath")
        if target:
            _check_target(doc, target, f"{path}.targetPath")
        optional = entry.get("optional", False)
        if not isinstance(optional, bool):
            raise doc.error(f"{path}.optional", f"must be true or false, not {type_name(optional)}",
                            "write optional: true to skip a missing object, or leave it out")
        literal = entry.get("literal", False)
        if not isinstance(literal, bool):
            raise doc.error(f"{path}.literal", f"must be true or false, not {type_name(literal)}",
                            "write literal: true to set the content verbatim at targetPath, or leave it out")
        out.append(ValuesReference(kind, name, key, target, optional, i, lines.get(path, 0), literal))
    return tuple(out)


def _check_target(doc: Fields, target: str, path: str) -> None:
    fix = "write a path as helm's --set does, e.g. db.password, hosts[0].name or a\\.b"
    if len(target) > 250:
        raise doc.error(path, f"is {len(target)} characters long", "use at most 250 (Flux's limit)")
    try:  # first: its message says where and why (an index over the maximum, an empty key)
        parse_path(target)
    except PathError as exc:
        raise doc.error(path, f"{target!r}: {exc}", fix) from None
    if not _TARGET.match(target):
        raise doc.error(path, f"{target!r} is not a target path: only ASCII letters, digits, '_', '-', '.', '\\', "
                        "'/' and [index] of at most 5 digits (Flux's pattern)", fix)
