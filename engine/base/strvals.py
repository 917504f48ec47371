"""Helm's ``--set`` syntax: paths, and ``key=value`` assignments as a ``valuesFrom[].targetPath`` sets them.

A path is keys joined by ``.``; a ``\\`` escapes the next character (``a\\.b``
is the one key ``a.b``); ``[n]`` after a key indexes a list (``hosts[0].name``,
``matrix[1][2]``), as helm's ``strvals`` reads the left side of ``--set``.
Bounds as helm's: at most :data:`MAX_INDEX` for an index, :data:`MAX_DEPTH`
nested names.

A ``targetPath`` value is set as Flux's ``ReplacePathValue`` (fluxcd/pkg
``chartutil``) sets it: the text ``<targetPath>=<value>`` goes through helm's
``--set`` parser (``strvals.ParseInto``), so, exactly as with ``--set``:

- a ``,`` ends the value and starts another assignment: ``a,b=c`` sets the
  path to ``a`` and also ``b`` (at the top of the values) to ``c``; ``a,b``
  is an error (key "b" has no value); a trailing ``,`` is ignored;
- ``{x,y}`` is a list; ``\\`` escapes the next character (``a\\,b`` is ``a,b``);
  ``.``, ``=``, ``[`` and ``]`` in a value are kept as they are;
- the value is typed as ``--set`` types it: ``true``/``false``/``null`` (any
  case), ``0`` and decimal 64-bit integers not starting with ``0``; anything
  else (``1.5``, ``007``, ``yes``, a trailing newline) stays a string;
- a value wholly in quotes (starting and ending with ``'``, or with ``"``) has
  every quote character trimmed from both ends and is parsed as
  ``--set-string``: commas, lists and escapes as above, never typed;
- with ``literal`` (Flux's ``ReplacePathLiteralValue``) the value is one
  string, verbatim: no split, list, escape, quote trimming or typing.

:func:`set_in_place` sets the assignments as helm's parser does: missing maps and
lists are created, a list is padded with nulls up to the index, a list item
that is not a map becomes an empty map when a key is set inside it, and going
through any other value (a null included: Go's type assertion fails) is an
error. One quirk of helm's parser is kept (helm.sh/helm/v4 pkg/strvals
parser.go, ``parser.listItem`` returning early on ``io.EOF``): an empty value at
the very end of the text, for a key below a list item (``a[0].b=``), is set
only inside list items that exist already; a new item is dropped (``a[0].b=``
over no ``a`` gives ``a: []``). Such a value is :data:`EMPTY_AT_END`.
Bounds beyond helm's: at most :data:`MAX_DEPTH` nested list indices and
:data:`MAX_PADDING` null cells padded per value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

MAX_INDEX = 65536  # helm's strvals.MaxIndex
MAX_DEPTH = 30  # helm's strvals.MaxNestedNameLevel: nested names (dots) in one path
_INT64 = 2**63
MAX_PADDING = 1 << 18  # null cells padded into lists per value: an index near MAX_INDEX per comma adds up

Segment = str | int
Path = tuple[Segment, ...]
Assignment = tuple[Path, Any]
"""One value set by a ``--set`` argument: its path and its (typed) value."""


class _EmptyAtEnd(str):
    """The empty value of the text's last assignment (see the module docstring); equal to ``""``."""

    __slots__ = ()


EMPTY_AT_END = _EmptyAtEnd("")


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


# What Flux's ReplacePathLiteralValue escapes before --set-string reads the value: helm's syntax characters.
_LITERAL = str.maketrans({ch: "\\" + ch for ch in "\\,[]{}"})


def target_assignments(target_path: str, value: str, *, literal: bool = False) -> list[Assignment]:
    """What Flux's ``ReplacePathValue(values, target_path, value)`` sets (see the module docstring); with
    ``literal``, what ``ReplacePathLiteralValue`` sets (a ``valuesFrom[].literal`` entry, fluxcd/pkg chartutil
    values.go): ``value`` verbatim, one string, as ``--set-literal`` sets it, the path still read with its
    ``\\.`` escapes. Raises PathError."""
    if literal:  # every character --set would read as syntax escaped, then read as --set-string
        return parse_assignments(f"{target_path}={value.translate(_LITERAL)}", strings=True)
    quoted = len(value) >= 1 and ((value[0] == value[-1] == "'") or (value[0] == value[-1] == '"'))
    if quoted:
        value = value.strip("'\"")  # as Go's strings.Trim(value, `'"`): every quote at both ends
    return parse_assignments(f"{target_path}={value}", strings=quoted)


def parse_assignments(text: str, *, strings: bool = False) -> list[Assignment]:
    """The assignments of a helm ``--set`` argument (``--set-string`` when ``strings``), in order:
    ``a.b=1,c[0]={x,y}`` -> ``[(("a", "b"), 1), (("c", 0), ["x", "y"])]``. Raises PathError with helm's
    reasons. Malformed pieces helm ignores at the very end (``a[``, ``a.``) are ignored too."""
    return _Parser(text, strings).parse()


class _Parser:
    """A reader of helm's ``strvals`` grammar (keys, indices, values, lists) producing assignments."""

    def __init__(self, text: str, strings: bool):
        self.text, self.pos, self.strings = text, 0, strings

    def until(self, stops: str) -> tuple[str, str]:
        """The characters up to one of ``stops`` (consumed; ``""`` at the end), ``\\`` escaping the next
        (a lone ``\\`` at the end is dropped, as helm)."""
        out: list[str] = []
        text, n = self.text, len(self.text)
        while self.pos < n:
            ch = text[self.pos]
            self.pos += 1
            if ch in stops:
                return "".join(out), ch
            if ch == "\\":
                if self.pos == n:
                    break
                ch = text[self.pos]
                self.pos += 1
            out.append(ch)
        return "".join(out), ""

    def parse(self) -> list[Assignment]:
        out: list[Assignment] = []
        while self.pos < len(self.text):
            got = self.key()
            if got is None:
                break
            out.append(got)  # an empty key is kept: apply ignores it as helm's set() does, or refuses it
        return out

    def key(self) -> tuple[Path, Any] | None:
        """One assignment; None at the end of the text (what helm's parser treats as done)."""
        path: list[Segment] = []
        names = indices = 0
        while True:
            k, last = self.until("=[,.")
            if not last:
                if k:
                    raise PathError(f"key {k!r} has no value")
                return None
            path.append(k)
            if last == ",":
                raise PathError(f"key {k!r} has no value (cannot end with ,)")
            if last == "=":
                return tuple(path), self.value()
            if last == ".":
                names += 1
                if names > MAX_DEPTH:
                    raise PathError(f"value name nested level is greater than maximum supported nested level "
                                    f"of {MAX_DEPTH}")
                continue
            while True:  # "[": one index or more, then "=", "." or the end
                digits, closed = self.until("]")
                if not closed:
                    return None
                index = _index(digits)
                indices += 1
                if indices > MAX_DEPTH:
                    raise PathError(f"more than {MAX_DEPTH} list indices in one key")
                path.append(index)
                rest, last = self.until("[.=")
                if rest:
                    raise PathError(f"unexpected data at end of array index: {rest!r}")
                if not last:
                    return None
                if last == "=":
                    return tuple(path), self.value()
                if last == ".":
                    break
            # "." after an index: the keys go on (helm does not count this dot as a nested name)

    def value(self) -> Any:
        if self.pos == len(self.text):
            return EMPTY_AT_END  # helm's valList meets io.EOF
        if self.text[self.pos] == "{":
            self.pos += 1
            items: list[Any] = []
            while True:
                item, last = self.until(",}")
                if not last:
                    raise PathError("list must terminate with '}'")
                items.append(self.typed(item))
                if last == "}":
                    if self.pos < len(self.text) and self.text[self.pos] == ",":
                        self.pos += 1
                    return items
        text, _ = self.until(",")
        return self.typed(text)

    def typed(self, text: str) -> Any:
        """As helm's ``typedVal``: every value a string under ``--set-string``."""
        if self.strings:
            return text
        lower = text.lower()
        if lower in ("true", "false"):
            return lower == "true"
        if lower == "null":
            return None
        if text == "0":
            return 0
        if text and text[0] != "0" and text.isascii():
            digits = text[1:] if text[0] in "+-" else text
            if digits.isdigit() and -_INT64 <= int(text) < _INT64:
                return int(text)
        return text


def _index(digits: str) -> int:
    """A list index as Go's ``strconv.Atoi`` reads it, within helm's bounds."""
    body = digits[1:] if digits[:1] in ("+", "-") else digits
    if not body or not body.isascii() or not body.isdigit():
        raise PathError(f"error parsing index: {digits!r} is not a number")
    index = int(digits)
    if index < 0:
        raise PathError(f"negative {index} index not allowed")
    if index > MAX_INDEX:
        raise PathError(f"index of {index} is greater than maximum supported index of {MAX_INDEX}")
    return index


def set_in_place(values: dict[str, Any], assignments: Sequence[Assignment]) -> None:
    """Set ``assignments`` in ``values`` in order, in place, as helm's ``--set`` parser sets them (helm.sh/helm/v4
    pkg/strvals parser.go ``parser.key``, ``parser.listItem``, ``setIndex``): the maps and list items along a
    path are changed where they are and a list grown is a new, longer one, so a value sharing those maps or lists
    sees the change as with Go's maps and slices (Flux's ``ChartValuesFromReferences`` depends on it:
    :mod:`engine.resolve.values`). Raises PathError naming the path; ``values`` may then be partly set, as helm's.
    """
    setter = _HelmSet()
    for path, value in assignments:
        setter.set(values, path, value)


class _HelmSet:
    """Assignments set step by step as helm's parser sets them (helm.sh/helm/v4 pkg/strvals parser.go
    ``parser.key`` and ``parser.listItem``), the quirks included: an empty key is ignored by helm's ``set``, but a
    map left empty by it is an error (``key map "a" has no value``) and a list item made for it stays (``a[0].=``
    gives ``a: [{}]``); an empty value at the end of the text below a list item (:data:`EMPTY_AT_END`: helm returns
    ``io.EOF`` before putting new items in their lists) changes existing items in place and drops new ones. Lists
    padded beyond :data:`MAX_PADDING` null cells in all are refused."""

    def __init__(self) -> None:
        self.whole: Path = ()
        self.value: Any = None
        self.at_end = False
        self.padded = 0

    def set(self, data: dict[str, Any], path: Path, value: Any) -> None:
        """Set one assignment below ``data``."""
        self.whole, self.at_end = path, value is EMPTY_AT_END
        self.value = "" if self.at_end else value  # a plain str in the values (YAML dumpers refuse a subclass)
        self.key(data, path)

    def key(self, data: dict[str, Any], path: Path) -> bool:
        """Set ``path`` (a key first) below ``data``; True when helm's parser would return ``io.EOF``."""
        key, rest = path[0], path[1:]
        assert isinstance(key, str)
        if not rest:
            if key:
                data[key] = self.value
            return self.at_end
        if isinstance(rest[0], int):
            items, eof = self.item(self._as(data[key], list, path) if key in data else [], rest)
            if key:
                data[key] = items
            return eof
        inner = self._as(data[key], dict, path) if key in data else {}
        eof = self.key(inner, rest)
        if not eof and not inner:
            raise PathError(f"key map {key!r} has no value")
        if inner and key:
            data[key] = inner
        return eof

    def item(self, items: list[Any], path: Path) -> tuple[list[Any], bool]:
        """``items`` with item ``path[0]`` set below (the same list, or a longer copy), and helm's ``io.EOF``."""
        index, rest = path[0], path[1:]
        assert isinstance(index, int)
        if not rest:
            return self._set_index(items, index, self.value), False
        if isinstance(rest[0], int):
            current = items[index] if index < len(items) else None
            inner, eof = self.item(self._as(current, list, path) if current is not None else [], rest)
            return (items, True) if eof else (self._set_index(items, index, inner), False)
        if index < len(items):
            if not isinstance(items[index], dict):
                items[index] = {}  # helm: an item that is no map is replaced by one
            current = items[index]
        else:
            current = {}
        if self.key(current, rest):
            return items, True  # a new item is dropped; an existing one was changed in place
        return self._set_index(items, index, current), False

    def _set_index(self, items: list[Any], index: int, value: Any) -> list[Any]:
        """helm's setIndex: ``items`` changed in place, or a longer copy when ``index`` is past its end."""
        if index < len(items):
            items[index] = value
            return items
        self.padded += index - len(items)
        if self.padded > MAX_PADDING:
            raise PathError(f"lists padded with more than {MAX_PADDING} nulls")
        return [*items, *([None] * (index - len(items))), value]

    def _as(self, value: Any, kind: type, at: Path) -> Any:
        if not isinstance(value, kind):
            where = format_path(self.whole[:len(self.whole) - len(at) + 1])
            raise PathError(f"{where} holds {_kind(value)}, not a {'list' if kind is list else 'map'}")
        return value


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, Mapping):
        return "a map"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__}"
