"""RBAC: the observer works with namespace-scoped list/watch only, and names a missing permission."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kubernetes import client

from engine.kube.client import KubeTarget, api_client
from engine.storage.observer import MissingPermission, Observer
from localcluster.cluster import LocalCluster
from tests.storage_cluster import wait_for
from tests.storage_records import new_secret, release

pytestmark = pytest.mark.cluster


def service_account_target(
    cluster: LocalCluster, core: client.CoreV1Api, rbac: client.RbacAuthorizationV1Api,
    namespace: str, name: str, verbs: list[str], tmp_path: Path,
) -> KubeTarget:
    """A kubeconfig for a new ServiceAccount allowed ``verbs`` on secrets in ``namespace`` only."""
    core.create_namespaced_service_account(namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name=name)))
    if verbs:
        rbac.create_namespaced_role(namespace, client.V1Role(
            metadata=client.V1ObjectMeta(name=name),
            rules=[client.V1PolicyRule(api_groups=[""], resources=["secrets"], verbs=verbs)],
        ))
        rbac.create_namespaced_role_binding(namespace, client.V1RoleBinding(
            metadata=client.V1ObjectMeta(name=name),
            role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name=name),
            subjects=[client.RbacV1Subject(kind="ServiceAccount", name=name, namespace=namespace)],
        ))
    token = core.create_namespaced_service_account_token(name, namespace, client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=600)))
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": name,
        "clusters": [{"name": "local", "cluster": {
            "server": cluster.server, "certificate-authority": str(cluster.state_dir / "pki" / "ca.crt")}}],
        "users": [{"name": name, "user": {"token": token.status.token if token.status else ""}}],
        "contexts": [{"name": name, "context": {"cluster": "local", "user": name}}],
    }
    path = tmp_path / f"{name}.kubeconfig"
    path.write_text(json.dumps(config))
    return KubeTarget(path)


@pytest.fixture
def rbac_api(kube_target: KubeTarget) -> client.RbacAuthorizationV1Api:
    return client.RbacAuthorizationV1Api(api_client(kube_target))


def test_namespace_scoped_list_and_watch_suffice(
    local_cluster: LocalCluster, core_api: client.CoreV1Api, rbac_api: client.RbacAuthorizationV1Api,
    namespace: str, tmp_path: Path,
) -> None:
    target = service_account_target(local_cluster, core_api, rbac_api, namespace, "viewer", ["list", "watch"],
                                    tmp_path)
    observer = Observer(api_client(target), [namespace], driver="secret")
    assert observer.check_access() == []
    observer.start()
    try:
        assert observer.wait_synced(20)
        core_api.create_namespaced_secret(namespace, new_secret(release(1, namespace=namespace)))
        wait_for(lambda: observer.latest(namespace, "web"), what="the record through the watch")
        assert observer.load_release(namespace, "web", 1)["name"] == "web"  # list by name, no get needed
        assert observer.problems() == {} and observer.last_error is None
    finally:
        observer.stop()


def test_a_missing_permission_is_named(
    local_cluster: LocalCluster, core_api: client.CoreV1Api, rbac_api: client.RbacAuthorizationV1Api,
    namespace: str, tmp_path: Path,
) -> None:
    lister = service_account_target(local_cluster, core_api, rbac_api, namespace, "lister", ["list"], tmp_path)
    observer = Observer(api_client(lister), [namespace], driver="secret")
    assert observer.check_access() == [MissingPermission("watch", "secrets", namespace)]
    observer.start()
    try:
        assert observer.wait_synced(20)  # the list works, the watch is refused
        problem = wait_for(lambda: observer.problems().get(namespace), what="the watch problem")
        assert problem.startswith(f'missing RBAC permission: watch secrets in namespace "{namespace}"')
        assert "cannot watch resource" in problem and observer.last_error == problem
    finally:
        observer.stop()

    nobody = service_account_target(local_cluster, core_api, rbac_api, namespace, "nobody", [], tmp_path)
    everywhere = Observer(api_client(nobody), None, driver="configmap")
    assert everywhere.check_access() == [MissingPermission("list", "configmaps", None),
                                         MissingPermission("watch", "configmaps", None)]
    everywhere.start()
    try:
        assert not everywhere.wait_synced(20)  # returns as soon as the list is refused
        assert everywhere.problems()[""].startswith(
            "missing RBAC permission: list configmaps across all namespaces (cluster scope)")
    finally:
        everywhere.stop()
