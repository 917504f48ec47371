"""The per-object manifest diff (pure)."""

from __future__ import annotations

from engine.masking import Masker
from engine.runtime.diff import manifest_diff

DEPLOYED = """---
# Source: app/templates/cm.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: app
data:
  a: "1"
---
apiVersion: v1
kind: Secret
metadata:
  name: creds
stringData:
  password: hunter2
"""


def test_changes_additions_and_removals_per_object() -> None:
    desired = DEPLOYED.replace('a: "1"', 'a: "2"') + """---
apiVersion: v1
kind: Service
metadata:
  name: app
  namespace: ns
spec: {}
"""
    out = manifest_diff(DEPLOYED, desired, "revision 3")
    assert '--- ConfigMap/app (revision 3)\n+++ ConfigMap/app (desired)' in out
    assert '-  a: "1"\n+  a: "2"' in out
    assert "--- /dev/null\n+++ Service/ns/app (desired)" in out
    assert "Secret" not in out  # unchanged


def test_equal_manifests_give_nothing_and_hooks_are_ignored() -> None:
    hook = """---
apiVersion: batch/v1
kind: Job
metadata:
  name: t
  annotations: {helm.sh/hook: test}
"""
    assert manifest_diff(DEPLOYED, DEPLOYED + hook) == ""


def test_secret_values_never_show_with_a_masker() -> None:
    changed = DEPLOYED.replace("hunter2", "correct-horse")
    out = manifest_diff(DEPLOYED, changed, masker=Masker(b"fixed"))
    assert "hunter2" not in out and "correct-horse" not in out
    assert "-  password: •••••• #" in out and "+  password: •••••• #" in out
    assert "correct-horse" in manifest_diff(DEPLOYED, changed)  # revealed on request
