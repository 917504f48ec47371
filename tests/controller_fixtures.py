"""The controller tests' pytest fixtures (a plugin tests/conftest.py loads): ``controller_env`` gives a test the
APIs, its namespace and what starts a controller there (:mod:`testkit.controller`); ``apis`` the three APIs
alone; ``package_loads`` counts the Package objects loaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from engine.helm import Helm
from engine.kube.client import KubeTarget, api_client
from engine.package.load import package_object
from engine.package.model import PackageSpec
from localcluster.cluster import LocalCluster
from testkit.controller import (
    EXAMPLES,
    Controller,
    create,
    oci_repository,
    publish_chart,
    publish_web,
    start_controller,
)

Apis = tuple[client.CustomObjectsApi, client.CoreV1Api, client.CoordinationV1Api]


@pytest.fixture
def apis(kube_target: KubeTarget, helmdeck_crds: list[str]) -> Apis:
    """The custom objects, core and coordination APIs of the local cluster, with helmdeck's CRDs applied."""
    api = api_client(kube_target)
    return client.CustomObjectsApi(api), client.CoreV1Api(api), client.CoordinationV1Api(api)


@dataclass
class ControllerEnv:
    """A controller test's set-up: the APIs, its namespace, helm, its work directory and the local cluster."""

    objects: client.CustomObjectsApi
    core: client.CoreV1Api
    coordination: client.CoordinationV1Api
    namespace: str
    helm: Helm
    work: Path
    cluster: LocalCluster
    helm_home: dict[str, str]

    @property
    def kubeconfig(self) -> Path:
        assert self.cluster.kubeconfig is not None
        return self.cluster.kubeconfig

    @property
    def registry(self) -> str:
        assert self.cluster.registry is not None
        return self.cluster.registry

    def web_source(self) -> None:
        """The web example chart 0.1.0 pushed to the local registry, and the OCIRepository ``web`` selecting it."""
        create(self.objects, oci_repository(self.namespace, publish_web(self.helm, self.work, self.registry,
                                                                        self.helm_home, "0.1.0")))

    def flaky_source(self, chart: Path = EXAMPLES / "charts" / "flaky") -> None:
        """The flaky example chart (a ``hang`` value makes --wait never end; or ``chart``, a copy of it) pushed to
        the local registry, and the OCIRepository ``web`` selecting its 0.1.0."""
        base = publish_chart(self.helm, chart, self.work, self.registry, self.helm_home)
        create(self.objects, {**oci_repository(self.namespace, base), "spec": {
            "url": f"oci://{base}/flaky", "insecure": True, "ref": {"tag": "0.1.0"}}})

    def start(self, *extra: str, name: str = "c", in_cluster: bool = False,
              env: dict[str, str] | None = None) -> Controller:
        """:func:`start_controller` on this namespace, with the cluster's kubeconfig unless ``in_cluster``."""
        return start_controller(None if in_cluster else self.kubeconfig, self.namespace, self.helm, self.work,
                                *extra, name=name, env=env)


@pytest.fixture
def controller_env(apis: Apis, namespace: str, helm: Helm, tmp_path: Path, local_cluster: LocalCluster,
                   helm_home: dict[str, str]) -> ControllerEnv:
    """A :class:`ControllerEnv` in the test's namespace."""
    return ControllerEnv(*apis, namespace, helm, tmp_path, local_cluster, helm_home)


@pytest.fixture
def package_loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the Package objects the object set (engine.package.object_set) has the loader validate,
    in order."""
    seen: list[str] = []

    def counting(obj: Any, default_service_account: str = "") -> PackageSpec:
        seen.append(obj["metadata"]["name"])
        return package_object(obj, default_service_account)

    monkeypatch.setattr("engine.package.object_set.package_object", counting)
    return seen
