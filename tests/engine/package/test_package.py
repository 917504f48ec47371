"""Unit tests of package file loading: every error names file, field and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.base.fields import PackageError, parse_duration
from engine.package.load import load_package, load_packages
from engine.package.model import shorten_release_name
from engine.resolve.release import resolve
from engine.resolve.values import deep_merge
from engine.sources.chart import load_chart

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
CHART = EXAMPLES / "charts" / "settings"


def write(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(body)
    return path


def pkg(chart: Path = CHART, spec: str = "", name: str = "app") -> str:
    return (f"apiVersion: helmdeck.dev/v1alpha1\nkind: Package\nmetadata:\n  name: {name}\n  namespace: ns\n"
            f"spec:\n  chart: {chart}\n{spec}")


def test_examples_load() -> None:
    specs, errors = load_packages(EXAMPLES / "packages")
    assert errors == []
    assert {s.name for s in specs} == {"settings", "web", "flaky"}
    web = next(s for s in specs if s.name == "web")
    assert web.timeout == 120.0
    assert resolve(web).values == {"image": {"tag": "1.27.3"}, "replicas": 2}


def test_unknown_field_names_file_field_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", pkg(spec="  valus: {a: 1}\n"))
    with pytest.raises(PackageError) as err:
        load_package(path)
    e = err.value
    assert (e.file, e.field, e.line) == (path, "spec.valus", 8)
    assert "unknown field" in str(e) and "values" in e.fix


def test_every_unknown_field_is_named_with_the_closest_known_one(tmp_path: Path) -> None:
    # As kubectl's strict field validation names each unknown field (not the first only), and a shell or git
    # suggests the closest command: one run shows every typo, each with its line and a suggestion.
    body = ("  valuesFile: [a.yaml]\n  install:\n    remediaton: {retries: 2}\n"
            "  upgrade: {remediation: {retrys: 2}}\n  dependsOn:\n    - {nmae: x}\n  zzz: 1\n")
    path = write(tmp_path, "a.yaml", pkg(spec=body))
    errors = load_packages(tmp_path)[1]
    assert [(e.file, e.line, e.field, e.problem) for e in errors] == [
        (path, 8, "spec.valuesFile", "unknown field"), (path, 10, "spec.install.remediaton", "unknown field"),
        (path, 11, "spec.upgrade.remediation.retrys", "unknown field"),
        (path, 13, "spec.dependsOn[0].nmae", "unknown field"), (path, 14, "spec.zzz", "unknown field")]
    assert [e.fix.split("?")[0] for e in errors[:4]] == [
        "did you mean valuesFiles", "did you mean remediation", "did you mean retries", "did you mean name"]
    assert errors[4].fix.startswith("allowed here: chart, ")  # nothing close: no guess
    with pytest.raises(PackageError) as caught:  # one package named: every field, one line each
        load_package(path)
    assert str(caught.value).splitlines() == [str(e) for e in errors]


def test_wrong_type(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", pkg(spec="  values: [1, 2]\n"))
    with pytest.raises(PackageError, match=r"spec\.values: must be a mapping, not a list"):
        load_package(path)


def test_bad_duration(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", pkg(spec="  timeout: soon\n"))
    with pytest.raises(PackageError, match=r"a\.yaml:8: spec\.timeout: 'soon' is not a duration"):
        load_package(path)


def test_missing_chart(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", pkg(chart=tmp_path / "nowhere"))
    with pytest.raises(PackageError, match=r"spec\.chart: no Chart\.yaml"):
        load_package(path)


def test_yaml_syntax_error_has_line(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", pkg(spec="  values: {a: [\n"))
    with pytest.raises(PackageError) as err:
        load_package(path)
    assert err.value.line is not None and "YAML error" in str(err.value)


def test_an_unclosed_quote_names_the_line_it_opens_on(tmp_path: Path) -> None:
    """A missing closing quote was reported only at the end of the file ("found unexpected end of stream"),
    lines below the mistake: the error also names the line the quoted string starts on."""
    path = write(tmp_path, "a.yaml", pkg(spec='  values:\n    message: "unterminated\n  timeout: 1m\n'))
    with pytest.raises(PackageError) as err:
        load_package(path)
    assert err.value.line == 11  # where libyaml met the end of the file
    assert "while scanning a quoted scalar that starts at line 9" in str(err.value)


def test_bad_maintenance_mode(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", pkg(spec="  maintenance: Sometimes\n"))
    with pytest.raises(PackageError, match="NoResourceReconciliation"):
        load_package(path)


def test_bad_file_does_not_stop_others_and_duplicates_are_reported(tmp_path: Path) -> None:
    write(tmp_path, "good.yaml", pkg(name="good"))
    write(tmp_path, "bad.yaml", "kind: [")
    write(tmp_path, "dup1.yaml", pkg(name="dup1", spec="  releaseName: same\n"))
    write(tmp_path, "dup2.yaml", pkg(name="dup2", spec="  releaseName: same\n"))
    specs, errors = load_packages(tmp_path)
    assert [s.name for s in specs] == ["good"]
    assert sorted(e.file.name for e in errors) == ["bad.yaml", "dup1.yaml", "dup2.yaml"]


def test_release_name_over_53_characters_is_an_error_when_explicit(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", pkg(spec=f"  releaseName: {'a' * 54}\n"))
    with pytest.raises(PackageError, match="at most 53"):
        load_package(path)


def test_shorten_release_name_as_flux() -> None:
    name = "a" * 60
    short = shorten_release_name(name)
    assert len(short) == 53 and short.startswith("a" * 40 + "-")
    assert shorten_release_name("short") == "short"


def test_durations() -> None:
    assert parse_duration("1m30s") == 90
    assert parse_duration("2h") == 7200
    assert parse_duration("500ms") == 0.5
    for bad in ("", "5", "m5", "5x", "1m 30s"):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_deep_merge_replaces_non_maps() -> None:
    assert deep_merge({"a": {"b": 1, "c": [1]}, "d": 1}, {"a": {"c": [2]}, "d": None}) == \
        {"a": {"b": 1, "c": [2]}, "d": None}


def test_chart_digest_changes_with_any_file(tmp_path: Path) -> None:
    chart = tmp_path / "c"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: c\nversion: 1.0.0\n")
    (chart / "templates" / "a.yaml").write_text("a: 1\n")
    first = load_chart(chart)
    (chart / "templates" / "a.yaml").write_text("a: 2\n")
    second = load_chart(chart)
    assert (first.name, first.version) == ("c", "1.0.0")
    assert first.digest != second.digest


FULL = """\
  interval: 1m
  maxHistory: 3
  suspend: true
  storageNamespace: ns
  install:
    createNamespace: true
    disableWaitForJobs: true
    remediation: {retries: -1}
  upgrade:
    force: true
    cleanupOnFail: true
    preserveValues: true
    remediation: {retries: 2, strategy: uninstall, remediateLastFailure: false}
  test:
    enable: true
    ignoreFailures: true
    timeout: 30s
    filters: [{name: smoke}, {name: slow, exclude: true}]
  rollback: {force: true, recreate: true, cleanupOnFail: true, disableWaitForJobs: true}
  uninstall: {keepHistory: true, disableHooks: true}
  driftDetection: {mode: warn}
"""


def test_every_flux_field(tmp_path: Path) -> None:
    spec = load_package(write(tmp_path, "a.yaml", pkg(spec=FULL)))
    assert (spec.interval, spec.max_history, spec.suspend, spec.storage_ns) == (60, 3, True, "ns")
    assert spec.install.create_namespace and spec.install.retries == -1
    assert not spec.install.remediate_last  # api/v2 InstallRemediation.MustRemediateLastFailure: false
    up = spec.upgrade
    assert (up.force, up.cleanup_on_fail, up.preserve_values, up.retries, up.strategy) == \
        (True, True, True, 2, "uninstall")
    assert up.remediate_last is False
    assert spec.test.enable and spec.test.ignore_failures and spec.test.timeout == 30
    assert spec.test.helm_filters() == ["name=smoke", "!name=slow"]
    assert spec.rollback.force and spec.rollback.recreate and spec.uninstall.keep_history
    assert spec.drift_detection == "warn"
    assert spec.install.disable_wait_for_jobs and spec.rollback.disable_wait_for_jobs
    assert not spec.upgrade.disable_wait_for_jobs


def test_flux_defaults(tmp_path: Path) -> None:
    spec = load_package(write(tmp_path, "a.yaml", pkg()))
    assert (spec.timeout, spec.interval, spec.max_history, spec.storage_ns) == (300, 600, 5, "ns")
    assert spec.upgrade.strategy == "rollback" and spec.upgrade.retries == 0 and not spec.upgrade.remediate_last
    assert spec.drift_detection == "disabled" and not spec.test.enable


@pytest.mark.parametrize(
    ("body", "field", "problem"),
    [
        ("  install: {createNamespace: yes-please}\n", "spec.install.createNamespace", "true or false"),
        ("  upgrade: {remediation: {retries: two}}\n", "spec.upgrade.remediation.retries", "integer"),
        ("  upgrade: {remediation: {strategy: pray}}\n", "spec.upgrade.remediation.strategy", "unknown value"),
        ("  test: {filters: [{exclude: true}]}\n", "spec.test.filters[0].name", "required"),
        ("  driftDetection: {mode: loud}\n", "spec.driftDetection.mode", "unknown value"),
        ("  rollback: {recreat: true}\n", "spec.rollback.recreat", "unknown field"),
        ("  maxHistory: -1\n", "spec.maxHistory", "negative"),
        ("  upgrade: {disableWaitForJobs: 1}\n", "spec.upgrade.disableWaitForJobs", "true or false"),
        # helm's CLI has no separate storage namespace: refused rather than silently ignored.
        ("  storageNamespace: elsewhere\n", "spec.storageNamespace", "stores a release in its own namespace"),
    ],
)
def test_nested_field_errors(tmp_path: Path, body: str, field: str, problem: str) -> None:
    with pytest.raises(PackageError) as err:
        load_package(write(tmp_path, "a.yaml", pkg(spec=body)))
    assert err.value.field == field and problem in str(err.value)
    assert err.value.line is not None


def test_hints_for_two_packages_in_one_file_and_a_values_file(tmp_path: Path) -> None:
    two = write(tmp_path, "two.yaml", pkg(name="a") + "---\n" + pkg(name="b"))
    with pytest.raises(PackageError, match="holds 2 Packages, not one") as caught:
        load_package(two)  # one file named for one package: say it has two, and how to name one
    assert "--packages" in str(caught.value)
    values = write(tmp_path, "values.yaml", "image:\n  tag: '1.0'\n")
    with pytest.raises(PackageError, match="values files must live outside the packages folder"):
        load_package(values)
