"""`helmdeck export DIR`: a packages folder as Package, HelmRepository and OCIRepository objects, applied
server-side to the local cluster and read back through the controller's loader."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml
from kubernetes import client

from engine.base.wire import API_VERSION
from engine.kube import rest
from engine.kube.client import KubeTarget, api_client
from engine.package.load import load_folder, load_objects
from engine.package.model import PackageSpec
from engine.runtime.cluster.objects import KINDS, list_objects
from helmdeck.cli import main
from helmdeck.demo import write_examples

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SECRET = "s3cr3t-export-value"


class Exported(NamedTuple):
    code: int
    objects: list[dict[str, Any]]
    err: str
    out: str


def export(capsys: pytest.CaptureFixture[str], *args: str) -> Exported:
    """Run ``helmdeck export``: its exit code, the objects printed, standard error and output."""
    code = main(["export", *args])
    out, err = capsys.readouterr()
    return Exported(code, [d for d in yaml.safe_load_all(out) if d is not None], err, out)


def demo_folder(tmp_path: Path, namespace: str) -> Path:
    """The demo's packages folder (the example packages, their remote variants and the demo's sources), in
    ``namespace``."""
    folder = write_examples(EXAMPLES, tmp_path / "examples", "http://127.0.0.1:9/charts", "127.0.0.1:9")
    for file in folder.glob("*.yaml"):
        file.write_text(file.read_text().replace("helmdeck-demo", namespace))
    return folder


def test_local_charts_are_refused_by_name_and_the_rest_is_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, objects, err, _ = export(capsys, str(demo_folder(tmp_path, "team-a")))
    assert code == 1  # as kubectl apply with an invalid object: the others still go through
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("HelmRepository", "demo-charts"), ("OCIRepository", "demo-web"),
        ("Package", "settings-http"), ("Package", "web-oci")]
    assert all(o["apiVersion"] == API_VERSION and o["metadata"]["namespace"] == "team-a" for o in objects)
    for name in ("flaky", "settings", "web"):
        assert f"{name}.yaml: Package team-a/{name} not exported: spec.chart: a chart folder on disk cannot move " \
               "into the cluster" in err, err
    web = next(o for o in objects if o["metadata"]["name"] == "web-oci")
    assert web["spec"] == {"chartRef": {"kind": "OCIRepository", "name": "demo-web"}, "values": {"replicas": 1},
                           "timeout": "2m", "install": {"createNamespace": True}}  # as written


def test_flux_documents_namespaces_values_files_and_secrets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "values.yaml").write_text("a: 1\n")
    folder = tmp_path / "packages"
    folder.mkdir()
    (folder / "flux.yaml").write_text(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata:\n  name: charts\n"
        "  labels: {team: a}\nspec:\n  url: https://charts.example.com\n  interval: 10m\n---\n"
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: podinfo\nspec:\n"
        "  interval: 5m\n  persistentClient: true\n  kubeConfig: {secretRef: {name: remote}}\n"
        "  chart:\n    spec:\n      chart: podinfo\n      version: '6.x'\n"
        "      sourceRef: {apiVersion: source.toolkit.fluxcd.io/v1, kind: HelmRepository, name: charts}\n"
        f"  values:\n    password: {SECRET}\n    ünïcode: ✓\n    a: &a {{k: [1, 2]}}\n    b: *a\n---\n"
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: skipped\n")
    (folder / "files.yaml").write_text(
        "apiVersion: helmdeck.dev/v1alpha1\nkind: Package\nmetadata:\n  name: files\nspec:\n"
        "  chartRef: {kind: OCIRepository, name: web}\n  valuesFiles: [../values.yaml]\n---\n"
        "apiVersion: helmdeck.dev/v1alpha1\nkind: OCIRepository\nmetadata:\n  name: web\n"
        "spec:\n  url: oci://registry.example.com/charts/web\n  ref: {tag: 1.0.0}\n")
    with caplog.at_level(logging.DEBUG):
        code, objects, err, out = export(capsys, str(folder), "--namespace", "team-b", "--allow-unsupported")
    assert code == 1
    assert "Package team-b/files not exported: spec.valuesFiles: values files on disk cannot move into the " \
           "cluster" in err, err
    assert "skipped 1 object helmdeck does not read: Namespace (1)" in err
    kinds = {(o["apiVersion"], o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects}
    assert kinds == {(API_VERSION, "HelmRepository", "team-b", "charts"),
                     (API_VERSION, "OCIRepository", "team-b", "web"),
                     (API_VERSION, "Package", "team-b", "podinfo")}  # a HelmRelease is the Package of its spec
    charts = next(o for o in objects if o["kind"] == "HelmRepository")
    assert charts["metadata"]["labels"] == {"team": "a"}
    podinfo = next(o for o in objects if o["kind"] == "Package")
    # Left out as the loader leaves them out: ignored Flux fields silently, unsupported ones with a warning.
    assert "persistentClient" not in podinfo["spec"] and "kubeConfig" not in podinfo["spec"]
    assert podinfo["spec"]["chart"]["spec"]["sourceRef"] == {"kind": "HelmRepository", "name": "charts"}
    assert "warning:" in err and "spec.kubeConfig: left out" in err, err
    assert podinfo["spec"]["values"] == {"password": SECRET, "ünïcode": "✓", "a": {"k": [1, 2]},
                                         "b": {"k": [1, 2]}}  # the operator's own, as written
    assert "&" not in out and "*" not in out  # aliases expanded: each object whole
    assert SECRET not in err and not any(SECRET in r.getMessage() for r in caplog.records)  # never logged


def test_an_empty_or_missing_folder_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, objects, err, _ = export(capsys, str(tmp_path))
    assert (code, objects) == (1, []) and "holds no Package" in err
    assert main(["export", str(tmp_path / "missing")]) == 2
    assert "is not a directory" in capsys.readouterr().err


def _comparable(spec: PackageSpec) -> PackageSpec:
    """A spec without where it was read from (a file or an object's API path, and what follows from it)."""
    request = spec.chart_request
    source = dataclasses.replace(request.source, file=Path("-")) if request is not None else None
    return dataclasses.replace(spec, file=Path("-"), document=0, chart_path=Path("-"), chart_request=(
        dataclasses.replace(request, source=source) if request is not None and source is not None else None))


@pytest.mark.cluster
def test_exported_objects_applied_server_side_read_back_as_the_file_packages(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], namespace: str, kube_target: KubeTarget,
    helmdeck_crds: list[str],
) -> None:
    folder = demo_folder(tmp_path, namespace)
    objects = export(capsys, str(folder)).objects
    api = api_client(kube_target)
    plurals = {kind: plural for plural, kind in KINDS.items()}
    for obj in objects:  # as `kubectl apply --server-side -f -`
        rest.send(api, "PATCH", rest.path(API_VERSION, plurals[obj["kind"]], namespace, obj["metadata"]["name"]),
                  json.dumps(obj), [("fieldManager", "helmdeck-export-test")],
                  content_type="application/apply-patch+yaml")
    read = {plural: list(list_objects(api, plural, namespace)[0].values()) for plural in KINDS}
    specs, errors = load_objects(read["packages"], [*read["helmrepositories"], *read["ocirepositories"]])
    assert errors == []
    from_files = {s.key: s for s in load_folder(folder).specs if s.chart_source is not None}
    assert sorted(from_files) == sorted(s.key for s in specs) == [(namespace, "settings-http"), (namespace, "web-oci")]
    for spec in specs:
        assert _comparable(spec) == _comparable(from_files[spec.key])


@pytest.mark.cluster
def test_server_side_dry_run_accepts_every_object(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], namespace: str, kube_target: KubeTarget,
    helmdeck_crds: list[str],
) -> None:
    """The CRDs' schema takes what export prints, a Flux HelmRelease's spec included."""
    folder = tmp_path / "flux"
    folder.mkdir()
    (folder / "hr.yaml").write_text(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata: {name: charts}\n"
        "spec: {url: 'https://charts.example.com'}\n---\n"
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: podinfo}\nspec:\n"
        "  chart: {spec: {chart: podinfo, sourceRef: {apiVersion: source.toolkit.fluxcd.io/v1, kind: HelmRepository,"
        " name: charts}}}\n"
        "  upgrade: {remediation: {retries: 3}}\n  driftDetection: {mode: warn}\n")
    code, objects, err, _ = export(capsys, str(folder), "--namespace", namespace)
    assert code == 0 and len(objects) == 2, err
    api = api_client(kube_target)
    for obj in objects:
        plural = "packages" if obj["kind"] == "Package" else "helmrepositories"
        answer = rest.send(api, "PATCH", rest.path(API_VERSION, plural, namespace, obj["metadata"]["name"]),
                           json.dumps(obj), [("fieldManager", "helmdeck-export-test"), ("dryRun", "All")],
                           content_type="application/apply-patch+yaml")
        assert answer["spec"] == obj["spec"]
    listed: Any = client.CustomObjectsApi(api).list_namespaced_custom_object(
        "helmdeck.dev", "v1alpha1", namespace, "packages")
    assert listed["items"] == []  # a dry run
