"""Requests on API paths with raw JSON (list, watch, get, create, replace, patch, delete) through a
kubernetes ApiClient.

The kubernetes package is kept for what it is good at: kubeconfig and in-cluster config,
authentication, TLS, proxies and its REST transport (``ApiClient.call_api``). Its generated API and
model modules are not used here: ``kubernetes.client.api.core_v1_api`` alone imports ~265 model
modules (0.65 s), more than a headless command's whole budget, and the typed client has no call for
"any resource type" nor for metadata-only responses.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

import orjson
from kubernetes import client
from kubernetes.client.exceptions import ApiException

JSON = "application/json"
# Server-side metadata-only responses (PartialObjectMetadata), as client-go's metadata client asks.
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
MERGE_PATCH = "application/merge-patch+json"  # RFC 7386


def path(api_version: str, plural: str, namespace: str | None = None, name: str | None = None) -> str:
    """The API path of a resource collection or object, as kubectl builds it: ``v1`` is the core group
    (``/api/v1``), ``group/version`` is under ``/apis``; ``namespace`` None is every namespace (a
    collection) or a cluster-scoped resource. Names are percent-encoded."""
    root = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    where = f"/namespaces/{quote(namespace, safe='')}" if namespace else ""
    return f"{root}{where}/{plural}" + (f"/{quote(name, safe='')}" if name is not None else "")


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
    """GET ``path`` and decode the JSON object. Raises ApiException, ValueError (not JSON)."""
    resp = get(api, path, query, accept=accept)
    try:
        try:  # a compiled decoder: a page of 500 storage records is ~60 ms of json, ~15 ms here
            data = orjson.loads(resp.data)
        except orjson.JSONDecodeError:
            data = json.loads(resp.data)  # what it cannot read (e.g. integers past 64 bits) as before
    finally:
        resp.release_conn()
    return data if isinstance(data, dict) else {}


def send(
    api: client.ApiClient,
    method: str,
    path: str,
    body: Any = None,
    query: Sequence[tuple[str, str]] = (),
    *,
    content_type: str = JSON,
    timeout: float | tuple[float, float] = 30,
) -> dict[str, Any]:
    """``method`` (POST, PUT, PATCH, DELETE) on ``path`` with a JSON ``body`` (a dict, or a list for a
    JSON patch); returns the decoded JSON answer (``{}`` when it is not an object). Raises
    ApiException on a non-2xx status, as the generated API does."""
    headers = {"Accept": JSON, "Content-Type": content_type}
    request = api.param_serialize(method, path, query_params=list(query), header_params=headers, body=body,
                                  auth_settings=["BearerToken"])
    resp: Any = api.call_api(*request, _request_timeout=timeout)
    data = resp.read()
    if not 200 <= resp.status <= 299:
        raise ApiException.from_response(http_resp=resp, body=data.decode(errors="replace"), data=None)
    try:
        answer = json.loads(data) if data else {}
    except ValueError:
        return {}
    return answer if isinstance(answer, dict) else {}
