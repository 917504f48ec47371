"""Where a manifest's objects live: each kind's scope from the API server's discovery (the local cluster), the
built-in list when discovery cannot answer."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from kubernetes import client

from engine.kube.client import KubeTarget, api_client
from engine.monitor.inspect import Inspector
from engine.monitor.manifest import manifest_objects
from testkit.fixtures import WEB, fixed_engine
from tui.engine_client import EngineClient
from tui.manifest import kinds, placed

GROUP = "scope.helmdeck.dev"
MANIFEST = """apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
---
apiVersion: scope.helmdeck.dev/v1
kind: Widget
metadata: {name: w, namespace: wrongly-given}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: reader}
"""


def test_discovery_decides_and_the_built_in_list_stands_in() -> None:
    found = manifest_objects(MANIFEST)
    # No answer: the built-in list (a custom kind counts as namespaced, a ClusterRole does not).
    assert [o.ref for o in placed(found, "ns", {})] == ["Deployment/ns/web", "Widget/wrongly-given/w",
                                                         "ClusterRole/reader"]
    scopes = {("apps/v1", "Deployment"): True, (f"{GROUP}/v1", "Widget"): False,
              ("rbac.authorization.k8s.io/v1", "ClusterRole"): None}  # None: not served, the list decides
    assert [o.ref for o in placed(found, "ns", scopes)] == ["Deployment/ns/web", "Widget/w", "ClusterRole/reader"]


class FailingInspector:
    """Stands in for the engine's Inspector when the API server does not answer."""

    def __init__(self) -> None:
        self.calls = 0

    async def scopes(self, wanted: Any) -> dict[tuple[str, str], bool | None]:
        self.calls += 1
        raise ConnectionError("connection refused")


async def test_the_app_places_objects_offline_and_asks_discovery_again_only_after_a_pause(
        monkeypatch: pytest.MonkeyPatch) -> None:
    engine = fixed_engine()
    door = EngineClient(engine)
    found = await door.objects(WEB, 3)  # offline: no discovery, the built-in list
    assert [o.ref for o in found] == ["Secret/helmdeck-demo/web-auth", "Service/helmdeck-demo/web",
                                      "Deployment/helmdeck-demo/web"]
    failing = FailingInspector()
    monkeypatch.setattr(engine, "_inspector", failing)
    assert await door.objects(WEB, 3) == found and failing.calls == 1
    assert await door.objects(WEB, 3) == found and failing.calls == 1  # not asked again at once
    door._discovery_retry = time.monotonic() - 1
    await door.objects(WEB, 3)
    assert failing.calls == 2


def install_cluster_scoped_crd(api: client.ApiClient) -> None:
    crd: Any = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{GROUP}"},
        "spec": {"group": GROUP, "scope": "Cluster",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {"type": "object",
                                                              "x-kubernetes-preserve-unknown-fields": True}}}]},
    }
    try:
        client.ApiextensionsV1Api(api).create_custom_resource_definition(crd)
    except client.ApiException as exc:
        if exc.status != 409:
            raise


async def test_scopes_come_from_the_api_servers_discovery(kube_target: KubeTarget) -> None:
    api = api_client(kube_target)
    install_cluster_scoped_crd(api)
    inspector = Inspector(api)
    found = manifest_objects(MANIFEST)
    deadline = time.monotonic() + 60  # a new CRD is served once established
    while (scopes := await inspector.scopes(kinds(found)))[(f"{GROUP}/v1", "Widget")] is None:
        assert time.monotonic() < deadline, "the CRD was never served"
        await asyncio.sleep(0.5)
    assert scopes == {("apps/v1", "Deployment"): True, (f"{GROUP}/v1", "Widget"): False,
                      ("rbac.authorization.k8s.io/v1", "ClusterRole"): False}
    assert [o.ref for o in placed(found, "ns", scopes)] == ["Deployment/ns/web", "Widget/w", "ClusterRole/reader"]
    assert await inspector.scopes([("v1", "Namespace"), ("v1", "NoSuchKind"), ("nope.invalid/v1", "X")]) == {
        ("v1", "Namespace"): False, ("v1", "NoSuchKind"): None, ("nope.invalid/v1", "X"): None}
