"""Observations: detached, immutable copies of one stored release revision.

The model follows Flux helm-controller's observing storage driver: an
observation keeps the release metadata as written to storage, so callers can
compare what Helm *persisted* rather than what an action returned.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from engine.storage.codec import StorageKey

# Helm's release statuses (pkg/release/v1 status.go).
STATUSES = frozenset({
    "unknown", "deployed", "uninstalled", "superseded", "failed",
    "uninstalling", "pending-install", "pending-upgrade", "pending-rollback",
})
PENDING_STATUSES = frozenset({"pending-install", "pending-upgrade", "pending-rollback"})
_TEST_EVENTS = frozenset({"test", "test-success"})


def canonical_json(value: Any) -> bytes:
    """Canonical JSON bytes: UTF-8, keys sorted, no insignificant whitespace."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def sha256_hex(data: bytes) -> str:
    """Lower-case hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Hook:
    """A release hook and its last run, as stored by Helm."""

    name: str
    kind: str
    path: str
    events: tuple[str, ...]
    phase: str = ""
    started_at: str = ""
    completed_at: str = ""

    @property
    def is_test(self) -> bool:
        """True for ``helm test`` hooks (event ``test``, or Helm 2's ``test-success``)."""
        return bool(_TEST_EVENTS.intersection(self.events))

    def _canonical(self, with_run: bool) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name, "kind": self.kind, "path": self.path, "events": list(self.events),
        }
        if with_run:
            out["last_run"] = {
                "phase": self.phase, "started_at": self.started_at, "completed_at": self.completed_at,
            }
        return out


@dataclass(frozen=True)
class Observation:
    """One stored release revision, detached from storage.

    ``config_json`` is the user-supplied values as canonical JSON; ``config``
    returns a fresh dict each call, so nothing outside can change an
    observation. Times are Helm's RFC 3339 strings, ``""`` when unset.
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

    @property
    def release_key(self) -> tuple[str, str]:
        """``(namespace, release name)``."""
        return (self.namespace, self.name)

    @property
    def config(self) -> dict[str, Any]:
        value = json.loads(self.config_json)
        return value if isinstance(value, dict) else {}

    @property
    def label_map(self) -> dict[str, str]:
        return dict(self.labels)

    @property
    def chart(self) -> str:
        """``name-version`` as ``helm list`` prints it."""
        return f"{self.chart_name}-{self.chart_version}" if self.chart_name else ""

    @property
    def config_digest(self) -> str:
        """``sha256:<hex>`` of the user values in canonical JSON."""
        return "sha256:" + sha256_hex(self.config_json.encode())

    @property
    def digest(self) -> str:
        """``sha256:<hex>`` over the canonical JSON of this observation.

        Test hooks are included without their last run, so running
        ``helm test`` does not change the digest.
        """
        doc = {
            "name": self.name,
            "namespace": self.namespace,
            "version": self.version,
            "info": {
                "status": self.status,
                "first_deployed": self.first_deployed,
                "last_deployed": self.last_deployed,
                "deleted": self.deleted,
                "description": self.description,
            },
            "chart": {"name": self.chart_name, "version": self.chart_version, "app_version": self.app_version},
            "config": json.loads(self.config_json),
            "manifest": self.manifest_digest,
            "hooks": [h._canonical(with_run=not h.is_test) for h in self.hooks],
            "labels": dict(self.labels),
        }
        return "sha256:" + sha256_hex(canonical_json(doc))


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def observation_from_release(
    release: dict[str, Any],
    *,
    labels: dict[str, str] | None = None,
    storage_key: StorageKey | None = None,
) -> Observation:
    """Build an :class:`Observation` from a decoded Helm release dict.

    Raises ValueError when the release lacks a name or an integer version.
    Unknown statuses are kept as written (the UI shows them as they are).
    """
    name = release.get("name")
    version = release.get("version")
    if not isinstance(name, str) or not name:
        raise ValueError("release has no name")
    if not isinstance(version, int) or isinstance(version, bool):
        raise ValueError("release has no integer version")
    info = _dict(release.get("info"))
    meta = _dict(_dict(release.get("chart")).get("metadata"))
    config = release.get("config")
    hooks = []
    for raw in release.get("hooks") or []:
        if not isinstance(raw, dict):
            continue
        run = _dict(raw.get("last_run"))
        events = raw.get("events") or []
        hooks.append(Hook(
            name=_str(raw.get("name")),
            kind=_str(raw.get("kind")),
            path=_str(raw.get("path")),
            events=tuple(e for e in events if isinstance(e, str)),
            phase=_str(run.get("phase")),
            started_at=_str(run.get("started_at")),
            completed_at=_str(run.get("completed_at")),
        ))
    manifest = _str(release.get("manifest"))
    return Observation(
        name=name,
        namespace=_str(release.get("namespace")),
        version=version,
        status=_str(info.get("status")) or "unknown",
        first_deployed=_str(info.get("first_deployed")),
        last_deployed=_str(info.get("last_deployed")),
        deleted=_str(info.get("deleted")),
        description=_str(info.get("description")),
        chart_name=_str(meta.get("name")),
        chart_version=_str(meta.get("version")),
        app_version=_str(meta.get("appVersion")),
        config_json=canonical_json(config if isinstance(config, dict) else {}).decode(),
        manifest_digest="sha256:" + sha256_hex(manifest.encode()),
        hooks=tuple(hooks),
        labels=tuple(sorted((labels or {}).items())),
        storage_key=storage_key,
    )
