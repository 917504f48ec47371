"""Flux's order of values, case by case, each citing where Flux says it.

- Flux's HelmRelease docs, "Values references": "The values are merged in the order given, with the later
  values overwriting earlier, and then `.spec.values` overwriting those"; targetPath: "The YAML dot notation
  path at which the value should be merged. When set, the valuesKey is expected to be a single flat value."
- helm-controller's ``ChartValuesFromReferences`` (internal/chartutil/values.go): "If provided, the values map
  is merged in last overwriting values from references, unless a reference has a targetPath specified, in
  which case it will overwrite all"; its test case "target path precedence over all" (mirrored in
  tests/engine/resolve/test_values_compose.py).

helmdeck's composition (engine/resolve/values.py) was checked against these: root entries in order, then
spec.values, then every targetPath entry in order. The cases below pin what those sentences imply beyond
the mirrored case."""

from __future__ import annotations

from pathlib import Path

from engine.package.load import load_package
from engine.resolve.release import ResolveCache
from engine.resolve.values import ValuesLayer, compose
from tests.engine.resolve.test_values_compose import objects, write


def _resolved(tmp_path: Path, values_from: str, values: str, **data: dict[str, bytes] | None) -> dict[str, object]:
    spec = load_package(write(tmp_path, values_from, values))
    got = compose(spec, objects(spec, **data))
    layer = ValuesLayer(got.values, "spec.valuesFrom", digest=got.digest, targets=got.targets)
    return dict(ResolveCache().resolve(spec, lambda s: [layer]).values)


def test_later_references_overwrite_earlier_and_inline_values_overwrite_them(tmp_path: Path) -> None:
    # "merged in the order given, with the later values overwriting earlier, and then .spec.values overwriting"
    values = _resolved(tmp_path, "    - {kind: ConfigMap, name: first}\n    - {kind: ConfigMap, name: second}\n",
                       "{b: inline}",
                       first={"values.yaml": b"a: first\nb: first\nc: {x: 1}\n"},
                       second={"values.yaml": b"a: second\nb: second\nc: {z: 2}\n"})
    assert values == {"a": "second", "b": "inline", "c": {"x": 1, "z": 2}}


def test_a_target_path_overwrites_all_and_targets_apply_in_order(tmp_path: Path) -> None:
    # "unless a reference has a targetPath specified, in which case it will overwrite all": over inline values
    # and over a root reference listed after it; two targets on one path: the later one, "in the order given".
    values = _resolved(tmp_path, "    - {kind: Secret, name: one, valuesKey: v, targetPath: image.tag}\n"
                                 "    - {kind: ConfigMap, name: root}\n"
                                 "    - {kind: ConfigMap, name: two, valuesKey: v, targetPath: image.tag}\n"
                                 "    - {kind: ConfigMap, name: three, valuesKey: v, targetPath: replicas}\n",
                       "{image: {tag: inline, repo: nginx}, replicas: 1}",
                       one={"v": b"from-secret"}, root={"values.yaml": b"image: {tag: root, pull: always}\n"},
                       two={"v": b"from-configmap"}, three={"v": b"3"})
    assert values == {"image": {"tag": "from-configmap", "repo": "nginx", "pull": "always"}, "replicas": 3}
