"""The CRD policy (spec.install.crds / spec.upgrade.crds, as Flux) on the local cluster: a chart whose
crds/ CRD gains a schema field in 0.2.0 (and a second CRD appears) is upgraded under each policy."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from engine.helm import Helm
from engine.helm.crds import CrdError, chart_crds
from engine.kube.client import KubeTarget
from testkit.packages import write_package
from tests.cli.test_cli import cluster_args, helmdeck

pytestmark = pytest.mark.cluster


def crd(group: str, plural: str, fields: list[str]) -> dict[str, object]:
    kind = plural.capitalize()[:-1]
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": plural, "singular": plural[:-1], "kind": kind, "listKind": f"{kind}List"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                     "type": "object", "properties": {"spec": {"type": "object", "properties": {
                         f: {"type": "string"} for f in fields}}}}}}]},
    }


def write_chart(root: Path, group: str, version: str) -> Path:
    """Chart ``crdchart`` at ``version``: 0.1.0 has widgets {size}; 0.2.0 adds widgets.color and gadgets."""
    chart = root / "crdchart"
    (chart / "crds").mkdir(parents=True, exist_ok=True)
    (chart / "templates").mkdir(exist_ok=True)
    (chart / "Chart.yaml").write_text(f"apiVersion: v2\nname: crdchart\nversion: {version}\n")
    (chart / "templates" / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n"
        "  version: {{ .Chart.Version | quote }}\n")
    fields = ["size", "color"] if version == "0.2.0" else ["size"]
    (chart / "crds" / "widgets.yaml").write_text(yaml.safe_dump(crd(group, "widgets", fields)))
    if version == "0.2.0":
        (chart / "crds" / "gadgets.yaml").write_text(yaml.safe_dump(crd(group, "gadgets", ["kind"])))
    return chart


@pytest.fixture
def group(kube_target: KubeTarget) -> Iterator[str]:
    name = f"t{uuid.uuid4().hex[:8]}.helmdeck.dev"
    yield name
    ext = client.ApiextensionsV1Api(_api(kube_target))
    for plural in ("widgets", "gadgets"):
        try:
            ext.delete_custom_resource_definition(f"{plural}.{name}")
        except ApiException as exc:
            if exc.status != 404:
                raise


def _api(target: KubeTarget) -> client.ApiClient:
    from engine.kube.client import api_client

    return api_client(target)


def read(ext: client.ApiextensionsV1Api, name: str) -> dict[str, Any] | None:
    try:
        resp: Any = ext.read_custom_resource_definition(name, _preload_content=False)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    found: dict[str, Any] = json.loads(resp.data)
    return found


def schema_fields(ext: client.ApiextensionsV1Api, name: str) -> set[str] | None:
    found = read(ext, name)
    if found is None:
        return None
    return set(found["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"])


@pytest.mark.parametrize("policy", ["CreateReplace", "Create", "Skip"])
def test_the_upgrade_crd_policy_decides_what_happens_to_the_charts_crds(
    policy: str, helm: Helm, kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str, group: str,
    tmp_path: Path,
) -> None:
    chart = write_chart(tmp_path, group, "0.1.0")
    pkgs = tmp_path / "p"
    pkgs.mkdir()
    upgrade: dict[str, Any] = {} if policy == "Create" else {"upgrade": {"crds": policy}}  # Create is the default
    write_package(pkgs, "app", namespace, chart=chart, timeout="30s", **upgrade)
    args = ["reconcile", "--once", "--no-lease", "--json", *cluster_args(helm, kube_target, namespace, pkgs,
                                                                         tmp_path / "log")]
    ext = client.ApiextensionsV1Api(core_api.api_client)
    first = helmdeck(*args)
    assert first.returncode == 0, first.stdout + first.stderr
    assert schema_fields(ext, f"widgets.{group}") == {"size"}  # install.crds defaults to Create (helm creates)

    write_chart(tmp_path, group, "0.2.0")
    second = helmdeck(*args)
    assert second.returncode == 0, second.stdout + second.stderr
    assert core_api.read_namespaced_config_map("app", namespace).data == {"version": "0.2.0"}
    widgets, gadgets = schema_fields(ext, f"widgets.{group}"), schema_fields(ext, f"gadgets.{group}")
    if policy == "CreateReplace":  # applied server-side: the schema gained its field, the new CRD exists
        assert (widgets, gadgets) == ({"size", "color"}, {"kind"})
        found = read(ext, f"widgets.{group}") or {}
        assert "helmdeck" in {m["manager"] for m in found["metadata"]["managedFields"]}
    elif policy == "Create":  # only the missing CRD is created; the existing one is left as it was
        assert (widgets, gadgets) == ({"size"}, {"kind"})
    else:
        assert (widgets, gadgets) == ({"size"}, None)
    # Established before helm ran (helmdeck waited for it).
    if gadgets is not None:
        conditions = (read(ext, f"gadgets.{group}") or {})["status"]["conditions"]
        assert {"type": "Established", "status": "True"}.items() <= next(
            c for c in conditions if c["type"] == "Established").items()


def test_chart_crds_reads_crds_of_packaged_charts_and_subcharts(tmp_path: Path) -> None:
    import tarfile

    chart = write_chart(tmp_path / "src", "x.helmdeck.dev", "0.2.0")
    sub = write_chart(tmp_path / "sub", "y.helmdeck.dev", "0.1.0")
    (chart / "charts").mkdir()
    with tarfile.open(chart / "charts" / "crdchart-sub.tgz", "w:gz") as tar:
        tar.add(sub, arcname="crdchart")
    (chart / "crds" / "notes.txt").write_text("not a CRD file")
    archive = tmp_path / "crdchart-0.2.0.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(chart, arcname="crdchart")
    for source in (chart, archive):
        names = [c["metadata"]["name"] for c in chart_crds(source)]
        assert names == ["gadgets.x.helmdeck.dev", "widgets.x.helmdeck.dev", "widgets.y.helmdeck.dev"], source
    assert json.dumps(chart_crds(chart)) == json.dumps(chart_crds(archive))


def test_chart_crds_refuses_an_alias_bomb_naming_the_file(tmp_path: Path) -> None:
    chart = write_chart(tmp_path / "src", "x.helmdeck.dev", "0.1.0")
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    (chart / "crds" / "bomb.yaml").write_text("\n".join(lines) + "\n")
    with pytest.raises(CrdError, match=r"crds/bomb.yaml:\d+: aliases expand past"):
        chart_crds(chart)


@pytest.mark.parametrize("policy", ["CreateReplace", "Skip"])
def test_the_install_crd_policy(
    policy: str, helm: Helm, kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str, group: str,
    tmp_path: Path,
) -> None:
    chart = write_chart(tmp_path, group, "0.2.0")
    pkgs = tmp_path / "p"
    pkgs.mkdir()
    write_package(pkgs, "app", namespace, chart=chart, timeout="30s", install={"crds": policy})
    proc = helmdeck("reconcile", "--once", "--no-lease", "--json",
                    *cluster_args(helm, kube_target, namespace, pkgs, tmp_path / "log"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ext = client.ApiextensionsV1Api(core_api.api_client)
    if policy == "Skip":  # helm --skip-crds: none created
        assert schema_fields(ext, f"widgets.{group}") is None and schema_fields(ext, f"gadgets.{group}") is None
    else:  # applied by helmdeck (its field manager), not by helm
        found = read(ext, f"widgets.{group}") or {}
        managers = {m["manager"] for m in found["metadata"]["managedFields"]}
        assert "helmdeck" in managers and "helm" not in managers, managers
        assert schema_fields(ext, f"gadgets.{group}") == {"kind"}


def write_umbrella(root: Path, group: str) -> Path:
    """Chart ``umbrella`` (no CRDs of its own) with subcharts ``front`` (widgets: condition ``front.enabled``, true
    by the subchart's own default), ``back`` (gadgets: condition ``back.enabled``, false by the umbrella's
    values) and ``tagged`` (things: tag ``extras``, false by default), plus ``loose`` (dongles: undeclared,
    always in); ``back`` is packaged, the others directories."""
    import tarfile

    chart = root / "umbrella"
    (chart / "templates").mkdir(parents=True)
    (chart / "charts").mkdir()
    (chart / "Chart.yaml").write_text(yaml.safe_dump({
        "apiVersion": "v2", "name": "umbrella", "version": "0.1.0", "dependencies": [
            {"name": "front", "version": "0.1.0", "condition": "front.enabled"},
            {"name": "back", "version": "0.1.0", "condition": "back.enabled,global.back"},
            {"name": "tagged", "version": "0.1.0", "tags": ["extras"]}]}))
    (chart / "values.yaml").write_text("back: {enabled: false}\ntags: {extras: false}\n")
    (chart / "templates" / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n"
        "data: {extras: {{ .Values.tags.extras | quote }}}\n")  # a tag change changes the manifest
    for sub, plural in (("front", "widgets"), ("back", "gadgets"), ("tagged", "things"), ("loose", "dongles")):
        src = (root / "src" / sub) if sub == "back" else (chart / "charts" / sub)
        (src / "crds").mkdir(parents=True)
        (src / "Chart.yaml").write_text(f"apiVersion: v2\nname: {sub}\nversion: 0.1.0\n")
        (src / "values.yaml").write_text("enabled: true\n")
        (src / "crds" / f"{plural}.yaml").write_text(yaml.safe_dump(crd(group, plural, ["size"])))
    with tarfile.open(chart / "charts" / "back-0.1.0.tgz", "w:gz") as tar:
        tar.add(root / "src" / "back", arcname="back")
    return chart


def test_crds_of_subcharts_disabled_by_condition_or_tags_are_left_out(tmp_path: Path) -> None:
    import tarfile

    chart = write_umbrella(tmp_path, "x.helmdeck.dev")
    archive = tmp_path / "umbrella-0.1.0.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(chart, arcname="umbrella")
    cases: list[tuple[dict[str, Any] | None, list[str]]] = [
        (None, ["dongles", "widgets"]),  # the charts' defaults: off and tagged are disabled
        ({"front": {"enabled": False}}, ["dongles"]),
        ({"back": {"enabled": True}, "tags": {"extras": True}}, ["dongles", "widgets", "gadgets", "things"]),
        ({"back": {"enabled": None}, "global": {"back": True}}, ["dongles", "widgets", "gadgets"]),  # next path
        ({"back": {"enabled": "yes"}}, ["dongles", "widgets", "gadgets"]),  # not a boolean: no say (enabled)
        ({"tagged": {"enabled": True}}, ["dongles", "widgets"]),  # no condition: the false tag decides
    ]
    for source in (chart, archive):
        for values, plurals in cases:
            names = [c["metadata"]["name"] for c in chart_crds(source, values)]
            assert names == [f"{p}.x.helmdeck.dev" for p in plurals], (source, values)


def test_create_replace_applies_crds_of_enabled_subcharts_only(
    helm: Helm, kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str, group: str, tmp_path: Path,
) -> None:
    chart = write_umbrella(tmp_path, group)
    pkgs = tmp_path / "p"
    pkgs.mkdir()
    ext = client.ApiextensionsV1Api(core_api.api_client)
    try:
        for values in ("{}", "{tags: {extras: true}}"):
            write_package(pkgs, "app", namespace, chart=chart, timeout="30s", values=yaml.safe_load(values),
                          install={"crds": "CreateReplace"}, upgrade={"crds": "CreateReplace"})
            proc = helmdeck("reconcile", "--once", "--no-lease", "--json",
                            *cluster_args(helm, kube_target, namespace, pkgs, tmp_path / "log"))
            assert proc.returncode == 0, proc.stdout + proc.stderr
            present = {p for p in ("widgets", "gadgets", "things", "dongles") if read(ext, f"{p}.{group}")}
            # The disabled subchart's CRD (gadgets) is never applied; things once its tag turns true.
            assert present == ({"widgets", "dongles"} if values == "{}" else {"widgets", "dongles", "things"})
    finally:
        for plural in ("things", "dongles"):
            try:
                ext.delete_custom_resource_definition(f"{plural}.{group}")
            except ApiException as exc:
                if exc.status != 404:
                    raise
