"""The digest of a stored release in Flux's format: the ``digest`` of helm-controller v1.6.3's ``status.history``
snapshots (internal/release/digest.go ``Digest`` over internal/release/observation.go ``ObserveRelease``).

Flux hashes ``json.NewEncoder(sha256).Encode(observation)``: Go's encoding/json of an ``Observation`` (its fields in
struct order: ``name``, ``version``, ``info``, ``chartMetadata``, ``config``, ``manifest``, ``hooks``, ``namespace``,
``ociDigest`` when set: :class:`ReleaseDigest`) followed by the encoder's newline. The nested values are helm's own
structs at the version helm-controller v1.6.3 pins (helm v4.2: pkg/release/v1 ``Info`` and ``Hook``, pkg/chart/v2
``Metadata``), each as its JSON tags and ``MarshalJSON`` write it: unset times and empty fields left out, times in
RFC 3339 with nanoseconds (trailing zeros dropped, an offset of zero written ``Z``), a ``test`` hook left out entirely
(``IgnoreHookTestEvents``, so running tests does not change the digest), empty values and no hooks as ``null``.
Maps' keys are sorted by bytes; ``<``, ``>``, ``&``, U+2028 and U+2029 are escaped as ``\\u00XX``; numbers are
Go's float64 (helm decodes values into ``map[string]any``).

The input is the release JSON as helm stores it (what helm's decoder reads back; Flux verifies a stored release
by this same digest, internal/action/verify.go ``VerifyReleaseObject``).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from json.encoder import encode_basestring
from typing import Any

from engine.storage.canonical import format_number

__all__ = ["ReleaseDigest", "release_digest"]

# pkg/chart/v2 Metadata's JSON fields in struct order, every one omitempty; Maintainer's and Dependency's too
# (Dependency's name and repository are always written).
_METADATA = ("name", "home", "sources", "version", "description", "keywords", "maintainers", "icon", "apiVersion",
             "condition", "tags", "appVersion", "deprecated", "annotations", "kubeVersion", "dependencies", "type")
_MAINTAINER = ("name", "email", "url")
_DEPENDENCY = ("name", "version", "repository", "condition", "tags", "enabled", "import-values", "alias")
_DEPENDENCY_ALWAYS = frozenset({"name", "repository"})
# pkg/release/v1 Hook's fields in struct order: all omitempty but last_run.
_HOOK = ("name", "kind", "path", "manifest", "events", "last_run", "weight", "delete_policies", "output_log_policies")
_TIME = re.compile(r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:\d{2})")
_ZERO_TIME = "0001-01-01T00:00:00Z"  # Go's zero time.Time: IsZero, so Info's and HookExecution's MarshalJSON omit it
_HTML = (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029"))
_SURROGATE = re.compile("[\ud800-\udfff]")


def release_digest(release: Mapping[str, Any], oci_digest: str = "") -> str:
    """``sha256:<hex>`` of the decoded release JSON ``release`` as helm-controller's ``Digest(digest.Canonical,
    ObserveRelease(rls))`` makes it (see the module docstring), with ``oci_digest`` as the Observation's
    ``ociDigest`` (``""``: left out, as its ``omitempty`` tag does).

    Raises ValueError for a value Go could not have decoded (a non-finite number)."""
    return ReleaseDigest(release).digest(oci_digest)


class ReleaseDigest:
    """The digest of one stored release, for any ``ociDigest``: the Observation's JSON up to its last field is
    hashed once (the manifest is long), and each :meth:`digest` hashes only the rest on a copy. Flux records
    ``ociDigest`` (``status.lastAttemptedRevisionDigest``, what the release's storage does not hold) on the
    snapshot of a release whose chart came from an OCIRepository, and hashes it into the digest
    (internal/reconcile/release.go ``mutateOCIDigest``; internal/action/verify.go ``VerifySnapshot`` sets the
    snapshot's before comparing). Immutable once made: copies share it.

    Raises ValueError (from the constructor) for a value Go could not have decoded (a non-finite number)."""

    __slots__ = ("_head",)

    def __init__(self, release: Mapping[str, Any]):
        self._head = hashlib.sha256(_go_bytes("".join(_observation(release))))

    def digest(self, oci_digest: str = "") -> str:
        """``sha256:<hex>`` of the Observation with ``oci_digest`` as its ``ociDigest`` (``""``: none)."""
        h = self._head.copy()
        h.update(_go_bytes(f',"ociDigest":{_str(oci_digest)}}}\n' if oci_digest else "}\n"))
        return "sha256:" + h.hexdigest()

    def __copy__(self) -> ReleaseDigest:
        return self

    def __deepcopy__(self, _memo: object) -> ReleaseDigest:
        return self


def _go_bytes(text: str) -> bytes:
    """``text`` as Go's encoder writes it: HTML's characters and U+2028/9 escaped, UTF-8 (a lone surrogate, which
    Go's decoder made U+FFFD, as U+FFFD). Per character, so a text's parts may be converted apart."""
    for char, escaped in _HTML:  # str.replace, not a regular expression: a manifest is long and rarely has them
        if char in text:
            text = text.replace(char, escaped)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text).encode("utf-8")


def _observation(release: Mapping[str, Any]) -> list[str]:
    info = _map(release.get("info"))
    chart = _map(release.get("chart"))
    config = _map(release.get("config"))
    hooks = [h for h in _items(release.get("hooks")) if "test" not in _items(_map(h).get("events"))]
    out = ['{"name":', _str(release.get("name")), ',"version":', _int(release.get("version")), ',"info":']
    out += _info(info)
    out.append(',"chartMetadata":')
    out += _struct(_map(chart.get("metadata")), _METADATA, _metadata_field)
    out.append(',"config":')
    _value(config or None, out)
    out += [',"manifest":', _str(release.get("manifest")), ',"hooks":']
    if hooks:
        out.append("[")
        for i, hook in enumerate(hooks):
            out.append("," if i else "")
            out += _struct(_map(hook), _HOOK, _hook_field)
        out.append("]")
    else:
        out.append("null")
    out += [',"namespace":', _str(release.get("namespace"))]  # the rest (ociDigest, "}") is ReleaseDigest.digest's
    return out


def _info(info: Mapping[str, Any]) -> list[str]:
    """pkg/release/v1 ``Info.MarshalJSON``: three times (left out when unset), then description, status, notes
    (omitempty). ``resources`` is never stored."""
    parts = []
    for key in ("first_deployed", "last_deployed", "deleted"):
        if (when := _time(info.get(key))) is not None:
            parts.append(f'"{key}":{_str(when)}')
    for key in ("description", "status", "notes"):
        if info.get(key):
            parts.append(f'"{key}":{_str(info[key])}')
    return ["{", ",".join(parts), "}"]


def _time(value: Any) -> str | None:
    """A stored time as Go's ``time.Time`` writes it back after reading it (RFC 3339 with nanoseconds, no trailing
    zeros, ``Z`` for an offset of zero); None for ``""``, null or the zero time (helm 4's UnmarshalJSON reads
    helm 3's ``""`` as zero, and MarshalJSON omits zero)."""
    if not isinstance(value, str) or not value:
        return None
    m = _TIME.fullmatch(value)
    if m is None:
        return value
    head, frac, zone = m.groups()
    frac = (frac or "")[:9].rstrip("0")
    if zone in ("+00:00", "-00:00"):
        zone = "Z"
    text = f"{head}.{frac}{zone}" if frac else f"{head}{zone}"
    return None if text == _ZERO_TIME else text


def _struct(doc: Mapping[str, Any], order: tuple[str, ...], field: Any) -> list[str]:
    parts = []
    for key in order:
        text = field(key, doc.get(key))
        if text is not None:
            parts.append(f'"{key}":{text}')
    return ["{", ",".join(parts), "}"]


def _metadata_field(key: str, value: Any) -> str | None:
    if not value:
        return None  # every field is omitempty
    if key == "maintainers":
        return _list(value, lambda m: "".join(_struct(_map(m), _MAINTAINER, _omitempty)) if m is not None
                     else "null")
    if key == "dependencies":
        return _list(value, lambda d: "".join(_struct(_map(d), _DEPENDENCY, _dependency_field)) if d is not None
                     else "null")
    return _json(value)


def _dependency_field(key: str, value: Any) -> str | None:
    if key in _DEPENDENCY_ALWAYS:
        return _str(value)
    return _omitempty(key, value)


def _hook_field(key: str, value: Any) -> str | None:
    if key == "last_run":
        run = _map(value)  # HookExecution.MarshalJSON: the times as Info's, the phase always
        parts = [f'"{k}":{_str(t)}' for k in ("started_at", "completed_at") if (t := _time(run.get(k))) is not None]
        parts.append(f'"phase":{_str(run.get("phase"))}')
        return "{" + ",".join(parts) + "}"
    return _omitempty(key, value)


def _omitempty(key: str, value: Any) -> str | None:
    return _json(value) if value else None


def _list(items: Any, each: Any) -> str:
    return "[" + ",".join(each(item) for item in items) + "]"


def _json(value: Any) -> str:
    out: list[str] = []
    _value(value, out)
    return "".join(out)


def _value(value: Any, out: list[str]) -> None:
    """``value`` (decoded JSON) as Go's encoding/json writes an ``any``: maps' keys sorted by bytes (code points
    sort alike), numbers as float64."""
    if isinstance(value, str):
        out.append(_str(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int | float):
        out.append(_float(float(value)))
    elif isinstance(value, Mapping):
        out.append("{")
        for i, key in enumerate(sorted(value)):
            out.append(("," if i else "") + _str(key) + ":")
            _value(value[key], out)
        out.append("}")
    else:
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _value(item, out)
        out.append("]")


def _float(f: float) -> str:
    """encoding/json's ``floatEncoder`` for float64: ECMAScript's shortest form (``1e+21``, ``1e-7``), but ``-0``
    for negative zero."""
    if not math.isfinite(f):
        raise ValueError(f"{f} is not a number Go's JSON decoder reads")
    if f == 0:
        return "-0" if math.copysign(1.0, f) < 0 else "0"
    return format_number(f)


def _str(value: Any) -> str:
    # json's encoder (ensure_ascii off) escapes what Go escapes but HTML's characters and U+2028/9: release_digest
    # replaces those after
    return encode_basestring(value) if isinstance(value, str) else '""'


def _int(value: Any) -> str:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else "0"


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _items(value: Any) -> list[Any]:
    """A stored list, or none for anything else (a hostile record's ``"hooks": true``)."""
    return value if isinstance(value, list) else []
