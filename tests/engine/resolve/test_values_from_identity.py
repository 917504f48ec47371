"""spec.valuesFrom with spec.serviceAccountName on the local cluster: the ConfigMaps and Secrets are read and
watched as the package's ServiceAccount (impersonated, as helm's --kube-as-user), never as helmdeck itself."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client

from engine.helm import Helm
from engine.kube.client import KubeTarget
from engine.reconcile import conditions as cond
from engine.runtime.assemble import build_engine
from tests.engine.helm.test_identity import grant
from tests.engine.resolve.test_values_from import GREETING, deployed_settings, revision, secret, until

pytestmark = pytest.mark.cluster


def package(folder: Path, namespace: str, name: str, account: str) -> None:
    from tests.engine.resolve.test_values_from import package as write

    write(folder, namespace, name, "    - {kind: Secret, name: creds}\n")
    file = folder / f"{name}.yaml"
    file.write_text(file.read_text().replace("  timeout: 20s\n", f"  timeout: 20s\n  serviceAccountName: {account}\n"))


async def test_values_are_read_and_watched_as_the_service_account(
    helm: Helm, kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str, tmp_path: Path,
) -> None:
    rbac = client.RbacAuthorizationV1Api(core_api.api_client)
    for account in ("deployer", "limited"):
        core_api.create_namespaced_service_account(namespace, client.V1ServiceAccount(
            metadata=client.V1ObjectMeta(name=account)))
    grant(rbac, namespace, "deployer")  # everything in its namespace
    rbac.create_namespaced_role(namespace, client.V1Role(  # ConfigMaps only: no Secret
        metadata=client.V1ObjectMeta(name="configmaps"),
        rules=[client.V1PolicyRule(api_groups=[""], resources=["configmaps"], verbs=["get", "list", "watch"])]))
    rbac.create_namespaced_role_binding(namespace, client.V1RoleBinding(
        metadata=client.V1ObjectMeta(name="configmaps"),
        role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name="configmaps"),
        subjects=[client.RbacV1Subject(kind="ServiceAccount", name="limited", namespace=namespace)]))
    secret(core_api, namespace, "creds", {"values.yaml": f"settings: {{greeting: {GREETING}}}\n"})
    pkgs = tmp_path / "p"
    package(pkgs, namespace, "app", "deployer")
    package(pkgs, namespace, "blind", "limited")
    deployer, limited = (f"system:serviceaccount:{namespace}:{a}" for a in ("deployer", "limited"))
    engine = build_engine(kube_target, helm, pkgs, namespaces=[namespace])
    app, blind = (namespace, "app"), (namespace, "blind")
    await engine.start()
    try:
        # The ServiceAccount that may read the Secret installs with its values, and watches it as itself.
        await until(lambda: revision(engine, app) == 1)
        assert deployed_settings(core_api, namespace, "app")["greeting"] == GREETING
        assert ("Secret", namespace, deployer) in engine.values_objects.watched()
        assert ("Secret", namespace, limited) in engine.values_objects.watched()
        assert not any(user == "" for _, _, user in engine.values_objects.watched())  # never as helmdeck

        # The one that may not: Ready=False naming the Secret and the identity; helmdeck itself could read it.
        def refused() -> bool:
            status = engine.status(blind)
            ready = cond.get(status.conditions, cond.READY) if status is not None else None
            return ready is not None and ready.status == "False" and ready.reason == "ValuesError"

        await until(refused)
        ready = cond.get(engine.status(blind).conditions, cond.READY)  # type: ignore[union-attr]
        assert ready is not None
        assert f"cannot read Secret {namespace}/creds as {limited}" in ready.message, ready.message
        assert "Forbidden (403)" in ready.message and f"ServiceAccount {namespace}/limited" in ready.message
        assert revision(engine, blind) == 0  # helm never ran
        assert core_api.read_namespaced_secret("creds", namespace).data  # readable by helmdeck's own identity

        # A change seen by the ServiceAccount's own watch reconciles within seconds.
        secret(core_api, namespace, "creds", {"values.yaml": "settings: {greeting: s3cr3t-changed}\n"}, replace=True)
        took = await until(lambda: revision(engine, app) == 2, timeout=15)
        assert took < 10
        assert deployed_settings(core_api, namespace, "app")["greeting"] == "s3cr3t-changed"
    finally:
        await engine.stop()
