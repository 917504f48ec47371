"""helm's client-side OpenAPI check is left out (``--disable-openapi-validation``) where the API server validates
fields itself, Kubernetes 1.27 and newer: there helm's check only asks the server whether it does (kubectl's
``pkg/validation/schema.go`` ``paramVerifyingSchema.ValidateBytes`` through cli-runtime's
``QueryParamVerifierV3.HasSupport``) and validates nothing, at about 50 ms of helm's CPU per install. What the
server refuses, and what it only warns about, stays as it was."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from kubernetes import client

from engine.helm import Helm
from engine.helm.cli import validates_fields
from engine.helm.errors import HelmError, RenderError
from engine.kube.client import KubeTarget
from tests.conftest import helm_binary


def _chart(root: Path, data: str) -> Path:
    """A one-ConfigMap chart whose ConfigMap carries ``data`` (YAML lines at the object's top level)."""
    (root / "templates").mkdir(parents=True)
    (root / "Chart.yaml").write_text("apiVersion: v2\nname: cm\nversion: 1.0.0\n")
    (root / "templates" / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n" + data)
    return root


@pytest.mark.cluster
async def test_an_unknown_field_is_refused_by_helm_4_with_the_client_check_left_out(
    kube_target: KubeTarget, helm_home: dict[str, str], namespace: str, tmp_path: Path,
) -> None:
    """helm 4 applies server-side with ``fieldValidation=Strict`` (helm v4 ``pkg/kube/client.go``: the
    create and update options' default), whatever ``--disable-openapi-validation`` says: an unknown field is
    refused by the server, and the helm that refused it ran with the flag (it ran without it before)."""
    calls = tmp_path / "calls"
    wrapper = tmp_path / "helm"
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {calls}\nexec {helm_binary("helm4")} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    helm = Helm(wrapper, kube_target, helm_home)
    with pytest.raises(HelmError, match="field not declared in schema"):
        await helm.install("bad", namespace, _chart(tmp_path / "bad", "bogus: 1\n"), {})
    # A document with neither apiVersion nor kind is refused before anything is applied, as before; only helm's
    # wording of why changes (kubectl's check said "apiVersion not set, kind not set", the decoder says so now).
    nokind = tmp_path / "nokind"
    (nokind / "templates").mkdir(parents=True)
    (nokind / "Chart.yaml").write_text("apiVersion: v2\nname: cm\nversion: 1.0.0\n")
    (nokind / "templates" / "x.yaml").write_text("metadata: {name: x}\ndata: {a: b}\n")
    with pytest.raises(RenderError, match=r"(?i)kind"):
        await helm.install("nokind", namespace, nokind, {})
    await helm.install("good", namespace, _chart(tmp_path / "good", "data: {a: b}\n"), {})
    await helm.dry_run("good", namespace, _chart(tmp_path / "good2", "data: {a: c}\n"), {})
    runs = [line.split() for line in calls.read_text().splitlines()]
    actions = [run for run in runs if run[0] in ("install", "upgrade")]
    assert [run[0] for run in actions] == ["install", "install", "install", "upgrade"]
    assert all("--disable-openapi-validation" in run for run in actions), actions


@pytest.mark.cluster
async def test_helm_3_installs_an_unknown_field_with_the_servers_warning_as_before(
    kube_target: KubeTarget, helm_home: dict[str, str], namespace: str, tmp_path: Path, core_api: client.CoreV1Api,
) -> None:
    """helm 3 sends no ``fieldValidation``: the server's default (Warn) drops the field and installs, with or
    without helm's client check (which, on this server, checks nothing)."""
    helm3 = Helm(helm_binary("helm3"), kube_target, helm_home)
    assert await helm3.server_validates()
    await helm3.install("bad", namespace, _chart(tmp_path / "bad", "bogus: 1\n"), {})
    assert core_api.read_namespaced_config_map("bad", namespace).metadata is not None


def test_the_servers_that_validate_fields_are_kubernetes_1_27_and_newer() -> None:
    """ServerSideFieldValidation is GA (locked on) from 1.27; a vendor's minor may carry a suffix."""
    assert validates_fields({"major": "1", "minor": "27"})
    assert validates_fields({"major": "1", "minor": "34+"})
    assert validates_fields({"major": "2", "minor": "0"})
    assert not validates_fields({"major": "1", "minor": "26"})
    assert not validates_fields({"major": "1", "minor": "24+"})
    with pytest.raises(ValueError):
        validates_fields({"major": "", "minor": "30"})
