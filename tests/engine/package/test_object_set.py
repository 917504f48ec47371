"""The incremental object set (engine.package.object_set) gives the whole set's verdicts (load_objects) after
any sequence of changes, while loading only the objects that changed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine.package.load import load_objects, object_document
from engine.package.model import PackageSpec
from engine.package.object_set import ObjectSet
from testkit.packages import package_doc

NAMES = ["a", "b", "c", "d"]


def _package(name: str, *, source: str = "web", release: str = "", depends: tuple[str, ...] = (),
             bad: bool = False, values: int = 0) -> dict[str, Any]:
    spec: dict[str, Any] = {"chartRef": {"kind": "OCIRepository", "name": source}, "values": {"v": values}}
    if release:
        spec["releaseName"] = release
    if depends:
        spec["dependsOn"] = [{"name": d} for d in depends]
    if bad:
        spec["interval"] = "soon"
    return package_doc(name, "apps", metadata={"resourceVersion": "1"}, **spec)


def _source(name: str, *, semver: str = "^1.0", bad: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"url": f"oci://registry.example.com/charts/{name}", "ref": {"semver": semver}}
    if bad:
        spec["interval"] = "never"
    return {"apiVersion": "helmdeck.dev/v1alpha1", "kind": "OCIRepository",
            "metadata": {"name": name, "namespace": "apps"}, "spec": spec}


def _origin(obj: dict[str, Any]) -> Path:
    return object_document(obj)[0]


rarely = st.sampled_from([False, False, False, True])  # mostly valid objects: the set checks then matter
packages = st.builds(
    _package, st.sampled_from(NAMES), source=st.sampled_from(["web", "web", "other"]),
    release=st.sampled_from(["", "", "shared"]),
    depends=st.one_of(st.just(()), st.lists(st.sampled_from(NAMES), max_size=2).map(tuple)),
    bad=rarely, values=st.integers(0, 2))
sources = st.builds(_source, st.sampled_from(["web", "other"]), semver=st.sampled_from(["^1.0", "^2.0"]),
                    bad=rarely)
changes = st.lists(st.one_of(
    st.tuples(st.just("package"), packages), st.tuples(st.just("source"), sources),
    st.tuples(st.just("delete-package"), st.sampled_from(NAMES)),
    st.tuples(st.just("delete-source"), st.sampled_from(["web", "other"]))), min_size=1, max_size=16)


@settings(max_examples=300, deadline=None)
@given(changes)
# Two packages on one release: one leaves the key, or turns bad through its source; the other is alone again.
@example([("package", _package("a", release="shared")), ("package", _package("b", release="shared")),
          ("package", _package("a"))])
@example([("package", _package("a", release="shared")), ("package", _package("b", release="shared", source="other")),
          ("delete-source", "web")])
# A chain: removing its base refuses the whole chain.
@example([("package", _package("a")), ("package", _package("b", depends=("a",))),
          ("package", _package("c", depends=("b",))), ("delete-package", "a")])
def test_after_any_changes_the_verdicts_are_the_whole_sets(steps: list[tuple[str, Any]]) -> None:
    objects: dict[Path, dict[str, Any]] = {}
    srcs = {_origin(s): s for s in (_source("web"), _source("other"))}
    verdicts: dict[Path, Any] = {}
    source_errors: dict[Path, Any] = {}
    incremental = ObjectSet()
    incremental.update({}, srcs)
    for what, arg in steps:
        if what == "package":
            objects[_origin(arg)] = arg
            checked = incremental.update({_origin(arg): arg})
        elif what == "source":
            srcs[_origin(arg)] = arg
            checked = incremental.update({}, {_origin(arg): arg})
        elif what == "delete-package":
            origin = _origin(_package(arg))
            objects.pop(origin, None)
            checked = incremental.update({origin: None})
        else:
            origin = _origin(_source(arg))
            srcs.pop(origin, None)
            checked = incremental.update({}, {origin: None})
        for origin, verdict in checked.packages.items():
            if verdict is None:
                verdicts.pop(origin, None)
            else:
                verdicts[origin] = verdict
        source_errors.update(checked.sources)
        specs, errors = load_objects(list(objects.values()), list(srcs.values()))
        assert {s.file: s for s in specs} == {o: v for o, v in verdicts.items() if isinstance(v, PackageSpec)}
        said = [str(e) for v in verdicts.values() if isinstance(v, tuple) for e in v]
        said += [str(e) for v in source_errors.values() for e in v]
        assert sorted(said) == sorted(str(e) for e in errors)


def test_one_changed_object_is_loaded_once_and_an_unchanged_one_not_at_all(package_loads: list[str]) -> None:
    everything = {_origin(p): p for p in (_package(f"p{i}") for i in range(200))}
    incremental = ObjectSet()
    incremental.update(everything, {_origin(_source("web")): _source("web")})
    assert len(package_loads) == 200
    package_loads.clear()
    one = _package("p7", values=1)
    checked = incremental.update({_origin(one): one})
    assert package_loads == ["p7"] and list(checked.packages) == [_origin(one)]
    status_only = {**one, "metadata": {**one["metadata"], "resourceVersion": "2"}, "status": {"x": 1}}
    assert incremental.update({_origin(one): status_only}).packages == {}
    assert package_loads == ["p7"]


def test_a_source_change_rechecks_exactly_the_packages_that_use_it(package_loads: list[str]) -> None:
    web = [_package(f"w{i}") for i in range(5)]
    other = [_package(f"o{i}", source="other") for i in range(50)]
    incremental = ObjectSet()
    incremental.update({_origin(p): p for p in web + other},
                       {_origin(_source(s)): _source(s) for s in ("web", "other")})
    package_loads.clear()
    checked = incremental.update({}, {_origin(_source("web")): _source("web", semver="^2.0")})
    assert package_loads == []  # the packages are linked again, not loaded again
    assert set(checked.packages) == {_origin(p) for p in web}
    for verdict in checked.packages.values():
        assert isinstance(verdict, PackageSpec) and verdict.chart_request is not None
        assert "^2.0" in str(verdict.chart_request.source)


def test_a_change_reaches_the_packages_that_depend_on_it_and_no_others(package_loads: list[str]) -> None:
    chain = [_package("base"), _package("mid", depends=("base",)), _package("top", depends=("mid",)),
             _package("alone")]
    incremental = ObjectSet()
    incremental.update({_origin(p): p for p in chain}, {_origin(_source("web")): _source("web")})
    checked = incremental.update({_origin(_package("base")): None})
    assert set(checked.packages) == {_origin(p) for p in chain[:3]}
    assert checked.packages[_origin(chain[0])] is None
    mid = checked.packages[_origin(chain[1])]
    # checked again, and kept: it waits for base (DependencyNotReady), as Flux's checkDependencies does
    assert isinstance(mid, PackageSpec) and mid.depends_on[0].id == ("apps", "base")
