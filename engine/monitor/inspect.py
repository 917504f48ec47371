"""One live object as ``kubectl get -o yaml`` / ``describe`` / ``logs`` show it: for the app's drill-down;
and which kinds are namespaced, from the API server's discovery (the app places a manifest's objects).

Reads only (GET). The YAML hides ``metadata.managedFields`` (as ``kubectl get``
does since 1.21) and masks a Secret's ``data``/``stringData`` values and any
secret-looking value by the masking rule (:mod:`engine.base.masking`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from engine.base.masking import Masker
from engine.kube import rest
from engine.kube.discovery import Discovery

WORKLOADS = frozenset({"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"})
LOG_LINES = 200


@dataclass(frozen=True)
class PodRow:
    """One pod of a workload: ``conditions`` as ``Type=Status (Reason)`` texts; ``containers`` by name."""

    name: str
    phase: str
    conditions: tuple[str, ...]
    containers: tuple[str, ...]


def object_yaml(obj: dict[str, Any], masker: Masker, *, reveal: bool = False) -> str:
    """``obj`` as YAML without ``managedFields``; a Secret's data and secret-looking values masked unless
    ``reveal``."""
    shown = dict(obj)
    meta = dict(shown.get("metadata") or {})
    meta.pop("managedFields", None)
    shown["metadata"] = meta
    if not reveal:
        shown = masker.mask_object(shown)
    return yaml.safe_dump(shown, sort_keys=False, allow_unicode=True, default_flow_style=False)


def pod_rows(pods: list[dict[str, Any]]) -> list[PodRow]:
    """Phase, conditions and container names of each pod, by name."""
    rows = []
    for pod in pods:
        status = pod.get("status") or {}
        conditions = tuple(
            f"{c.get('type')}={c.get('status')}" + (f" ({c['reason']})" if c.get("reason") else "")
            for c in status.get("conditions") or ())
        containers = tuple(str(c.get("name")) for c in (pod.get("spec") or {}).get("containers") or ())
        rows.append(PodRow(str((pod.get("metadata") or {}).get("name", "")), str(status.get("phase") or "-"),
                           conditions, containers))
    return sorted(rows, key=lambda r: r.name)


def _selector(obj: dict[str, Any]) -> str | None:
    labels = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or None


class Inspector:
    """Reads live objects, their pods and container logs through ``api``."""

    def __init__(self, api: client.ApiClient):
        self._api = api
        self._discovery = Discovery(api)

    async def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any]:
        """The object as the API serves it. Raises KeyError when absent or its kind is not served."""
        return await asyncio.to_thread(self._get, api_version, kind, namespace, name)

    def _get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any]:
        rtype = self._discovery.resource_type(api_version, kind)
        if rtype is None:
            raise KeyError(f"{api_version} {kind} is not served by this cluster")
        try:
            return rest.get_json(self._api, f"{rtype.path(namespace)}/{name}")
        except ApiException as exc:
            if exc.status == 404:
                raise KeyError(f"{kind}/{name} does not exist") from None
            raise

    async def scopes(self, kinds: Iterable[tuple[str, str]]) -> dict[tuple[str, str], bool | None]:
        """Per ``(apiVersion, kind)``: True when the API server serves it namespaced, False cluster-scoped,
        None when it does not serve it; from discovery, read in a thread and cached per group version
        (:class:`~engine.kube.discovery.Discovery`: a kind not found is looked up again next time).

        Raises ApiException or urllib3's errors when discovery cannot be read.
        """
        def read() -> dict[tuple[str, str], bool | None]:
            out: dict[tuple[str, str], bool | None] = {}
            for api_version, kind in sorted(set(kinds)):
                rtype = self._discovery.resource_type(api_version, kind)
                out[(api_version, kind)] = rtype.namespaced if rtype is not None else None
            return out

        return await asyncio.to_thread(read)

    async def pods(self, obj: dict[str, Any]) -> list[PodRow] | None:
        """The pods a workload selects (None for other kinds)."""
        if obj.get("kind") not in WORKLOADS:
            return None
        selector = _selector(obj)
        if selector is None:
            return []
        namespace = str((obj.get("metadata") or {}).get("namespace") or "")
        body = await asyncio.to_thread(rest.get_json, self._api, f"/api/v1/namespaces/{namespace}/pods",
                                       [("labelSelector", selector)])
        return pod_rows(list(body.get("items") or ()))

    async def logs(self, namespace: str, pod: str, container: str) -> str:
        """The last :data:`LOG_LINES` lines of a container's log.

        Raises RuntimeError saying why when the kubelet does not serve them (e.g. a pod on no node).
        """
        def read() -> str:
            try:
                resp = rest.get(self._api, f"/api/v1/namespaces/{namespace}/pods/{pod}/log",
                                [("container", container), ("tailLines", str(LOG_LINES))], accept="*/*")
            except ApiException as exc:
                raise RuntimeError(f"logs not served: {exc.status} {exc.reason}") from None
            try:
                return bytes(resp.data).decode("utf-8", "replace")
            finally:
                resp.release_conn()

        return await asyncio.to_thread(read)
