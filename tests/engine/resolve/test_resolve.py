"""The resolution stage and its bounded YAML loader: limits, caching, charts, helm options; fuzzed."""

from __future__ import annotations

import dataclasses
import os
import resource
import tarfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from engine.base import loader
from engine.base.fields import PackageError
from engine.package.load import load_package
from engine.package.model import PackageSpec
from engine.reconcile.options import install_options, rollback_options, upgrade_options
from engine.resolve.release import ResolveCache, resolve
from engine.sources.chart import load_chart

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
CHART = EXAMPLES / "charts" / "settings"
HEADER = ("apiVersion: helmdeck.dev/v1alpha1\nkind: Package\nmetadata:\n  name: app\n  namespace: ns\n"
          f"spec:\n  chart: {CHART}\n")


def bomb(levels: int = 9) -> str:
    lines = ['  values:\n    l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n']
    for i in range(1, levels):
        lines.append(f"    l{i}: &l{i} [{','.join([f'*l{i - 1}'] * 9)}]\n")
    return HEADER + "".join(lines)


def test_alias_bomb_is_refused_fast_naming_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(bomb())
    start = time.monotonic()
    with pytest.raises(PackageError) as err:
        load_package(path)
    assert time.monotonic() - start < 1.0
    assert f"aliases expand past {loader.package_limits().max_nodes} nodes" in str(err.value)
    assert err.value.file == path and err.value.line is not None and 8 <= err.value.line <= 16


def test_size_limits_name_the_file_the_limit_and_the_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    values = tmp_path / "big.yaml"
    values.write_text("a: " + "x" * 4096 + "\n")
    path = tmp_path / "app.yaml"
    path.write_text(HEADER + f"  valuesFiles: [{values}]\n")
    monkeypatch.setenv("HELMDECK_MAX_VALUES_BYTES", "1024")
    spec = load_package(path)
    with pytest.raises(PackageError) as err:
        resolve(spec, cache=ResolveCache())
    text = str(err.value)
    assert str(values) in text and "over the limit of 1024 bytes" in text and "HELMDECK_MAX_VALUES_BYTES" in text
    assert err.value.field == "spec.valuesFiles[0]"
    monkeypatch.setenv("HELMDECK_MAX_PACKAGE_BYTES", "64")
    with pytest.raises(PackageError, match="over the limit of 64 bytes"):
        load_package(path)


def test_deep_nesting_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text(HEADER + "  values:\n    a: " + "[" * 200 + "]" * 200 + "\n")
    with pytest.raises(PackageError, match="nesting deeper than 64 levels"):
        load_package(path)


def test_each_values_file_is_parsed_once_per_change(tmp_path: Path) -> None:
    values = tmp_path / "v.yaml"
    values.write_text("a: 1\nb: {c: 2}\n")
    path = tmp_path / "app.yaml"
    path.write_text(HEADER + f"  valuesFiles: [{values}]\n  values: {{b: {{d: 3}}}}\n")
    spec = load_package(path)
    cache = ResolveCache()
    first = resolve(spec, cache=cache)
    assert first.values == {"a": 1, "b": {"c": 2, "d": 3}}
    assert cache.last(spec) is first
    # Backdate the file so its stat signature is trusted (a file changed within 2 s is re-read).
    old = time.time() - 10
    os.utime(values, (old, old))
    parses = loader.CACHE.parses
    for _ in range(5):
        assert resolve(spec, cache=cache).spec_digest == first.spec_digest
    assert loader.CACHE.parses == parses + 1  # re-read once after the utime, then never
    values.write_text("a: 2\n")
    changed = resolve(spec, cache=cache)
    assert changed.spec_digest != first.spec_digest and changed.values["a"] == 2


def test_a_values_file_is_read_as_helm_reads_values_files(tmp_path: Path) -> None:
    # helm -f reads a file with ReadValues (sigs.k8s.io/yaml, go-yaml v2 rules: engine/base/helm_values.py), as
    # Flux reads a valuesFrom key: y is true, 0o17 is 15, 1e3 a number (the PyYAML reading kept them strings).
    values = tmp_path / "v.yaml"
    values.write_text("a: y\nb: 0o17\nc: 1e3\nd: 'y'\n")
    path = tmp_path / "app.yaml"
    path.write_text(HEADER + f"  valuesFiles: [{values}]\n")
    assert resolve(load_package(path), cache=ResolveCache()).values == {"a": True, "b": 15, "c": 1000.0, "d": "y"}


def test_spec_digest_covers_chart_values_and_post_render_settings(tmp_path: Path) -> None:
    spec = load_package(_write(tmp_path, HEADER + "  values: {a: 1}\n"))
    base = resolve(spec)
    assert len(base.spec_digest) == 32 and base.values_digest.startswith("sha256:")
    assert resolve(dataclasses.replace(spec, values_json='{"a": 2}')).spec_digest != base.spec_digest
    maint = resolve(dataclasses.replace(spec, maintenance="NoResourceReconciliation"))
    assert maint.spec_digest != base.spec_digest and dict(maint.post_render.stamp)["helmdeck.dev/maintenance"]
    assert resolve(dataclasses.replace(spec, timeout=5.0)).spec_digest == base.spec_digest  # not a render input


def test_packaged_chart(tmp_path: Path) -> None:
    tgz = tmp_path / "settings-0.1.0.tgz"  # as `helm package` lays it out: <name>/Chart.yaml ...
    with tarfile.open(tgz, "w:gz") as tar:
        tar.add(CHART, arcname=CHART.name)
    chart = load_chart(tgz)
    directory = load_chart(CHART)
    assert (chart.name, chart.version) == (directory.name, directory.version)
    assert chart.path == tgz and chart.digest.startswith("sha256:")
    spec = load_package(_write(tmp_path, HEADER.replace(str(CHART), str(tgz))))
    assert resolve(spec).chart.digest == chart.digest


def test_helm_options_wait_for_jobs_unless_disabled() -> None:
    spec = PackageSpec(Path("/p.yaml"), "app", "ns", CHART, "app")
    assert install_options(spec, labels={}, post_renderer=None).wait_for_jobs
    assert upgrade_options(spec, labels={}, post_renderer=None).wait_for_jobs
    assert rollback_options(spec).wait_for_jobs
    off = dataclasses.replace(spec, upgrade=dataclasses.replace(spec.upgrade, disable_wait_for_jobs=True),
                              install=dataclasses.replace(spec.install, disable_wait=True))
    assert not upgrade_options(off, labels={}, post_renderer=None).wait_for_jobs
    assert not install_options(off, labels={}, post_renderer=None).wait_for_jobs  # no --wait: no job wait


def _write(tmp_path: Path, text: str, name: str = "app.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# -- fuzz -------------------------------------------------------------------------------------------
_TOKENS = ["&a ", "&b ", "*a", "*b", "[", "]", "{", "}", ": ", ", ", "- ", "\n", "  ", "    ", "x", "values",
           "'q'", "\"q\"", "1", "1.5", "true", "null", "!!binary aGk=", "2024-01-01", "<<: *a", "? ", "|\n  t",
           "spec", "maintenance", "valuesFiles", "chart", "timeout: 5m", "~", "#c", "---\n", "%YAML 1.1\n"]

_SCALAR = hs.one_of(hs.integers(), hs.booleans(), hs.none(), hs.text(max_size=20), hs.floats(allow_nan=False),
                    hs.integers(1, 2_000_000).map(lambda n: "x" * n))  # huge scalars, some over the file limit


def _aliased(draw: hs.DrawFn) -> str:
    """A values block with anchors nested ``depth`` levels, each alias used ``fan`` times."""
    depth = draw(hs.integers(1, 12))
    fan = draw(hs.integers(1, 12))
    out = ["  values:\n    l0: &l0 '" + "y" * draw(hs.integers(0, 100_000)) + "'\n"]
    for i in range(1, depth):
        out.append(f"    l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * fan)}]\n")
    return "".join(out)


@hs.composite
def package_texts(draw: hs.DrawFn) -> str:
    kind = draw(hs.sampled_from(["tokens", "aliases", "typed", "deep"]))
    if kind == "tokens":
        return HEADER + "".join(draw(hs.lists(hs.sampled_from(_TOKENS), max_size=60)))
    if kind == "aliases":
        return HEADER + _aliased(draw)
    if kind == "deep":
        depth = draw(hs.integers(1, 3000))
        return HEADER + "  values:\n    a: " + "[" * depth + "]" * depth + "\n"
    field = draw(hs.sampled_from(["timeout", "maxHistory", "values", "valuesFiles", "suspend", "install",
                                  "test", "maintenance", "releaseName", "chart", "driftDetection"]))
    value = draw(hs.one_of(_SCALAR, hs.lists(_SCALAR, max_size=3), hs.dictionaries(hs.text(max_size=5), _SCALAR,
                                                                                    max_size=3)))
    return HEADER + f"  {field}: {value!r}\n"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=package_texts())
def test_fuzzed_package_files_load_or_fail_cleanly_within_bounds(tmp_path_factory: pytest.TempPathFactory,
                                                                 text: str) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "app.yaml"
    path.write_text(text)
    start = time.monotonic()
    try:
        spec = load_package(path)
    except PackageError as exc:
        assert str(exc).startswith(str(path))
    else:
        assert isinstance(spec, PackageSpec) and spec.name == "app"
    assert time.monotonic() - start < 2.0
    # Peak RSS of the whole test process (kilobytes on Linux): no expansion ever materialised.
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss < 600 * 1024
