"""Observations: detached, immutable copies of one stored release revision.

The model follows Flux helm-controller's observing storage driver: an
observation keeps the release metadata as written to storage, so callers can
compare what Helm *persisted* rather than what an action returned. The
manifest body and the chart's files and default values are not kept (only a
digest of the manifest); :meth:`engine.storage.observer.Observer.load_release`
reads them on demand.

Its digest is Flux's (helm-controller's ``Digest(ObserveRelease(rls))``, docs/storage.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from engine.storage.canonical import canonical_json, sha256_hex
from engine.storage.codec import (
    ReleaseFieldError,
    StorageKey,
    UnknownStatusError,
    validate_release_name,
)
from engine.storage.release_digest import ReleaseDigest
from engine.storage.values_digest import digest_values

__all__ = [
    "PENDING_STATUSES",
    "STATUSES",
    "Hook",
    "Observation",
    "canonical_json",
    "observation_from_release",
    "sha256_hex",
]

# Helm's release statuses (pkg/release/v1 status.go; the same in Helm 4).
STATUSES = frozenset({
    "unknown", "deployed", "uninstalled", "superseded", "failed",
    "uninstalling", "pending-install", "pending-upgrade", "pending-rollback",
})
PENDING_STATUSES = frozenset({"pending-install", "pending-upgrade", "pending-rollback"})
# Statuses a rollback may return to (Flux's Previous).
ROLLBACK_TARGETS = frozenset({"deployed", "superseded"})
_TEST_EVENTS = frozenset({"test", "test-success"})
# Go's zero time.Time, which Helm 4 writes for unset times (Helm 3 writes "").
_ZERO_TIME = "0001-01-01T00:00:00Z"
# The shape Go's time.Time accepts from JSON (RFC 3339 with optional fraction).
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


@dataclass(frozen=True)
class Hook:
    """A release hook and its last run, as stored by Helm (manifest not kept).

    ``phase`` is Helm's hook phase (``Running``, ``Succeeded``, ``Failed``,
    ``Unknown``) or ``""`` when the hook never ran; times are RFC 3339
    strings or ``""``.
    """

    name: str
    kind: str
    path: str
    events: tuple[str, ...]
    phase: str = ""
    started_at: str = ""
    completed_at: str = ""
    weight: int = 0
    delete_policies: tuple[str, ...] = ()

    @property
    def is_test(self) -> bool:
        """True for ``helm test`` hooks (event ``test``, or Helm 2's ``test-success``)."""
        return bool(_TEST_EVENTS.intersection(self.events))


@dataclass(frozen=True)
class Observation:
    """One stored release revision, detached from storage.

    ``namespace`` is the release namespace (from the payload; the storage
    namespace when the payload has none), which may differ from the storage
    namespace (``storage_key.namespace``). ``config_json`` is the
    user-supplied values as canonical JSON (RFC 8785); ``config`` returns a
    fresh dict each call, so nothing outside can change an observation.
    Times are Helm's RFC 3339 strings as stored, ``""`` when unset.
    ``labels`` are the release's custom labels (object labels minus Helm's
    system labels), sorted. ``storage_key`` and ``resource_version`` say
    where and in which version of its object it was read (not compared).
    """

    name: str
    namespace: str
    version: int
    status: str
    first_deployed: str = ""
    last_deployed: str = ""
    deleted: str = ""
    description: str = ""
    chart_name: str = ""
    chart_version: str = ""
    app_version: str = ""
    config_json: str = "{}"
    manifest_digest: str = ""
    hooks: tuple[Hook, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    storage_key: StorageKey | None = field(default=None, compare=False)
    notes: str = ""
    chart_description: str = ""
    kube_version: str = ""
    resource_version: str = field(default="", compare=False)
    # "namespace/name" of the Flux HelmRelease whose labels the manifest's objects carry ("" if none).
    # Compared, though derived from the manifest: a view differing only in its owner is a change the
    # app shows (OWNER, Overview).
    flux_owner: str = ""
    # How helm applied the revision's objects: "ssa" (server-side apply, helm 4's default), "csa", or "" (helm 3:
    # client-side). helm 4's and Flux's upgrade with server-side "auto" take the last revision's.
    apply_method: str = ""
    # Flux's digest of the stored release (engine.storage.release_digest), made when the record is read: it
    # covers what this copy does not keep (the manifest, hooks' manifests, all chart metadata).
    digest: str = ""
    # What makes that digest with an ``ociDigest`` (:meth:`digest_with`); None for an observation not read from a
    # record.
    digests: ReleaseDigest | None = field(default=None, compare=False, repr=False)

    def digest_with(self, oci_digest: str) -> str:
        """Flux's digest of this revision with ``oci_digest`` (``sha256:<hex>``, the OCI artifact the chart came
        from) as its Observation's ``ociDigest``; :attr:`digest` for ``""`` or an observation not read from a
        record (:class:`engine.storage.release_digest.ReleaseDigest`)."""
        if not oci_digest or self.digests is None:
            return self.digest
        return self.digests.digest(oci_digest)

    @property
    def release_key(self) -> tuple[str, str]:
        """``(namespace, release name)``."""
        return (self.namespace, self.name)

    @property
    def storage_namespace(self) -> str:
        """Namespace of the storage record (the release namespace when unknown)."""
        return self.storage_key.namespace if self.storage_key is not None else self.namespace

    @property
    def config(self) -> dict[str, Any]:
        """The user-supplied values (a fresh dict)."""
        value = json.loads(self.config_json)
        return value if isinstance(value, dict) else {}

    @property
    def label_map(self) -> dict[str, str]:
        """The release's custom labels as a fresh dict."""
        return dict(self.labels)

    @property
    def chart(self) -> str:
        """``name-version`` as ``helm list`` prints it."""
        return f"{self.chart_name}-{self.chart_version}" if self.chart_name else ""

    @property
    def is_pending(self) -> bool:
        """True while an operation holds the release (``pending-*``): Helm refuses others."""
        return self.status in PENDING_STATUSES

    @property
    def test_hooks(self) -> tuple[Hook, ...]:
        """The ``helm test`` hooks, in stored order."""
        return tuple(h for h in self.hooks if h.is_test)

    @cached_property
    def config_digest(self) -> str:
        """``sha256:<hex>`` of the user values as Flux's helm-controller records a snapshot's ``configDigest``
        (fluxcd/pkg/chartutil ``DigestValues``: :func:`engine.storage.values_digest.digest_values`)."""
        return digest_values(json.loads(self.config_json))


class _Fields:
    """Reads release JSON fields with the types Helm's Go structs give them.

    JSON ``null`` reads as the zero value (as Go's decoder does); any other
    type mismatch raises :class:`ReleaseFieldError` naming the field.
    """

    def __init__(self, key: str):
        self.key = key

    def error(self, path: str, problem: str) -> ReleaseFieldError:
        return ReleaseFieldError(self.key, path, problem)

    def object(self, value: Any, path: str) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.error(path, f"is a JSON {_json_type(value)}, not an object")
        return value

    def string(self, value: Any, path: str) -> str:
        if value is None:
            return ""
        if not isinstance(value, str):
            raise self.error(path, f"is a JSON {_json_type(value)}, not a string")
        return value

    def integer(self, value: Any, path: str) -> int:
        if value is None:
            return 0
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.error(path, f"is a JSON {_json_type(value)}, not an integer")
        return value

    def time(self, value: Any, path: str) -> str:
        text = self.string(value, path)
        if text in ("", _ZERO_TIME):
            return ""
        if not _RFC3339.match(text):
            raise self.error(path, f"is {text[:40]!r}, not an RFC 3339 time")
        return text

    def strings(self, value: Any, path: str) -> tuple[str, ...]:
        if value is None:
            return ()
        if not isinstance(value, list):
            raise self.error(path, f"is a JSON {_json_type(value)}, not an array")
        return tuple(self.string(v, f"{path}[{i}]") for i, v in enumerate(value))


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    names: dict[type, str] = {str: "string", list: "array", dict: "object"}
    return names.get(type(value), type(value).__name__)


def _hooks(read: _Fields, value: Any) -> tuple[Hook, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise read.error("hooks", f"is a JSON {_json_type(value)}, not an array")
    hooks = []
    for i, raw in enumerate(value):
        path = f"hooks[{i}]"
        if not isinstance(raw, dict):
            raise read.error(path, "is not an object")
        run = read.object(raw.get("last_run"), f"{path}.last_run")
        read.string(raw.get("manifest"), f"{path}.manifest")
        hooks.append(Hook(
            name=read.string(raw.get("name"), f"{path}.name"),
            kind=read.string(raw.get("kind"), f"{path}.kind"),
            path=read.string(raw.get("path"), f"{path}.path"),
            events=read.strings(raw.get("events"), f"{path}.events"),
            phase=read.string(run.get("phase"), f"{path}.last_run.phase"),
            started_at=read.time(run.get("started_at"), f"{path}.last_run.started_at"),
            completed_at=read.time(run.get("completed_at"), f"{path}.last_run.completed_at"),
            weight=read.integer(raw.get("weight"), f"{path}.weight"),
            delete_policies=read.strings(raw.get("delete_policies"), f"{path}.delete_policies"),
        ))
    return tuple(hooks)


def observation_from_release(
    release: Mapping[str, Any],
    *,
    labels: Mapping[str, str] | None = None,
    storage_key: StorageKey | None = None,
    resource_version: str = "",
) -> Observation:
    """Build an :class:`Observation` from a decoded Helm release dict.

    ``labels`` are the release's custom labels (see ``codec.release_labels``);
    ``storage_key`` and ``resource_version`` say where it was read from.
    Raises :class:`ReleaseFieldError` (missing name, version or info; a field
    of a type Helm cannot read; a malformed time), :class:`UnknownStatusError`
    (a status Helm does not define) or :class:`ReleaseNameError` (a name
    helm refuses); all are ``StorageDecodeError`` and so ``ValueError``.
    """
    read = _Fields(str(storage_key) if storage_key is not None else "")
    name = read.string(release.get("name"), "name")
    if not name:
        raise read.error("name", "is missing")
    validate_release_name(name, read.key)
    version = read.integer(release.get("version"), "version")
    if version < 1:
        raise read.error("version", "is missing" if version == 0 else f"is {version}, not a positive integer")
    if release.get("info") is None:
        raise read.error("info", "is missing")
    info = read.object(release.get("info"), "info")
    status = read.string(info.get("status"), "info.status")
    if status not in STATUSES:
        raise UnknownStatusError(read.key, status)
    chart = read.object(release.get("chart"), "chart")
    meta = read.object(chart.get("metadata"), "chart.metadata")
    config = read.object(release.get("config"), "config")
    manifest = read.string(release.get("manifest"), "manifest")
    namespace = read.string(release.get("namespace"), "namespace")
    if not namespace and storage_key is not None:
        namespace = storage_key.namespace
    digests = ReleaseDigest(release)
    return Observation(
        name=name,
        namespace=namespace,
        version=version,
        status=status,
        first_deployed=read.time(info.get("first_deployed"), "info.first_deployed"),
        last_deployed=read.time(info.get("last_deployed"), "info.last_deployed"),
        deleted=read.time(info.get("deleted"), "info.deleted"),
        description=read.string(info.get("description"), "info.description"),
        notes=read.string(info.get("notes"), "info.notes"),
        chart_name=read.string(meta.get("name"), "chart.metadata.name"),
        chart_version=read.string(meta.get("version"), "chart.metadata.version"),
        app_version=read.string(meta.get("appVersion"), "chart.metadata.appVersion"),
        chart_description=read.string(meta.get("description"), "chart.metadata.description"),
        kube_version=read.string(meta.get("kubeVersion"), "chart.metadata.kubeVersion"),
        config_json=canonical_json(config).decode(),
        manifest_digest="sha256:" + sha256_hex(manifest.encode()),
        flux_owner=flux_owner_of(manifest),
        apply_method=read.string(release.get("apply_method"), "apply_method"),
        hooks=_hooks(read, release.get("hooks")),
        digest=digests.digest(),
        digests=digests,
        labels=tuple(sorted((labels or {}).items())),
        storage_key=storage_key,
        resource_version=resource_version,
    )


_FLUX_LABEL = re.compile(r"""^\s*["']?helm\.toolkit\.fluxcd\.io/(name|namespace)["']?:\s*["']?([^"'\s#]+)""",
                         re.MULTILINE)


def flux_owner_of(manifest: str) -> str:
    """``namespace/name`` of the Flux HelmRelease named by the manifest's ``helm.toolkit.fluxcd.io/name`` and
    ``/namespace`` labels (Flux's helm-controller post-renderer puts them on every object), else ``""``.

    A text scan, not a YAML parse: it runs on every decoded record (as the digest does)."""
    if "helm.toolkit.fluxcd.io/" not in manifest:
        return ""
    found: dict[str, str] = {}
    for match in _FLUX_LABEL.finditer(manifest):
        found.setdefault(match.group(1), match.group(2))
        if len(found) == 2:
            return f"{found['namespace']}/{found['name']}"
    return ""


def previous_deployed(history: Sequence[Observation]) -> Observation | None:
    """The first revision older than the latest (``history`` newest first) that was deployed or superseded:
    a rollback's target, as Flux's Previous (after a cancelled upgrade, the last deployed revision)."""
    return next((o for o in history[1:] if o.status in ROLLBACK_TARGETS), None)


def chart_default_values(release: Mapping[str, Any]) -> dict[str, Any]:
    """The chart's default values (``chart.values``) of a decoded release; ``{}`` when absent."""
    chart = release.get("chart")
    values = chart.get("values") if isinstance(chart, dict) else None
    return values if isinstance(values, dict) else {}
