"""The digest of a release's values in Flux's format: ``chartutil.DigestValues`` (fluxcd/pkg/chartutil digest.go),
the ``configDigest`` of helm-controller's ``status.history`` snapshots (internal/release/observation.go
``ObservedToSnapshot``).

Flux hashes the values' YAML, not JSON: sigs.k8s.io/yaml ``JSONObjectToYAMLObject`` (a float64 with an integer
value becomes an int64, or a uint64 past it), keys sorted by byte order at every level (chartutil sort.go
``SortMapSlice``), written by go-yaml v2's encoder (block style, indent 2, width 80, unicode as is: a port of
libyaml's emitter, which PyYAML's C emitter is too). Empty values digest as nothing at all. A value is the JSON
helm stores (``Observation.config``): numbers are Go's float64, so an integer past 2**53 is its float.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterator, Mapping
from datetime import date
from decimal import Decimal
from typing import Any

import yaml

_STR, _INT, _FLOAT, _BOOL, _NULL, _OTHER = "str", "int", "float", "bool", "null", "other"

# go-yaml v2 resolve.go: the plain scalars YAML 1.1 reads as something other than a string.
_BOOLS = frozenset(["y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "true", "True", "TRUE", "false",
                    "False", "FALSE", "on", "On", "ON", "off", "Off", "OFF"])
_NULLS = frozenset(["", "~", "null", "Null", "NULL"])
_SPECIAL_FLOATS = frozenset([".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF", ".nan",
                             ".NaN", ".NAN"])
_YAML_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")  # resolve.go yamlStyleFloat
_BASE60 = re.compile(r"^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$")  # encode.go base60float
_TIMESTAMP_FORMATS = (  # resolve.go allowedTimestampFormats, as regular expressions of their shapes
    re.compile(r"^[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}[Tt][0-9]{1,2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[-+][0-9]{2}:[0-9]{2})$"),
    re.compile(r"^[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}[Tt][0-9]{1,2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?$"),
    re.compile(r"^[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}[ \t]+[0-9]{1,2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?$"),
    re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"),
)
_INT64 = 2**63
_UINT64 = 2**64


def digest_values(values: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of ``values`` as ``chartutil.DigestValues(digest.Canonical, values)`` makes it."""
    if not values:
        return "sha256:" + hashlib.sha256(b"").hexdigest()
    return "sha256:" + hashlib.sha256(encode(values).encode("utf-8")).hexdigest()


def encode(values: Mapping[str, Any]) -> str:
    """``values`` as chartutil's ``Encode(w, values, SortMapSlice)`` writes them (see the module docstring)."""
    events: list[yaml.Event] = [yaml.StreamStartEvent(encoding="utf-8"), yaml.DocumentStartEvent(explicit=False),
                                *_node(values), yaml.DocumentEndEvent(explicit=False), yaml.StreamEndEvent()]
    out = str(yaml.emit(events, Dumper=getattr(yaml, "CDumper", yaml.Dumper), allow_unicode=True, width=80,
                        indent=2))
    # libyaml ends a document whose last scalar keeps its trailing breaks (``|+``) with "...", go-yaml v2 does not;
    # no content line can be "..." (a scalar so is quoted, and every value is indented under its key).
    return out.removesuffix("...\n")


def _node(value: Any) -> Iterator[yaml.Event]:
    if isinstance(value, Mapping):
        yield yaml.MappingStartEvent(anchor=None, tag=None, implicit=True, flow_style=False)
        for key in sorted(value, key=str):
            yield _string(str(key))
            yield from _node(value[key])
        yield yaml.MappingEndEvent()
    elif isinstance(value, list | tuple):
        yield yaml.SequenceStartEvent(anchor=None, tag=None, implicit=True, flow_style=False)
        for item in value:
            yield from _node(item)
        yield yaml.SequenceEndEvent()
    elif value is None:
        yield _plain("null")
    elif isinstance(value, bool):
        yield _plain("true" if value else "false")
    elif isinstance(value, int | float):
        yield _plain(number_text(value))
    else:
        yield _string(str(value))


def _plain(text: str) -> yaml.ScalarEvent:
    return yaml.ScalarEvent(anchor=None, tag=None, implicit=(True, True), value=text, style=None)


def _string(text: str) -> yaml.ScalarEvent:
    """A string as go-yaml v2's ``stringv`` styles it: literal with a line break, plain where YAML 1.1 would
    read it back as this string, else double-quoted (the emitter may still quote a plain one)."""
    if "\n" in text:
        style: str | None = "|"
    elif _resolves_to(text) == _STR and not _BASE60.match(text):
        style = None
    else:
        style = '"'
    return yaml.ScalarEvent(anchor=None, tag=None, implicit=(True, True), value=text, style=style)


def _resolves_to(text: str) -> str:
    """What go-yaml v2's ``resolve("", text)`` makes of a plain scalar, by its first character's hint: a letter of
    ``yYnNtTfFoO~`` (or none) looks the scalar up (booleans, nulls); ``.`` a float too; a digit or sign the
    special floats, a timestamp, an integer (``strconv.ParseInt``/``ParseUint`` base 0, ``_`` dropped), a
    YAML-style float or ``0b`` binary; anything else is a string."""
    first = text[:1]
    if first and first not in "yYnNtTfFoO~.+-0123456789":
        return _STR
    if text in _BOOLS:
        return _BOOL
    if text in _NULLS:
        return _NULL
    if text in _SPECIAL_FLOATS:
        return _FLOAT
    if first in ("", ".") or first in "yYnNtTfFoO~":
        return _FLOAT if first == "." and _finite_float(text, r"\.[0-9]+([eE][-+]?[0-9]+)?") else _STR
    if any(f.match(text) for f in _TIMESTAMP_FORMATS) and _valid_timestamp(text):
        return _OTHER
    plain = text.replace("_", "")
    if _go_int(plain) is not None:
        return _INT
    if _finite_float(plain, _YAML_FLOAT.pattern.strip("^$")):
        return _FLOAT
    for prefix in ("0b", "-0b"):
        rest = plain[len(prefix):]
        if plain.startswith(prefix) and rest and all(c in "01" for c in rest) and int(rest, 2) < _UINT64:
            return _INT
    return _STR


def _finite_float(text: str, shape: str) -> bool:
    """Does ``text`` have ``shape`` and parse as a finite float64 (Go's ParseFloat fails out of range)?"""
    return re.fullmatch(shape, text) is not None and math.isfinite(float(text))


def _valid_timestamp(text: str) -> bool:
    """Does the date part name a real day (Go's time.Parse refuses month 13 or day 32)?"""
    try:
        y, m, d = (int(p) for p in re.split(r"[-Tt \t]", text)[:3])
        date(y, m, d)
    except ValueError:
        return False
    return True


_GO_INT = re.compile(r"([-+]?)(?:0[xX]([0-9a-fA-F]+)|0[oO]([0-7]+)|0[bB]([01]+)|0([0-7]*)|([1-9][0-9]*))")


def _go_int(text: str) -> int | None:
    """``strconv.ParseInt(text, 0, 64)``, else ``ParseUint`` (no sign): None when neither parses."""
    m = _GO_INT.fullmatch(text)
    if m is None:
        return None
    sign, hexa, octal, binary, old_octal, decimal = m.groups()
    if hexa is not None:
        n = int(hexa, 16)
    elif octal is not None:
        n = int(octal, 8)
    elif binary is not None:
        n = int(binary, 2)
    elif old_octal is not None:
        n = int(old_octal or "0", 8)
    else:
        n = int(decimal)
    if sign == "-":
        n = -n
    if -_INT64 <= n < _INT64 or (not sign and n < _UINT64):
        return n
    return None


def number_text(value: int | float) -> str:
    """A JSON number as go-yaml v2 writes it after ``JSONObjectToYAMLObject``: helm's float64 with an integer
    value as an int64 (or uint64), another as ``strconv.FormatFloat(f, 'g', -1, 64)`` (``.inf``, ``.nan``)."""
    f = float(value)
    if math.isnan(f):
        return ".nan"
    if math.isinf(f):
        return ".inf" if f > 0 else "-.inf"
    if f.is_integer() and -_INT64 <= f < _UINT64:
        return str(int(f))
    return _format_g(f)


def _format_g(f: float) -> str:
    """Go's ``strconv.FormatFloat(f, 'g', -1, 64)``: the shortest digits, exponent form (at least two digits)
    when the exponent is below -4 or at least 6 (strconv's ftoa.go: the shortest form decides with precision 6)."""
    sign = "-" if f < 0 else ""
    _, digits, exponent = Decimal(repr(abs(f))).normalize().as_tuple()
    text = "".join(map(str, digits))
    assert isinstance(exponent, int)
    dp = len(text) + exponent  # the decimal point's place after the first digit's
    exp = dp - 1
    if exp < -4 or exp >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{sign}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if dp <= 0:
        return f"{sign}0.{'0' * -dp}{text}"
    if dp >= len(text):
        return f"{sign}{text}{'0' * (dp - len(text))}"
    return f"{sign}{text[:dp]}.{text[dp:]}"
