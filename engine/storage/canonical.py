"""Canonical JSON: the JSON Canonicalization Scheme of RFC 8785 (JCS).

Digests of observations and values are sha256 over these bytes, so any
implementation of RFC 8785 reproduces them (see docs/storage.md). In short:

- no whitespace; object members sorted by their keys' UTF-16 code units;
- strings in UTF-8, escaping only ``"``, ``\\``, and U+0000..U+001F (as
  ``\\b \\t \\n \\f \\r`` or ``\\u00xx`` in lower-case hex);
- numbers as ECMAScript's ``Number.prototype.toString`` prints the IEEE-754
  double: ``1`` for 1.0, ``1e+21``, ``1.5e-7``, ``0`` for -0.0.

Python integers beyond ±2**53 are first converted to a double, as every JCS
(and Go, hence Helm) reader would. Object keys that are not strings (YAML
allows ``1:`` or ``true:``) are converted as Python's json module converts
them; booleans, None, strings, numbers, lists, tuples and dicts are the only
accepted values.
"""

from __future__ import annotations

import hashlib
import math
from json.encoder import encode_basestring
from typing import Any

_EXACT_INT = 2**53


def canonical_json(value: Any) -> bytes:
    """RFC 8785 canonical JSON of ``value`` as UTF-8 bytes.

    Raises TypeError for values JSON cannot hold, ValueError for NaN or an
    infinity, UnicodeEncodeError for strings holding lone surrogates.
    """
    out: list[str] = []
    _encode(value, out)
    return "".join(out).encode("utf-8")


def sha256_hex(data: bytes) -> str:
    """Lower-case hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def _encode(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(encode_basestring(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(str(value) if -_EXACT_INT < value < _EXACT_INT else format_number(float(value)))
    elif isinstance(value, float):
        out.append(format_number(value))
    elif isinstance(value, dict):
        members = {_key(k): v for k, v in value.items()}
        keys = sorted(members) if all(k.isascii() for k in members) else sorted(members, key=_utf16)
        out.append("{")
        for i, k in enumerate(keys):
            if i:
                out.append(",")
            out.append(encode_basestring(k))
            out.append(":")
            _encode(members[k], out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _encode(item, out)
        out.append("]")
    else:
        raise TypeError(f"{type(value).__name__} is not JSON")


def _utf16(key: str) -> bytes:
    # Big-endian UTF-16 bytes compare exactly as RFC 8785's UTF-16 code units do.
    return key.encode("utf-16-be", "surrogatepass")


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool | int | float):
        return canonical_json(key).decode()
    raise TypeError(f"object key {key!r} is not JSON")


def format_number(value: float) -> str:
    """ECMAScript ``Number.prototype.toString`` of a finite double (RFC 8785 section 3.2.2.3).

    Raises ValueError for NaN and infinities (JSON has no such numbers).
    """
    if not math.isfinite(value):
        raise ValueError(f"{value} is not a JSON number")
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    # repr gives the shortest digits that round-trip, as ECMAScript requires.
    mantissa, _, exp_text = repr(abs(value)).partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    # n: the decimal point sits after the n-th digit (value = 0.d1d2... * 10**n).
    n = len(whole) + (int(exp_text) if exp_text else 0) - (len(whole + frac) - len(digits))
    digits = digits.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + digits
    exp = n - 1
    exp_part = f"e{'+' if exp > 0 else '-'}{abs(exp)}"
    return sign + (digits if k == 1 else digits[0] + "." + digits[1:]) + exp_part
