"""The per-object manifest diff (pure)."""

from __future__ import annotations

from engine.base.masking import Masker
from engine.monitor.manifest import load_document, split_manifest
from engine.runtime.diff import manifest_diff, revision_diff

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


def test_equal_manifests_give_nothing_and_hooks_count_by_template_not_by_name() -> None:
    hook = """---
# Source: c/templates/tests/t.yaml
apiVersion: batch/v1
kind: Job
metadata:
  name: t-{suffix}
  annotations: {{helm.sh/hook: test}}
"""
    assert manifest_diff(DEPLOYED, DEPLOYED) == ""
    one, two = DEPLOYED + hook.format(suffix="abcde"), DEPLOYED + hook.format(suffix="vwxyz")
    assert manifest_diff(one, two) == ""  # a name generated per render is not a change (as Helm records hooks)
    added = manifest_diff(DEPLOYED, one)
    assert added.startswith("--- /dev/null\n+++ Job hook c/templates/tests/t.yaml (desired)\n"), added


def test_secret_values_never_show_with_a_masker() -> None:
    changed = DEPLOYED.replace("hunter2", "correct-horse")
    out = manifest_diff(DEPLOYED, changed, masker=Masker(b"fixed"))
    assert "hunter2" not in out and "correct-horse" not in out
    assert "-  password: '•••••• #" in out and "+  password: '•••••• #" in out
    assert "correct-horse" in manifest_diff(DEPLOYED, changed)  # revealed on request


def test_revision_diff_masks_manifests_and_values_unless_revealed() -> None:
    before = (1, DEPLOYED, {"db": {"password": "hunter2"}, "replicas": 1})
    after = (2, DEPLOYED.replace("hunter2", "correct-horse"), {"db": {"password": "correct-horse"}, "replicas": 2})
    masked = revision_diff(before, after, Masker(b"fixed"))
    assert "--- manifest (revision 1)\n+++ manifest (revision 2)" in masked
    assert "--- values (revision 1)\n+++ values (revision 2)" in masked and "+replicas: 2" in masked
    assert "hunter2" not in masked and "correct-horse" not in masked
    shown = revision_diff(before, after, Masker(b"fixed"), reveal=True)
    assert "-  password: hunter2" in shown and "+  password: correct-horse" in shown
    assert revision_diff(before, before, Masker(b"fixed")) == ""


# A ConfigMap as the demo's settings chart renders it (quoted by the template), before and after a secret
# value was added to the package's values.
CONFIG = """---
# Source: settings/templates/configmap.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  labels:
    "helmdeck.dev/package-name": "settings"
data:
{extra}  logLevel: "debug"
"""


def test_a_secret_added_to_an_object_shows_only_its_own_lines_changed() -> None:
    """Revision 1 had no secret in the ConfigMap and was shown as Helm stored it; revision 2's was dumped
    again to mask its token, so the diff showed every line of the object as changed (the quotes gone)."""
    before = (1, CONFIG.format(extra=""), {"settings": {"logLevel": "debug"}})
    after_values = {"settings": {"logLevel": "debug", "apiToken": "tok-123456"}}
    after = (2, CONFIG.format(extra='  apiToken: "tok-123456"\n'), after_values)
    shown = revision_diff(before, after, Masker(b"fixed")).split("--- values")[0]
    changed = [ln for ln in shown.splitlines()[2:] if ln[:1] in "+-"]
    assert len(changed) == 1 and changed[0].startswith("+  apiToken: '•••••• #"), shown
    desired = manifest_diff(before[1], after[1], masker=Masker(b"fixed"), values=[after_values])
    changed = [ln for ln in desired.splitlines()[2:] if ln[:1] in "+-"]
    assert len(changed) == 1 and changed[0].startswith("+  apiToken: '•••••• #"), desired
    assert "tok-123456" not in shown + desired


def test_documents_split_on_helm_separators_only() -> None:
    text = "---\n# Source: a\nkind: A\n---   \nkind: B\ndata: '---'\n---\n\n"
    assert [load_document(d)["kind"] for d in split_manifest(text) if load_document(d)] == ["A", "B"]
