"""Files of many objects: Packages, sources and other kinds in any number per file, as a Flux repository
holds them; other kinds skipped in one line; names and kinds matched whole; limit errors worded once."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.base.fields import PackageError
from engine.package.documents import skipped_line
from engine.package.load import load_folder, load_package
from engine.resolve.release import ResolveCache, resolve

CHART = Path(__file__).resolve().parents[3] / "examples" / "charts" / "settings"


def package(name: str, extra: str = "") -> str:
    return (f"apiVersion: helmdeck.dev/v1alpha1\nkind: Package\nmetadata: {{name: {name}, namespace: team}}\n"
            f"spec:\n  chart: {CHART}\n{extra}")


NAMESPACE = "apiVersion: v1\nkind: Namespace\nmetadata: {name: team}\n"
KUSTOMIZATION = ("apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: apps}\n"
                 "spec: {path: ./apps, prune: true}\n")
SECRET = "apiVersion: v1\nkind: Secret\nmetadata: {name: token}\nstringData: {token: hunter2}\n"
REPO = ("apiVersion: helmdeck.dev/v1alpha1\nkind: HelmRepository\nmetadata: {name: charts, namespace: team}\n"
        "spec: {url: https://charts.example.com}\n")


def test_a_file_mixing_packages_sources_and_other_kinds(tmp_path: Path) -> None:
    docs = [NAMESPACE, package("web"), REPO, SECRET, package("api"), KUSTOMIZATION, NAMESPACE.replace("team", "b")]
    (tmp_path / "all.yaml").write_text("---\n".join(docs))
    (tmp_path / "more.yml").write_text(NAMESPACE + "---\n" + package("db"))
    loaded = load_folder(tmp_path)
    assert loaded.errors == []
    assert sorted(s.name for s in loaded.specs) == ["api", "db", "web"]
    assert {s.name: s.document for s in loaded.specs} == {"web": 1, "api": 4, "db": 1}
    assert loaded.skipped_line() == ("skipped 5 objects helmdeck does not read: Kustomization (1), Namespace (3), "
                                     "Secret (1)")
    assert "hunter2" not in loaded.skipped_line()


def test_the_skipped_line_is_empty_without_other_kinds() -> None:
    assert skipped_line([]) == ""
    assert skipped_line(["Namespace"]) == "skipped 1 object helmdeck does not read: Namespace (1)"


def test_a_bad_document_names_its_line_and_leaves_the_others(tmp_path: Path) -> None:
    bad = package("bad", "  timeout: soon\n")
    text = package("web") + "---\n" + bad + "---\n" + package("api")
    (tmp_path / "three.yaml").write_text(text)
    loaded = load_folder(tmp_path)
    assert sorted(s.name for s in loaded.specs) == ["api", "web"]
    [err] = loaded.errors
    assert err.field == "spec.timeout" and err.line == text.splitlines().index("  timeout: soon") + 1


@pytest.mark.parametrize("name", ["web\n", "web\\n", "Web", "-web", "web-"])
def test_names_are_matched_whole(tmp_path: Path, name: str) -> None:
    # A double-quoted YAML "web\n" is the name with a trailing newline: "$" alone would let it through.
    path = tmp_path / "p.yaml"
    path.write_text(package("web").replace("name: web,", f'name: "{name}",'))
    with pytest.raises(PackageError, match="is not a valid Kubernetes name") as caught:
        load_package(path)
    assert caught.value.field == "metadata.name"


def test_release_and_target_namespace_names_are_matched_whole(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(package("web", '  releaseName: "web\\n"\n'))
    with pytest.raises(PackageError, match="not a valid release name"):
        load_package(path)
    path.write_text(package("web", '  targetNamespace: "apps\\n"\n'))
    with pytest.raises(PackageError, match="not a valid namespace name"):
        load_package(path)


@pytest.mark.parametrize("kind", ['"Package\\n"', "5", "package", '""'])
def test_kinds_are_matched_whole(tmp_path: Path, kind: str) -> None:
    text = package("web") + "---\n" + f"apiVersion: v1\nkind: {kind}\nmetadata: {{name: x}}\n"
    (tmp_path / "p.yaml").write_text(text)
    loaded = load_folder(tmp_path)
    assert [s.name for s in loaded.specs] == ["web"] and loaded.skipped == ()
    [err] = loaded.errors
    assert err.field == "kind" and "is not a Kubernetes kind" in str(err) and err.line == len(
        package("web").splitlines()) + 3


def test_a_document_that_is_not_an_object_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "values.yaml").write_text(package("web") + "---\nimage: {tag: '1.0'}\n")
    loaded = load_folder(tmp_path)
    [err] = loaded.errors
    assert "no apiVersion or kind" in str(err) and "values files must live outside" in str(err)
    assert [s.name for s in loaded.specs] == ["web"]


def test_the_number_of_documents_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELMDECK_MAX_DOCUMENTS", "3")
    (tmp_path / "many.yaml").write_text("---\n".join([NAMESPACE] * 4))
    [err] = load_folder(tmp_path).errors
    assert str(err).count("more than 3 documents") == 1 and "HELMDECK_MAX_DOCUMENTS" in str(err)
    # with an anchor the file is checked on its events before composing: the same bound, the same words
    (tmp_path / "many.yaml").write_text("---\n".join([NAMESPACE.replace("team", "&a team")] * 4))
    [err] = load_folder(tmp_path).errors
    assert "more than 3 documents" in str(err) and "HELMDECK_MAX_DOCUMENTS" in str(err)
    (tmp_path / "many.yaml").write_text("---\n".join([NAMESPACE] * 3))
    assert load_folder(tmp_path).errors == []


def test_a_too_deep_values_file_is_worded_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "values").mkdir()
    deep = tmp_path / "values" / "deep.yaml"
    deep.write_text("a: " + "[" * 100 + "]" * 100 + "\n")
    (tmp_path / "p.yaml").write_text(package("web", "  valuesFiles: [values/deep.yaml]\n"))
    spec = load_package(tmp_path / "p.yaml")
    with pytest.raises(PackageError) as caught:
        resolve(spec, cache=ResolveCache())
    text = str(caught.value)
    assert text.count("flatten the structure") == 1, text
    assert "nesting deeper than 64 levels" in text and "HELMDECK_MAX_YAML_DEPTH" in text and str(deep) in text
    monkeypatch.setenv("HELMDECK_MAX_YAML_DEPTH", "200")  # the variable the error names raises the limit
    deep.write_text(deep.read_text() + "\n")  # a new stat signature: parsed again
    value, depth = resolve(spec, cache=ResolveCache()).values["a"], 0
    while isinstance(value, list) and value:
        value, depth = value[0], depth + 1
    assert depth == 99  # 100 lists, the innermost empty


def test_a_too_deep_package_file_names_the_limit_and_its_variable(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(package("web", "  values:\n    a: " + "[" * 100 + "]" * 100 + "\n"))
    with pytest.raises(PackageError) as caught:
        load_package(path)
    text = str(caught.value)
    assert text.count("flatten the structure") == 1 and "HELMDECK_MAX_YAML_DEPTH" in text
    assert "nesting deeper than 64 levels" in text and caught.value.line == 7  # the line of "a:"
