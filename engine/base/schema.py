"""Field tables: the one declaration of a document's fields, read by its loader and by the CRD generator.

A table is a tuple of :class:`Field`. The loaders take the names allowed at a dotted path from it
(:func:`allowed`), so a field the loader reads is a field of the table; :func:`openapi` turns the same table
into a CustomResourceDefinition's structural ``openAPIV3Schema`` (Kubernetes' rules: every node typed, maps as
``additionalProperties``, free-form values as ``x-kubernetes-preserve-unknown-fields``). So the CRDs and the
loader cannot drift.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

# Go durations as Flux's CRDs check them (``^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$``).
DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"

# Field types: scalars, ``object`` (``fields``), ``list`` (of ``items``: a scalar type, or ``object`` with
# ``fields``), ``map`` (string to string), ``free`` (any YAML: values).
TYPES = ("string", "integer", "boolean", "duration", "object", "list", "map", "free")


@dataclass(frozen=True)
class Field:
    """One field: its camelCase ``name``, ``type`` (one of :data:`TYPES`), a one-line ``doc`` (the CRD's
    description), its ``fields`` (an object, or a list's object items), the ``items`` type of a list,
    allowed values (``enum``), whether it is ``required``, ``file_only``: a string form only package
    files accept besides the object form (``spec.chart``: a local chart folder cannot move into the cluster),
    and ``helmdeck_only``: why a field is helmdeck's own, not Flux's (a HelmRelease may not carry it)."""

    name: str
    type: str
    doc: str = ""
    fields: tuple[Field, ...] = ()
    items: str = ""
    enum: tuple[str, ...] = ()
    required: bool = False
    file_only: str = ""
    helmdeck_only: str = ""

    def __post_init__(self) -> None:
        if self.type not in TYPES or (self.items and self.items not in TYPES):
            raise ValueError(f"field {self.name}: unknown type {self.type!r}/{self.items!r}")


def at(table: tuple[Field, ...], path: str) -> Field:
    """The field at dotted ``path`` (``spec.install.remediation``). KeyError when there is none."""
    fields, found = table, None
    for part in path.split("."):
        found = next((f for f in fields if f.name == part), None)
        if found is None:
            raise KeyError(path)
        fields = found.fields
    assert found is not None
    return found


def allowed(table: tuple[Field, ...], path: str = "") -> tuple[str, ...]:
    """The field names allowed at ``path`` (the top level when ``""``), in the table's order."""
    return tuple(f.name for f in (at(table, path).fields if path else table))


def booleans(table: tuple[Field, ...], path: str) -> tuple[str, ...]:
    """The boolean fields at ``path`` (an action section's flags)."""
    return tuple(f.name for f in at(table, path).fields if f.type == "boolean")


def paths(table: tuple[Field, ...], prefix: str = "") -> Iterator[str]:
    """Every dotted path of the table, parents before children (a list's items are not a level)."""
    for f in table:
        path = f"{prefix}.{f.name}" if prefix else f.name
        yield path
        yield from paths(f.fields, path)


def undeclared(table: tuple[Field, ...], data: Any, path: str = "") -> Iterator[tuple[str, tuple[str, ...]]]:
    """Each field of the document ``data`` that ``table`` does not declare, in the document's order: its dotted
    path (``spec.install.remediaton``, a list's item ``spec.dependsOn[0].nmae``) and the names declared there.
    Descends into declared objects and lists of objects; a value of another type than declared is the loader's
    to refuse, not looked into."""
    if not isinstance(data, dict):
        return
    by_name = {f.name: f for f in table}
    for key, value in data.items():
        sub = f"{path}.{key}" if path else str(key)
        field = by_name.get(key)
        if field is None:
            yield sub, tuple(by_name)
        elif field.type == "object" and field.fields:
            yield from undeclared(field.fields, value, sub)
        elif field.type == "list" and field.items == "object" and field.fields and isinstance(value, list):
            for i, item in enumerate(value):
                yield from undeclared(field.fields, item, f"{sub}[{i}]")


def _scalar(kind: str) -> dict[str, Any]:
    if kind == "duration":
        return {"type": "string", "pattern": DURATION_PATTERN}
    if kind == "map":
        return {"type": "object", "additionalProperties": {"type": "string"}}
    if kind == "free":
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {"type": kind}


def _object(fields: tuple[Field, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": {f.name: openapi(f) for f in fields}}
    required = [f.name for f in fields if f.required]
    if required:
        out["required"] = required
    return out


def openapi(field: Field) -> dict[str, Any]:
    """The structural OpenAPI v3 schema of ``field`` (a CRD's ``openAPIV3Schema`` node)."""
    if field.type == "object":
        out = _object(field.fields)
    elif field.type == "list":
        out = {"type": "array", "items": _object(field.fields) if field.items == "object" else _scalar(field.items)}
    else:
        out = _scalar(field.type)
    if field.enum:
        out["enum"] = list(field.enum)
    if field.doc:
        out["description"] = field.doc
    return out


def schema(table: tuple[Field, ...]) -> dict[str, Any]:
    """The schema of a whole table (a CRD's ``spec``, say): an object of its fields."""
    return _object(table)


# Kubernetes' metav1.Condition, the shape of every ``status.conditions`` entry (and Flux's).
CONDITION = (
    Field("type", "string", "Ready, Released, TestSuccess, Remediated", required=True),
    Field("status", "string", "True, False or Unknown", enum=("True", "False", "Unknown"), required=True),
    Field("observedGeneration", "integer", "the object's generation the condition was set for"),
    Field("lastTransitionTime", "string", "when status last changed (RFC 3339)", required=True),
    Field("reason", "string", "a CamelCase reason (Flux's)", required=True),
    Field("message", "string", "what happened, in words"),
)
