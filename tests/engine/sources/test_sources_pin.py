"""Pinning a version edits one scalar in place: comments, layout and the other documents stay byte for byte."""

from __future__ import annotations

import pytest
import yaml

from engine.sources.pin import PinError, document_index, set_scalar

VERSION = ("spec", "chart", "spec", "version")

FILE = """# Charts for the demo namespace.
apiVersion: helmdeck.dev/v1alpha1
kind: HelmRepository
metadata: {name: charts, namespace: demo}
spec:
  url: https://charts.example.com   # the team's repository
---
apiVersion: helmdeck.dev/v1alpha1
kind: Package
metadata:
  name: web   # the shop front
  namespace: demo
spec:
  chart:
    spec:
      chart: web
      version: "^1.2.0"   # any 1.x from 1.2 on
      sourceRef: {kind: HelmRepository, name: charts}

  values:
    replicas: 2  # two is enough
"""


def test_existing_version_is_replaced_in_place() -> None:
    doc = document_index(FILE, "Package", "web")
    assert doc == 1
    out = set_scalar(FILE, VERSION, "1.4.2", document=doc)
    assert out == FILE.replace('version: "^1.2.0"   # any', 'version: "1.4.2"   # any')
    assert yaml.safe_load_all(out) is not None
    assert list(yaml.safe_load_all(out))[1]["spec"]["chart"]["spec"]["version"] == "1.4.2"


@pytest.mark.parametrize(("line", "want"), [
    ("version: ^1.2.0", "version: 1.4.2"),  # plain stays plain
    ("version: '^1.2.0'", "version: '1.4.2'"),  # single quotes stay
    ("version: 1.2", 'version: "1.4"'),  # a plain value that YAML would read as a number gets quotes
])
def test_quoting_follows_the_file(line: str, want: str) -> None:
    text = FILE.replace('version: "^1.2.0"', line)
    new = "1.4" if want.endswith('"1.4"') else "1.4.2"
    out = set_scalar(text, VERSION, new, document=1)
    assert want in out and out.replace(want, line) == text
    assert list(yaml.safe_load_all(out))[1]["spec"]["chart"]["spec"]["version"] == new


def test_missing_version_is_added_to_a_block_mapping() -> None:
    text = FILE.replace('      version: "^1.2.0"   # any 1.x from 1.2 on\n', "")
    out = set_scalar(text, VERSION, "1.4.2", document=1)
    assert out == text.replace("{kind: HelmRepository, name: charts}",
                               '{kind: HelmRepository, name: charts}\n      version: "1.4.2"')
    assert list(yaml.safe_load_all(out))[1]["spec"]["chart"]["spec"]["version"] == "1.4.2"


def test_missing_version_is_added_to_a_flow_mapping() -> None:
    text = "kind: Package\nspec:\n  chart:\n    spec: {chart: web, sourceRef: {name: c}}  # flow\n"
    out = set_scalar(text, VERSION, "2.0.0")
    assert out == text.replace("{name: c}}", '{name: c}, version: "2.0.0"}')


def test_refusals() -> None:
    with pytest.raises(PinError, match="not a single value"):
        set_scalar(FILE, ("spec", "chart"), "x", document=1)
    with pytest.raises(PinError, match="not a mapping"):
        set_scalar("spec: [a, b]\n", ("spec", "x"), "1")
    with pytest.raises(PinError, match="no Package named 'api'"):
        document_index(FILE, "Package", "api")
    with pytest.raises(PinError, match="no YAML document 5"):
        set_scalar(FILE, VERSION, "1", document=5)


def test_missing_version_before_a_nested_block() -> None:
    text = "kind: Package\nspec:\n  chart:\n    spec:\n      chart: web\n      sourceRef:\n        name: c\n"
    out = set_scalar(text, VERSION, "1.0.0")
    assert out == ("kind: Package\nspec:\n  chart:\n    spec:\n      version: \"1.0.0\"\n      chart: web\n"
                   "      sourceRef:\n        name: c\n")
