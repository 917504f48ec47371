"""Masking on the local cluster: what `render`, `diff` and the Manifest tab show of a chart with flow
mappings, Kubernetes fields named like secrets and a Secret from the values stays valid YAML."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from engine.helm import Helm
from engine.kube.client import KubeTarget
from engine.reconcile import state as st
from engine.runtime.assemble import build_engine
from testkit.packages import write_package
from tests.engine.resolve.test_values_from import until
from tui.engine_client import EngineClient

pytestmark = pytest.mark.cluster

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
  annotations:
    checksum/secret: {{ .Values.password | sha256sum | trunc 16 }}
spec:
  replicas: 0
  selector:
    matchLabels: {app: {{ .Release.Name }}}
  template:
    metadata:
      labels: {app: {{ .Release.Name }}}
    spec:
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - topologyKey: kubernetes.io/hostname
              labelSelector:
                matchExpressions:
                  - {key: app, operator: In, values: [{{ .Release.Name }}]}
      containers:
        - name: app
          image: registry.invalid/app:1
          env:
            - name: DB_PASSWORD
              valueFrom:
                secretKeyRef: {name: {{ .Release.Name }}, key: password}
            - name: DB_URL
              value: "postgres://app:{{ .Values.password }}@db/app"
"""
SECRET = """\
apiVersion: v1
kind: Secret
metadata:
  name: {{ .Release.Name }}
stringData:
  password: {{ .Values.password | quote }}
"""


def chart(root: Path) -> Path:
    (root / "templates").mkdir(parents=True)
    (root / "Chart.yaml").write_text("apiVersion: v2\nname: masked\nversion: 0.1.0\n")
    (root / "values.yaml").write_text("password: changeme\n")
    (root / "templates" / "deployment.yaml").write_text(DEPLOYMENT)
    (root / "templates" / "secret.yaml").write_text(SECRET)
    return root


def package(folder: Path, namespace: str, chart_dir: Path, password: str) -> None:
    write_package(folder, "app", namespace, chart=chart_dir, timeout="20s", values={"password": password})


async def test_render_diff_and_manifest_stay_valid_yaml_and_hide_only_secrets(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path,
) -> None:
    chart_dir, pkgs = chart(tmp_path / "masked"), tmp_path / "p"
    package(pkgs, namespace, chart_dir, "first-pass-123")
    engine = build_engine(kube_target, helm, pkgs, namespaces=[namespace])
    key = (namespace, "app")
    await engine.start()
    try:
        await until(lambda: (view := engine.release(key)) is not None and view.state == st.IN_SYNC)
        package(pkgs, namespace, chart_dir, "second-pass-456")
        await engine.stop()
        engine = build_engine(kube_target, helm, pkgs, namespaces=[namespace])
        await engine.start(reconcile=False)
        rendered = await engine.render(key, reveal=False)
        manifest = await EngineClient(engine).manifest_text(key, 1)
        diff = await engine.diff(key)
        for text in (rendered, manifest, diff):
            assert "first-pass-123" not in text and "second-pass-456" not in text
        for text in (rendered, manifest):
            docs = {d["kind"]: d for d in yaml.safe_load_all(text) if d}
            pod = docs["Deployment"]["spec"]["template"]["spec"]
            term = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
            assert term["topologyKey"] == "kubernetes.io/hostname"
            assert term["labelSelector"]["matchExpressions"] == [{"key": "app", "operator": "In", "values": ["app"]}]
            env = pod["containers"][0]["env"]
            assert env[0]["valueFrom"]["secretKeyRef"] == {"name": "app", "key": "password"}
            assert env[1]["value"].startswith("postgres://app:•••••• #")
            assert len(docs["Deployment"]["metadata"]["annotations"]["checksum/secret"]) == 16
            assert docs["Secret"]["stringData"]["password"].startswith("•••••• #")
        assert "+  password: '•••••• #" in diff and "checksum/secret" in diff  # changed, shown, its value hidden
        assert "second-pass-456" in await engine.render(key)  # revealed
    finally:
        await engine.stop()
