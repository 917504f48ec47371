"""helmdeck's own chart (deploy/chart/): it lints, renders and applies (a server-side dry run) on the local
cluster, and the controller runs "as in the cluster" with the chart's ServiceAccount and RBAC: in-cluster config
with a TokenRequest's token, bound to cluster-admin (the default) and locked down (``rbac.clusterAdmin: false``,
every release applied as a Package's ServiceAccount).

Whether the locked-down ClusterRole is enough and no more: each capability the controller uses as itself (the
table :data:`CAPABILITIES`, taken from the code that makes each request: named beside it) is a named test
asking the API server (SubjectAccessReview) whether the chart's ServiceAccount may do it, so removing any rule
breaks the tests named for its capabilities; a test fails on any verb a rule grants that no capability uses;
and one full run with the complete role installs, uninstalls and stops without a single Forbidden answer to
the controller's own identity.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from engine.base import tools
from engine.helm import Helm
from engine.kube.client import KubeTarget, api_client
from engine.kube.rest import send
from helmdeck.parser import EXIT_USAGE
from localcluster import build
from localcluster.cluster import LocalCluster
from testkit.controller import (
    GROUP,
    VERSION,
    Controller,
    create,
    eventually,
    get_package,
    lease_holder,
    package,
    releases,
    start_controller,
)
from tests.conftest import ROOT, helm_binary
from tests.controller_fixtures import ControllerEnv

pytestmark = pytest.mark.binaries("helm4", "helm3")  # its rendering tests run the real helm without a cluster
CHART = ROOT / "deploy" / "chart"
LOCKED = ("--set", "rbac.clusterAdmin=false")
# Two static shards beside the main instance; shard2 with two replicas and its own resources.
SHARDS = ("--set", "shards[0].name=shard1", "--set", "shards[1].name=shard2", "--set", "shards[1].replicas=2",
          "--set", "shards[1].resources.limits.memory=2Gi")
# Automatic placement: one Deployment of three replicas, each `helmdeck controller --shards auto`.
AUTO = ("--set", "shards=auto", "--set", "replicas=3")
APPLY = "application/apply-patch+yaml"
# Where each kind the chart renders is applied (group/version, plural, namespaced).
PATHS = {
    "ServiceAccount": ("v1", "serviceaccounts", True),
    "Service": ("v1", "services", True),
    "Deployment": ("apps/v1", "deployments", True),
    "Role": ("rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": ("rbac.authorization.k8s.io/v1", "rolebindings", True),
    "ClusterRole": ("rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "CustomResourceDefinition": ("apiextensions.k8s.io/v1", "customresourcedefinitions", False),
}
RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


def render(namespace: str, *args: str, release: str = "hd", crds: bool = False) -> list[dict[str, Any]]:
    """``helm template`` of the chart into ``namespace``: its documents."""
    cmd = [str(helm_binary("helm4")), "template", release, str(CHART), "--namespace", namespace, *args]
    out = subprocess.run(cmd + (["--include-crds"] if crds else []), capture_output=True, text=True, timeout=60,
                         check=False)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def apply(api: client.ApiClient, doc: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
    """Server-side apply of ``doc`` (as ``kubectl apply --server-side``); Raises ApiException."""
    version, plural, namespaced = PATHS[doc["kind"]]
    root = f"/api/{version}" if "/" not in version else f"/apis/{version}"
    where = f"/namespaces/{doc['metadata']['namespace']}" if namespaced else ""
    query = [("fieldManager", "helmdeck-chart-test")] + ([("dryRun", "All")] if dry_run else [])
    return send(api, "PATCH", f"{root}{where}/{plural}/{doc['metadata']['name']}", json.dumps(doc), query,
                content_type=APPLY)


def container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    [found] = deployment["spec"]["template"]["spec"]["containers"]
    return dict(found)


# -- the chart alone ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("values", [(), LOCKED, SHARDS, AUTO], ids=["cluster-admin", "locked-down", "shards", "auto"])
def test_helm_lint(values: tuple[str, ...]) -> None:
    for helm in ("helm4", "helm3"):
        out = subprocess.run([str(helm_binary(helm)), "lint", "--strict", str(CHART), *values],
                             capture_output=True, text=True, timeout=60, check=False)
        assert out.returncode == 0 and "0 chart(s) failed" in out.stdout, out.stdout + out.stderr


def test_the_pod_is_non_root_with_a_read_only_root_and_probes() -> None:
    docs = render("helmdeck-system")
    pod = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    ctl = container(docs)
    assert pod["serviceAccountName"] == "helmdeck"
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = ctl["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    # helm and helmdeck write only below HOME and the XDG directories, all on the emptyDir.
    [tmp] = [v for v in pod["volumes"] if v["name"] == "tmp"]
    assert "emptyDir" in tmp and {"name": "tmp", "mountPath": "/tmp"} in ctl["volumeMounts"]
    env = {e["name"]: e["value"] for e in ctl["env"]}
    for var in ("HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
        assert env[var].startswith("/tmp/"), var
    ports = {p["name"]: p["containerPort"] for p in ctl["ports"]}
    assert ctl["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http-health"}
    assert ctl["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http-health"}
    assert f"--health-addr=:{ports['http-health']}" in ctl["args"]
    assert f"--metrics-addr=:{ports['http-metrics']}" in ctl["args"]
    assert ctl["resources"]["requests"] and ctl["resources"]["limits"]["memory"]
    [svc] = [d for d in docs if d["kind"] == "Service"]
    assert svc["spec"]["ports"][0]["targetPort"] == "http-metrics"
    assert not any(d["kind"] in ("ClusterRole", "Role") for d in docs)  # bound to cluster-admin
    [binding] = [d for d in docs if d["kind"] == "ClusterRoleBinding"]
    assert binding["roleRef"]["name"] == "cluster-admin"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "helmdeck", "namespace": "helmdeck-system"}]


def test_the_image_is_configurable() -> None:
    ctl = container(render("x", "--set", "image.repository=registry.example/hd", "--set", "image.tag=1.2.3",
                           "--set", "image.pullPolicy=Always"))
    assert (ctl["image"], ctl["imagePullPolicy"]) == ("registry.example/hd:1.2.3", "Always")
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert container(render("x"))["image"].endswith(f":{chart['appVersion']}")


@pytest.mark.parametrize(("values", "grace"), [
    ((), 45),
    (("--set", "controller.stopDeadline=100"), 115),
    (("--set", "terminationGracePeriodSeconds=300"), 300),
])
def test_the_stop_deadline_is_kept_inside_the_grace_period(values: tuple[str, ...], grace: int) -> None:
    docs = render("x", *values)
    pod = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    deadline = next(int(a.split("=", 1)[1]) for a in container(docs)["args"] if a.startswith("--stop-deadline="))
    assert pod["terminationGracePeriodSeconds"] == grace and deadline < grace


def test_a_grace_period_shorter_than_the_stop_deadline_fails_rendering() -> None:
    out = subprocess.run([str(helm_binary("helm4")), "template", "hd", str(CHART), "--set",
                          "terminationGracePeriodSeconds=30", "--set", "controller.stopDeadline=30"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode != 0
    assert "terminationGracePeriodSeconds (30) must be at least controller.stopDeadline (30) + 15" in out.stderr
    assert "Raise terminationGracePeriodSeconds to 45" in out.stderr


def _deployments(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}


def _selector_arg(deployment: dict[str, Any]) -> str | None:
    [ctl] = deployment["spec"]["template"]["spec"]["containers"]
    return next((a.split("=", 1)[1] for a in ctl["args"] if a.startswith("--watch-label-selector=")), None)


class _Strict(yaml.SafeLoader):
    """YAML that refuses a key given twice in one mapping (the API server's decoder does)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        keys = [self.construct_object(k, deep=deep) for k, _ in node.value]
        assert len(keys) == len(set(keys)), f"a key given twice: {keys}"
        return super().construct_mapping(node, deep=deep)


def test_shards_run_as_one_deployment_each_beside_the_main_instance() -> None:
    assert _selector_arg(_deployments(render("x"))["hd-helmdeck"]) is None  # not sharded: every Package
    out = subprocess.run([str(helm_binary("helm4")), "template", "hd", str(CHART), "--namespace", "x", *SHARDS],
                         capture_output=True, text=True, timeout=60, check=True)
    docs = [d for d in yaml.load_all(out.stdout, Loader=_Strict) if d]
    found = _deployments(docs)
    assert set(found) == {"hd-helmdeck", "hd-helmdeck-shard1", "hd-helmdeck-shard2"}
    key = "sharding.helmdeck.dev/key"
    assert _selector_arg(found["hd-helmdeck-shard1"]) == f"{key}=shard1"
    assert _selector_arg(found["hd-helmdeck-shard2"]) == f"{key}=shard2"
    # The main instance: the complement (unlabelled Packages, and any labelled for a shard not listed).
    assert _selector_arg(found["hd-helmdeck"]) == f"{key} notin (shard1,shard2)"
    assert [found[n]["spec"]["replicas"] for n in sorted(found)] == [1, 1, 2]
    [ctl2] = found["hd-helmdeck-shard2"]["spec"]["template"]["spec"]["containers"]
    assert ctl2["resources"] == {"limits": {"memory": "2Gi"}}
    # No Deployment's selector takes another's pods (the main one's selector is immutable: kept as it was).
    for name, deployment in found.items():
        wanted = deployment["spec"]["selector"]["matchLabels"]
        for other, pods in found.items():
            labels = pods["spec"]["template"]["metadata"]["labels"]
            assert (wanted.items() <= labels.items()) == (name == other), (name, other)
    assert found["hd-helmdeck"]["spec"]["selector"] == _deployments(render("x"))["hd-helmdeck"]["spec"]["selector"]
    # A metrics Service per Deployment, each selecting that Deployment's pods only.
    services = {d["metadata"]["name"]: d["spec"]["selector"] for d in docs if d["kind"] == "Service"}
    assert set(services) == {f"{n}-metrics" for n in found}
    for name, deployment in found.items():
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert [s for s, sel in services.items() if sel.items() <= labels.items()] == [f"{name}-metrics"]
    # Each shard pod is the same hardened controller as the main one.
    pods = {n: d["spec"]["template"]["spec"] for n, d in found.items()}
    assert all(p["securityContext"] == pods["hd-helmdeck"]["securityContext"] for p in pods.values())
    assert all(p["serviceAccountName"] == "helmdeck" for p in pods.values())


def _args(deployment: dict[str, Any]) -> list[str]:
    [ctl] = deployment["spec"]["template"]["spec"]["containers"]
    return list(ctl["args"])


def test_shards_auto_runs_one_deployment_whose_replicas_all_act() -> None:
    docs = render("x", *AUTO)
    found = _deployments(docs)
    assert set(found) == {"hd-helmdeck"} and found["hd-helmdeck"]["spec"]["replicas"] == 3
    args = _args(found["hd-helmdeck"])
    assert "--shards=auto" in args and _selector_arg(found["hd-helmdeck"]) is None
    assert not any(a.startswith("--lease-duration") for a in args)  # the controller's own default for auto
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "Service"] == ["hd-helmdeck-metrics"]
    assert "--lease-duration=20" in _args(_deployments(render("x", *AUTO, "--set", "controller.leaseDuration=20"))
                                          ["hd-helmdeck"])
    plain = _args(_deployments(render("x"))["hd-helmdeck"])  # not sharded: one acting, the defaults helmdeck's
    assert "--shards=auto" not in plain and not any(a.startswith("--lease-duration") for a in plain)


def test_a_shard_with_its_own_selector_and_the_main_selector_given() -> None:
    found = _deployments(render("x", "--set", "shards[0].name=team-a", "--set", "shards[0].selector=team=a",
                                "--set", "controller.watchLabelSelector=team!=a"))
    assert _selector_arg(found["hd-helmdeck-team-a"]) == "team=a"
    assert _selector_arg(found["hd-helmdeck"]) == "team!=a"


@pytest.mark.parametrize(("values", "says"), [
    (("--set", "shards[0].name=a", "--set", "shards[1].name=a"), 'shards: "a" is listed twice'),
    (("--set", "shards[0].name=a", "--set", "shards[0].selector=team=a"),
     'shards: "a" has its own selector, so the main instance\'s cannot be computed: set controller.watchLabelSelector'),
    (("--set", "shards[0].name=Shard_1"), "/shards/0/name"),
    (("--set", "shards[0].name=" + "s" * 41), "/shards/0/name"),
    (("--set", "shards[0].selector=a=b"), "missing property 'name'"),
    (("--set", "shards[0].name=a", "--set", "shards[0].replica=2"), "additional properties 'replica'"),
    (("--set", "shards=manual"), "'manual' does not match pattern '^auto$'"),
    (("--set", "shards=auto", "--set", "controller.watchLabelSelector=team=a"),
     "shards: auto places every Package the controller sees on its replicas, so controller.watchLabelSelector "
     "cannot be set with it"),
    (("--set", "controller.leaseDuration=soon"), "/controller/leaseDuration"),
])
def test_bad_shard_values_fail_rendering_naming_the_value(values: tuple[str, ...], says: str) -> None:
    out = subprocess.run([str(helm_binary("helm4")), "template", "hd", str(CHART), *values],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode != 0 and says in out.stderr, out.stderr


def test_locked_down_the_releases_act_as_the_default_service_account() -> None:
    assert "--default-service-account=default" in container(render("x", *LOCKED))["args"]
    assert not any(a.startswith("--default-service-account") for a in container(render("x"))["args"])
    args = container(render("x", *LOCKED, "--set", "rbac.defaultServiceAccount=tenant"))["args"]
    assert "--default-service-account=tenant" in args


def test_the_containerfile_builds_the_pinned_helm_kustomize_and_cosign() -> None:
    text = (ROOT / "Containerfile").read_text()
    assert f"ARG HELM_VERSION={tools.HELM4_VERSION}\n" in text
    assert f"ARG KUSTOMIZE_VERSION={tools.KUSTOMIZE_VERSION}\n" in text
    assert f"ARG COSIGN_VERSION={tools.COSIGN_VERSION}\n" in text
    cosign = build.COMPONENTS["cosign"]  # the same module and version stamp as `make test` builds
    assert f'"{cosign.binaries["cosign"]}@${{COSIGN_VERSION}}"' in text
    assert "-X sigs.k8s.io/release-utils/version.gitVersion=${COSIGN_VERSION}" in text
    assert f"-X sigs.k8s.io/release-utils/version.gitVersion={tools.COSIGN_VERSION}" in cosign.ldflags
    assert f"cosign {tools.COSIGN_VERSION}\n" in (ROOT / "README.md").read_text()  # its Versions line
    # The image runs what the chart's Deployment asks for, as the chart's non-root user.
    assert 'ENTRYPOINT ["helmdeck"]' in text and container(render("x"))["args"][0] == "controller"
    user = next(line.split()[1] for line in text.splitlines() if line.startswith("USER "))
    pod = next(d for d in render("x") if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    assert user == f"{pod['securityContext']['runAsUser']}:{pod['securityContext']['runAsGroup']}"


def test_a_bad_default_service_account_is_refused_naming_the_flag(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "helmdeck", "controller", "--kubeconfig", str(tmp_path / "none"),
                          "--default-service-account", "Not_A_Name"], capture_output=True, text=True, timeout=60,
                         check=False)
    assert out.returncode == EXIT_USAGE
    assert "--default-service-account: 'Not_A_Name' is not a valid ServiceAccount name" in out.stderr, out.stderr


# -- on the local cluster ---------------------------------------------------------------------------------------

@pytest.mark.cluster
@pytest.mark.parametrize("values", [(), LOCKED, SHARDS, AUTO], ids=["cluster-admin", "locked-down", "shards", "auto"])
def test_the_rendered_chart_applies_server_side_as_a_dry_run(values: tuple[str, ...], namespace: str,
                                                             kube_target: KubeTarget) -> None:
    api = api_client(kube_target)
    docs = render(namespace, *values, crds=True)
    assert {d["kind"] for d in docs} >= {"CustomResourceDefinition", "Deployment", "ServiceAccount", "Service",
                                          "ClusterRoleBinding"}
    for doc in docs:
        out = apply(api, doc, dry_run=True)
        assert out["kind"] == doc["kind"] and out["metadata"]["name"] == doc["metadata"]["name"]
    # Nothing was created: it was a dry run.
    with pytest.raises(ApiException) as missing:
        client.AppsV1Api(api).read_namespaced_deployment("hd-helmdeck", namespace)
    assert missing.value.status == 404


@dataclass(frozen=True)
class Capability:
    """One request the controller makes as itself; ``scope``: "all" namespaces, its "own" namespace (the
    Lease's), or the "package"/"release" namespace."""

    what: str
    verb: str
    group: str
    resource: str
    scope: str = "package"
    subresource: str = ""
    name: str = ""


# Checked against the API server's audit log of the two runs at the end of this file (the requests made as the
# controller itself, not impersonated): each entry was seen except "update a release record (unlock)", which
# only a cancel makes; nothing else was asked but discovery (/api, /apis, allowed to every user).
CAPABILITIES = [
    # engine/runtime/cluster/objects.py: one list+watch per kind over all namespaces (or each --watch-namespace).
    *(Capability(f"{verb} {plural}", verb, GROUP, plural, "all")
      for plural in ("packages", "helmrepositories", "ocirepositories") for verb in ("list", "watch")),
    # engine/runtime/cluster/finalizer.py: the finalizer added, and removed once the release is uninstalled.
    Capability("patch a Package's finalizers", "patch", GROUP, "packages"),
    # engine/runtime/cluster/object_status.py: status in Flux's shape, request annotations acknowledged.
    Capability("patch a Package's status", "patch", GROUP, "packages", subresource="status"),
    Capability("create an Event on a Package", "create", "", "events"),
    # engine/runtime/release_events.py (engine/monitor/events.py): each release namespace's Events.
    Capability("list a release namespace's Events", "list", "", "events", "release"),
    Capability("watch a release namespace's Events", "watch", "", "events", "release"),
    # engine/storage/observer.py: Helm's storage (secrets driver) observed, records read by list.
    Capability("list Helm's storage", "list", "", "secrets", "all"),
    Capability("watch Helm's storage", "watch", "", "secrets", "all"),
    # engine/service/records.py: a revision's manifest read by name (the release service's monitors); and
    # engine/storage/writer.py: a pending revision unlocked (cancel, SIGTERM); engine/sources/credentials.py.
    Capability("get a release record", "get", "", "secrets", "release"),
    Capability("update a release record (unlock)", "update", "", "secrets", "release"),
    # engine/reconcile/action.py (engine/storage/writer.py label_revision): a new revision's manifest checksum.
    Capability("patch a release record (its manifest checksum)", "patch", "", "secrets", "release"),
    # engine/reconcile/store.py: helmdeck's status ConfigMaps (written as the Package's ServiceAccount).
    Capability("list the status objects", "list", "", "configmaps", "all"),
    Capability("delete a removed release's status object", "delete", "", "configmaps", "release"),
    # engine/kube/client.py impersonating(), helm --kube-as-user: releases applied as the ServiceAccount.
    Capability("impersonate a Package's ServiceAccount", "impersonate", "", "serviceaccounts", name="deployer"),
    # engine/runtime/drive/lease.py: read, create, renew and give up the Lease.
    *(Capability(f"{verb} the Lease", verb, "coordination.k8s.io", "leases", "own", name="helmdeck-cluster")
      for verb in ("get", "create", "update")),
    # engine/runtime/cluster/members.py (--shards auto): the membership Leases listed on each renew and watched for
    # renewals, and a member's Lease unrenewed for FORGET_AFTER durations deleted.
    Capability("list the membership Leases", "list", "coordination.k8s.io", "leases", "own"),
    Capability("watch the membership Leases", "watch", "coordination.k8s.io", "leases", "own"),
    Capability("delete a long-gone member's Lease", "delete", "coordination.k8s.io", "leases", "own",
               name="helmdeck-member-0123456789ab"),
]


def _review(api: client.ApiClient, user: str, namespace: str, cap: Capability) -> dict[str, Any]:
    """The API server's answer (SubjectAccessReview) whether ServiceAccount ``user`` may make ``cap``."""
    account_ns = user.split(":")[2]
    ns = "" if cap.scope == "all" else namespace
    attrs = {"namespace": ns, "verb": cap.verb, "group": cap.group, "resource": cap.resource,
             "subresource": cap.subresource, "name": cap.name}
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
              "spec": {"user": user, "groups": ["system:serviceaccounts", f"system:serviceaccounts:{account_ns}",
                                                "system:authenticated"], "resourceAttributes": attrs}}
    status: dict[str, Any] = send(api, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                                  review)["status"]
    return status


@pytest.fixture(scope="module")
def locked_down(kube_target: KubeTarget, core_api: client.CoreV1Api) -> Iterator[str]:
    """A namespace holding the locked-down chart's ServiceAccount and RBAC (applied for real); its name."""
    name = f"t-chart-rbac-{uuid.uuid4().hex[:6]}"
    core_api.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    api = api_client(kube_target)
    docs = [d for d in render(name, *LOCKED) if d["kind"] in RBAC_KINDS]
    try:
        for doc in docs:
            apply(api, doc)
        yield name
    finally:
        _delete_cluster_scoped(api, docs)
        core_api.delete_namespace(name, propagation_policy="Background")


def _delete_cluster_scoped(api: client.ApiClient, docs: list[dict[str, Any]]) -> None:
    for doc in docs:
        version, plural, namespaced = PATHS[doc["kind"]]
        if not namespaced:
            send(api, "DELETE", f"/apis/{version}/{plural}/{doc['metadata']['name']}")


@pytest.mark.cluster
@pytest.mark.parametrize("cap", CAPABILITIES, ids=[c.what for c in CAPABILITIES])
def test_the_locked_down_role_allows(cap: Capability, locked_down: str, kube_target: KubeTarget) -> None:
    user = f"system:serviceaccount:{locked_down}:helmdeck"
    answer = eventually(lambda: (lambda a: a if a.get("allowed") else None)(
        _review(api_client(kube_target), user, locked_down, cap)), 10, f"{user} may {cap.what}")
    assert answer["allowed"] is True


def test_the_locked_down_role_grants_no_verb_the_controller_does_not_use() -> None:
    used = {(c.group, c.resource + (f"/{c.subresource}" if c.subresource else ""), c.verb) for c in CAPABILITIES}
    docs = render("x", *LOCKED)
    rules = [r for d in docs if d["kind"] in ("ClusterRole", "Role") for r in d["rules"]]
    assert rules
    seen: set[tuple[str, str, str]] = set()
    for rule in rules:
        assert "resourceNames" not in rule and "nonResourceURLs" not in rule, rule
        granted = {(g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
        assert not any("*" in part for grant in granted for part in grant), rule
        assert granted <= used, f"{rule} grants {sorted(granted - used)}, which the controller never asks for"
        # No grant twice: removing any rule takes away a capability, whose test above then fails.
        assert not granted & seen, f"{rule} repeats {sorted(granted & seen)}"
        seen |= granted


# -- the controller as in the cluster ------------------------------------------------------------------------

def _in_cluster(core: client.CoreV1Api, namespace: str, local_cluster: LocalCluster, mount: Path) -> dict[str, str]:
    """The chart's ServiceAccount's token (a TokenRequest), the CA and the namespace written as a pod's
    ServiceAccount mount at ``mount``; the environment a pod gets (KUBERNETES_SERVICE_HOST/PORT)."""
    assert local_cluster.kubeconfig is not None
    token: Any = core.create_namespaced_service_account_token("helmdeck", namespace,
                                                              client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=900)))
    mount.mkdir()
    (mount / "token").write_text(token.status.token)
    cluster = json.loads(local_cluster.kubeconfig.read_text())["clusters"][0]["cluster"]
    (mount / "ca.crt").write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    (mount / "namespace").write_text(namespace)
    server = urlsplit(cluster["server"])
    # A pod has no $KUBECONFIG (empty counts as unset, as controller-runtime reads it): the runner's is not used.
    return {"KUBERNETES_SERVICE_HOST": str(server.hostname), "KUBERNETES_SERVICE_PORT": str(server.port),
            "KUBECONFIG": ""}


# As the pod's read-only root filesystem with its emptyDir: a private mount namespace (unshare) in which "/" is
# read-only and only the directory standing for the emptyDir ($0) is writable; then the controller is exec'd.
READ_ONLY_ROOT = ("unshare", "--mount", "sh", "-c", 'mount --make-rprivate / && mount --bind "$0" "$0" && '
                  'mount -o remount,bind,ro / && exec "$@"')


@functools.cache
def _read_only_root_works() -> bool:
    """Can this machine make one (unshare: root, or user namespaces)? Inside, the writable directory takes a
    file and its parent refuses one."""
    with tempfile.TemporaryDirectory() as where:
        probe = subprocess.run([*READ_ONLY_ROOT, where, "sh", "-c", 'touch "$0/w" && ! touch "$0/../ro" 2>/dev/null',
                                where], capture_output=True, timeout=30, check=False)
        return probe.returncode == 0 and (Path(where) / "w").exists() and not (Path(where).parent / "ro").exists()


def _start_as_chart(docs: list[dict[str, Any]], namespace: str, helm: Helm, work: Path,
                    env: dict[str, str]) -> Controller:
    """`helmdeck controller` with the rendered Deployment's arguments (the test's own addresses: port 0) and its
    environment, on a read-only root filesystem where ``work``/pod-tmp stands for the pod's /tmp emptyDir."""
    if not _read_only_root_works():
        pytest.skip("needs `unshare --mount` (root) to run the controller on a read-only root filesystem")
    ctl = container(docs)
    args = [a for a in ctl["args"][1:] if not a.startswith(("--health-addr", "--metrics-addr"))]
    tmp = work / "pod-tmp"
    tmp.mkdir()
    pod_env = {e["name"]: e["value"].replace("/tmp/", f"{tmp}/", 1) for e in ctl["env"]}
    # The session's helm and helmdeck homes unset (empty counts as unset for both): the XDG directories serve;
    # temporary files (the controller's private kubeconfig) go to the emptyDir, as /tmp in the pod.
    unset = dict.fromkeys(("HELM_CONFIG_HOME", "HELM_CACHE_HOME", "HELM_DATA_HOME", "HELMDECK_CACHE"), "")
    return start_controller(None, namespace, helm, work, "--serviceaccount-dir", str(work / "serviceaccount"),
                            *args, env={**unset, **pod_env, "TMPDIR": str(tmp), **env},
                            wrap=(*READ_ONLY_ROOT, str(tmp)))


def _ready(objects: client.CustomObjectsApi, namespace: str, name: str) -> dict[str, Any] | None:
    status = (get_package(objects, namespace, name) or {}).get("status") or {}
    ready = next((c for c in status.get("conditions", []) if c["type"] == "Ready"), None)
    return ready if ready is not None and ready["status"] != "Unknown" else None


def _forbidden_as_controller(text: str, namespace: str) -> list[str]:
    me = f"system:serviceaccount:{namespace}:helmdeck"
    return [line for line in text.splitlines() if "forbidden" in line.lower() and me in line]


@contextlib.contextmanager
def _as_in_the_cluster(docs: list[dict[str, Any]], namespace: str, helm: Helm, work: Path, cluster: LocalCluster,
                       api: client.ApiClient) -> Iterator[Controller]:
    """The chart's ServiceAccount and RBAC applied (``docs``, rendered into ``namespace``), and the controller
    started as that ServiceAccount with in-cluster config, the Deployment's arguments and environment; it is
    stopped afterwards (it must exit 0: nothing left running), the cluster-wide RBAC deleted."""
    rbac = [d for d in docs if d["kind"] in RBAC_KINDS]
    try:
        for doc in rbac:
            apply(api, doc)
        env = _in_cluster(client.CoreV1Api(api), namespace, cluster, work / "serviceaccount")
        ctl = _start_as_chart(docs, namespace, helm, work, env)
        try:
            eventually(lambda: "cluster: in-cluster config" in ctl.text(), 30, "in-cluster config", logs=ctl.text)
            yield ctl
        finally:
            assert ctl.stop() == 0, ctl.text()
    finally:
        _delete_cluster_scoped(api, rbac)


def _installed_and_ready(objects: client.CustomObjectsApi, api: client.ApiClient, namespace: str,
                         ctl: Controller) -> None:
    """Package ``web`` installed (revision 1 deployed), Ready=True, by the controller holding the Lease."""
    eventually(lambda: releases(client.CoreV1Api(api), namespace, "web") == [(1, "deployed")], 90,
               "web installed", logs=ctl.text)
    ready = eventually(lambda: _ready(objects, namespace, "web"), 30, "web Ready", logs=ctl.text)
    assert ready["status"] == "True", ready
    assert f"-{ctl.pid}-" in lease_holder(client.CoordinationV1Api(api), namespace)


@pytest.mark.cluster
def test_the_controller_as_the_charts_service_account_bound_to_cluster_admin(
    namespace: str, helm: Helm, tmp_path: Path, local_cluster: LocalCluster, kube_target: KubeTarget,
    controller_env: ControllerEnv,
) -> None:
    # As in a pod: no kubeconfig; KUBERNETES_SERVICE_HOST/PORT, and the token (a TokenRequest), CA and namespace
    # in the ServiceAccount's mount (here another directory). The Lease goes to that namespace.
    api = api_client(kube_target)
    objects = client.CustomObjectsApi(api)
    docs = render(namespace, "--set", f"controller.watchNamespaces={{{namespace}}}")
    controller_env.web_source()
    create(objects, package(namespace, "web"))
    with _as_in_the_cluster(docs, namespace, helm, tmp_path, local_cluster, api) as ctl:
        _installed_and_ready(objects, api, namespace, ctl)
    assert _forbidden_as_controller(ctl.text(), namespace) == []
    # What helmdeck and helm wrote went below the pod's HOME (the emptyDir): the pulled chart among it.
    assert list((tmp_path / "pod-tmp" / "home" / ".cache" / "helmdeck").rglob("*.tgz")), ctl.text()


@pytest.mark.cluster
def test_the_controller_locked_down_applies_each_release_as_a_service_account(
    namespace: str, helm: Helm, tmp_path: Path, local_cluster: LocalCluster, kube_target: KubeTarget,
    controller_env: ControllerEnv,
) -> None:
    # The chart's locked-down role, for real: a Package naming ServiceAccount "deployer" (admin of its namespace)
    # installs with values from a ConfigMap, is uninstalled when deleted, and the controller stops cleanly, never
    # refused as itself. A Package naming none acts as --default-service-account ("default", without rights
    # here) and is refused.
    api = api_client(kube_target)
    objects, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    docs = render(namespace, *LOCKED, "--set", f"controller.watchNamespaces={{{namespace}}}")
    core.create_namespaced_service_account(namespace, client.V1ServiceAccount(
        metadata=client.V1ObjectMeta(name="deployer")))
    client.RbacAuthorizationV1Api(api).create_namespaced_role_binding(namespace, client.V1RoleBinding(
        metadata=client.V1ObjectMeta(name="deployer-admin"),
        role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="ClusterRole", name="admin"),
        subjects=[client.RbacV1Subject(kind="ServiceAccount", name="deployer", namespace=namespace)]))
    controller_env.web_source()
    # valuesFrom is read as the ServiceAccount too: the controller's own role has no "get configmaps".
    core.create_namespaced_config_map(namespace, client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="web-values"), data={"values.yaml": "replicas: 3\n"}))
    create(objects, package(namespace, "web", serviceAccountName="deployer",
                            valuesFrom=[{"kind": "ConfigMap", "name": "web-values"}]))
    create(objects, package(namespace, "plain"))
    with _as_in_the_cluster(docs, namespace, helm, tmp_path, local_cluster, api) as ctl:
        _installed_and_ready(objects, api, namespace, ctl)
        assert client.AppsV1Api(api).read_namespaced_deployment("web", namespace).spec.replicas == 3
        refused = eventually(lambda: _ready(objects, namespace, "plain"), 60, "plain refused", logs=ctl.text)
        assert refused["status"] == "False", refused
        assert f"system:serviceaccount:{namespace}:default" in refused["message"], refused

        objects.delete_namespaced_custom_object(GROUP, VERSION, namespace, "packages", "web")
        eventually(lambda: releases(core, namespace, "web") == [], 60, "web uninstalled", logs=ctl.text)
        eventually(lambda: get_package(objects, namespace, "web") is None, 30, "the finalizer removed",
                   logs=ctl.text)
    assert _forbidden_as_controller(ctl.text(), namespace) == [], ctl.text()
