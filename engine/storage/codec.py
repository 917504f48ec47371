"""Codec for Helm release storage records, as Helm's secrets/configmaps drivers.

A record holds one release revision. Its object is named
``sh.helm.release.v1.<release>.v<revision>``, typed ``helm.sh/release.v1``
(Secrets), labelled ``name``, ``owner=helm``, ``status``, ``version`` (plus
``createdAt``/``modifiedAt`` and the release's custom labels), and its
``release`` key holds base64(gzip(JSON of the release)). Helm also accepts a
payload that is base64 of plain JSON (no gzip magic), and so do we.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import zlib
from dataclasses import dataclass
from typing import Any

RELEASE_TYPE = "helm.sh/release.v1"
RECORD_PREFIX = "sh.helm.release.v1."
OWNER_SELECTOR = "owner=helm"
# Labels Helm's storage drivers set themselves; all others are release labels.
SYSTEM_LABELS = frozenset({"name", "owner", "status", "version", "createdAt", "modifiedAt"})
_GZIP_MAGIC = b"\x1f\x8b\x08"


class StorageDecodeError(ValueError):
    """A storage record could not be decoded; ``reason`` says which step failed."""

    def __init__(self, key: str, reason: str):
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason


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


def decode_payload(payload: str | bytes, key: str = "") -> dict[str, Any]:
    """Decode a ``release`` payload (base64 of gzip or plain JSON) to the release dict.

    Raises :class:`StorageDecodeError` naming the failed step (base64, gzip,
    JSON, or not an object); never any other exception.
    """
    try:
        raw = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError, TypeError) as exc:
        raise StorageDecodeError(key, f"payload is not valid base64 ({exc})") from None
    if raw[:3] == _GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise StorageDecodeError(key, f"payload is not valid gzip ({exc})") from None
    try:
        release = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise StorageDecodeError(key, f"payload is not valid JSON ({exc})") from None
    if not isinstance(release, dict):
        raise StorageDecodeError(key, f"payload is JSON {type(release).__name__}, not an object")
    return release


def encode_payload(release: dict[str, Any]) -> str:
    """Encode a release dict the way Helm's drivers do: base64(gzip(JSON)).

    Labels are not part of the payload (Helm keeps them on the object only),
    so a ``labels`` key is dropped.
    """
    body = {k: v for k, v in release.items() if k != "labels"}
    data = json.dumps(body, separators=(",", ":")).encode()
    return base64.b64encode(gzip.compress(data, compresslevel=9, mtime=0)).decode()


def secret_payload(obj: dict[str, Any]) -> str | None:
    """The ``release`` payload of a Secret object as the API returns it (one more base64 layer)."""
    data = obj.get("data") or {}
    value = data.get("release")
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True).decode("ascii")
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return "\x00invalid"  # let decode_payload report it as bad base64


def configmap_payload(obj: dict[str, Any]) -> str | None:
    """The ``release`` payload of a ConfigMap object."""
    value = (obj.get("data") or {}).get("release")
    return value if isinstance(value, str) else None


def release_labels(obj_labels: dict[str, str] | None) -> dict[str, str]:
    """Custom release labels: the object's labels minus Helm's system labels."""
    return {k: v for k, v in (obj_labels or {}).items() if k not in SYSTEM_LABELS}
