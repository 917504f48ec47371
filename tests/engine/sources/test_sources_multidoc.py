"""Package files holding several documents: a Package with its HelmRepository / OCIRepository in one file.
Errors still name the file, line and field; the size and alias bounds hold for the whole file."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.base.fields import PackageError
from engine.base.loader import Limits, YamlLimitError, parse_documents
from engine.package.load import load_package, load_packages
from engine.sources.repository import HelmRepositorySpec

HEAD = "apiVersion: helmdeck.dev/v1alpha1\n"
REPO = HEAD + "kind: HelmRepository\nmetadata: {name: charts, namespace: team}\nspec:\n  url: https://charts.example.com\n"
PACKAGE = (HEAD + "kind: Package\nmetadata: {name: web, namespace: team}\nspec:\n  chart:\n    spec:\n"
           "      chart: web\n      version: '^1.0'\n      sourceRef: {kind: HelmRepository, name: charts}\n")


def test_a_file_with_a_helm_repository_and_its_package(tmp_path: Path) -> None:
    (tmp_path / "web.yaml").write_text(REPO + "---\n" + PACKAGE)
    specs, errors = load_packages(tmp_path)
    assert errors == []
    [web] = specs
    assert web.name == "web" and web.chart_request is not None
    source = web.chart_request.source
    assert isinstance(source, HelmRepositorySpec) and source.url == "https://charts.example.com"
    assert (web.chart_request.chart, web.chart_request.version) == ("web", "^1.0")
    assert load_package(tmp_path / "web.yaml").name == "web"  # the Package of the file, past its source


def test_a_file_with_only_sources_declares_no_package(tmp_path: Path) -> None:
    (tmp_path / "sources.yaml").write_text(REPO + "---\n" + REPO.replace("charts", "more"))
    (tmp_path / "web.yaml").write_text(PACKAGE.replace("name: charts", "name: more"))
    specs, errors = load_packages(tmp_path)
    assert errors == [] and [s.name for s in specs] == ["web"]
    assert specs[0].chart_request is not None and specs[0].chart_request.source.name == "more"


def test_errors_name_the_line_inside_the_file(tmp_path: Path) -> None:
    bad_repo = REPO.replace("url: https://charts.example.com", "url: ftp://charts.example.com")
    (tmp_path / "web.yaml").write_text(PACKAGE + "---\n" + bad_repo)
    _, errors = load_packages(tmp_path)
    [err] = [e for e in errors if e.field == "spec.url"]
    assert err.file == tmp_path / "web.yaml" and err.line == (PACKAGE + "---\n" + bad_repo).splitlines().index(
        "  url: ftp://charts.example.com") + 1
    bad_pkg = PACKAGE.replace("version: '^1.0'", "version: [1]")
    (tmp_path / "web.yaml").write_text(REPO + "---\n" + bad_pkg)
    with pytest.raises(PackageError) as caught:
        load_package(tmp_path / "web.yaml")
    assert caught.value.field == "spec.chart.spec.version"
    assert caught.value.line == (REPO + "---\n" + bad_pkg).splitlines().index("      version: [1]") + 1


def test_two_packages_in_one_file_both_load(tmp_path: Path) -> None:
    text = PACKAGE + "---\n" + REPO + "---\n" + PACKAGE.replace("name: web,", "name: api,")
    (tmp_path / "two.yaml").write_text(text)
    specs, errors = load_packages(tmp_path)
    assert errors == [] and sorted(s.name for s in specs) == ["api", "web"]
    assert {s.name: s.document for s in specs} == {"web": 0, "api": 2}
    assert all(s.chart_request is not None and s.chart_request.source.name == "charts" for s in specs)


def test_bounds_apply_to_the_whole_file(tmp_path: Path) -> None:
    limits = Limits(max_bytes=1 << 20, max_nodes=50)
    doc = "a: [" + ", ".join(["x"] * 20) + "]\n"
    assert len(parse_documents(doc, tmp_path / "f.yaml", limits)) == 1  # one document fits
    with pytest.raises(YamlLimitError, match="more than 50 nodes"):
        parse_documents(doc + "---\n" + doc + "---\n" + doc, tmp_path / "f.yaml", limits)
    laughs = "a: &a [x, x, x, x, x, x, x, x]\nb: [*a, *a, *a]\n"
    parse_documents(laughs, tmp_path / "f.yaml", limits)
    with pytest.raises(YamlLimitError, match="aliases expand past 50 nodes"):
        parse_documents(laughs + "---\n" + laughs, tmp_path / "f.yaml", limits)
