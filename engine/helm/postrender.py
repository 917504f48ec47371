"""helmdeck's post-renderer: stamp labels on every object helm rendered.

helm pipes the rendered manifests (a multi-document YAML stream) through a
post-renderer and applies what comes out. This one adds
``metadata.labels[key] = value`` for each ``key=value`` argument to every
object, including each item of a ``*List`` kind, and leaves every other byte
as helm wrote it: the stream is parsed only to find *where* the labels go
(PyYAML node marks), then the text is edited at those offsets. Comments,
``# Source:`` lines, document separators, empty documents, quoting and key
order stay as they were, so the checksum of the output changes only with the
labels.

This file runs as a standalone script (``python -I postrender.py KEY=VALUE...``,
stdin to stdout), copied into a helmdeck-owned directory by
:mod:`engine.helm.postrender_plugin`; it must import nothing but the standard
library and PyYAML.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Kubernetes label syntax (apimachinery validation): optional DNS-subdomain prefix, 63-character name/value.
_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_LABEL_KEY = re.compile(rf"^([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_LABEL_NAME}$")
_LABEL_VALUE = re.compile(rf"^({_LABEL_NAME})?$")
_NULL_TAG = "tag:yaml.org,2002:null"


class StampError(ValueError):
    """The manifests cannot be stamped (not YAML, or labels that are not a mapping)."""


@dataclass(frozen=True)
class _Edit:
    """Replace ``text[start:end]`` with ``new`` (an insertion when start == end)."""

    start: int
    end: int
    new: str


def parse_labels(args: Sequence[str]) -> dict[str, str]:
    """``KEY=VALUE`` arguments as a label map; raises StampError on a bad key or value."""
    out: dict[str, str] = {}
    for arg in args:
        key, sep, value = arg.partition("=")
        if not sep or not _LABEL_KEY.match(key):
            raise StampError(f"bad label argument {arg!r}: want KEY=VALUE with a Kubernetes label key")
        if not _LABEL_VALUE.match(value):
            raise StampError(f"bad label value for {key}: {value!r} is not a Kubernetes label value")
        out[key] = value
    return out


def stamp(text: str, labels: Mapping[str, str]) -> str:
    """Return ``text`` with ``labels`` set on every object of the YAML stream.

    Documents that are empty, comments only or not a mapping pass through
    unchanged; ``*List`` kinds get the labels on each item (not on the list).
    An existing label with one of the keys is overwritten. Raises StampError
    when ``text`` is not YAML or an object's ``metadata.labels`` is not a
    mapping.
    """
    if not labels:
        return text
    try:
        docs = list(yaml.compose_all(text, Loader=_Loader))
    except yaml.YAMLError as exc:
        raise StampError(f"rendered manifests are not valid YAML: {exc}") from None
    edits: list[_Edit] = []
    seen: set[int] = set()
    for doc in docs:
        if isinstance(doc, MappingNode):
            edits += _object_edits(doc, text, labels, seen)
    out = text
    # An aliased labels mapping yields the same edit twice; apply it once.
    for edit in sorted(set(edits), key=lambda e: e.start, reverse=True):
        out = out[: edit.start] + edit.new + out[edit.end :]
    return out


def _get(mapping: MappingNode, key: str) -> tuple[ScalarNode, Node] | None:
    for k, v in mapping.value:
        if isinstance(k, ScalarNode) and k.value == key:
            return k, v
    return None


def _is_null(node: Node) -> bool:
    return isinstance(node, ScalarNode) and node.tag == _NULL_TAG


def _quote(value: str) -> str:
    # A JSON string is a YAML double-quoted scalar: never re-typed (no "true" or "1.0" surprises).
    return json.dumps(value, ensure_ascii=False)


def _flow(items: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"{_quote(k)}: {v}" for k, v in items.items()) + "}"


def _object_edits(obj: MappingNode, text: str, labels: Mapping[str, str], seen: set[int]) -> list[_Edit]:
    """The edits that label ``obj`` (or each item of a ``*List``); ``seen`` skips aliased nodes met before."""
    if id(obj) in seen:
        return []
    seen.add(id(obj))
    kind = _get(obj, "kind")
    items = _get(obj, "items")
    if kind is not None and str(kind[1].value).endswith("List") and items is not None:
        edits: list[_Edit] = []
        if isinstance(items[1], SequenceNode):
            for item in items[1].value:
                if isinstance(item, MappingNode):
                    edits += _object_edits(item, text, labels, seen)
        return edits
    quoted = {k: _quote(v) for k, v in labels.items()}
    meta = _get(obj, "metadata")
    if meta is None:
        return [_insert_entries(obj, {"metadata": _flow({"labels": _flow(quoted)})}, text)]
    if _is_null(meta[1]):
        return [_replace(meta[1], _flow({"labels": _flow(quoted)}), text)]
    if not isinstance(meta[1], MappingNode):
        raise StampError(f"metadata is not a mapping at line {meta[1].start_mark.line + 1}")
    current = _get(meta[1], "labels")
    if current is None:
        return [_insert_entries(meta[1], {"labels": _flow(quoted)}, text)]
    if _is_null(current[1]):
        return [_replace(current[1], _flow(quoted), text)]
    if not isinstance(current[1], MappingNode):
        raise StampError(f"metadata.labels is not a mapping at line {current[1].start_mark.line + 1}")
    out: list[_Edit] = []
    missing: dict[str, str] = {}
    for key, value in quoted.items():
        found = _get(current[1], key)
        if found is None:
            missing[key] = value
        else:
            out.append(_replace(found[1], value, text))
    if missing:
        out.append(_insert_entries(current[1], missing, text))
    return out


def _insert_entries(mapping: MappingNode, entries: Mapping[str, str], text: str) -> _Edit:
    """Add ``entries`` (key -> YAML text) before the first entry of ``mapping``, in its own style."""
    pairs = [f"{_quote(k)}: {v}" for k, v in entries.items()]
    if mapping.flow_style or not mapping.value:
        brace = text.index("{", mapping.start_mark.index)  # skips an anchor or tag before the brace
        return _Edit(brace + 1, brace + 1, ", ".join(pairs) + (", " if mapping.value else ""))
    first = mapping.value[0][0].start_mark
    # At the first key's column: the old first key moves down a line, same indentation.
    indent = " " * first.column
    return _Edit(first.index, first.index, "".join(f"{p}\n{indent}" for p in pairs))


def _replace(node: Node, new: str, text: str) -> _Edit:
    start, end = node.start_mark.index, node.end_mark.index
    old = text[start:end]
    if start == end and (start == 0 or not text[start - 1].isspace()):
        new = " " + new  # an empty value sits right after the colon
    # A block scalar's span includes its line break(s); keep them.
    trailing = old[len(old.rstrip("\n")) :]
    return _Edit(start, end, new + trailing)


def main(argv: Sequence[str] | None = None) -> int:
    """Post-renderer entry point: labels from ``argv``, manifests stdin → stdout.

    Exits 0 on success, 2 on bad arguments, 1 when the manifests cannot be
    stamped (helm then fails the action with this message).
    """
    args = sys.argv[1:] if argv is None else argv
    try:
        labels = parse_labels(args)
    except StampError as exc:
        print(f"helmdeck post-renderer: {exc}", file=sys.stderr)
        return 2
    try:
        # Bytes in and out: helm speaks UTF-8 whatever the locale says.
        out = stamp(sys.stdin.buffer.read().decode("utf-8"), labels)
    except (StampError, UnicodeDecodeError) as exc:
        print(f"helmdeck post-renderer: {exc}", file=sys.stderr)
        return 1
    sys.stdout.buffer.write(out.encode("utf-8"))
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
