"""YAML values read as helm reads them: helm's ``ReadValues`` (helm.sh/helm/v4 pkg/chart/common values.go, as
Flux's ``ChartValuesFromReferences`` reads a ``valuesFrom`` key) goes through sigs.k8s.io/yaml, which reads
YAML with go-yaml v2's rules (go.yaml.in/yaml/v2 resolve.go ``resolve``) and then round-trips it through JSON.
PyYAML's rules differ, so a plain scalar means what it means to helm only when read here:

- ``y``, ``Y``, ``yes``, ``on`` (any of their spellings in go-yaml's table) are true, ``n``, ``no``, ``off``
  false, as ``true``/``false``; ``~``, ``null`` and nothing are null;
- a number is what Go's ``strconv.ParseInt(text, 0, 64)`` reads once every ``_`` is removed (``0o17``,
  ``017``, ``0x1F``, ``0b101``, ``+12``), else an unsigned 64-bit integer, else a float of YAML's shape
  (``1e3``, ``.5``, ``08``, ``1.``); any other text (``1:20``, ``2001-12-14``) stays a string;
- ``.inf`` and ``.nan`` cannot become JSON: the values are refused, as helm refuses them;
- after the JSON round trip every number is a float64: an integer beyond 2**53 loses its low digits;
- keys become strings as sigs.k8s.io/yaml writes them (``true``, ``1``); a null key is refused.

A quoted scalar is a string, an explicit tag (``!!str``) is kept, and merge keys (``<<``) merge, as in both.
"""

from __future__ import annotations

import math
import re
import struct
from pathlib import Path
from typing import Any

import yaml

from engine.base.loader import Limits, Loader, Parsed, YamlLimitError, parse_text

_BOOLS = {**dict.fromkeys(("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), True),
          **dict.fromkeys(("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), False)}
_NULLS = ("", "~", "null", "Null", "NULL")
_INFINITE = (".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF", ".nan", ".NaN", ".NAN")
_YAML_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_DOT_FLOAT = re.compile(r"\.[0-9]+([eE][-+]?[0-9]+)?")
_BASES = {"0x": (16, "0123456789abcdefABCDEF"), "0o": (8, "01234567"), "0b": (2, "01")}
_INT64 = 2**63
_EXACT = 2**53  # float64 holds every integer up to here

_BOOL_TAG = "tag:yaml.org,2002:bool"
_NULL_TAG = "tag:yaml.org,2002:null"
_NUMBER_TAG = "tag:helmdeck.dev,2026:go-yaml-number"  # a plain scalar go-yaml reads as a number, or not
_INFINITE_TAG = "tag:helmdeck.dev,2026:go-yaml-infinite"


class _Infinite(float):
    """A value JSON cannot hold (``.inf``, ``.nan``), refused after construction."""


class HelmValuesLoader(Loader):  # type: ignore[misc]
    """:data:`engine.base.loader.Loader` with go-yaml v2's rules for plain scalars and sigs.k8s.io/yaml's string
    keys (module docstring: keys 1 and true stay two keys, where Python's dict would hold one)."""

    yaml_implicit_resolvers: dict[str | None, list[tuple[str, re.Pattern[str]]]] = {}

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[str, Any]:
        self.flatten_mapping(node)  # merge keys (<<)
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            try:
                key = _key(self.construct_object(key_node, deep=deep))
            except ValueError as exc:
                raise yaml.constructor.ConstructorError(None, None, str(exc), key_node.start_mark) from None
            out[key] = self.construct_object(value_node, deep=deep)
        return out


def _add(tag: str, pattern: str, first: list[str | None]) -> None:
    HelmValuesLoader.add_implicit_resolver(tag, re.compile(pattern), first)


_add(_BOOL_TAG, "^(?:" + "|".join(_BOOLS) + ")$", list({k[0] for k in _BOOLS}))
_add(_NULL_TAG, r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""])
_add(_INFINITE_TAG, "^(?:" + "|".join(re.escape(t) for t in _INFINITE) + ")$", [".", "+", "-"])
_add(_NUMBER_TAG, r"^[-+0-9.].*$", list("-+0123456789."))
_add("tag:yaml.org,2002:merge", r"^(?:<<)$", ["<"])


def _construct_bool(loader: Any, node: yaml.ScalarNode) -> bool:
    if node.value in _BOOLS:
        return _BOOLS[node.value]
    return bool(loader.construct_yaml_bool(node))  # an explicit !!bool


def _construct_number(loader: Any, node: yaml.ScalarNode) -> Any:
    return go_number(node.value)


def _construct_infinite(loader: Any, node: yaml.ScalarNode) -> _Infinite:
    if "nan" in node.value.lower():
        return _Infinite(math.nan)
    return _Infinite(-math.inf if node.value.startswith("-") else math.inf)


HelmValuesLoader.add_constructor(_BOOL_TAG, _construct_bool)
HelmValuesLoader.add_constructor(_NUMBER_TAG, _construct_number)
HelmValuesLoader.add_constructor(_INFINITE_TAG, _construct_infinite)


def go_number(text: str) -> int | float | str:
    """A plain scalar starting with a digit, a sign or a dot as go-yaml v2 reads it (module docstring):
    an integer, a float, or the text itself."""
    if text.startswith("."):  # go-yaml: strconv.ParseFloat of the text as it is
        return float(text) if _DOT_FLOAT.fullmatch(text) else text
    plain = text.replace("_", "")
    number = _go_int(plain)
    if number is not None:
        return number
    if _YAML_FLOAT.fullmatch(plain):
        value = float(plain)
        return value if math.isfinite(value) else text  # ParseFloat's range error: the text stays a string
    return text


def _go_int(text: str) -> int | None:
    """``strconv.ParseInt(text, 0, 64)``, else ``strconv.ParseUint(text, 0, 64)``; None when neither reads it."""
    sign, body = (text[0], text[1:]) if text[:1] in "+-" else ("", text)
    base, digits = 10, body
    prefix = body[:2].lower()
    if prefix in _BASES:
        base, digits = _BASES[prefix][0], body[2:]
        allowed = _BASES[prefix][1]
    elif len(body) > 1 and body[0] == "0":
        base, digits, allowed = 8, body[1:], _BASES["0o"][1]
    else:
        allowed = "0123456789"
    if not digits or any(c not in allowed for c in digits):
        return None
    value = int(digits, base) * (-1 if sign == "-" else 1)
    if -_INT64 <= value < _INT64 or (not sign and value < 2 * _INT64):
        return value
    return None


def read_values(text: str, file: Path, limits: Limits) -> Parsed:
    """``text`` (one YAML document) read as helm's ``ReadValues`` reads it (module docstring), within ``limits``.
    Raises YamlLimitError: malformed, over a limit, a value JSON cannot hold or a key that cannot be a string."""
    parsed = parse_text(text, file, limits, HelmValuesLoader)
    try:
        data = _as_json(parsed.data)
    except ValueError as exc:
        raise YamlLimitError(file, str(exc), None, "write the value as a string (in quotes)") from None
    return Parsed(data, parsed.node, parsed.serial)


def _as_json(value: Any) -> Any:
    """``value`` after sigs.k8s.io/yaml's trip through JSON (module docstring). Raises ValueError."""
    if isinstance(value, dict):
        return {k: _as_json(v) for k, v in value.items()}  # keys made strings as read
    if isinstance(value, list):
        return [_as_json(v) for v in value]
    if isinstance(value, _Infinite):
        raise ValueError(f"{'NaN' if math.isnan(value) else 'an infinite number'} cannot be a value "
                         "(helm: error converting YAML to JSON)")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > _EXACT:
        return float(value)
    return value


def _key(key: Any) -> str:
    """A map key as sigs.k8s.io/yaml makes it a string. Raises ValueError for a null or another kind."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        return str(key)
    if isinstance(key, _Infinite):
        return ".nan" if math.isnan(key) else ".inf" if key > 0 else "-.inf"
    if isinstance(key, float):
        return _float32_g(key)
    raise ValueError(f"the key {key!r} cannot be a string key (helm: unsupported map key)")


def _float32_g(value: float) -> str:
    """Go's ``strconv.FormatFloat(value, 'g', -1, 32)``: the shortest text of its float32 value, with an
    exponent below 1e-4 or from 1e6 (Go's rule for the shortest precision)."""
    single = struct.unpack("f", struct.pack("f", value))[0]
    for digits in range(1, 10):
        text = f"{single:.{digits}e}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == single:
            break
    mantissa, exponent = text.split("e")
    exp = int(exponent)
    if -4 <= exp < 6:
        out = f"{float(text):f}".rstrip("0").rstrip(".")
        return out or "0"
    mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{'+' if exp >= 0 else '-'}{abs(exp):02d}"
