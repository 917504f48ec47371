"""helmdeck's CRDs: generated from the loaders' field tables, committed as generated, equal to the
package-file reference (docs/packages.md, "The fields"), and served by a real API server with
`kubectl get pkg`'s printer columns."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from engine.base.schema import Field, openapi
from engine.kube.client import KubeTarget, api_client
from engine.kube.rest import get_json
from engine.package import crd
from engine.package.load import load_package
from engine.package.schema import PACKAGE_SPEC
from testkit.packages import package_doc

ROOT = Path(__file__).resolve().parents[3]
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def test_committed_crds_are_what_the_generator_writes() -> None:
    for definition in crd.definitions():
        path = ROOT / "deploy" / "chart" / "crds" / f"{definition['metadata']['name']}.yaml"
        assert path.read_text() == crd.render(definition), f"regenerate: python -m engine.package.crd ({path.name})"


def _schema_paths(node: dict[str, Any], prefix: str = "") -> Iterator[str]:
    node = node.get("items", node)
    for name, child in (node.get("properties") or {}).items():
        path = f"{prefix}.{name}" if prefix else name
        yield path
        yield from _schema_paths(child, path)


def _schema_node(node: dict[str, Any], path: str) -> dict[str, Any]:
    for part in path.split("."):
        node = node.get("items", node)["properties"][part]
    return node


def _doc_paths(value: Any, spec: dict[str, Any], prefix: str = "") -> Iterator[str]:
    """Dotted paths of a reference example, not descending where the schema takes any content (values, labels)."""
    items = value if isinstance(value, list) else [value]
    for item in items:
        if not isinstance(item, dict):
            continue
        for name, child in item.items():
            path = f"{prefix}.{name}" if prefix else name
            yield path
            try:
                node = _schema_node(spec, path)
            except KeyError:
                continue  # reported by the comparison
            if "properties" in node or "properties" in node.get("items", {}):
                yield from _doc_paths(child, spec, path)


def _reference_documents() -> list[dict[str, Any]]:
    text = (ROOT / "docs" / "packages.md").read_text()
    section = text.split("\n## The fields\n", 1)[1].split("\n## ", 1)[0]
    docs = []
    for block in re.findall(r"```yaml\n(.*?)```", section, re.S):
        docs += [d for d in yaml.safe_load_all(block) if isinstance(d, dict)]
    return docs


@pytest.mark.parametrize("kind", ["Package", "HelmRepository", "OCIRepository"])
def test_documented_reference_and_schema_have_the_same_fields(kind: str) -> None:
    definition = next(d for d in crd.definitions() if d["spec"]["names"]["kind"] == kind)
    spec = definition["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    documented = {p for d in _reference_documents() if d.get("kind") == kind for p in _doc_paths(d["spec"], spec)}
    assert documented, f"docs/packages.md documents no {kind}"
    in_schema = set(_schema_paths(spec))
    assert sorted(documented - in_schema) == [], "documented in docs/packages.md, missing from the CRD schema"
    assert sorted(in_schema - documented) == [], "in the CRD schema, missing from docs/packages.md's reference"


def test_the_loader_takes_its_allowed_fields_from_the_table(tmp_path: Path) -> None:
    # A field the table does not declare is refused by the loader, naming the fields the table allows.
    (tmp_path / "chart").mkdir()
    (tmp_path / "chart" / "Chart.yaml").write_text("apiVersion: v2\nname: c\nversion: 0.1.0\n")
    file = tmp_path / "p.yaml"
    file.write_text("apiVersion: helmdeck.dev/v1alpha1\nkind: Package\nmetadata: {name: p}\n"
                    "spec: {chart: chart, upgrade: {remediation: {tries: 1}}}\n")
    with pytest.raises(ValueError) as caught:
        load_package(file)
    names = ", ".join(f.name for f in PACKAGE_SPEC[[f.name for f in PACKAGE_SPEC].index("upgrade")].fields[-1].fields)
    assert "spec.upgrade.remediation.tries: unknown field" in str(caught.value)
    assert f"allowed here: {names}" in str(caught.value)


def test_every_flag_of_the_table_reaches_the_package(tmp_path: Path) -> None:
    # Each action section's boolean fields, all set, load into the section's dataclass (no name drifts).
    (tmp_path / "chart").mkdir()
    (tmp_path / "chart" / "Chart.yaml").write_text("apiVersion: v2\nname: c\nversion: 0.1.0\n")
    sections = {s.name: s for s in PACKAGE_SPEC if s.name in ("install", "upgrade", "rollback", "uninstall")}
    spec = {name: {f.name: True for f in s.fields if f.type == "boolean"} for name, s in sections.items()}
    file = tmp_path / "p.yaml"
    file.write_text(yaml.safe_dump({"apiVersion": "helmdeck.dev/v1alpha1", "kind": "Package",
                                    "metadata": {"name": "p"}, "spec": {"chart": "chart", **spec}}))
    loaded = load_package(file)
    for name, flags in spec.items():
        section = getattr(loaded, name)
        for flag in flags:
            assert getattr(section, re.sub(r"(?<!^)([A-Z])", r"_\1", flag).lower()) is True, f"{name}.{flag}"


def test_openapi_of_the_field_types() -> None:
    assert openapi(Field("t", "duration"))["pattern"].startswith("^(")
    assert openapi(Field("v", "free")) == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    assert openapi(Field("l", "map")) == {"type": "object", "additionalProperties": {"type": "string"}}
    node = openapi(Field("f", "list", items="object", fields=(Field("n", "string", required=True),)))
    assert node == {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "string"}},
                                                "required": ["n"]}}
    with pytest.raises(ValueError):
        Field("x", "text")


def _package(name: str, chart: Any) -> dict[str, Any]:
    return package_doc(name, chart=chart, timeout="90s", values={"replicas": 2, "deep": {"a": [1, {"b": "c"}]}},
                       upgrade={"remediation": {"retries": 2, "strategy": "uninstall"}},
                       commonMetadata={"labels": {"team": "web"}})


@pytest.mark.cluster
def test_the_api_server_serves_packages_with_printer_columns(
    kube_target: KubeTarget, helmdeck_crds: list[str], namespace: str,
) -> None:
    assert sorted(helmdeck_crds) == ["helmrepositories.helmdeck.dev", "ocirepositories.helmdeck.dev",
                                     "packages.helmdeck.dev"]
    api = api_client(kube_target)
    objects = client.CustomObjectsApi(api)
    remote = {"spec": {"chart": "web", "version": "^0.2", "sourceRef": {"kind": "HelmRepository", "name": "r"}}}
    created: Any = objects.create_namespaced_custom_object("helmdeck.dev", "v1alpha1", namespace, "packages",
                                                      _package("web", remote))
    assert created["spec"]["values"]["deep"] == {"a": [1, {"b": "c"}]}  # free-form values kept, not pruned
    # What the API server can check, it refuses: a local chart folder, an unknown enum value, a bad duration.
    for bad, field in ((_package("local", "../charts/web"), "spec.chart"),
                       ({**_package("enum", remote), "spec": {"chart": remote, "maintenance": "Sometimes"}},
                        "spec.maintenance"),
                       ({**_package("dur", remote), "spec": {"chart": remote, "interval": "10 minutes"}},
                        "spec.interval")):
        with pytest.raises(ApiException) as caught:
            objects.create_namespaced_custom_object("helmdeck.dev", "v1alpha1", namespace, "packages", bad)
        assert caught.value.status == 422 and field in str(caught.value.body), caught.value.body
    status = {"status": {
        "observedGeneration": 1, "lastAttemptedRevision": "0.2.1", "lastAppliedRevision": "0.2.1",
        "conditions": [{"type": "Ready", "status": "True", "reason": "UpgradeSucceeded",
                        "message": "Helm upgrade succeeded for release x/web.v2 with chart web@0.2.1",
                        "lastTransitionTime": "2026-12-01T10:00:00Z", "observedGeneration": 1}],
        "history": [{"apiVersion": "v2", "digest": "sha256:" + "1" * 64, "name": "web", "namespace": namespace,
                     "version": 2, "status": "deployed", "chart": "web@0.2.1", "chartName": "web",
                     "chartVersion": "0.2.1", "testHooks": {"web-test": {"lastStarted": "2026-12-01T10:00:00Z",
                                                                         "lastCompleted": None,
                                                                         "phase": "Running"}}}]}}
    patched: Any = objects.patch_namespaced_custom_object_status("helmdeck.dev", "v1alpha1", namespace, "packages",
                                                                 "web", status)
    kept = patched["status"]["history"][0]  # Flux's snapshot fields are in the schema, not pruned
    assert (kept["apiVersion"], kept["testHooks"]["web-test"]["phase"]) == ("v2", "Running")
    table = get_json(api, f"/apis/helmdeck.dev/v1alpha1/namespaces/{namespace}/packages", accept=TABLE)
    assert table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Age", "Ready", "Status", "Revision", "Chart"]
    row = table["rows"][0]
    assert len(table["rows"]) == 1
    assert row["cells"][0] == "web" and row["cells"][2:] == [
        "True", "Helm upgrade succeeded for release x/web.v2 with chart web@0.2.1", 2, "web@0.2.1"]
    group = get_json(api, "/apis/helmdeck.dev/v1alpha1")
    packages = next(r for r in group["resources"] if r["name"] == "packages")
    assert packages["shortNames"] == ["pkg"] and packages["namespaced"]
    assert {r["name"] for r in group["resources"]} >= {"packages/status", "helmrepositories/status",
                                                      "ocirepositories/status"}
