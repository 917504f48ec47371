"""Raw GET requests on API paths (discovery, list, watch) through a kubernetes ApiClient.

The typed client has no call for "any resource type" nor for metadata-only
responses; these go through the client's own request path (authentication,
TLS, proxies from the kubeconfig) with an ``Accept`` header of our choosing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

JSON = "application/json"
# Server-side metadata-only responses (PartialObjectMetadata), as client-go's metadata client asks.
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"


def get(
    api: client.ApiClient,
    path: str,
    query: Sequence[tuple[str, str]] = (),
    *,
    accept: str = JSON,
    timeout: float | tuple[float, float] = 30,
) -> Any:
    """GET ``path``; returns the raw (unread) urllib3 response. Raises ApiException on a non-2xx status."""
    request = api.param_serialize(
        "GET", path, query_params=list(query), header_params={"Accept": accept}, auth_settings=["BearerToken"],
    )
    resp: Any = api.call_api(*request, _request_timeout=timeout)
    if not 200 <= resp.status <= 299:
        resp.read()
        raise ApiException.from_response(http_resp=resp, body=None, data=None)
    return resp.response


def get_json(
    api: client.ApiClient, path: str, query: Sequence[tuple[str, str]] = (), *, accept: str = JSON,
) -> dict[str, Any]:
    """GET ``path`` and decode the JSON object. Raises ApiException."""
    resp = get(api, path, query, accept=accept)
    try:
        data = json.loads(resp.data)
    finally:
        resp.release_conn()
    return data if isinstance(data, dict) else {}
