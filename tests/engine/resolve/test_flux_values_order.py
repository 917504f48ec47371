"""Flux's order of values, case by case, each citing where Flux says it.

- Flux's HelmRelease docs, "Values references": "The values are merged in the order given, with the later
  values overwriting earlier, and then `.spec.values` overwriting those"; targetPath: "The YAML dot notation
  path at which the value should be merged. When set, the valuesKey is expected to be a single flat value."
- fluxcd/pkg/chartutil v1.27.1 values.go ``ChartValuesFromReferences``, the version helm-controller v1.6.3 runs:
  an entry with targetPath first merges ``spec.values`` over the result (``MergeMaps``, which shares the inline
  values' maps and lists), then sets its value there (``ReplacePathValue``, helm's --set parser, in place); the
  inline values are merged once more at the end. Its docstring's "unless a reference has a targetPath
  specified, in which case it will overwrite all" holds only where the value is set inside a map or list the
  inline values hold (changed in place, so the last merge keeps it); at a top-level key the inline value wins.

helmdeck's composition (engine/resolve/values.py ``compose_values``) follows the code; the expected values below
are the oracle's (tests/oracle, that chartutil version run), the differential test is
tests/engine/package/test_flux_oracle.py."""

from __future__ import annotations

from pathlib import Path

from engine.package.load import load_package
from engine.resolve.release import ResolveCache
from engine.resolve.values import ValuesLayer, compose
from tests.engine.resolve.test_values_compose import objects, write


def _resolved(tmp_path: Path, values_from: str, values: str, **data: dict[str, bytes] | None) -> dict[str, object]:
    spec = load_package(write(tmp_path, values_from, values))
    got = compose(spec, objects(spec, **data))
    layer = ValuesLayer(got.entries, "spec.valuesFrom", digest=got.digest)
    return dict(ResolveCache().resolve(spec, lambda s: [layer]).values)


def test_later_references_overwrite_earlier_and_inline_values_overwrite_them(tmp_path: Path) -> None:
    # "merged in the order given, with the later values overwriting earlier, and then .spec.values overwriting"
    values = _resolved(tmp_path, "    - {kind: ConfigMap, name: first}\n    - {kind: ConfigMap, name: second}\n",
                       "{b: inline}",
                       first={"values.yaml": b"a: first\nb: first\nc: {x: 1}\n"},
                       second={"values.yaml": b"a: second\nb: second\nc: {z: 2}\n"})
    assert values == {"a": "second", "b": "inline", "c": {"x": 1, "z": 2}}


def test_a_target_path_at_a_top_level_key_loses_to_inline_values_inside_their_maps_wins(tmp_path: Path) -> None:
    # chartutil v1.27.1 ChartValuesFromReferences: the first image.tag is set in the image map the inline values
    # hold (shared by MergeMaps), so it changes them and outlives the last merge; the second is set in a map the
    # merge made anew over the root entry's image, and the last merge puts the inline (changed) tag back over it;
    # replicas, a top-level key, is the inline 1 again after the last merge.
    values = _resolved(tmp_path, "    - {kind: Secret, name: one, valuesKey: v, targetPath: image.tag}\n"
                                 "    - {kind: ConfigMap, name: root}\n"
                                 "    - {kind: ConfigMap, name: two, valuesKey: v, targetPath: image.tag}\n"
                                 "    - {kind: ConfigMap, name: three, valuesKey: v, targetPath: replicas}\n",
                       "{image: {tag: inline, repo: nginx}, replicas: 1}",
                       one={"v": b"from-secret"}, root={"values.yaml": b"image: {tag: root, pull: always}\n"},
                       two={"v": b"from-configmap"}, three={"v": b"3"})
    assert values == {"image": {"tag": "from-secret", "repo": "nginx", "pull": "always"}, "replicas": 1}


def test_a_target_path_without_inline_values_is_set_after_the_entries_before_it(tmp_path: Path) -> None:
    # No inline value at the path: each targetPath value is set where its entry stands, so a root entry listed
    # after it overwrites it, and a later targetPath on the same path wins ("merged in the order given").
    values = _resolved(tmp_path, "    - {kind: ConfigMap, name: one, valuesKey: v, targetPath: image.tag}\n"
                                 "    - {kind: ConfigMap, name: root}\n"
                                 "    - {kind: ConfigMap, name: two, valuesKey: v, targetPath: replicas}\n"
                                 "    - {kind: ConfigMap, name: three, valuesKey: v, targetPath: replicas}\n",
                       "{}", one={"v": b"first"}, root={"values.yaml": b"image: {tag: root}\n"},
                       two={"v": b"2"}, three={"v": b"3"})
    assert values == {"image": {"tag": "root"}, "replicas": 3}
