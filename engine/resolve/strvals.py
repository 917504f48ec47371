"""Helm's ``--set`` path syntax, and setting one value at such a path (``valuesFrom[].targetPath``).

A path is keys joined by ``.``; a ``\\`` escapes the next character (``a\\.b``
is the one key ``a.b``); ``[n]`` after a key indexes a list (``hosts[0].name``,
``matrix[1][2]``), as helm's ``strvals`` reads the left side of ``--set``.
Bounds as helm's: at most :data:`MAX_INDEX` for an index, :data:`MAX_DEPTH`
nested names. Setting pads a list with nulls up to the index, creates missing
maps and lists, and refuses to go through a value of another type (helm's
parser fails there too).

:func:`typed_value` types a value as Flux's ``ReplacePathValue`` does for a
``targetPath``: a value in quotes is the string inside them; else ``true`` /
``false`` / ``null`` (any case) and decimal integers not starting with ``0``
become a boolean, null or integer; anything else stays a string. Unlike
``--set``, the value is taken whole: it is never split at commas nor read as a
``{a,b}`` list, and backslashes in it are kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MAX_INDEX = 65536  # helm's strvals.MaxIndex
MAX_DEPTH = 30  # helm's strvals.MaxNestedNameLevel: nested names (dots) in one path
_INT64 = 2**63

Segment = str | int
Path = tuple[Segment, ...]


class PathError(ValueError):
    """A path that is not helm's ``--set`` syntax, or a value that cannot be set at it."""


def parse_path(path: str) -> Path:
    """``a.b\\.c[0].d`` -> ``("a", "b.c", 0, "d")``. Raises PathError naming the position."""
    segments: list[Segment] = []
    i, n, dots = 0, len(path), 0
    if not path:
        raise PathError("the path is empty")
    while True:
        key: list[str] = []
        while i < n and path[i] not in ".[]=,":
            if path[i] == "\\":
                i += 1
                if i == n:
                    raise PathError("the path ends with a backslash")
            key.append(path[i])
            i += 1
        if i < n and path[i] in "]=,":
            raise PathError(f"unexpected {path[i]!r} at position {i + 1}")
        if not key:
            raise PathError(f"empty key at position {i + 1}")
        segments.append("".join(key))
        while i < n and path[i] == "[":
            end = path.find("]", i)
            if end < 0:
                raise PathError(f"'[' at position {i + 1} is not closed")
            digits = path[i + 1:end]
            if not digits.isascii() or not digits.isdigit():
                raise PathError(f"list index {digits!r} at position {i + 2} is not a number")
            index = int(digits)
            if index > MAX_INDEX:
                raise PathError(f"list index {index} is over the maximum of {MAX_INDEX}")
            segments.append(index)
            i = end + 1
        if i == n:
            return tuple(segments)
        if path[i] != ".":
            raise PathError(f"unexpected {path[i]!r} at position {i + 1} (expected '.' or '[')")
        dots += 1
        if dots > MAX_DEPTH:
            raise PathError(f"more than {MAX_DEPTH} nested names")
        i += 1
        if i == n:
            raise PathError("the path ends with '.'")


def format_path(path: Path) -> str:
    """The ``--set`` form of ``path`` (dots in keys escaped)."""
    out = ""
    for seg in path:
        if isinstance(seg, int):
            out += f"[{seg}]"
        else:
            key = seg.replace("\\", "\\\\").replace(".", "\\.").replace("[", "\\[")
            out += f".{key}" if out else key
    return out


def typed_value(text: str) -> Any:
    """The value Flux sets at a ``targetPath`` for ``text`` (see the module docstring)."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text.strip("'\"")  # as Flux: the quote characters around it are trimmed
    lower = text.lower()
    if lower in ("true", "false"):
        return lower == "true"
    if lower == "null":
        return None
    if text == "0":
        return 0
    if text and text[0] != "0" and (text[1:] if text[0] in "+-" else text).isdigit() and text.isascii():
        number = int(text)
        if -_INT64 <= number < _INT64:
            return number
    return text


def set_path(values: Mapping[str, Any], path: Path, value: Any) -> dict[str, Any]:
    """A copy of ``values`` with ``value`` at ``path`` (the maps and lists along the path are copied,
    the rest shared). Raises PathError when the path goes through a value that is not a map or list."""
    root: dict[str, Any] = dict(values)
    parent: Any = root
    for depth, seg in enumerate(path):
        last = depth == len(path) - 1
        if isinstance(seg, int):
            while len(parent) <= seg:
                parent.append(None)
        current = parent[seg] if isinstance(seg, int) else parent.get(seg)
        if last:
            parent[seg] = value
            break
        want_list = isinstance(path[depth + 1], int)
        child: Any
        if current is None:
            child = [] if want_list else {}
        elif want_list and isinstance(current, list):
            child = list(current)
        elif not want_list and isinstance(current, Mapping):
            child = dict(current)
        else:
            where = format_path(path[:depth + 1])
            raise PathError(f"{where} holds {_kind(current)}, not a {'list' if want_list else 'map'}")
        parent[seg] = child
        parent = child
    return root


def _kind(value: Any) -> str:
    if isinstance(value, Mapping):
        return "a map"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__}"
