"""`helmdeck controller` on the local cluster, run as a subprocess: Package objects are installed and upgraded
by the same engine as the app, one controller acts through its Lease and a second takes over."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from kubernetes import client

from engine.helm import Helm
from engine.kube.client import KubeTarget, api_client
from helmdeck.parser import EXIT_USAGE
from localcluster.cluster import LocalCluster
from tests.controller_fixtures import (
    GROUP,
    VERSION,
    create,
    eventually,
    lease_holder,
    oci_repository,
    package,
    publish_web,
    releases,
    start_controller,
)

pytestmark = pytest.mark.cluster


@pytest.fixture
def apis(kube_target: KubeTarget, helmdeck_crds: list[str]) -> tuple[client.CustomObjectsApi, client.CoreV1Api,
                                                                        client.CoordinationV1Api]:
    api = api_client(kube_target)
    return client.CustomObjectsApi(api), client.CoreV1Api(api), client.CoordinationV1Api(api)


def test_a_package_object_is_installed_and_an_edit_upgrades_once(
    apis: tuple[client.CustomObjectsApi, client.CoreV1Api, client.CoordinationV1Api], namespace: str,
    helm: Helm, tmp_path: Path, local_cluster: LocalCluster, helm_home: dict[str, str],
) -> None:
    objects, core, _ = apis
    assert local_cluster.registry is not None and local_cluster.kubeconfig is not None
    base = publish_web(helm, tmp_path, local_cluster.registry, helm_home, "0.1.0")
    create(objects, oci_repository(namespace, base))
    create(objects, package(namespace, "web", values={"replicas": 1}))
    ctl = start_controller(local_cluster.kubeconfig, namespace, helm, tmp_path)
    try:
        eventually(lambda: releases(core, namespace, "web") == [(1, "deployed")], 90, "web installed",
                   logs=ctl.text)
        objects.patch_namespaced_custom_object(GROUP, VERSION, namespace, "packages", "web",
                                               {"spec": {"values": {"replicas": 2}}})
        eventually(lambda: releases(core, namespace, "web") == [(1, "superseded"), (2, "deployed")], 60,
                   "web upgraded", logs=ctl.text)
        time.sleep(5)  # more passes would make more revisions: the edit upgrades once
        assert releases(core, namespace, "web") == [(1, "superseded"), (2, "deployed")]
    finally:
        assert ctl.stop() == 0, ctl.text()


def test_a_second_controller_takes_over_within_20s_of_sigkill(
    apis: tuple[client.CustomObjectsApi, client.CoreV1Api, client.CoordinationV1Api], namespace: str,
    helm: Helm, tmp_path: Path, local_cluster: LocalCluster, helm_home: dict[str, str],
) -> None:
    objects, core, coordination = apis
    assert local_cluster.registry is not None and local_cluster.kubeconfig is not None
    base = publish_web(helm, tmp_path, local_cluster.registry, helm_home, "0.1.0")
    create(objects, oci_repository(namespace, base))
    first = start_controller(local_cluster.kubeconfig, namespace, helm, tmp_path, name="a")
    second = None
    try:
        holder = eventually(lambda: lease_holder(coordination, namespace), 30, "a controller holds the Lease",
                            logs=first.text)
        assert f"-{first.pid}-" in holder
        second = start_controller(local_cluster.kubeconfig, namespace, helm, tmp_path, name="b")
        time.sleep(3)
        assert lease_holder(coordination, namespace) == holder  # the second one waits
        first.stop(signal.SIGKILL)
        killed = time.monotonic()

        def taken_over() -> str | None:
            now = lease_holder(coordination, namespace)
            return now if now and now != holder else None

        new = eventually(taken_over, 20, "the second controller holds the Lease", logs=second.text)
        assert f"-{second.pid}-" in new and time.monotonic() - killed < 20
        create(objects, package(namespace, "after"))  # and it acts
        eventually(lambda: releases(core, namespace, "after") == [(1, "deployed")], 90, "installed by the second",
                   logs=second.text)
    finally:
        first.stop(signal.SIGKILL)
        if second is not None:
            assert second.stop() == 0, second.text()


def test_in_cluster_config_from_a_service_account_token(
    apis: tuple[client.CustomObjectsApi, client.CoreV1Api, client.CoordinationV1Api], namespace: str,
    helm: Helm, tmp_path: Path, local_cluster: LocalCluster, helm_home: dict[str, str], kube_target: KubeTarget,
) -> None:
    # As in a pod: no kubeconfig; KUBERNETES_SERVICE_HOST/PORT, and a ServiceAccount's token (a TokenRequest),
    # the CA and the namespace in the mount's files (here another directory). The Lease goes to that namespace.
    objects, core, coordination = apis
    assert local_cluster.registry is not None and local_cluster.kubeconfig is not None
    rbac = client.RbacAuthorizationV1Api(api_client(kube_target))
    core.create_namespaced_service_account(namespace, client.V1ServiceAccount(
        metadata=client.V1ObjectMeta(name="helmdeck")))
    binding = f"helmdeck-{namespace}"
    rbac.create_cluster_role_binding(client.V1ClusterRoleBinding(
        metadata=client.V1ObjectMeta(name=binding),
        role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="ClusterRole", name="cluster-admin"),
        subjects=[client.RbacV1Subject(kind="ServiceAccount", name="helmdeck", namespace=namespace)]))
    try:
        token: Any = core.create_namespaced_service_account_token("helmdeck", namespace,
                                                                  client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=600)))
        mount = tmp_path / "serviceaccount"
        mount.mkdir()
        (mount / "token").write_text(token.status.token)
        kubeconfig = json.loads(local_cluster.kubeconfig.read_text())
        cluster = kubeconfig["clusters"][0]["cluster"]
        (mount / "ca.crt").write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
        (mount / "namespace").write_text(namespace)
        server = urlsplit(cluster["server"])
        base = publish_web(helm, tmp_path, local_cluster.registry, helm_home, "0.1.0")
        create(objects, oci_repository(namespace, base))
        create(objects, package(namespace, "web"))
        ctl = start_controller(None, namespace, helm, tmp_path, "--serviceaccount-dir", str(mount), env={
            "KUBERNETES_SERVICE_HOST": str(server.hostname), "KUBERNETES_SERVICE_PORT": str(server.port),
            "KUBECONFIG": str(tmp_path / "no-such-kubeconfig")})
        try:
            eventually(lambda: releases(core, namespace, "web") == [(1, "deployed")], 90, "web installed",
                       logs=ctl.text)
            assert f"-{ctl.pid}-" in lease_holder(coordination, namespace)
        finally:
            assert ctl.stop() == 0, ctl.text()
    finally:
        rbac.delete_cluster_role_binding(binding)


def test_without_cluster_access_it_says_what_is_missing(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "helmdeck", "controller", "--serviceaccount-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=60, check=False,
                          env={k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_SERVICE")})
    assert proc.returncode == EXIT_USAGE and "no in-cluster config" in proc.stderr, proc.stderr
