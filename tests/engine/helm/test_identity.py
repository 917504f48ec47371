"""spec.targetNamespace and spec.serviceAccountName on the local cluster: a package in one namespace
installs its release into another; helm impersonates the ServiceAccount, and RBAC refuses it outside
its rights with a Ready message naming the ServiceAccount."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from engine.helm import Helm
from engine.kube.client import KubeTarget
from testkit import packages
from tests.cli.test_cli import cluster_args, helmdeck

pytestmark = pytest.mark.cluster

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


@pytest.fixture
def other_namespace(core_api: client.CoreV1Api) -> Iterator[str]:
    name = f"t-target-{uuid.uuid4().hex[:6]}"
    core_api.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    core_api.delete_namespace(name, propagation_policy="Background")


def write_package(folder: Path, namespace: str, extra: str) -> Path:
    """A folder with the package ``app`` of the flaky chart; ``extra`` more spec fields as YAML text."""
    packages.write_package(folder, "app", namespace, chart=EXAMPLES / "charts" / "flaky", timeout="20s",
                           values={"message": "hi"}, **(yaml.safe_load(extra) or {}))
    return folder


def results(stdout: str) -> dict[str, dict[str, object]]:
    lines = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    return {f"{r['namespace']}/{r['release']}": r for r in lines if r.get("type") == "result"}


def test_a_package_with_a_target_namespace_installs_its_release_there(
    helm: Helm, kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str, other_namespace: str,
    tmp_path: Path,
) -> None:
    pkgs = write_package(tmp_path / "p", namespace, f"  targetNamespace: {other_namespace}\n")
    args = cluster_args(helm, kube_target, namespace, pkgs, tmp_path / "log")
    proc = helmdeck("reconcile", "--once", "--no-lease", "--json", *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    release = f"{other_namespace}-app"  # Flux's default name: <targetNamespace>-<name>
    assert results(proc.stdout)[f"{other_namespace}/{release}"]["state"] == "InSync"
    # The release, its storage, its objects and helmdeck's status live in the target namespace.
    assert core_api.read_namespaced_config_map(release, other_namespace).data == {"message": "hi"}
    stored = core_api.list_namespaced_secret(other_namespace, label_selector="owner=helm").items
    assert [(s.metadata.labels or {}).get("name") for s in stored if s.metadata] == [release]
    assert core_api.read_namespaced_config_map(f"helmdeck.status.{release}", other_namespace)
    assert not core_api.list_namespaced_secret(namespace, label_selector="owner=helm").items
    # Reconciling again changes nothing (the status is found where it was written).
    again = helmdeck("reconcile", "--once", "--no-lease", "--json", *args)
    assert again.returncode == 0, again.stdout + again.stderr
    assert len(core_api.list_namespaced_secret(other_namespace, label_selector="owner=helm").items) == 1
    status = helmdeck("status", "-o", "json", *args)
    assert status.returncode == 0, status.stderr
    rows = {f"{r['namespace']}/{r['name']}": r for r in json.loads(status.stdout)}
    row = rows[f"{other_namespace}/{release}"]
    assert row["package"] == "app" and row["state"] == "InSync" and row["revision"] == 1, row
    # diff compares the release in the target namespace with the render: nothing would change.
    diff = helmdeck("diff", str(pkgs / "app.yaml"), "--kubeconfig", str(kube_target.kubeconfig), "--helm",
                    helm.binary, "--log-file", str(tmp_path / "log"))
    assert diff.returncode == 0, diff.stdout + diff.stderr
    assert f"{other_namespace}/{release}: an upgrade would change nothing" in diff.stderr


def grant(rbac: client.RbacAuthorizationV1Api, namespace: str, account: str) -> None:
    """A Role over everything in ``namespace`` only, bound to ServiceAccount ``namespace/account``."""
    rbac.create_namespaced_role(namespace, client.V1Role(
        metadata=client.V1ObjectMeta(name="deployer"),
        rules=[client.V1PolicyRule(api_groups=["*"], resources=["*"], verbs=["*"])]))
    rbac.create_namespaced_role_binding(namespace, client.V1RoleBinding(
        metadata=client.V1ObjectMeta(name="deployer"),
        role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name="deployer"),
        subjects=[client.RbacV1Subject(kind="ServiceAccount", name=account, namespace=namespace)]))


def test_a_service_account_installs_within_its_rights_and_is_refused_outside_them(
    any_helm: Helm, kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str, other_namespace: str,
    tmp_path: Path,
) -> None:
    core_api.create_namespaced_service_account(namespace, client.V1ServiceAccount(
        metadata=client.V1ObjectMeta(name="deployer")))
    grant(client.RbacAuthorizationV1Api(core_api.api_client), namespace, "deployer")
    user = f"system:serviceaccount:{namespace}:deployer"

    inside = write_package(tmp_path / "in", namespace, "  serviceAccountName: deployer\n")
    proc = helmdeck("reconcile", "--once", "--no-lease", "--json",
                    *cluster_args(any_helm, kube_target, namespace, inside, tmp_path / "log"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert results(proc.stdout)[f"{namespace}/app"]["state"] == "InSync"
    assert core_api.read_namespaced_config_map("app", namespace).data == {"message": "hi"}
    # The monitor reads as the ServiceAccount too (its own watches): it sees the release's objects.
    status = helmdeck("status", "-o", "json", *cluster_args(any_helm, kube_target, namespace, inside,
                                                            tmp_path / "log"))
    row = next(r for r in json.loads(status.stdout) if r["name"] == "app")
    assert row["monitor"] == {"state": "active", "paused": 0, "absent": [], "problem": None} \
        and row["ready"] is True, row

    outside = write_package(tmp_path / "out", namespace,
                            f"  serviceAccountName: deployer\n  targetNamespace: {other_namespace}\n")
    refused = helmdeck("reconcile", "--once", "--no-lease", "--json",
                       *cluster_args(any_helm, kube_target, namespace, outside, tmp_path / "log2"))
    assert refused.returncode != 0, refused.stdout
    result = results(refused.stdout)[f"{other_namespace}/{other_namespace}-app"]
    assert result["state"] != "InSync"
    message = str(result["message"])
    assert "forbidden" in message and user in message, message
    assert not core_api.list_namespaced_secret(other_namespace, label_selector="owner=helm").items
