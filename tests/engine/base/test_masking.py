"""Masking manifests on their parsed objects: valid YAML out, the same structure, only secrets hidden."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.base.masking import Masker, is_secret_key

FLOW = """\
---
# Source: app/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
  annotations:
    checksum/secret: 5f1e0c3a9d
spec:
  template:
    spec:
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - topologyKey: kubernetes.io/hostname
              labelSelector:
                matchExpressions:
                  - {key: app, operator: In, values: [x]}
      containers:
        - name: app
          env:
            - name: DB_PASSWORD
              valueFrom:
                secretKeyRef: {name: app-db, key: password}
            - name: API_TOKEN
              value: s3cr3t-from-values
      volumes:
        - name: certs
          secret:
            secretName: app-tls
            items:
              - key: tls.crt
                path: tls.crt
---
apiVersion: v1
kind: Secret
metadata:
  name: app-db
stringData:
  password: {plain: hunter22}
data:
  tls.key: aGVsbG8=
"""


def shape(node: Any) -> Any:
    """The structure of a YAML tree: mappings' keys and sequences' lengths, scalars as one mark."""
    if isinstance(node, dict):
        return {k: shape(v) for k, v in node.items()}
    if isinstance(node, list):
        return [shape(v) for v in node]
    return "."


def leaves(before: Any, after: Any) -> Any:
    """Pairs of scalars at the same place in two trees of the same shape."""
    if isinstance(before, dict):
        for k, v in before.items():
            yield from leaves(v, after[k])
    elif isinstance(before, list):
        for b, a in zip(before, after, strict=True):
            yield from leaves(b, a)
    else:
        yield before, after


def test_flow_mappings_and_kubernetes_fields_stay_as_they_were() -> None:
    masker = Masker(b"k")
    out = masker.mask_manifest(FLOW, {"auth": {"apiToken": "s3cr3t-from-values"}})
    docs = list(yaml.safe_load_all(out))
    assert [shape(d) for d in docs] == [shape(d) for d in yaml.safe_load_all(FLOW)]
    pod = docs[0]["spec"]["template"]["spec"]
    term = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchExpressions"] == [{"key": "app", "operator": "In", "values": ["x"]}]
    env = pod["containers"][0]["env"]
    assert env[0]["valueFrom"]["secretKeyRef"] == {"name": "app-db", "key": "password"}
    assert env[1]["value"] == masker.mask("s3cr3t-from-values")  # a secret of the values, wherever it went
    assert pod["volumes"][0]["secret"] == {"secretName": "app-tls", "items": [{"key": "tls.crt", "path": "tls.crt"}]}
    assert docs[0]["metadata"]["annotations"] == {"checksum/secret": "5f1e0c3a9d"}
    secret = docs[1]
    assert secret["stringData"]["password"] == {"plain": masker.mask("hunter22")}  # only scalars change
    assert secret["data"]["tls.key"] == masker.mask("aGVsbG8=") and "hunter22" not in out
    assert out.startswith("---\n# Source: app/templates/deployment.yaml\n")


def test_a_document_with_nothing_to_mask_is_kept_as_helm_stored_it() -> None:
    doc = "---\n# Source: a/cm.yaml\nkind: ConfigMap\ndata:\n  x: {a: 1}   # a comment\n  y: \"q\"\n"
    assert Masker(b"k").mask_manifest(doc) == doc


def test_configmap_entries_and_embedded_config_files() -> None:
    masker = Masker(b"k")
    manifest = ("kind: ConfigMap\ndata:\n  DB_PASSWORD: hidden1\n  logLevel: info\n"
                "  app.yaml: |\n    db:\n      host: db\n      password: hidden2\n    key: visible\n"
                "  url: postgres://app:pw123@db/x\n")
    out = masker.mask_manifest(manifest)
    data = yaml.safe_load(out)["data"]
    assert data["DB_PASSWORD"] == masker.mask("hidden1") and data["logLevel"] == "info"
    assert "hidden2" not in out and "host: db" in data["app.yaml"] and "key: visible" in data["app.yaml"]
    assert data["url"] == f"postgres://app:{masker.mask('pw123')}@db/x"


def test_the_key_word_alone_is_not_a_secret() -> None:
    assert all(is_secret_key(k) for k in ("apiKey", "API_KEY", "privateKey", "accessKey", "tls-key", "secretKey"))
    assert not any(is_secret_key(k) for k in ("key", "topologyKey", "secretKeyRef", "keyboard", "sortKey"))


def test_a_secret_remembered_or_a_pem_key_is_masked_inside_any_scalar() -> None:
    masker = Masker(b"k")
    masker.remember(["from-a-secret"])
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n"
    manifest = yaml.safe_dump({"kind": "Job", "spec": {"args": ["--pass=from-a-secret", pem], "n": 3}})
    out = yaml.safe_load(masker.mask_manifest(manifest))
    assert out["spec"]["args"] == [f"--pass={masker.mask('from-a-secret')}", masker.mask(pem)]
    assert out["spec"]["n"] == 3


def test_a_document_that_is_not_yaml_is_masked_as_text() -> None:
    masker = Masker(b"k")
    masker.remember(["from-a-secret"])
    out = masker.mask_manifest("kind: [oops\nx: from-a-secret\n---\nkind: ConfigMap\n")
    assert "from-a-secret" not in out and out.endswith("---\nkind: ConfigMap\n")


# -- properties -----------------------------------------------------------------------

_KEYS = st.sampled_from(["key", "password", "data", "stringData", "name", "topologyKey", "apiKey", "items",
                         "values", "operator", "a b", "x: y", "#c", "é", "{k}", "-", "checksum/secret"])
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                     st.text(max_size=20), st.sampled_from(["•••••• #1a2b", "a #b", "{x: 1}", "- y", "'q'", "",
                                                            "http://u:p@h/", "true", "null", "1e3", "\n a\n"]))
_TREES = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                        st.dictionaries(_KEYS, inner, max_size=5)), max_leaves=25)
_OBJECTS = st.fixed_dictionaries({"kind": st.sampled_from(["Secret", "ConfigMap", "Deployment", "PodList"])},
                                 optional={"data": _TREES, "stringData": _TREES, "spec": _TREES, "items": _TREES})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=st.lists(_OBJECTS, min_size=1, max_size=4), flow=st.sampled_from([True, False, None]),
       values=_TREES, remembered=st.lists(st.text(min_size=4, max_size=8), max_size=3))
def test_masked_manifests_parse_with_the_same_keys(docs: list[dict[str, Any]], flow: bool | None, values: Any,
                                                   remembered: list[str]) -> None:
    masker = Masker(b"k")
    masker.remember(remembered)
    manifest = "".join("---\n# Source: c/t.yaml\n" + yaml.safe_dump(d, default_flow_style=flow, allow_unicode=True)
                       for d in docs)
    out = list(yaml.safe_load_all(masker.mask_manifest(manifest, values)))
    # Compared with what the manifest means, not with ``docs``: PyYAML does not round-trip every string
    # (a NEL, U+0085, in a flow scalar is read back as a space), and the masker masks the parsed value.
    parsed = list(yaml.safe_load_all(manifest))
    assert [shape(d) for d in out] == [shape(d) for d in parsed]
    for before, after in zip(parsed, out, strict=True):
        if before["kind"] == "Secret":
            pairs = list(leaves(before.get("data"), after.get("data"))) + list(
                leaves(before.get("stringData"), after.get("stringData")))
            assert all(a == masker.mask(b) for b, a in pairs if b is not None and not isinstance(b, bool))


# -- a large realistic render ---------------------------------------------------------------


def stack_render(apps: int = 40) -> str:
    """A render shaped like kube-prometheus-stack's: CRDs with deep schemas, workloads with flow-style
    selectors, RBAC, ConfigMaps holding YAML and JSON files, Secrets, monitoring rules."""
    docs: list[str] = []
    schema: dict[str, Any] = {"type": "string"}
    for depth in range(30):
        schema = {"type": "object", "properties": {f"field{depth}": schema, "key": {"type": "string"}},
                  "x-kubernetes-preserve-unknown-fields": depth % 2 == 0}
    for crd in ("alertmanagers", "prometheuses", "servicemonitors", "podmonitors", "prometheusrules"):
        docs.append(yaml.safe_dump({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{crd}.monitoring.coreos.com",
                         "annotations": {"controller-gen.kubebuilder.io/version": "v0.16"}},
            "spec": {"group": "monitoring.coreos.com", "names": {"kind": crd.title(), "plural": crd},
                     "versions": [{"name": "v1", "schema": {"openAPIV3Schema": schema}}]}}, sort_keys=False))
    for i in range(apps):
        name = f"stack-app{i}"
        docs.append(f"""\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  labels: {{app.kubernetes.io/name: {name}, app.kubernetes.io/part-of: stack}}
  annotations:
    checksum/secret: {i:064x}
    checksum/config: {i + 1:064x}
spec:
  replicas: 1
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      affinity:
        podAntiAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 100
              podAffinityTerm:
                topologyKey: kubernetes.io/hostname
                labelSelector:
                  matchExpressions:
                    - {{key: app, operator: In, values: [{name}]}}
                    - {{key: tier, operator: NotIn, values: [a, "b c", 'd']}}
      topologySpreadConstraints:
        - {{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}}
      containers:
        - name: main
          image: "quay.io/prometheus/{name}:v2.{i}.0"
          args: ["--config.file=/etc/{name}/config.yaml", "--web.listen-address=:9090"]
          env:
            - name: ADMIN_PASSWORD
              valueFrom:
                secretKeyRef: {{name: {name}-admin, key: admin-password}}
          resources: {{limits: {{cpu: 200m, memory: 256Mi}}, requests: {{cpu: 100m}}}}
      volumes:
        - name: tls
          secret:
            secretName: {name}-tls
            items: [{{key: tls.crt, path: tls.crt}}, {{key: tls.key, path: tls.key}}]
""")
        docs.append(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"{name}-admin"}, "type": "Opaque",
            "data": {"admin-user": base64.b64encode(b"admin").decode(),
                     "admin-password": base64.b64encode(f"pw-{i}-correct-horse".encode()).decode()},
            "stringData": {"alertmanager.yaml": f"global:\n  slack_api_url: https://hooks/{i}\n"
                                                "route: {{receiver: x}}\n"}},
            sort_keys=False))
        dashboard = {"title": name, "panels": [{"id": p, "expr": f'sum(rate(x{{job="{name}"}}[5m])) # {p}'}
                                               for p in range(20)]}
        docs.append(yaml.safe_dump({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-dashboards",
                                                                   "labels": {"grafana_dashboard": "1"}},
            "data": {f"{name}.json": json.dumps(dashboard, indent=2),
                     "config.yaml": f"server:\n  http_listen_port: 3100\nauth:\n  password: cm-{i}-hidden\n"}},
            sort_keys=False, width=1 << 20))
        docs.append(f"""\
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata: {{name: {name}-rules, labels: {{release: stack}}}}
spec:
  groups:
    - name: {name}.rules
      rules:
        - alert: {name}Down
          expr: |
            up{{job="{name}"}} == 0
          for: 5m
          labels: {{severity: critical}}
          annotations:
            description: 'Target {{{{ $labels.instance }}}}: down # for 5m'
""")
    return "".join(f"---\n# Source: stack/templates/t{n}.yaml\n{d}" for n, d in enumerate(docs))


def test_a_large_realistic_render_stays_valid_yaml_when_masked() -> None:
    manifest = stack_render()
    masker = Masker(b"k")
    started = time.perf_counter()
    out = masker.mask_manifest(manifest, {"grafana": {"adminPassword": "pw-3-correct-horse"}})
    first = time.perf_counter() - started
    started = time.perf_counter()
    assert masker.mask_manifest(manifest, {"grafana": {"adminPassword": "pw-3-correct-horse"}}) is out  # cached
    assert time.perf_counter() - started < first
    before, after = list(yaml.safe_load_all(manifest)), list(yaml.safe_load_all(out))
    assert [shape(d) for d in after] == [shape(d) for d in before]
    assert "pw-3-correct-horse" not in out and "cm-7-hidden" not in out and "hooks/3" not in out
    assert "{key: app, operator: In" in out  # workloads have nothing secret: kept as written
    for b, a in zip(before, after, strict=True):
        if b["kind"] in ("Deployment", "PrometheusRule", "CustomResourceDefinition"):
            assert a == b
