"""Unit tests of spec.postRenderers, spec.commonMetadata and spec.driftDetection.ignore: parsing (errors name
file, line, field and fix), target selection, JSON pointers, ignored paths and the spec digest."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from engine.base import pointer
from engine.base.fields import PackageError
from engine.base.label_selector import SelectorError
from engine.base.label_selector import parse as parse_label_selector
from engine.package.drift import IgnoreRule, detection_disabled, ignored_paths
from engine.package.load import load_package
from engine.package.postrender import Image, Kustomize, Patch, Rendering
from engine.package.selector import Selector
from engine.resolve.release import PostRenderSettings, spec_digest
from tests.engine.package.test_package import pkg, write

DEPLOY: dict[str, Any] = {
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "web-api", "namespace": "demo", "labels": {"app": "web", "tier": "front"},
                 "annotations": {"team": "a"}},
    "spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}},
}


def load(tmp_path: Path, spec: str) -> Any:
    return load_package(write(tmp_path, "a.yaml", pkg(spec=spec)))


def test_post_renderers_and_common_metadata_parse_in_order(tmp_path: Path) -> None:
    spec = load(tmp_path, """\
  postRenderers:
    - kustomize:
        patches:
          - patch: |
              - {op: add, path: /metadata/annotations/x, value: "1"}
            target: {kind: Deployment, labelSelector: "app in (web)"}
          - patch: |
              apiVersion: v1
              kind: ConfigMap
              metadata: {name: app}
              data: {extra: "yes"}
        images: [{name: busybox, newTag: "1.37"}]
    - kustomize: {images: [{name: nginx, newName: example.com/nginx, digest: "sha256:abc"}]}
  commonMetadata:
    labels: {team: web}
    annotations: {owner: "ops@example.com"}
""")
    r = spec.rendering
    assert [len(s.patches) for s in r.steps] == [2, 0]
    assert r.steps[0].patches[0].target == Selector(kind="Deployment", label_selector="app in (web)")
    assert r.steps[0].patches[1].target is None
    assert r.steps[1].images == (Image("nginx", new_name="example.com/nginx", digest="sha256:abc"),)
    assert r.labels == (("team", "web"),) and r.annotations == (("owner", "ops@example.com"),)
    doc = r.document()
    assert doc["postRenderers"][0]["kustomize"]["images"] == [{"name": "busybox", "newTag": "1.37"}]
    assert doc["postRenderers"][0]["kustomize"]["patches"][0]["target"] == {"kind": "Deployment",
                                                                           "labelSelector": "app in (web)"}
    assert doc["commonMetadata"] == {"labels": {"team": "web"}, "annotations": {"owner": "ops@example.com"}}
    assert load(tmp_path, "").rendering == Rendering() and Rendering().canonical == ""


@pytest.mark.parametrize(("spec", "field", "line", "words"), [
    ("  postRenderers: {kustomize: {}}\n", "spec.postRenderers", 8, "must be a list"),
    ("  postRenderers:\n    - helm: {}\n", "spec.postRenderers[0].helm", 9, "unknown field"),
    ("  postRenderers:\n    - kustomize: {patchesStrategicMerge: []}\n",
     "spec.postRenderers[0].kustomize.patchesStrategicMerge", 9, "unknown field"),
    ("  postRenderers:\n    - kustomize:\n        patches: [{patch: '- {op: remove, path: /a}'}]\n",
     "spec.postRenderers[0].kustomize.patches[0].patch", 10, "without a target"),
    ("  postRenderers:\n    - kustomize:\n        patches: [{patch: 'data: {a: b}'}]\n",
     "spec.postRenderers[0].kustomize.patches[0].patch", 10, "must name its object"),
    ("  postRenderers:\n    - kustomize:\n        patches: [{patch: '[', target: {kind: A}}]\n",
     "spec.postRenderers[0].kustomize.patches[0].patch", 10, "is not YAML"),
    # bounded as the file around it: too deep (was a RecursionError stopping every package) or an alias bomb
    pytest.param("  postRenderers:\n    - kustomize:\n        patches: [{patch: '" + "[" * 20000 + "]" * 20000
                 + "', target: {kind: A}}]\n", "spec.postRenderers[0].kustomize.patches[0].patch", 10,
                 "nesting depth", id="patch-too-deep"),
    pytest.param("  postRenderers:\n    - kustomize:\n        patches: [{patch: \"a: &a [x,x,x,x,x,x,x,x,x,x]\\n"
                 + "".join(f"{c}: &{c} [{','.join([f'*{p}'] * 10)}]\\n" for p, c in zip("abcdef", "bcdefg",
                                                                                         strict=True))
                 + "kind: A\", target: {kind: A}}]\n", "spec.postRenderers[0].kustomize.patches[0].patch", 10,
                 "aliases expand", id="patch-alias-bomb"),
    ("  postRenderers:\n    - kustomize:\n        patches:\n          - patch: 'kind: A'\n"
     "            target: {name: 'web('}\n",
     "spec.postRenderers[0].kustomize.patches[0].target.name", 12, "not a regular expression"),
    ("  postRenderers:\n    - kustomize:\n        patches:\n          - patch: 'kind: A'\n"
     "            target: {labelSelector: 'a in b'}\n",
     "spec.postRenderers[0].kustomize.patches[0].target.labelSelector", 12, "not a selector requirement"),
    ("  postRenderers:\n    - kustomize:\n        images: [{name: busybox}]\n",
     "spec.postRenderers[0].kustomize.images[0]", 10, "changes nothing"),
    ("  postRenderers:\n    - kustomize:\n        images: [{name: busybox, newName: \"evil\\nimage\"}]\n",
     "spec.postRenderers[0].kustomize.images[0].newName", 10, "space or control character"),
    pytest.param("  postRenderers:\n" + "    - kustomize: {images: [{name: a, newTag: '1'}]}\n" * 11,
                 "spec.postRenderers", 8, "11 steps, over the limit of 10", id="too-many-steps"),
    pytest.param("  postRenderers:\n    - kustomize:\n        patches:\n"
                 + "          - {patch: 'kind: A', target: {kind: A}}\n" * 101,
                 "spec.postRenderers[0].kustomize.patches", 10, "101 patches, over the limit of 100 per step",
                 id="too-many-patches"),
    pytest.param("  postRenderers:\n    - kustomize:\n        images:\n"
                 + "          - {name: a, newTag: '1'}\n" * 101,
                 "spec.postRenderers[0].kustomize.images", 10, "101 images, over the limit of 100 per step",
                 id="too-many-images"),
    ("  commonMetadata: {labels: {team: 1}}\n", "spec.commonMetadata.labels.team", 8, "must be a string"),
    ("  commonMetadata: {labels: {team: 'a b'}}\n", "spec.commonMetadata.labels.team", 8, "not a label value"),
    ("  commonMetadata: {labels: {helmdeck.dev/package-name: x}}\n",
     "spec.commonMetadata.labels.helmdeck.dev/package-name", 8, "helmdeck's own label"),
    ("  commonMetadata: {labels: {helmdeck.dev/maintenance: 'true'}}\n",
     "spec.commonMetadata.labels.helmdeck.dev/maintenance", 8, "helmdeck's own label"),
    ("  commonMetadata: {annotations: {'bad key!': x}}\n", "spec.commonMetadata.annotations.bad key!", 8,
     "not a Kubernetes annotation key"),
    ("  commonMetadata: {tags: {}}\n", "spec.commonMetadata.tags", 8, "unknown field"),
    ("  driftDetection: {ignore: {paths: []}}\n", "spec.driftDetection.ignore", 8, "must be a list"),
    ("  driftDetection:\n    ignore: [{paths: []}]\n", "spec.driftDetection.ignore[0].paths", 9, "non-empty"),
    ("  driftDetection:\n    ignore: [{paths: [spec/replicas]}]\n", "spec.driftDetection.ignore[0].paths[0]", 9,
     "does not start with '/'"),
    ("  driftDetection:\n    ignore: [{paths: ['/a~2b']}]\n", "spec.driftDetection.ignore[0].paths[0]", 9,
     "not followed by 0 or 1"),
    ("  driftDetection:\n    ignore: [{paths: [/a], target: {kind: '*'}}]\n",
     "spec.driftDetection.ignore[0].target.kind", 9, "not a regular expression"),
])
def test_errors_name_file_line_field_and_fix(tmp_path: Path, spec: str, field: str, line: int, words: str) -> None:
    with pytest.raises(PackageError) as err:
        load(tmp_path, spec)
    e = err.value
    assert (e.file.name, e.field, e.line) == ("a.yaml", field, line), str(e)
    assert words in e.problem and e.fix, str(e)


def test_ignore_rules_parse(tmp_path: Path) -> None:
    spec = load(tmp_path, """\
  driftDetection:
    mode: enabled
    ignore:
      - paths: ["/spec/replicas"]
        target: {kind: Deployment}
      - paths: ["/metadata/annotations/a~1b", ""]
""")
    assert spec.drift_detection == "enabled"
    assert spec.drift_ignore == (IgnoreRule(("/spec/replicas",), Selector(kind="Deployment")),
                                 IgnoreRule(("/metadata/annotations/a~1b", "")))


@pytest.mark.parametrize(("selector", "matches"), [
    (Selector(), True),
    (Selector(kind="Deployment"), True),
    (Selector(kind="Deploy"), False),  # anchored: the whole kind
    (Selector(kind="Deploy.*"), True),
    (Selector(group="apps", version="v1"), True),
    (Selector(group=""), True),
    (Selector(group="batch"), False),
    (Selector(name="web-.*", namespace="demo|prod"), True),
    (Selector(namespace="prod"), False),
    (Selector(label_selector="app=web,tier!=db"), True),
    (Selector(label_selector="app==web,tier=db"), False),
    (Selector(label_selector="tier in (front, back),!canary"), True),
    (Selector(label_selector="tier notin (front)"), False),
    (Selector(label_selector="app"), True),
    (Selector(label_selector="missing"), False),
    (Selector(label_selector="missing!=x"), True),
    (Selector(annotation_selector="team=a"), True),
    (Selector(annotation_selector="team=b"), False),
])
def test_target_selection(selector: Selector, matches: bool) -> None:
    assert selector.matches(DEPLOY) is matches


def test_core_group_and_bad_selectors() -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
    assert Selector(group="", version="v1", kind="ConfigMap").matches(cm)
    assert not Selector(group="apps").matches(cm)
    for bad in ("a in b", "=x", "a b", "a in (x", "Bad Key=1"):
        with pytest.raises(SelectorError):
            parse_label_selector(bad)


def test_json_pointers() -> None:
    doc: dict[str, Any] = {"a": {"b/c": 1, "d~e": [10, 20, 30]}, "": 5}
    assert pointer.tokens("/a/b~1c") == ("a", "b/c") and pointer.tokens("") == ()
    assert pointer.get(doc, "/a/b~1c") == 1 and pointer.get(doc, "/a/d~0e/1") == 20 and pointer.get(doc, "/") == 5
    assert pointer.has(doc, "/a/d~0e/2") and not pointer.has(doc, "/a/d~0e/3") and not pointer.has(doc, "/x/y")
    assert not pointer.has(doc, "/a/d~0e/-") and not pointer.has(doc, "/a/b~1c/z")
    with pytest.raises(KeyError):
        pointer.get(doc, "/nope")
    pointer.replace(doc, "/a/d~0e/0", 11)
    pointer.remove(doc, "/a/d~0e/1")
    pointer.remove(doc, "/a/missing/deeper")  # absent: nothing, as Flux's AllowMissingPathOnRemove
    pointer.remove(doc, "")
    assert doc == {"a": {"b/c": 1, "d~e": [11, 30]}, "": 5}
    for bad in ("a", "/a~", "/~2"):
        with pytest.raises(pointer.PointerError):
            pointer.tokens(bad)


def test_ignored_paths_and_the_opt_out() -> None:
    rules = (IgnoreRule(("/spec/replicas",), Selector(kind="Deployment")),
             IgnoreRule(("/data/x",), Selector(kind="ConfigMap")),
             IgnoreRule(("/metadata/annotations/a", "/spec/replicas")))
    assert ignored_paths(rules, DEPLOY) == ("/spec/replicas", "/metadata/annotations/a")
    assert ignored_paths((), DEPLOY) == ()
    assert not detection_disabled(DEPLOY) and not detection_disabled(None)
    for key in ("helm.toolkit.fluxcd.io/driftDetection", "helmdeck.dev/driftDetection"):
        for where in ("annotations", "labels"):
            assert detection_disabled({"metadata": {where: {key: "Disabled"}}})
    assert not detection_disabled({"metadata": {"annotations": {"helmdeck.dev/driftDetection": "enabled"}}})


def test_ignored_paths_of_many_rules_stay_linear() -> None:
    """10,000 one-path rules (a generated package): each path was looked up in the list so far, about
    0.7 s per object per drift check; now a few milliseconds."""
    rules = [IgnoreRule((f"/spec/x{i}", "/spec/replicas")) for i in range(10_000)]
    start = time.perf_counter()
    for _ in range(5):
        paths = ignored_paths(rules, DEPLOY)
    assert time.perf_counter() - start < 1.5, "ignored_paths must not scan its result per path"
    assert paths[:3] == ("/spec/x0", "/spec/replicas", "/spec/x1") and len(paths) == 10_001


def test_post_rendering_is_part_of_the_spec_digest() -> None:
    stamp = (("helmdeck.dev/package-name", "web"),)
    plain = spec_digest("c", "v", PostRenderSettings(stamp))
    assert plain == spec_digest("c", "v", PostRenderSettings(stamp, Rendering()))  # unchanged without them
    one = Rendering((Kustomize(images=(Image("busybox", new_tag="1.37"),)),))
    two = Rendering((Kustomize(images=(Image("busybox", new_tag="1.38"),)),))
    patched = Rendering((Kustomize(patches=(Patch("kind: A\nmetadata: {name: a}\n"),)),))
    labelled = Rendering(labels=(("team", "web"),))
    digests = {spec_digest("c", "v", PostRenderSettings(stamp, r)) for r in (one, two, patched, labelled)}
    assert len(digests) == 4 and plain not in digests
