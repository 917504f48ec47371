"""Direct reads of Helm release storage for the release service.

The service decides from what is stored *now* (not from an observer that
may lag a write behind): the latest revision's status and release labels
come from the storage objects' own labels, fetched metadata-only with a
server-side label selector, so no payload is transferred or decoded; the
manifest is decoded only when a monitor is built.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from kubernetes import client

from engine.base import wire
from engine.kube import rest
from engine.storage.codec import (
    OWNER_SELECTOR,
    RECORD_PREFIX,
    StorageDecodeError,
    configmap_payload,
    decode_payload,
    record_name,
    release_labels,
    secret_payload,
)
from engine.storage.observation import Observation

Driver = Literal["secret", "configmap"]
MANAGED_SELECTOR = f"{OWNER_SELECTOR},{wire.MANAGED_BY}={wire.MANAGER}"
# Releases whose manifests one list reads: the selector stays well under URL length limits (8 KiB).
BATCH = 100


@dataclass(frozen=True, order=True)
class ReleaseRecord:
    """The latest stored revision of one release, from its storage object's labels; ``apply_method`` is helm's
    release field (``ssa``, ``csa``, "" for helm 3's), None where only the labels were read."""

    namespace: str
    name: str
    version: int
    status: str
    labels: tuple[tuple[str, str], ...] = ()
    apply_method: str | None = None

    @property
    def ref(self) -> str:
        """``<namespace>/<release-name>``."""
        return f"{self.namespace}/{self.name}"

    def label(self, key: str) -> str | None:
        """A release label (helm ``--labels``), None when absent."""
        return dict(self.labels).get(key)

    @classmethod
    def from_observation(cls, obs: Observation | None) -> ReleaseRecord | None:
        """The same view of an observed revision (the engine reads the latest revision from its observer)."""
        if obs is None:
            return None
        return cls(obs.namespace, obs.name, obs.version, obs.status, tuple(sorted(obs.label_map.items())),
                   obs.apply_method)


class ReleaseStore:
    """Reads release storage (Secrets, or ConfigMaps with ``driver="configmap"``). Calls block."""

    def __init__(self, api: client.ApiClient, driver: Driver = "secret"):
        self._api = api
        self._driver: Driver = driver
        self._resource = "secrets" if driver == "secret" else "configmaps"

    def _list(self, namespace: str | None, selector: str, accept: str = rest.METADATA_LIST) -> list[dict[str, Any]]:
        path = f"/api/v1/namespaces/{namespace}/{self._resource}" if namespace else f"/api/v1/{self._resource}"
        items: list[dict[str, Any]] = []
        token = ""
        while True:
            query = [("labelSelector", selector), ("limit", "500")] + ([("continue", token)] if token else [])
            body = rest.get_json(self._api, path, query, accept=accept)
            items += body.get("items") or []
            token = str((body.get("metadata") or {}).get("continue") or "")
            if not token:
                return items

    def latest(self, namespace: str, name: str) -> ReleaseRecord | None:
        """The highest stored revision of ``namespace/name``, or None. Raises ApiException."""
        records = _records(self._list(namespace, f"{OWNER_SELECTOR},name={name}"))
        return max(records, key=lambda r: r.version) if records else None

    def apply_method(self, record: ReleaseRecord) -> str:
        """``record``'s ``apply_method`` (its own when known, else read from its stored payload: one object
        decoded). Raises ApiException, StorageDecodeError."""
        if record.apply_method is not None:
            return record.apply_method
        name = record_name(record.name, record.version)
        obj = rest.get_json(self._api, f"/api/v1/namespaces/{record.namespace}/{self._resource}/{name}")
        where = f"{record.namespace}/{name}"
        payload = secret_payload(obj) if self._driver == "secret" else configmap_payload(obj)
        if payload is None:
            raise StorageDecodeError(where, "record has no 'release' data")
        method = decode_payload(payload, where).get("apply_method")
        return method if isinstance(method, str) else ""

    def managed(
        self, namespaces: Sequence[str] | None = None, selector: Mapping[str, str] | None = None,
    ) -> list[ReleaseRecord]:
        """The latest revision of every release labelled managed-by helmdeck (and ``selector``), sorted.

        ``namespaces`` None lists all namespaces (one cluster-wide call).
        Raises ApiException.
        """
        wanted = ",".join([MANAGED_SELECTOR, *(f"{k}={v}" for k, v in sorted((selector or {}).items()))])
        found: dict[tuple[str, str], ReleaseRecord] = {}
        for ns in namespaces if namespaces else [None]:
            for rec in _records(self._list(ns, wanted)):
                cur = found.get((rec.namespace, rec.name))
                if cur is None or rec.version > cur.version:
                    found[(rec.namespace, rec.name)] = rec
        return sorted(found.values())

    def manifests(
        self, namespace: str, revisions: Collection[tuple[str, int]],
    ) -> tuple[dict[tuple[str, int], str], dict[tuple[str, int], StorageDecodeError]]:
        """The manifests stored for ``revisions`` (``(release name, version)`` pairs) of one namespace, and
        the records among them that cannot be decoded. One list reads :data:`BATCH` releases (a set-based
        label selector on the names and versions) instead of one read per revision; a revision not stored
        is in neither result. Raises ApiException."""
        wanted = set(revisions)
        names = sorted({name for name, _ in wanted})
        out: dict[tuple[str, int], str] = {}
        errors: dict[tuple[str, int], StorageDecodeError] = {}
        for start in range(0, len(names), BATCH):
            chunk = names[start:start + BATCH]
            members = set(chunk)
            versions = sorted({v for n, v in wanted if n in members})
            selector = (f"{OWNER_SELECTOR},name in ({','.join(chunk)}),"
                        f"version in ({','.join(str(v) for v in versions)})")
            for obj in self._list(namespace, selector, accept=rest.JSON):
                lbl = (obj.get("metadata") or {}).get("labels") or {}
                version = str(lbl.get("version", ""))
                pair = (str(lbl.get("name", "")), int(version) if version.isdigit() else -1)
                if pair not in wanted:
                    continue  # another release's revision with a wanted number
                where = f"{namespace}/{record_name(*pair)}"
                payload = secret_payload(obj) if self._driver == "secret" else configmap_payload(obj)
                try:
                    if payload is None:
                        raise StorageDecodeError(where, "record has no 'release' data")
                    manifest = decode_payload(payload, where).get("manifest")
                except StorageDecodeError as exc:
                    errors[pair] = exc
                    continue
                out[pair] = manifest if isinstance(manifest, str) else ""
        return out, errors


def _records(items: list[dict[str, Any]]) -> list[ReleaseRecord]:
    out = []
    for obj in items:
        meta = obj.get("metadata") or {}
        lbl = meta.get("labels") or {}
        version = str(lbl.get("version", ""))
        if not str(meta.get("name", "")).startswith(RECORD_PREFIX) or not version.isdigit() or not lbl.get("name"):
            continue
        out.append(ReleaseRecord(
            namespace=str(meta.get("namespace", "")), name=str(lbl["name"]), version=int(version),
            status=str(lbl.get("status", "unknown")),
            labels=tuple(sorted(release_labels(lbl).items())),
        ))
    return out
