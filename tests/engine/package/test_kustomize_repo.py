"""``--kustomize`` on the local cluster: tests/data/flux-repo's staging overlay (HelmReleases from an HTTP chart
repository and the local OCI registry, a values patch, ``${cluster_name}``, a Namespace and a Flux Kustomization)
reconciled, planned (0 when deployed, 2 listing only the release an overlay change touches), ``plan --base``
over a two-commit git history while the cluster drifted, and a missing variable as a clear error."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from engine.base import tools
from engine.helm import Helm
from engine.kube.client import KubeTarget, api_client
from engine.runtime.drive.kustomized import KustomizeInput, KustomizeSource
from helmdeck.cli import EXIT_CHANGES, EXIT_FAILED, EXIT_NO_CHANGES
from localcluster.cluster import LocalCluster
from testkit.chart_sources import ChartRepoServer, package_chart, publish_http, push_oci
from tests.cli.test_cli import helmdeck
from tests.conftest import run_helm
from tests.engine.runtime.test_folder import Watching
from tests.flux_oracle import Oracle
from tests.tui.test_app_pilot_actions import install_crd

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2] / "data" / "flux-repo"


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=repo,
                          capture_output=True, text=True, check=True)
    return proc.stdout


@pytest.fixture
def flux_repo(helm: Helm, namespace: str, tmp_path: Path, repo: ChartRepoServer, local_cluster: LocalCluster,
              helm_home: dict[str, str]) -> tuple[Path, list[str]]:
    """The test repository in a git checkout of one commit, its charts published; returns it and the
    variables' flags."""
    h = helm.binary
    publish_http(h, package_chart(h, tmp_path, "1.0.0"), repo)
    base = f"{local_cluster.registry}/t-{uuid.uuid4().hex[:8]}"
    push_oci(h, package_chart(h, tmp_path, "1.0.0", marker="oci"), base, env=helm_home)
    checkout = tmp_path / "flux-repo"
    shutil.copytree(REPO, checkout)
    git(checkout, "init", "-q", "-b", "main")
    git(checkout, "add", "-A")
    git(checkout, "commit", "-qm", "first")
    flags = ["--var", f"namespace={namespace}", "--var", f"http_url={repo.url}", "--var", f"oci_base={base}",
             "--var", "cluster_name=staging"]
    return checkout, flags


def test_plan_a_flux_repository_overlay(helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path,
                                        flux_repo: tuple[Path, list[str]]) -> None:
    checkout, flags = flux_repo
    staging = checkout / "clusters" / "staging"
    common = ["--kubeconfig", str(kube_target.kubeconfig), "--helm", helm.binary, "-n", namespace,
              "--kustomize", str(staging), "--log-file", str(tmp_path / "log")]
    args = [*common, *flags]
    done = helmdeck("reconcile", "--once", "--no-lease", *args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "skipped 2 objects helmdeck does not read: Kustomization (1), Namespace (1)" in done.stderr
    releases = {r["name"]: r for r in json.loads(run_helm(helm, "list", "-n", namespace, "-o", "json"))}
    assert set(releases) == {"web", "api"}
    assert releases["api"]["chart"].startswith("web-1.0.0+")  # the OCI chart's version carries its digest
    web_values = json.loads(run_helm(helm, "get", "values", "web", "-n", namespace, "-o", "json"))
    assert web_values == {"replicas": 1, "image": {"tag": "1.27-staging"}, "cluster": "staging",
                          "script": "echo ${not_a_variable}"}

    planned = helmdeck("plan", *args)
    assert planned.returncode == EXIT_NO_CHANGES, planned.stdout + planned.stderr
    assert "0 of 2 packages would change" in planned.stdout

    # A values change in the staging overlay: only web, with its values diff.
    patch = staging / "web-values.yaml"
    patch.write_text(patch.read_text().replace('"1.27-staging"', '"1.28-staging"'))
    planned = helmdeck("plan", *args, "-o", "json")
    assert planned.returncode == EXIT_CHANGES, planned.stdout + planned.stderr
    changed = [p for p in json.loads(planned.stdout)["packages"] if p["changes"]]
    assert [(p["release"], p["action"]) for p in changed] == [("web", "upgrade")]
    [web] = changed
    assert "values changed" in web["reasons"] and web["revision"] == 1
    assert "-  tag: 1.27-staging" in web["values_diff"] and "+  tag: 1.28-staging" in web["values_diff"]
    assert "nginx:1.28-staging" in web["manifest_diff"]
    diffed = helmdeck("diff", "web", *args)  # diff and status take --kustomize too
    assert diffed.returncode == EXIT_CHANGES and "+        image: \"nginx:1.28-staging\"" in diffed.stdout, diffed
    status = helmdeck("status", *args, "-o", "json")
    assert status.returncode == 0, status.stderr
    assert {r["name"] for r in json.loads(status.stdout)} >= {"web", "api"}

    # plan --base: commit the change; the cluster drifts on api (an upgrade by hand). The plan of the commit
    # shows web only; the plan against the cluster shows api too.
    git(checkout, "commit", "-qam", "staging: web 1.28")
    run_helm(helm, "upgrade", "api", "--reuse-values", "--set", "service.port=9090", "-n", namespace,
             f"oci://{flags[5].split('=', 1)[1]}/web", "--version", "1.0.0", "--plain-http")
    against_cluster = helmdeck("plan", *args, "-o", "json")
    assert {p["release"] for p in json.loads(against_cluster.stdout)["packages"] if p["changes"]} == {"web", "api"}
    change = helmdeck("plan", *args, "--base", "HEAD~1", "-o", "json")
    assert change.returncode == EXIT_CHANGES, change.stdout + change.stderr
    doc = json.loads(change.stdout)
    states = {p["release"]: (p["state"], p["action"]) for p in doc["packages"]}
    assert states == {"web": ("Changed", "upgrade"), "api": ("Unchanged", None)}
    [web] = [p for p in doc["packages"] if p["release"] == "web"]
    assert "-  tag: 1.27-staging" in web["values_diff"] and "HEAD~1 values" in web["values_diff"]
    assert web["changed"] == ["Deployment/web"]  # the chart names no namespace
    same = helmdeck("plan", *args, "--base", "HEAD")
    assert same.returncode == EXIT_NO_CHANGES, same.stdout + same.stderr
    bad = helmdeck("plan", *args, "--base", "no-such-ref")
    assert bad.returncode == EXIT_FAILED and "--base no-such-ref: names no commit of" in bad.stderr

    # A missing variable: a clear error naming it and the object; exit 1.
    missing = helmdeck("plan", *common, *flags[:-2])  # all but --var cluster_name=staging
    assert missing.returncode == EXIT_FAILED, missing.stdout + missing.stderr
    assert (f"HelmRelease {namespace}/web: variable cluster_name is not set and has no default "
            "(pass --var cluster_name=VALUE") in missing.stdout + missing.stderr


def test_a_plan_comment_names_files_as_the_repository_does(helm: Helm, kube_target: KubeTarget, namespace: str,
                                                          tmp_path: Path, flux_repo: tuple[Path, list[str]]) -> None:
    """plan -o markdown/json of a --kustomize path, with and without --base: warnings and the packages' files
    name the repository's file and the object (apps/base/web.yaml (HelmRelease NS/web)), never the build's
    temporary copy (<tmp>/helmdeck-kustomize-*/NS.HelmRelease.web.yaml:16, deleted when the command ends)."""
    checkout, flags = flux_repo
    web = checkout / "apps" / "base" / "web.yaml"
    web.write_text(web.read_text().replace("  interval: 10m\n",
                                           "  interval: 10m\n  kubeConfig: {secretRef: {name: x}}\n"))
    git(checkout, "commit", "-qam", "a field helmdeck leaves out")
    args = ["--kubeconfig", str(kube_target.kubeconfig), "--helm", helm.binary, "-n", namespace, "--kustomize",
            str(checkout / "clusters" / "staging"), "--log-file", str(tmp_path / "log"), "--allow-unsupported", *flags]
    said = f"apps/base/web.yaml (HelmRelease {namespace}/web): spec.kubeConfig: left out"
    markdown = helmdeck("plan", *args, "-o", "markdown")
    assert markdown.returncode == EXIT_CHANGES, markdown.stdout + markdown.stderr
    assert f"> warning: {said}" in markdown.stdout, markdown.stdout
    doc = json.loads(helmdeck("plan", *args, "-o", "json").stdout)
    assert any(w.startswith(said) for w in doc["warnings"]), doc["warnings"]
    assert {p["release"]: p["file"] for p in doc["packages"]} == {"web": "apps/base/web.yaml",
                                                                  "api": "apps/base/api.yaml"}
    based = helmdeck("plan", *args, "--base", "HEAD", "-o", "markdown")
    for out in (markdown, based):
        assert "helmdeck-kustomize" not in out.stdout + out.stderr and str(tmp_path) not in out.stdout


def test_kustomize_flags_are_checked(tmp_path: Path) -> None:
    for extra, said in (
        (["--packages", str(tmp_path), "--kustomize", str(tmp_path)], "give --packages DIR or --kustomize DIR"),
        (["--packages", str(tmp_path), "--var", "a=b"], "--var, --vars-from and --vars-from-cluster go with"),
        (["--kustomize", str(tmp_path / "none")], "is not a directory"),
        (["--kustomize", str(tmp_path), "--var", "a-b=c"], "variable name 'a-b' is invalid"),
    ):
        proc = helmdeck("plan", "--kubeconfig", str(tmp_path / "kubeconfig"), *extra)
        assert proc.returncode == EXIT_FAILED and said in proc.stderr, proc.stderr


KUSTOMIZATION_GROUP, KUSTOMIZATION_VERSION, KUSTOMIZATIONS = "kustomize.toolkit.fluxcd.io", "v1", "kustomizations"


def install_kustomization_crd(api: client.ApiClient) -> client.CustomObjectsApi:
    """Flux's Kustomization API served (a schema-less CRD)."""
    return install_crd(api, KUSTOMIZATION_GROUP, KUSTOMIZATION_VERSION, "Kustomization", KUSTOMIZATIONS)


def test_variables_from_the_clusters_kustomization_and_a_secret_value_never_shows(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path, repo: ChartRepoServer,
    core_api: client.CoreV1Api,
) -> None:
    publish_http(helm.binary, package_chart(helm.binary, tmp_path, "1.0.0"), repo)
    objects = install_kustomization_crd(core_api.api_client)
    secret = "s3cr3t-hunter-42"
    core_api.create_namespaced_config_map(namespace, client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="cluster-vars"), data={"cluster_name": "prod-eu", "region": "us"}))
    core_api.create_namespaced_secret(namespace, client.V1Secret(
        metadata=client.V1ObjectMeta(name="cluster-secrets"), string_data={"greeting": secret}))
    flux: Any = {"apiVersion": f"{KUSTOMIZATION_GROUP}/{KUSTOMIZATION_VERSION}", "kind": "Kustomization",
            "metadata": {"name": "apps"},
            "spec": {"interval": "10m", "path": "./apps", "prune": True,
                     "sourceRef": {"kind": "GitRepository", "name": "flux-system"},
                     "postBuild": {"substitute": {"region": "eu"}, "substituteFrom": [
                         {"kind": "ConfigMap", "name": "cluster-vars"}, {"kind": "Secret", "name": "cluster-secrets"},
                         {"kind": "ConfigMap", "name": "absent", "optional": True}]}}}
    objects.create_namespaced_custom_object(KUSTOMIZATION_GROUP, KUSTOMIZATION_VERSION, namespace, KUSTOMIZATIONS,
                                            flux)
    apps = tmp_path / "apps"
    apps.mkdir()
    (apps / "web.yaml").write_text(f"""apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmRepository
metadata: {{name: charts, namespace: {namespace}}}
spec: {{interval: 1m, url: "{repo.url}"}}
---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {{name: web, namespace: {namespace}}}
spec:
  interval: 10m
  chart:
    spec: {{chart: web, version: "1.x", sourceRef: {{kind: HelmRepository, name: charts}}}}
  values:
    cluster: ${{cluster_name}}
    region: ${{region}}
    greeting: ${{greeting}}
""")
    log = tmp_path / "log"
    args = ["--kubeconfig", str(kube_target.kubeconfig), "--helm", helm.binary, "-n", namespace,
            "--kustomize", str(apps), "--vars-from-cluster", f"{namespace}/apps", "--log-file", str(log)]
    planned = helmdeck("plan", *args, "-o", "json")
    assert planned.returncode == EXIT_CHANGES, planned.stdout + planned.stderr
    [web] = json.loads(planned.stdout)["packages"]
    assert "+cluster: prod-eu" in web["values_diff"]  # from the ConfigMap
    assert "+region: eu" in web["values_diff"]  # spec.postBuild.substitute over substituteFrom
    assert "+greeting: '••••••" in web["values_diff"]
    rendered = helmdeck("render", "web", *args)
    assert rendered.returncode == 0, rendered.stderr
    for text in (planned.stdout, planned.stderr, rendered.stdout, rendered.stderr, log.read_text()):
        assert secret not in text

    # A long-running mode reads the cluster's variables again on its interval: a changed ConfigMap re-renders.
    kin = KustomizeInput(KustomizeSource(apps, cluster=f"{namespace}/apps"), api_client(kube_target),
                         lambda _: None, debounce_ms=200, step_ms=50)
    kin.cluster_interval = 0.5
    assert json.loads(kin.load().specs[(namespace, "web")].values_json)["cluster"] == "prod-eu"

    async def watch_cluster_change() -> Any:
        async with Watching(kin) as watching:
            core_api.patch_namespaced_config_map("cluster-vars", namespace, {"data": {"cluster_name": "prod-us"}})
            return await watching.next(20)

    update = asyncio.run(watch_cluster_change())
    assert update.changed == {(namespace, "web")}
    assert json.loads(update.specs[(namespace, "web")].values_json)["cluster"] == "prod-us"

    flux["spec"]["postBuild"]["substituteFrom"].append({"kind": "ConfigMap", "name": "nope"})
    objects.patch_namespaced_custom_object(KUSTOMIZATION_GROUP, KUSTOMIZATION_VERSION, namespace, KUSTOMIZATIONS,
                                           "apps", {"spec": flux["spec"]})
    failed = helmdeck("plan", *args)
    assert failed.returncode == EXIT_FAILED
    assert (f"Kustomization {namespace}/apps: spec.postBuild.substituteFrom[3]: ConfigMap {namespace}/nope cannot be "
            "read (Not Found, 404) (create it, or mark the entry optional: true)") in failed.stdout + failed.stderr


def flux_values(oracle: Oracle, release: dict[str, Any], config_maps: dict[str, dict[str, str]]) -> dict[str, Any]:
    """The values Flux's helm-controller v1.6.3 gives a HelmRelease: its fluxcd/pkg/chartutil values.go
    ChartValuesFromReferences run by the oracle over ``config_maps`` (name -> data). (The chart's own values are
    helm's to merge under these.)"""
    answer = oracle.ask({"op": "values", "namespace": release["metadata"]["namespace"],
                         "values": release["spec"].get("values") or {}, "refs": release["spec"].get("valuesFrom", []),
                         "objects": [{"kind": "ConfigMap", "name": n, "data": d} for n, d in config_maps.items()]})
    assert "error" not in answer, answer
    values: dict[str, Any] = answer["values"]
    return values


def flux_build(path: Path, variables: dict[str, str]) -> dict[str, dict[str, Any]]:
    """The HelmReleases of ``path`` as Flux would apply them: the kustomize build, then ``${name}`` replaced by each
    variable, the test repository's one default (``${replicas:=1}``) and escape (``$${``) done by hand."""
    text = subprocess.run([str(tools.kustomize()), "build", "--load-restrictor", "LoadRestrictionsNone", str(path)],
                          capture_output=True, text=True, check=True).stdout
    for name, value in variables.items():
        text = text.replace("${" + name + "}", value)
    text = text.replace("${replicas:=1}", "1").replace("$${", "${")
    return {d["metadata"]["name"]: d for d in yaml.safe_load_all(text) if d and d["kind"] == "HelmRelease"}


def objects_by_ref(manifest: str) -> dict[tuple[str, str], Any]:
    return {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(manifest) if d}


@pytest.mark.binaries("oracle")
def test_helmdeck_composes_and_renders_as_flux_would(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path, flux_repo: tuple[Path, list[str]],
    core_api: client.CoreV1Api, flux_oracle_process: Oracle,
) -> None:
    """For each overlay: helmdeck's values (as deployed) equal the values Flux would compose, and its manifest
    equals ``helm template`` of the same chart with those values plus Flux's origin labels on every object."""
    checkout, flags = flux_repo
    given = dict(f.split("=", 1) for f in flags[1::2])
    prod_namespace = f"{namespace}-prod"
    core_api.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=prod_namespace)))
    try:
        for cluster, ns in (("staging", namespace), ("prod", prod_namespace)):
            config_maps = {"web-values": {"values.yaml": f"image: {{repository: mirror.example/{cluster}}}\n"
                                                         "extra: from-configmap\n", "port": "8081"}}
            core_api.create_namespaced_config_map(ns, client.V1ConfigMap(
                metadata=client.V1ObjectMeta(name="web-values"), data=config_maps["web-values"]))
            variables = {**given, "namespace": ns, "cluster_name": cluster}
            path = checkout / "clusters" / cluster
            args = ["--kubeconfig", str(kube_target.kubeconfig), "--helm", helm.binary, "-n", ns, "--kustomize",
                    str(path), *(f for k, v in variables.items() for f in ("--var", f"{k}={v}")),
                    "--log-file", str(tmp_path / "log")]
            done = helmdeck("reconcile", "--once", "--no-lease", *args)
            assert done.returncode == 0, done.stdout + done.stderr
            for name, release in flux_build(path, variables).items():
                values = flux_values(flux_oracle_process, release, config_maps)
                deployed = json.loads(run_helm(helm, "get", "values", name, "-n", ns, "-o", "json"))
                assert deployed == values, (cluster, name)
                if name == "web":
                    assert values["service"] == {"port": 8081} and values["extra"] == "from-configmap"
                values_file = tmp_path / f"{cluster}-{name}.json"
                values_file.write_text(json.dumps(values))
                chart = (["web", "--repo", variables["http_url"]] if name == "web" else
                         [f"oci://{variables['oci_base']}/web", "--plain-http"])
                expected = objects_by_ref(run_helm(helm, "template", name, *chart, "--version", "1.0.0", "-n", ns,
                                                   "-f", str(values_file)))
                for obj in expected.values():  # Flux's post-renderer: its origin labels on every object
                    obj["metadata"].setdefault("labels", {}).update(
                        {"helm.toolkit.fluxcd.io/name": name, "helm.toolkit.fluxcd.io/namespace": ns})
                stored = run_helm(helm, "get", "manifest", name, "-n", ns) + "\n---\n" + run_helm(
                    helm, "get", "hooks", name, "-n", ns)  # the objects, then the hooks (the test Job)
                assert objects_by_ref(stored) == expected, (cluster, name)
    finally:
        core_api.delete_namespace(prod_namespace)
