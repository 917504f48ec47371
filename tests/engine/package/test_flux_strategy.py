"""``spec.install.strategy`` and ``spec.upgrade.strategy`` read as Flux's helm-controller v1.6.3 reads them (issue 34,
behaviour 3): api/v2 helmrelease_types.go, InstallStrategy and UpgradeStrategy (``name`` required, one of
RemediateOnFailure and RetryOnFailure; ``retryInterval`` only beside RetryOnFailure, the CRD's XValidation rule),
``GetRetry(false)`` and ``GetRetryInterval`` (5m when unset). The getters are compared with Flux's own code in
test_flux_oracle.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.base.fields import PackageError
from engine.package.load import load_folder, load_package

RELEASE = """apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: web, namespace: apps}
spec:
  interval: 10m
  chart:
    spec: {chart: web, sourceRef: {kind: HelmRepository, name: charts}}
"""
REPO = """apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmRepository
metadata: {name: charts, namespace: apps}
spec: {interval: 5m, url: https://charts.example.com}
"""


def release(tmp_path: Path, spec: str) -> Path:
    path = tmp_path / "release.yaml"
    path.write_text(REPO + "---\n" + RELEASE + spec)
    return path


def test_a_helm_release_with_strategies_loads_without_allow_unsupported(tmp_path: Path) -> None:
    release(tmp_path, "  install:\n    strategy: {name: RetryOnFailure}\n"
                      "  upgrade:\n    strategy: {name: RetryOnFailure, retryInterval: 2m30s}\n")
    loaded = load_folder(tmp_path)
    assert loaded.errors == [] and not loaded.left_out
    [spec] = loaded.specs
    assert (spec.install.on_failure, spec.install.retry) == ("RetryOnFailure", 300.0)  # Flux's 5m default
    assert (spec.upgrade.on_failure, spec.upgrade.retry) == ("RetryOnFailure", 150.0)


def test_no_strategy_or_remediate_on_failure_has_no_retry(tmp_path: Path) -> None:
    release(tmp_path, "  upgrade:\n    strategy: {name: RemediateOnFailure}\n")
    [spec] = load_folder(tmp_path).specs
    assert (spec.install.on_failure, spec.install.retry) == ("RemediateOnFailure", None)
    assert (spec.upgrade.on_failure, spec.upgrade.retry) == ("RemediateOnFailure", None)


@pytest.mark.parametrize(("section", "field", "problem"), [
    ("install:\n    strategy: {name: RemediateOnFailure, retryInterval: 1m}", "spec.install.strategy.retryInterval",
     "cannot be set when spec.install.strategy.name is RemediateOnFailure"),
    ("upgrade:\n    strategy: {retryInterval: 1m}", "spec.upgrade.strategy.name", "is required"),
    ("upgrade:\n    strategy: {name: RetryForever}", "spec.upgrade.strategy.name", "unknown value 'RetryForever'"),
    ("install:\n    strategy: {name: RetryOnFailure, retryInterval: soon}", "spec.install.strategy.retryInterval",
     "'soon' is not a duration"),
    ("install:\n    strategy: {name: RetryOnFailure, interval: 1m}", "spec.install.strategy.interval",
     "unknown field"),
])
def test_what_fluxs_crd_refuses_is_refused(tmp_path: Path, section: str, field: str, problem: str) -> None:
    path = release(tmp_path, f"  {section}\n")
    [err] = load_folder(tmp_path).errors
    assert (err.file, err.field, err.problem) == (path, field, problem), err
    assert err.line == len(path.read_text().splitlines())  # the strategy's line


def test_a_package_reads_the_same_strategy(tmp_path: Path) -> None:
    """The Package kind has the same fields and meaning (docs/flux-differences.md lists no difference)."""
    path = tmp_path / "app.yaml"
    path.write_text("apiVersion: helmdeck.dev/v1alpha1\nkind: Package\nmetadata: {name: app, namespace: ns}\n"
                    "spec:\n  chart: chart\n  install:\n    strategy: {name: RetryOnFailure, retryInterval: 45s}\n")
    (tmp_path / "chart").mkdir()
    (tmp_path / "chart" / "Chart.yaml").write_text("apiVersion: v2\nname: chart\nversion: 1.0.0\n")
    spec = load_package(path)
    assert (spec.install.retry, spec.upgrade.retry) == (45.0, None)
    path.write_text(path.read_text().replace("RetryOnFailure", "RemediateOnFailure"))
    with pytest.raises(PackageError, match="retryInterval: cannot be set"):
        load_package(path)
