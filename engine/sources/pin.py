"""Precise edits of one scalar in a YAML file: how the version picker pins a chart version.

:func:`set_scalar` changes (or adds) the value at a field path of one document
and leaves every other byte alone: comments, blank lines, key order, quoting
and indentation stay as the operator wrote them. It edits the text at the
positions the YAML parser reports, never by dumping the data again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

import yaml

_PLAIN_SAFE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+\-]*$")


class PinError(ValueError):
    """The field cannot be edited in place (not a scalar, inside a flow sequence, ...); says why."""


def _quoted(value: str, style: str | None) -> str:
    """``value`` in the scalar style the file used, when that style can hold it (else double quotes)."""
    if style == "'" and "\n" not in value:
        return "'" + value.replace("'", "''") + "'"
    if style is None and _PLAIN_SAFE.match(value) and yaml.safe_load(value) == value:
        return value
    return json.dumps(value)


def _child(node: yaml.MappingNode, key: str) -> yaml.Node | None:
    for key_node, value_node in node.value:
        if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
            return value_node  # type: ignore[no-any-return]
    return None


def _nested(path: Sequence[str], value: str) -> str:
    """``a: {b: value}`` for the missing keys of ``path``, in flow style."""
    out = json.dumps(value)
    for key in reversed(path[1:]):
        out = f"{{{key}: {out}}}"
    return f"{path[0]}: {out}"


def _insert(text: str, mapping: yaml.MappingNode, path: Sequence[str], value: str) -> str:
    entry = _nested(path, value)
    if mapping.flow_style:
        close = int(mapping.end_mark.index) - 1
        if text[close] != "}":
            raise PinError(f"cannot add {path[0]!r} to the mapping at line {mapping.start_mark.line + 1}")
        sep = ", " if mapping.value else ""
        return text[:close].rstrip() + sep + entry + text[close:]
    if not mapping.value:
        raise PinError(f"cannot add {path[0]!r} to the empty mapping at line {mapping.start_mark.line + 1}")
    first_key = mapping.value[0][0]
    indent = int(first_key.start_mark.column)
    last_value = mapping.value[-1][1]
    if isinstance(last_value, yaml.ScalarNode) or (
        isinstance(last_value, yaml.CollectionNode) and last_value.flow_style
    ):
        # After the last entry's line (keeping a comment at its end on that line).
        end = text.find("\n", int(last_value.end_mark.index))
        end = len(text) if end < 0 else end
        return text[:end] + "\n" + " " * indent + entry + text[end:]
    start = int(first_key.start_mark.index)
    line_start = start - indent
    if text[line_start:start].strip():
        raise PinError(f"cannot add {path[0]!r} next to line {first_key.start_mark.line + 1}; add it by hand")
    return text[:line_start] + " " * indent + entry + "\n" + text[line_start:]


def set_scalar(text: str, path: Sequence[str], value: str, *, document: int = 0) -> str:
    """``text`` with the scalar at ``path`` (mapping keys from the document's root) of the ``document``-th
    YAML document set to ``value``; missing keys below the deepest existing mapping are added.

    Raises PinError when the path runs through something other than mappings or ends on a collection,
    and yaml.YAMLError for text that does not parse.
    """
    docs = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    if not 0 <= document < len(docs) or docs[document] is None:
        raise PinError(f"there is no YAML document {document} in the file")
    node = docs[document]
    for i, key in enumerate(path):
        if not isinstance(node, yaml.MappingNode):
            raise PinError(f"{'.'.join(path[:i])} is not a mapping")
        child = _child(node, key)
        if child is None:
            return _insert(text, node, path[i:], value)
        node = child
    if not isinstance(node, yaml.ScalarNode):
        raise PinError(f"{'.'.join(path)} is not a single value (line {node.start_mark.line + 1})")
    start, end = int(node.start_mark.index), int(node.end_mark.index)
    return text[:start] + _quoted(value, node.style) + text[end:]


def document_index(text: str, kind: str, name: str) -> int:
    """The index of the document of ``kind`` named ``name`` (metadata.name) in a multi-document file.

    Raises PinError when there is none.
    """
    for i, data in enumerate(yaml.safe_load_all(text)):
        if isinstance(data, dict) and data.get("kind") == kind and (data.get("metadata") or {}).get("name") == name:
            return i
    raise PinError(f"no {kind} named {name!r} in the file")
