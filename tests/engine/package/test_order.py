"""Unit tests of package ordering (engine.package.order): dependsOn parsing, load-time checks, the DAG."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.base.fields import PackageError
from engine.package.load import load_package, load_packages
from engine.package.order import dependency_order, find_cycles, removal_order, topological

CHART = Path(__file__).resolve().parents[3] / "examples" / "charts" / "settings"


def write(tmp_path: Path, name: str, deps: str = "", namespace: str = "ns") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"apiVersion: helmdeck.dev/v1alpha1\nkind: Package\nmetadata:\n  name: {name}\n"
                    f"  namespace: {namespace}\nspec:\n  chart: {CHART}\n{deps}")
    return path


def dep(*names: str) -> str:
    return "  dependsOn:\n" + "".join(f"    - name: {n}\n" for n in names)


def test_topological_order_puts_dependencies_first_and_breaks_ties_by_name() -> None:
    graph = {("n", "app"): [("n", "db"), ("n", "cache")], ("n", "db"): [("n", "crds")],
             ("n", "cache"): [], ("n", "crds"): [], ("n", "zz"): []}
    order = topological(graph, lambda n: graph[n])
    assert order == [("n", "cache"), ("n", "crds"), ("n", "db"), ("n", "app"), ("n", "zz")]
    for node, deps in graph.items():
        assert all(order.index(d) < order.index(node) for d in deps)


def test_topological_refuses_a_cycle_naming_its_members() -> None:
    graph = {("n", "a"): [("n", "b")], ("n", "b"): [("n", "a")], ("n", "c"): []}
    with pytest.raises(ValueError, match="n/a, n/b"):
        topological(graph, lambda n: graph[n])


def test_find_cycles_gives_each_cycle_as_a_path() -> None:
    graph = {("n", "a"): [("n", "b")], ("n", "b"): [("n", "c")], ("n", "c"): [("n", "a")],
             ("n", "d"): [("n", "a")], ("n", "x"): [("n", "y")], ("n", "y"): [("n", "x")]}
    assert find_cycles(graph) == [[("n", "a"), ("n", "b"), ("n", "c")], [("n", "x"), ("n", "y")]]
    assert find_cycles({("n", "a"): [("n", "b")], ("n", "b"): []}) == []


def test_depends_on_parsed_with_the_package_namespace_as_default(tmp_path: Path) -> None:
    spec = load_package(write(tmp_path, "web", "  dependsOn:\n    - name: base\n    - name: db\n"
                                              "      namespace: data\n"))
    assert [(d.namespace, d.name, d.line) for d in spec.depends_on] == [("ns", "base", 9), ("data", "db", 10)]


@pytest.mark.parametrize(("deps", "field"), [
    ("  dependsOn: base\n", "spec.dependsOn"),
    ("  dependsOn:\n    - base\n", "spec.dependsOn[0]"),
    ("  dependsOn:\n    - name: base\n      kind: HelmRelease\n", "spec.dependsOn[0].kind"),
    ("  dependsOn:\n    - namespace: ns\n", "spec.dependsOn[0].name"),
    ("  dependsOn:\n    - name: web\n", "spec.dependsOn[0]"),
])
def test_bad_depends_on_names_the_field(tmp_path: Path, deps: str, field: str) -> None:
    with pytest.raises(PackageError) as info:
        load_package(write(tmp_path, "web", deps))
    assert info.value.field == field and info.value.line is not None


def test_a_reference_to_no_package_is_not_refused(tmp_path: Path) -> None:
    # It waits for it at pass time (DependencyNotReady), as helm-controller's checkDependencies
    # (internal/controller/helmrelease_controller.go) waits for a dependency it cannot get.
    write(tmp_path, "web", dep("base"))
    write(tmp_path, "other")
    specs, errors = load_packages(tmp_path)
    assert sorted(s.name for s in specs) == ["other", "web"] and errors == []


def test_cycle_is_refused_naming_every_member_and_holding_its_dependents(tmp_path: Path) -> None:
    write(tmp_path, "a", dep("b"))
    write(tmp_path, "b", dep("c"))
    write(tmp_path, "c", dep("a"))
    write(tmp_path, "d", dep("a"))
    write(tmp_path, "free")
    specs, errors = load_packages(tmp_path)
    assert [s.name for s in specs] == ["free"]
    text = "\n".join(str(e) for e in errors)
    for name in ("a", "b", "c"):
        assert f"{name}.yaml:9: spec.dependsOn[0]: dependency cycle: ns/a (a.yaml:9) -> ns/b (b.yaml:9) -> " \
               "ns/c (c.yaml:9)" in text
    assert "d.yaml:9: spec.dependsOn[0]: depends on ns/a, which is refused" in text


def test_dependency_order_of_loaded_packages(tmp_path: Path) -> None:
    write(tmp_path, "app", dep("db", "cache"))
    write(tmp_path, "db", "  dependsOn:\n    - name: crds\n      namespace: infra\n")
    write(tmp_path, "cache")
    write(tmp_path, "crds", namespace="infra")
    specs, errors = load_packages(tmp_path)
    assert errors == []
    assert [s.name for s in dependency_order(specs)] == ["crds", "cache", "db", "app"]
    assert [s.name for s in reversed(dependency_order(specs))] == ["app", "db", "cache", "crds"]


def test_the_overview_says_what_a_package_waits_for(tmp_path: Path) -> None:
    from engine.reconcile.conditions import Condition
    from engine.runtime.state import ReleaseView
    from tui.widgets.overview import overview_content

    write(tmp_path, "base")
    write(tmp_path, "web", dep("base"))
    specs, _ = load_packages(tmp_path)
    web = next(s for s in specs if s.name == "web")
    held = Condition("Ready", "False", "DependencyNotReady", "waiting for ns/base (not reconciled yet)")
    text = str(overview_content(ReleaseView("ns", "web", package=web, ready=False, conditions=(held,)), [], 0.0))
    assert "Depends on   ns/base   waiting for ns/base (not reconciled yet)" in text
    ready = Condition("Ready", "True", "InstallSucceeded", "installed")
    text = str(overview_content(ReleaseView("ns", "web", package=web, ready=True, conditions=(ready,)), [], 0.0))
    assert "Depends on   ns/base\n" in text


def test_removal_order_puts_dependents_before_their_dependencies() -> None:
    packages = {("ns", "a-app"): "ns/a-app", ("ns", "m-db"): "ns/m-db", ("ns", "z-base"): "ns/z-base",
                ("other", "free"): ""}
    depends = {("ns", "a-app"): ("ns/z-base",), ("ns", "m-db"): ("ns/a-app", "gone/pkg")}
    order = removal_order(packages, packages.__getitem__, lambda k: depends.get(k, ()))
    assert order.index(("ns", "m-db")) < order.index(("ns", "a-app")) < order.index(("ns", "z-base"))
    assert sorted(order) == sorted(packages)
