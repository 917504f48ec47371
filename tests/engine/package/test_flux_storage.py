"""Where a HelmRelease's release is stored, as Flux's helm-controller stores it (issue 34 behaviour 1):
``spec.storageNamespace``, else the HelmRelease's own namespace even with a ``targetNamespace``
(helm-controller api/v2 helmrelease_types.go ``HelmRelease.GetStorageNamespace``, which
internal/action/config.go ``NewConfigFactory`` gives the Helm SDK's storage driver). helm's CLI keeps a release
in its ``--namespace``, so helmdeck reads such a release but refuses to act on it, saying why."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from engine.helm import Helm
from engine.kube.client import KubeTarget, api_client
from engine.package.flux import HELM_RELEASE
from engine.runtime.ledger.gate import ActionGate
from engine.runtime.ledger.owners import FLUX_GROUP, FLUX_PLURAL, FLUX_VERSION
from helmdeck.cli import EXIT_CHANGES, EXIT_NO_CHANGES, EXIT_STALLED
from testkit.chart_sources import ChartRepoServer, package_chart, publish_http, write
from testkit.fixtures import WEB, fixed_engine
from tests.cli.test_cli import helmdeck
from tests.engine.runtime.test_flux_owns import document
from tests.tui.test_app_pilot_actions import install_flux_crd


@pytest.fixture
def target(core_api: client.CoreV1Api, namespace: str) -> Iterator[str]:
    """A second namespace, the HelmRelease's ``targetNamespace`` (deleted afterwards)."""
    name = f"tgt-{uuid.uuid4().hex[:8]}"
    core_api.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    core_api.delete_namespace(name, propagation_policy="Background")


def helm_release(namespace: str, target: str, url: str, replicas: int, storage: str = "") -> str:
    """The Flux repository file of :func:`document` with HelmRelease ``web`` releasing into ``target`` (stored in
    ``storage`` when given)."""
    stored = f"  storageNamespace: {storage}\n" if storage else ""
    return document(namespace, url, replicas, f"  targetNamespace: {target}\n{stored}")


def helm_records(core_api: client.CoreV1Api, namespace: str, release: str) -> list[dict[str, Any]]:
    """Helm's storage Secrets of ``release`` in ``namespace``, as JSON objects."""
    found = core_api.list_namespaced_secret(namespace, label_selector=f"owner=helm,name={release}")
    return list(core_api.api_client.sanitize_for_serialization(found)["items"])


# The labels helm's Secret driver writes itself (helm pkg/storage/driver/secrets.go newSecretsObject).
_HELM_LABELS = {"name", "owner", "status", "version", "modifiedAt", "createdAt"}


def store_as_flux(core_api: client.CoreV1Api, release: str, source: str, namespace: str) -> None:
    """Move ``release``'s storage Secrets from ``source`` to ``namespace``, the HelmRelease's, where Flux's
    helm-controller writes them (the payload keeps the release's own namespace, as Flux's does), with helm's
    own labels only; helmdeck's labels and status object go, since Flux writes none."""
    for secret in helm_records(core_api, source, release):
        name, labels = secret["metadata"]["name"], secret["metadata"]["labels"]
        kept = {k: v for k, v in labels.items() if k in _HELM_LABELS}
        body = client.V1Secret(metadata=client.V1ObjectMeta(name=name, namespace=namespace, labels=kept),
                               type=secret["type"], data=secret["data"])
        core_api.create_namespaced_secret(namespace, body)
        core_api.delete_namespaced_secret(name, source)
    core_api.delete_namespaced_config_map(f"helmdeck.status.{release}", source)


@pytest.mark.cluster
def test_a_release_flux_stores_in_the_helmreleases_namespace_plans_no_change_and_is_not_acted_on(
    helm: Helm, kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str, target: str, tmp_path: Path,
    repo: ChartRepoServer,
) -> None:
    """api/v2 helmrelease_types.go GetStorageNamespace: the release of a HelmRelease with a targetNamespace is
    stored in the HelmRelease's namespace. While Flux owns it, plan finds it there and plans no change (no
    false install). Once Flux is gone helmdeck would upgrade the release it did not make (as Flux's
    internal/reconcile/atomic_release.go actionForState does for an unmanaged release): the plan names the
    refusal, and reconcile stalls on it without running helm (the CLI's --namespace is the release's and its
    storage's at once)."""
    helmreleases = install_flux_crd(api_client(kube_target))
    publish_http(helm.binary, package_chart(helm.binary, tmp_path, "1.0.0"), repo)
    pkgs = tmp_path / "flux-repository"
    release = f"{target}-web"
    args = ["--kubeconfig", str(kube_target.kubeconfig), "--helm", helm.binary, "-n", namespace,
            "--packages", str(pkgs), "--log-file", str(tmp_path / "log")]
    # helmdeck installs it where helm's CLI can (storageNamespace: the target), then it is stored as Flux does
    write(pkgs, "web.yaml", helm_release(namespace, target, repo.url, 1, storage=target))
    installed = helmdeck("reconcile", "--once", "--no-lease", *args)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    store_as_flux(core_api, release, target, namespace)
    write(pkgs, "web.yaml", helm_release(namespace, target, repo.url, 1))
    body = {"apiVersion": f"{FLUX_GROUP}/{FLUX_VERSION}", "kind": "HelmRelease", "metadata": {"name": "web"},
            "spec": {"interval": "10m"}}
    helmreleases.create_namespaced_custom_object(FLUX_GROUP, FLUX_VERSION, namespace, FLUX_PLURAL, body)

    for watched in (namespace, target):  # found though only the release's namespace is named: it is watched
        planned = helmdeck("plan", *args[:4], "-n", watched, *args[6:], "-o", "json")
        assert planned.returncode == EXIT_NO_CHANGES, planned.stdout + planned.stderr
        [web] = json.loads(planned.stdout)["packages"]
        assert (web["namespace"], web["release"], web["action"], web["revision"]) == (target, release, None, 1)

    helmreleases.delete_namespaced_custom_object(FLUX_GROUP, FLUX_VERSION, namespace, FLUX_PLURAL, "web")
    planned = helmdeck("plan", *args, "-o", "json")
    assert planned.returncode == EXIT_CHANGES, planned.stdout + planned.stderr
    [web] = json.loads(planned.stdout)["packages"]
    assert (web["action"], web["revision"]) == ("upgrade", 1)
    assert any(r.startswith(f"upgrade refused: release {target}/{release} is stored in namespace {namespace}")
               for r in web["reasons"]), web["reasons"]
    refused = helmdeck("reconcile", "--once", "--no-lease", *args)
    said = refused.stdout + refused.stderr
    assert refused.returncode == EXIT_STALLED, said
    assert "helm's CLI keeps a release in its --namespace" in said and f"spec.storageNamespace: {target}" in said
    # nothing acted: Flux's record is the only one, no second release beside it
    assert [s["metadata"]["labels"]["version"] for s in helm_records(core_api, namespace, release)] == ["1"]
    assert helm_records(core_api, target, release) == []


def test_the_operators_helm_actions_on_a_release_stored_apart_are_refused_saying_why() -> None:
    """api/v2 helmrelease_types.go GetStorageNamespace puts a HelmRelease's storage in its own namespace; helm's
    CLI cannot act on a release there, so the gate refuses the operator's helm actions (not unlock, a storage
    write of helmdeck's own, nor suspend)."""
    engine = fixed_engine()
    gate = ActionGate(engine.book, engine.observer.latest)
    web = engine.book.packages[WEB]
    engine.book.packages[WEB] = dataclasses.replace(web, kind=HELM_RELEASE, namespace="flux-apps",
                                                    target_namespace=WEB[0])
    for action in ("upgrade", "rollback", "test", "maintenance", "uninstall"):
        assert (gate.why_not(action, WEB) or "").startswith(
            f"{action} refused: release {WEB[0]}/{WEB[1]} is stored in namespace flux-apps"), action
    assert gate.why_not("suspend", WEB) is None
    engine.book.packages[WEB] = dataclasses.replace(web, kind=HELM_RELEASE, namespace="flux-apps",
                                                    target_namespace=WEB[0], storage_namespace=WEB[0])
    assert gate.why_not("upgrade", WEB) is None  # spec.storageNamespace: the release's own namespace
