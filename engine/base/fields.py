"""Reading the fields of a YAML document with errors that name file, line, field and fix.

What the package loader (:mod:`engine.package.model`) and the chart-source loader
(:mod:`engine.sources.repository`) share: :class:`PackageError`, Go durations and
:class:`Fields`, which checks one field at a time against its dotted path
(``spec.install.remediation.retries``) and finds its line for the error.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from engine.base.schema import Field, undeclared

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


# The problem of a field whose value names something helmdeck does not implement (e.g. a verify provider): a
# Flux document's reader treats it as the unknown field helmdeck does not implement (engine.package.flux).
UNSUPPORTED_VALUE = "a value helmdeck does not implement"


class PackageError(ValueError):
    """A package file is invalid. ``str()`` reads ``file:line: field: problem (fix)``; with ``obj`` (the
    object, ``Kind namespace/name``, named where a file holds a copy of it: ``--kustomize``)
    ``file (obj): field: problem (fix)``."""

    def __init__(self, file: Path, field: str, problem: str, fix: str = "", line: int | None = None,
                 obj: str = ""):
        self.file = file
        self.field = field
        self.problem = problem
        self.fix = fix
        self.line = line
        self.obj = obj
        where = f"{file}:{line}" if line else str(file)
        where += f" ({obj})" if obj else ""
        text = f"{where}: {field}: {problem}" if field else f"{where}: {problem}"
        super().__init__(f"{text} ({fix})" if fix else text)

    @property
    def each(self) -> tuple[PackageError, ...]:
        """The problems this error stands for, one per field: itself (:class:`FieldErrors` holds several)."""
        return (self,)


class FieldErrors(PackageError):
    """Several fields of one document refused at once (every unknown field, say), each its own
    :class:`PackageError` (``each``, in the document's order); it reads as the first, and ``str()`` gives one
    line per field."""

    def __init__(self, errors: Iterable[PackageError]):
        self.errors = tuple(errors)
        first = self.errors[0]
        super().__init__(first.file, first.field, first.problem, first.fix, first.line, first.obj)
        self.args = ("\n".join(str(e) for e in self.errors),)

    @property
    def each(self) -> tuple[PackageError, ...]:
        return self.errors


def raise_all(errors: list[PackageError]) -> None:
    """Raise ``errors``: nothing when empty, the one error, or :class:`FieldErrors` over several."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise FieldErrors(errors)


def parse_duration(text: str) -> float:
    """A Go duration (``90s``, ``5m``, ``1h2m3s``, ``500ms``) in seconds; ValueError otherwise."""
    pos, total = 0, 0.0
    for m in _DURATION_PART.finditer(text):
        if m.start() != pos:
            break
        total += float(m[1]) * _UNIT_SECONDS[m[2]]
        pos = m.end()
    if pos != len(text) or not text:
        raise ValueError(f"{text!r} is not a duration")
    return total


def type_name(value: Any) -> str:
    """A YAML value's type in words ("a mapping", "null"), for error messages."""
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def lines_by_path(node: yaml.Node, path: str = "", out: dict[str, int] | None = None,
                   seen: set[int] | None = None) -> dict[str, int]:
    """Map dotted field paths to 1-based line numbers from a composed YAML node.

    An aliased node is walked once (at its anchor): aliases share nodes, and walking every
    expansion would be as costly as expanding them.
    """
    out = {} if out is None else out
    seen = set() if seen is None else seen
    if id(node) in seen:
        return out
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            sub = f"{path}.{key_node.value}" if path else str(key_node.value)
            out[sub] = key_node.start_mark.line + 1
            lines_by_path(value_node, sub, out, seen)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            sub = f"{path}[{i}]"
            out[sub] = item.start_mark.line + 1
            lines_by_path(item, sub, out, seen)
    return out


def closest(key: str, allowed: Sequence[str]) -> str | None:
    """The one of ``allowed`` closest to the unknown name ``key`` (stdlib ``difflib.get_close_matches``, as a
    shell or git suggests a command), None when none is close."""
    import difflib  # only on an error: its import (with its own) would cost every command's start

    close = difflib.get_close_matches(key, allowed, n=1)
    return close[0] if close else None


class Fields:
    """Checks the fields of one document; ``lines`` maps dotted paths to their line (1-based)."""

    def __init__(self, file: Path, lines: Mapping[str, int]):
        self.file = file
        self.lines = dict(lines)

    def error(self, path: str, problem: str, fix: str = "") -> PackageError:
        """The error for ``path``, at its line or else the line of its nearest parent that has one."""
        line = self.lines.get(path)
        probe = path
        while line is None and "." in probe:
            probe = probe.rsplit(".", 1)[0]
            line = self.lines.get(probe)
        return PackageError(self.file, path, problem, fix, line)

    def mapping(self, value: Any, path: str, allowed: Iterable[str], *, required: bool = False,
                fix: str = "") -> dict[str, Any]:
        """A mapping whose keys are all ``allowed`` (``{}`` when absent and not ``required``)."""
        if value is None:
            if required:
                raise self.error(path, "is required", fix)
            return {}
        if not isinstance(value, dict):
            raise self.error(path, f"must be a mapping, not {type_name(value)}", fix)
        allowed = tuple(allowed)
        raise_all([self.unknown(f"{path}.{key}" if path else str(key), allowed)
                   for key in value if key not in allowed])
        return value

    def unknown(self, path: str, allowed: tuple[str, ...]) -> PackageError:
        """The error of the field at ``path`` (its last part the key) that is none of ``allowed``: the closest
        allowed name suggested (stdlib ``difflib.get_close_matches``, as a shell or git suggests a command),
        then every allowed one."""
        close = closest(path.rsplit(".", 1)[-1], allowed)
        hint = f"did you mean {close}? " if close else ""
        return self.error(path, "unknown field", f"{hint}allowed here: {', '.join(allowed)}")

    def known(self, data: Any, table: tuple[Field, ...]) -> None:
        """Check that every field of the document ``data`` is declared in its field ``table`` (its whole
        nesting, :func:`engine.base.schema.undeclared`), so one run of the loader shows every typo. Raises
        PackageError naming the one unknown field, its line and the closest known name; :class:`FieldErrors`
        for several."""
        raise_all([self.unknown(path, names) for path, names in undeclared(table, data)])

    def sequence(self, value: Any, path: str, fix: str = "") -> list[Any]:
        """A list (``[]`` when absent). Raises PackageError "must be a list, not <type>" with ``fix``."""
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.error(path, f"must be a list, not {type_name(value)}", fix)
        return value

    def string(self, value: Any, path: str, *, required: bool = False, fix: str = "") -> str:
        """A string (``""`` when absent and not ``required``; a required one must not be empty)."""
        if value is None:
            if required:
                raise self.error(path, "is required", fix)
            return ""
        if not isinstance(value, str):
            raise self.error(path, f"must be a string, not {type_name(value)}", fix)
        if required and not value:
            raise self.error(path, "must not be empty", fix)
        return value

    def boolean(self, value: Any, path: str) -> bool | None:
        """true or false; None when absent."""
        if value is None:
            return None
        if not isinstance(value, bool):
            raise self.error(path, f"must be true or false, not {type_name(value)}")
        return value

    def flags(self, section: dict[str, Any], path: str, names: Iterable[str]) -> dict[str, bool]:
        """Boolean fields of ``section`` (camelCase) that are set, as snake_case keyword arguments."""
        out = {}
        for name in names:
            value = Fields.boolean(self, section.get(name), f"{path}.{name}")
            if value is not None:
                out[re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()] = value
        return out

    def choice(self, value: Any, path: str, choices: tuple[str, ...], default: str) -> str:
        """One of ``choices`` (``default`` when absent)."""
        if value is None:
            return default
        text = self.string(value, path)
        if text not in choices:
            raise self.error(path, f"unknown value {text!r}", f"use one of: {', '.join(repr(c) for c in choices)}")
        return text
