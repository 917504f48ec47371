"""``--kustomize DIR`` over a generated Flux repository: N HelmReleases (default 1,000) in ``apps/base``, a
``clusters/prod`` overlay patching one of them, every object holding a ``${cluster_name}`` reference.

In one run, against ``kustomize build`` of the same path alone (the floor: helmdeck runs it once per change):

- first load (build, substitution, one file per object written, the package loader over them);
- a reload after one object's values changed (one build; only that object's file rewritten and read again);
- a reload with nothing changed;

then the ratios to the bare build, and what the loader parsed (files). Run:
``python -m bench.kustomize_load [--releases 1000] [--repeat 5]`` (needs ``make build`` for kustomize).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from engine.base import tools
from engine.base.loader import CACHE
from engine.package.substitute import variables
from engine.runtime.drive.kustomized import KustomizeInput, KustomizeSource


def generate(root: Path, releases: int) -> Path:
    """The repository; returns the overlay path."""
    base = root / "apps" / "base"
    base.mkdir(parents=True)
    names = [f"app-{i:05d}.yaml" for i in range(releases)]
    (base / "kustomization.yaml").write_text("resources:\n- sources.yaml\n" + "".join(f"- {n}\n" for n in names))
    (base / "sources.yaml").write_text("apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\n"
                                       "metadata: {name: charts, namespace: apps}\n"
                                       "spec: {interval: 10m, url: 'https://charts.example.com'}\n")
    for i, name in enumerate(names):
        (base / name).write_text(
            f"apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {{name: app-{i}, namespace: apps}}\n"
            "spec:\n  interval: 10m\n  chart:\n    spec: {chart: web, version: '1.x', "
            "sourceRef: {kind: HelmRepository, name: charts}}\n"
            "  values:\n    cluster: ${cluster_name}\n    replicas: ${replicas:=1}\n"
            f"    index: {i}\n")
    prod = root / "clusters" / "prod"
    prod.mkdir(parents=True)
    (prod / "kustomization.yaml").write_text("resources: [../../apps/base]\npatches:\n- path: patch.yaml\n")
    (prod / "patch.yaml").write_text("apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\n"
                                     "metadata: {name: app-0, namespace: apps}\nspec: {values: {replicas: 3}}\n")
    return prod


def timed(run: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--releases", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        prod = generate(Path(tmp), args.releases)
        bare = timed(lambda: subprocess.run([str(tools.kustomize()), "build", "--load-restrictor",
                                             "LoadRestrictionsNone", str(prod)], capture_output=True, check=True),
                     args.repeat)
        source = KustomizeSource(prod, variables([("cluster_name", "prod")], "--var"))
        start = time.perf_counter()
        kin = KustomizeInput(source, None, lambda _: None)
        first = kin.load()
        first_s = time.perf_counter() - start
        assert not first.errors and len(first.specs) == args.releases, first.errors[:3]
        patch = prod / "patch.yaml"
        replicas = iter(range(4, 10_000))

        def one_change() -> object:
            patch.write_text("apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: app-0, "
                             f"namespace: apps}}\nspec: {{values: {{replicas: {next(replicas)}}}}}\n")
            parses = CACHE.parses
            update = kin.load(set())
            assert update.changed == {("apps", "app-0")}, update.changed
            one_change.parsed = CACHE.parses - parses  # type: ignore[attr-defined]
            return update

        changed = timed(one_change, args.repeat)
        parses = CACHE.parses
        unchanged = timed(lambda: kin.load(set()), args.repeat)
        unchanged_parsed = (CACHE.parses - parses) / args.repeat
    print(f"releases: {args.releases} (+1 HelmRepository), median of {args.repeat}")
    print(f"kustomize build alone:        {bare * 1000:8.0f} ms")
    print(f"first load:                   {first_s * 1000:8.0f} ms  ({first_s / bare:.1f}x the build)")
    print(f"reload, one object changed:   {changed * 1000:8.0f} ms  ({changed / bare:.1f}x the build; "
          f"{one_change.parsed} file parsed)")  # type: ignore[attr-defined]
    print(f"reload, nothing changed:      {unchanged * 1000:8.0f} ms  ({unchanged / bare:.1f}x the build; "
          f"{unchanged_parsed:.0f} files parsed)")


if __name__ == "__main__":
    main()
