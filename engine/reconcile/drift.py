"""Cluster drift: does the live state differ from a release's manifest? (after Flux's drift detection)

Each manifest object is applied as a server-side-apply *dry run* (forced, a
field manager of our own) and the result compared with the live object:
whatever the dry run would change is drift. Status, managed fields,
resourceVersion and generation are ignored, and so are fields the manifest
does not set (a separate field manager never removes another's fields).
An object that does not exist is drift too.

Ignore rules (``spec.driftDetection.ignore``, :mod:`engine.package.drift`) leave
their JSON pointers out of the comparison, removed from both the live object
and the dry-run result, and correction re-applies those paths with their live
values, so an autoscaler's ``/spec/replicas`` is neither drift nor reset. An
object labelled or annotated ``driftDetection: disabled`` (Flux's key or
helmdeck's), in the manifest or live, is skipped. As Flux's ``jsondiff``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from engine.base import pointer
from engine.monitor.manifest import manifest_bodies
from engine.package.drift import IgnoreRule, detection_disabled, ignored_paths

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
        # The dynamic client (with the websocket stream and requests) is imported when drift is first looked
        # for: a pass of packages without drift detection never needs it.
        if self._dyn is None:
            from kubernetes.dynamic import DynamicClient

            self._dyn = DynamicClient(self._api)  # type: ignore[no-untyped-call]
        return self._dyn

    def _resource(self, obj: dict[str, Any]) -> Any:
        return self._client().resources.get(api_version=obj["apiVersion"], kind=obj["kind"])

    def _placed(self, obj: dict[str, Any], namespace: str) -> tuple[Any, str, str, dict[str, Any]]:
        """The API resource, namespace ("" for cluster-scoped), name and a copy of ``obj`` with that namespace."""
        res = self._resource(obj)
        meta = obj.get("metadata") or {}
        ns = str(meta.get("namespace") or namespace) if res.namespaced else ""
        placed = copy.deepcopy(obj)
        if ns:
            placed.setdefault("metadata", {})["namespace"] = ns
        return res, ns, str(meta.get("name", "")), placed

    def detect(self, manifest: str, namespace: str, ignore: Sequence[IgnoreRule] = ()) -> list[DriftItem]:
        """Every drifted object of ``manifest`` (objects without a namespace get ``namespace``), leaving out
        what ``ignore`` names and the objects that opt out."""
        items = []
        for obj in manifest_bodies(manifest):
            item = self._check(obj, namespace, ignore)
            if item is not None:
                items.append(item)
        return items

    def _check(self, obj: dict[str, Any], namespace: str, ignore: Sequence[IgnoreRule]) -> DriftItem | None:
        from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

        try:
            res, ns, name, placed = self._placed(obj, namespace)
        except ResourceNotFoundError:
            return None  # a kind the cluster does not serve: helm would have failed; not drift
        paths = ignored_paths(ignore, placed)
        if detection_disabled(obj) or "" in paths:
            return None
        dyn = self._client()
        try:
            live = dyn.get(res, name=name, namespace=ns or None).to_dict()
        except NotFoundError:
            return DriftItem(obj["apiVersion"], obj["kind"], ns, name, absent=True)
        if detection_disabled(live):
            return None
        dry = dyn.server_side_apply(res, body=obj, name=name, namespace=ns or None,
                                    field_manager=FIELD_MANAGER, force_conflicts=True, dry_run="All").to_dict()
        live, dry = _strip(live), _strip(dry)
        for path in paths:
            pointer.remove(live, path)
            pointer.remove(dry, path)
        fields = tuple(_diff(live, dry))
        return DriftItem(obj["apiVersion"], obj["kind"], ns, name, absent=False, fields=fields) if fields else None

    def correct(self, manifest: str, namespace: str, items: list[DriftItem], field_manager: str,
                ignore: Sequence[IgnoreRule] = ()) -> list[str]:
        """Re-apply the drifted objects with ``field_manager`` (forced), ignored paths at their live values;
        return what was applied."""
        wanted = {(i.kind, i.namespace, i.name) for i in items}
        done = []
        for obj in manifest_bodies(manifest):
            res, ns, name, body = self._placed(obj, namespace)
            if (obj["kind"], ns, name) not in wanted:
                continue
            paths = [p for p in ignored_paths(ignore, body) if p and pointer.has(body, p)]
            if paths:
                self._keep_live(body, res, ns, name, paths)
            self._client().server_side_apply(res, body=body, name=name, namespace=ns or None,
                                             field_manager=field_manager, force_conflicts=True)
            done.append(f"{obj['kind']}/{ns}/{name}" if ns else f"{obj['kind']}/{name}")
        return done

    def _keep_live(self, body: dict[str, Any], res: Any, ns: str, name: str, paths: list[str]) -> None:
        """Set ``paths`` of ``body`` to their live values (removed when live has none), so applying it
        leaves them as they are."""
        from kubernetes.dynamic.exceptions import NotFoundError

        try:
            live = self._client().get(res, name=name, namespace=ns or None).to_dict()
        except NotFoundError:
            return  # created afresh: as the manifest says
        for path in paths:
            if pointer.has(live, path):
                pointer.replace(body, path, copy.deepcopy(pointer.get(live, path)))
            else:
                pointer.remove(body, path)
