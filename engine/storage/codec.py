"""Codec for Helm release storage records, as Helm's secrets and configmaps drivers.

A record holds one release revision. Its object is named
``sh.helm.release.v1.<release>.v<revision>`` (Secrets are also typed
``helm.sh/release.v1``), labelled ``name``, ``owner=helm``, ``status``,
``version`` (plus ``createdAt``/``modifiedAt`` and the release's custom
labels), and its ``release`` key holds base64(gzip(JSON of the release)).
Helm also accepts a payload that is base64 of plain JSON (no gzip magic),
and so do we. In a Secret the API adds one more base64 layer (``data``).

Every decoding problem raises a subclass of :class:`StorageDecodeError`
naming the record and the step that failed; nothing else escapes. Where
Helm (Go's ``encoding/json``) would refuse a record, so do we: a field of
the wrong JSON type, a non-integer version, a time that is not RFC 3339.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import math
import os
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import orjson

RELEASE_TYPE = "helm.sh/release.v1"
RECORD_PREFIX = "sh.helm.release.v1."
OWNER_SELECTOR = "owner=helm"
# Labels Helm's storage drivers set themselves; all others are release labels
# (Helm's filterSystemLabels).
SYSTEM_LABELS = frozenset({"name", "owner", "status", "version", "createdAt", "modifiedAt"})
# The API server refuses Secret and ConfigMap data over 1 MiB, so a larger
# payload cannot have come from a cluster.
MAX_PAYLOAD_BYTES = 1024 * 1024
# Decompressed release JSON above this is treated as a gzip bomb, not a release.
MAX_RELEASE_JSON_BYTES = 128 * 1024 * 1024
# Helm's release-name rule (chartutil.ValidateReleaseName): 53 characters at
# most, because names end up in label values and resource names.
MAX_RELEASE_NAME = 53
_RELEASE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_RECORD_NAME = re.compile(r"^sh\.helm\.release\.v1\.(?P<name>.+)\.v(?P<version>[0-9]+)\Z")
_GZIP_MAGIC = b"\x1f\x8b\x08"
# A JSON escape of a UTF-16 surrogate: only then can decoded text hold a lone one.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
# Paired surrogates are joined by the JSON decoder, so any left over is lone.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

Driver = Literal["secret", "configmap"]
# HELM_DRIVER values, as Helm's action.Configuration.Init spells them.
_DRIVER_NAMES: dict[str, Driver] = {
    "": "secret", "secret": "secret", "secrets": "secret",
    "configmap": "configmap", "configmaps": "configmap",
}


class StorageDecodeError(ValueError):
    """A storage record could not be decoded.

    ``key`` names the record (``namespace/object-name``), ``reason`` says
    what is wrong in words, ``code`` is a stable short identifier of the
    kind of problem (one per subclass).
    """

    code: ClassVar[str] = "undecodable"

    def __init__(self, key: str, reason: str):
        super().__init__(f"{key}: {reason}" if key else reason)
        self.key = key
        self.reason = reason


class RecordTooLargeError(StorageDecodeError):
    """The payload is over 1 MiB, or decompresses to more than 128 MiB."""

    code = "too-large"


class PayloadBase64Error(StorageDecodeError):
    """The payload is not valid base64."""

    code = "bad-base64"


class PayloadGzipError(StorageDecodeError):
    """The payload starts like gzip but does not decompress."""

    code = "bad-gzip"


class PayloadJSONError(StorageDecodeError):
    """The (decompressed) payload is not a JSON object Helm could read."""

    code = "bad-json"


class MissingPayloadError(StorageDecodeError):
    """The object has no ``release`` data key."""

    code = "no-payload"


class ReleaseFieldError(StorageDecodeError):
    """A release field is missing or has a type Helm cannot read; ``field`` is its dotted path."""

    code = "bad-field"

    def __init__(self, key: str, field: str, problem: str):
        super().__init__(key, f"release field {field!r} {problem}")
        self.field = field


class UnknownStatusError(StorageDecodeError):
    """``info.status`` is not one of Helm's release statuses."""

    code = "unknown-status"

    def __init__(self, key: str, status: str):
        super().__init__(key, f"unknown release status {status!r}")
        self.status = status


class ReleaseNameError(StorageDecodeError):
    """The release name breaks Helm's rule (53 characters, DNS-like); helm cannot operate on it."""

    code = "bad-name"


class RecordMismatchError(StorageDecodeError):
    """The object's name does not match the name and revision inside its payload."""

    code = "mismatch"


class UnsupportedDriverError(ValueError):
    """``HELM_DRIVER`` names a driver helmdeck cannot observe (memory, sql, or unknown)."""


@dataclass(frozen=True, order=True)
class StorageKey:
    """Identity of one storage record: ``namespace/sh.helm.release.v1.<name>.v<n>``."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


def record_name(release: str, revision: int) -> str:
    """Storage object name of ``release`` at ``revision``, as Helm's ``makeKey``."""
    return f"{RECORD_PREFIX}{release}.v{revision}"


def parse_record_name(name: str) -> tuple[str, int] | None:
    """``(release, revision)`` from a storage object name, or None if it is not one."""
    match = _RECORD_NAME.match(name)
    if match is None:
        return None
    return match["name"], int(match["version"])


def validate_release_name(name: str, key: str = "") -> None:
    """Raise :class:`ReleaseNameError` unless ``name`` passes Helm's release-name rule."""
    if len(name) > MAX_RELEASE_NAME:
        raise ReleaseNameError(key, f"release name is {len(name)} characters; Helm allows {MAX_RELEASE_NAME}")
    if not _RELEASE_NAME.match(name):
        raise ReleaseNameError(key, f"release name {name!r} is not a valid Helm release name")


def driver_from_env(environ: Mapping[str, str] | None = None) -> Driver:
    """The storage driver ``HELM_DRIVER`` selects, as Helm reads it (unset: secrets).

    Raises :class:`UnsupportedDriverError` for ``memory`` and ``sql`` (not
    observable in a cluster) and for names Helm does not know.
    """
    value = (os.environ if environ is None else environ).get("HELM_DRIVER", "")
    driver = _DRIVER_NAMES.get(value)
    if driver is None:
        raise UnsupportedDriverError(
            f"HELM_DRIVER={value!r}: helmdeck observes the 'secret' and 'configmap' drivers only"
        )
    return driver


def decode_payload(payload: str | bytes, key: str = "") -> dict[str, Any]:
    """Decode a ``release`` payload (base64 of gzip or of plain JSON) to the release dict.

    JSON is read as Go reads it for Helm: NaN, infinities and numbers out of
    a double's range are refused, invalid UTF-8 and lone surrogates become
    U+FFFD. Raises :class:`RecordTooLargeError`, :class:`PayloadBase64Error`,
    :class:`PayloadGzipError` or :class:`PayloadJSONError`; never any other
    exception.
    """
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise RecordTooLargeError(key, f"payload is {len(payload)} bytes; storage records hold at most 1 MiB")
    try:
        raw = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError, TypeError) as exc:
        raise PayloadBase64Error(key, f"payload is not valid base64 ({exc})") from None
    if raw[:3] == _GZIP_MAGIC:
        raw = _gunzip(raw, key)
    return _parse_release_json(raw, key)


def _gunzip(raw: bytes, key: str) -> bytes:
    """Inflate every gzip member (as Go's multistream reader), refusing output past the limit."""
    parts: list[bytes] = []
    size = 0
    rest = raw
    try:
        while rest:
            member = zlib.decompressobj(wbits=31)
            part = member.decompress(rest, MAX_RELEASE_JSON_BYTES + 1 - size)
            size += len(part)
            if size > MAX_RELEASE_JSON_BYTES or member.unconsumed_tail:
                raise RecordTooLargeError(key, f"payload decompresses to more than {MAX_RELEASE_JSON_BYTES} bytes")
            if not member.eof:
                raise PayloadGzipError(key, "payload is not valid gzip (truncated stream)")
            parts.append(part)
            rest = member.unused_data
    except zlib.error as exc:
        raise PayloadGzipError(key, f"payload is not valid gzip ({exc})") from None
    return b"".join(parts)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} is out of range")
    return value


def _checked_int(text: str) -> int:
    value = int(text)
    try:
        float(value)  # Go reads JSON numbers as doubles: this one must fit
    except OverflowError:
        raise ValueError(f"number {text[:40]}... is out of range") from None
    return value


def _no_constant(text: str) -> Any:
    raise ValueError(f"{text} is not JSON")


# Digit runs this long may be integers past 64 bits, which orjson reads as floats: the stdlib reads those.
_LONG_DIGITS = re.compile(rb"\d{19}")


def _parse_release_json(raw: bytes, key: str) -> dict[str, Any]:
    # A compiled decoder first (~10x faster): it refuses NaN, infinities, invalid UTF-8 and lone surrogates,
    # which the stdlib path below then reads with Go's rules (or refuses with the reason).
    if not _LONG_DIGITS.search(raw):
        try:
            fast = orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
        else:
            if isinstance(fast, dict):
                return fast
    try:
        release = json.loads(
            raw.decode("utf-8", "replace"),
            parse_float=_finite_float, parse_int=_checked_int, parse_constant=_no_constant,
        )
    except (ValueError, RecursionError) as exc:
        raise PayloadJSONError(key, f"payload is not valid JSON ({str(exc)[:200]})") from None
    if not isinstance(release, dict):
        raise PayloadJSONError(key, f"payload is JSON {type(release).__name__}, not an object")
    if _SURROGATE_ESCAPE.search(raw):
        cleaned: dict[str, Any] = _replace_lone_surrogates(release)
        return cleaned
    return release


def _replace_lone_surrogates(value: Any) -> Any:
    """Replace lone UTF-16 surrogates with U+FFFD, as Go's JSON decoder does."""
    if isinstance(value, str):
        return value if value.isascii() else _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_replace_lone_surrogates(k): _replace_lone_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_lone_surrogates(v) for v in value]
    return value


def encode_payload(release: dict[str, Any]) -> str:
    """Encode a release dict the way Helm's drivers do: base64(gzip(JSON)), best compression.

    Labels are not part of the payload (Helm keeps them on the object only),
    so a ``labels`` key is dropped. Key order is kept as given.
    """
    body = {k: v for k, v in release.items() if k != "labels"}
    data = json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
    return base64.b64encode(gzip.compress(data, compresslevel=9, mtime=0)).decode()


def secret_payload(obj: Mapping[str, Any]) -> str | None:
    """The ``release`` payload of a Secret object as the API returns it (one more base64 layer).

    None when there is no ``release`` key; undecodable outer base64 yields a
    string :func:`decode_payload` reports as bad base64.
    """
    value = (obj.get("data") or {}).get("release")
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True).decode("ascii")
    except (binascii.Error, ValueError):
        return "\x00invalid"


def configmap_payload(obj: Mapping[str, Any]) -> str | None:
    """The ``release`` payload of a ConfigMap object, or None when absent."""
    value = (obj.get("data") or {}).get("release")
    return value if isinstance(value, str) else None


def object_payload(obj: Mapping[str, Any], driver: Driver) -> str | None:
    """The ``release`` payload of a storage object of ``driver``, or None when absent."""
    return secret_payload(obj) if driver == "secret" else configmap_payload(obj)


def release_labels(obj_labels: Mapping[str, str] | None) -> dict[str, str]:
    """Custom release labels: the object's labels minus Helm's system labels."""
    return {k: v for k, v in (obj_labels or {}).items() if k not in SYSTEM_LABELS}


def is_record(obj: Mapping[str, Any], driver: Driver) -> bool:
    """True for a Helm release record of ``driver`` (name prefix; Secrets also by type)."""
    name = str((obj.get("metadata") or {}).get("name", ""))
    if not name.startswith(RECORD_PREFIX):
        return False
    return driver != "secret" or obj.get("type") == RELEASE_TYPE
