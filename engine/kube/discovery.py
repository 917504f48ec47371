"""API discovery: which resource (plural name, scope) serves an apiVersion and kind."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from engine.kube import rest


@dataclass(frozen=True, order=True)
class ResourceType:
    """A served resource: ``group`` "" is the core group; ``resource`` is the plural path name."""

    group: str
    version: str
    kind: str
    resource: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str = "") -> str:
        """The collection's API path, in ``namespace`` ("" = all namespaces or cluster-scoped)."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            return f"{base}/namespaces/{namespace}/{self.resource}"
        return f"{base}/{self.resource}"


def split_api_version(api_version: str) -> tuple[str, str]:
    """``apps/v1`` → ``("apps", "v1")``; ``v1`` → ``("", "v1")``."""
    group, _, version = api_version.rpartition("/")
    return group, version


class Discovery:
    """Resolves kinds through the API server's discovery documents, cached per group version.

    A miss refetches that group version once per :meth:`resource_type` call, so a
    CRD installed after the first lookup is found; misses at the same time share one fetch
    (monitors of many releases start together). Thread-safe.
    """

    def __init__(self, api: client.ApiClient):
        self._api = api
        self._lock = threading.Lock()
        self._kinds: dict[str, dict[str, ResourceType]] = {}
        self._fetching: dict[str, threading.Lock] = {}  # one fetch of a group version at a time
        self._fetched: dict[str, int] = {}  # fetches of a group version done so far

    def resource_type(self, api_version: str, kind: str) -> ResourceType | None:
        """The resource serving ``kind`` in ``api_version``, or None when the server has none.

        Raises ApiException for API errors other than "group version not found".
        """
        with self._lock:
            found = self._kinds.get(api_version, {}).get(kind)
            seen = self._fetched.get(api_version, 0)
            fetching = self._fetching.setdefault(api_version, threading.Lock())
        if found is not None:
            return found
        with fetching:
            with self._lock:
                if self._fetched.get(api_version, 0) > seen:  # fetched after this call began: fresh enough
                    return self._kinds.get(api_version, {}).get(kind)
            kinds = self._fetch(api_version)
            with self._lock:
                self._kinds[api_version] = kinds
                self._fetched[api_version] = self._fetched.get(api_version, 0) + 1
        return kinds.get(kind)

    def _fetch(self, api_version: str) -> dict[str, ResourceType]:
        group, version = split_api_version(api_version)
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        try:
            doc = rest.get_json(self._api, path)
        except ApiException as exc:
            if exc.status == 404:
                return {}
            raise
        out: dict[str, ResourceType] = {}
        for res in doc.get("resources") or ():
            name = str(res.get("name", ""))
            if not name or "/" in name:  # subresources (deployments/status) are not objects
                continue
            kind = str(res.get("kind", ""))
            out[kind] = ResourceType(group, version, kind, name, bool(res.get("namespaced")))
        return out
