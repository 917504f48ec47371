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

import pytest
import yaml
from kubernetes import client

from engine.helm import Helm
from engine.kube.client import KubeTarget
from engine.package.load import load_package
from engine.resolve.release import ResolveCache
from engine.resolve.values import ValuesLayer, compose
from testkit.chart_sources import ChartRepoServer, package_chart, publish_http
from testkit.chart_sources import write as write_file
from tests.cli.test_cli import helmdeck
from tests.conftest import run_helm
from tests.engine.reconcile.test_flux_rules import helm_release, repository
from tests.engine.resolve.test_values_compose import objects, write
from tests.flux_oracle import Oracle


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


@pytest.mark.cluster
@pytest.mark.binaries("oracle")
def test_helm_gets_the_values_flux_composes_from_inline_values_and_target_paths(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path, repo: ChartRepoServer,
    core_api: client.CoreV1Api, flux_oracle_process: Oracle,
) -> None:
    """A HelmRelease whose inline values and targetPath entries set the same keys, reconciled with real helm:
    ``helm get values`` shows what fluxcd/pkg/chartutil v1.27.1 values.go ChartValuesFromReferences (the version
    helm-controller v1.6.3 runs, asked of the oracle) composes: the inline replicas over the targetPath's (a
    top-level key: merged again at the end), the first entry's image.tag over the inline one (set inside the
    image map the inline values hold, changed in place; set after another entry's merge made a new map there, it
    would lose, as the unit tests above show)."""
    publish_http(helm.binary, package_chart(helm.binary, tmp_path, "1.0.0"), repo)
    overrides = {"replicas": "3", "tag": "from-configmap"}
    core_api.create_namespaced_config_map(namespace, client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="overrides"), data=overrides))
    refs = [{"kind": "ConfigMap", "name": "overrides", "valuesKey": "tag", "targetPath": "image.tag"},
            {"kind": "ConfigMap", "name": "overrides", "valuesKey": "replicas", "targetPath": "replicas"}]
    inline = {"replicas": 1, "image": {"repository": "web", "tag": "inline"}}
    folder = tmp_path / "flux"
    write_file(folder, "repository.yaml", repository(namespace, repo.url))
    entries = "".join(f"  - {{kind: ConfigMap, name: overrides, valuesKey: {r['valuesKey']}, "
                      f"targetPath: {r['targetPath']}}}\n" for r in refs)
    write_file(folder, "web.yaml", helm_release(namespace, "  valuesFrom:\n" + entries,
                                                values="{replicas: 1, image: {repository: web, tag: inline}}"))
    ran = helmdeck("reconcile", "--once", "--no-lease", "--kubeconfig", str(kube_target.kubeconfig), "--helm",
                   helm.binary, "-n", namespace, "--packages", str(folder), "--log-file", str(tmp_path / "log"))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    values = yaml.safe_load(run_helm(helm, "get", "values", "web", "-n", namespace, "-o", "yaml"))
    flux = flux_oracle_process.ask({"op": "values", "namespace": namespace, "values": inline, "refs": refs,
                                    "objects": [{"kind": "ConfigMap", "name": "overrides", "data": overrides}]})
    assert values == flux["values"] == {"replicas": 1, "image": {"repository": "web", "tag": "from-configmap"}}
