"""Cluster drift: does the live state differ from a release's manifest? (after Flux's drift detection)

Each manifest object is applied as a server-side-apply *dry run* (forced, a
field manager of our own) and the result compared with the live object:
whatever the dry run would change is drift. Status, managed fields,
resourceVersion and generation are ignored, and so are fields the manifest
does not set (a separate field manager never removes another's fields).
An object that does not exist is drift too.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

from engine.monitor.manifest import manifest_bodies

FIELD_MANAGER = "helmdeck-drift"
_IGNORED_META = ("managedFields", "resourceVersion", "generation", "creationTimestamp", "uid")


@dataclass(frozen=True)
class DriftItem:
    """One drifted object: ``ref`` is ``Kind/namespace/name``; ``fields`` the differing paths."""

    api_version: str
    kind: str
    namespace: str
    name: str
    absent: bool
    fields: tuple[str, ...] = ()

    @property
    def ref(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}" if self.namespace else f"{self.kind}/{self.name}"

    def describe(self) -> str:
        return f"{self.ref} is absent" if self.absent else f"{self.ref} differs at {', '.join(self.fields[:4])}"


def _strip(obj: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in obj.items() if k != "status"}
    meta = dict(out.get("metadata") or {})
    for key in _IGNORED_META:
        meta.pop(key, None)
    out["metadata"] = meta
    return out


def _diff(a: Any, b: Any, path: str = "") -> Iterator[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            yield from _diff(a.get(key), b.get(key), f"{path}.{key}" if path else str(key))
    elif a != b:
        yield path or "."


class DriftDetector:
    """Compares a release's manifest with the cluster (synchronous; run it in a thread)."""

    def __init__(self, api: client.ApiClient):
        self._api = api
        self._dyn: Any = None  # DynamicClient; its methods are untyped

    def _client(self) -> Any:
        if self._dyn is None:
            self._dyn = DynamicClient(self._api)  # type: ignore[no-untyped-call]
        return self._dyn

    def _resource(self, obj: dict[str, Any]) -> Any:
        return self._client().resources.get(api_version=obj["apiVersion"], kind=obj["kind"])

    def detect(self, manifest: str, namespace: str) -> list[DriftItem]:
        """Every drifted object of ``manifest`` (objects without a namespace get ``namespace``)."""
        items = []
        for obj in manifest_bodies(manifest):
            item = self._check(obj, namespace)
            if item is not None:
                items.append(item)
        return items

    def _check(self, obj: dict[str, Any], namespace: str) -> DriftItem | None:
        try:
            res = self._resource(obj)
        except ResourceNotFoundError:
            return None  # a kind the cluster does not serve: helm would have failed; not drift
        meta = obj.get("metadata") or {}
        name = str(meta.get("name", ""))
        ns = str(meta.get("namespace") or namespace) if res.namespaced else ""
        dyn = self._client()
        try:
            live = dyn.get(res, name=name, namespace=ns or None).to_dict()
        except NotFoundError:
            return DriftItem(obj["apiVersion"], obj["kind"], ns, name, absent=True)
        dry = dyn.server_side_apply(res, body=obj, name=name, namespace=ns or None,
                                    field_manager=FIELD_MANAGER, force_conflicts=True, dry_run="All").to_dict()
        fields = tuple(_diff(_strip(live), _strip(dry)))
        return DriftItem(obj["apiVersion"], obj["kind"], ns, name, absent=False, fields=fields) if fields else None

    def correct(self, manifest: str, namespace: str, items: list[DriftItem], field_manager: str) -> list[str]:
        """Re-apply the drifted objects with ``field_manager`` (forced); return what was applied."""
        wanted = {(i.kind, i.namespace, i.name) for i in items}
        done = []
        for obj in manifest_bodies(manifest):
            res = self._resource(obj)
            meta = obj.get("metadata") or {}
            name = str(meta.get("name", ""))
            ns = str(meta.get("namespace") or namespace) if res.namespaced else ""
            if (obj["kind"], ns, name) not in wanted:
                continue
            self._client().server_side_apply(res, body=obj, name=name, namespace=ns or None,
                                             field_manager=field_manager, force_conflicts=True)
            done.append(f"{obj['kind']}/{ns}/{name}" if ns else f"{obj['kind']}/{name}")
        return done
