"""Unit tests of helm's --set syntax as Flux's targetPath uses it (engine.base.strvals): paths, values
(commas, lists, escapes, types, quotes) and setting them."""

from __future__ import annotations

from typing import Any

import pytest

from engine.base.strvals import (
    MAX_INDEX,
    MAX_PADDING,
    PathError,
    format_path,
    parse_assignments,
    parse_path,
    set_in_place,
    target_assignments,
)


@pytest.mark.parametrize(("path", "segments"), [
    ("a", ("a",)),
    ("a.b.c", ("a", "b", "c")),
    ("a\\.b.c", ("a.b", "c")),
    ("hosts[0].name", ("hosts", 0, "name")),
    ("m[1][2]", ("m", 1, 2)),
    ("a[3]", ("a", 3)),
    ("x\\\\y", ("x\\y",)),
    ("annotations.kubernetes\\.io/ingress", ("annotations", "kubernetes.io/ingress")),
])
def test_parse_path(path: str, segments: tuple[object, ...]) -> None:
    assert parse_path(path) == segments
    assert parse_path(format_path(parse_path(path))) == segments


@pytest.mark.parametrize(("path", "problem"), [
    ("", "empty"),
    ("a.", "ends with '.'"),
    (".a", "empty key"),
    ("a..b", "empty key"),
    ("a[", "not closed"),
    ("a[x]", "not a number"),
    ("a[-1]", "not a number"),
    (f"a[{MAX_INDEX + 1}]", "over the maximum"),
    ("a[0]b", "expected '.' or '['"),
    ("a\\", "backslash"),
    ("a=b", "unexpected '='"),
    ("[0]", "empty key"),
    (".".join(["k"] * 32), "nested names"),
])
def test_parse_path_refuses(path: str, problem: str) -> None:
    with pytest.raises(PathError, match=problem if problem != "expected '.' or '['" else "expected"):
        parse_path(path)


def apply(values: dict[str, Any], assignments: list[Any]) -> dict[str, Any]:
    """``values`` with ``assignments`` set (in place: the same dict)."""
    set_in_place(values, assignments)
    return values


def target(path: str, value: str, values: dict[str, Any] | None = None) -> dict[str, Any]:
    return apply(values or {}, target_assignments(path, value))


@pytest.mark.parametrize(("value", "expected"), [
    # Flux's own ReplacePathValue cases (fluxcd/pkg chartutil values_test.go), then helm's --set rules.
    ("value", {"name": "value"}),
    ("{a,b,c}", {"name": ["a", "b", "c"]}),
    ("value1\\,value2", {"name": "value1,value2"}),
    ("true", {"name": True}),
    ('"true"', {"name": "true"}),
    ("a,other=b", {"name": "a", "other": "b"}),  # a comma starts another assignment, at the top
    ("a,", {"name": "a"}),  # a trailing comma is ignored
    ("x,deep.er[1]=2", {"name": "x", "deep": {"er": [None, 2]}}),
    ("{a,1,true}", {"name": ["a", 1, True]}),
    ("{a,b},c=d", {"name": ["a", "b"], "c": "d"}),
    ("a.b.c", {"name": "a.b.c"}),  # dots in a value are kept
    ("1.5", {"name": "1.5"}), ("007", {"name": "007"}), ("0", {"name": 0}), ("-7", {"name": -7}),
    ("+7", {"name": 7}), ("NULL", {"name": None}), ("False", {"name": False}),
    ("99999999999999999999", {"name": "99999999999999999999"}),
    ("42\n", {"name": "42\n"}),  # a trailing newline: a string
    ("a=b", {"name": "a=b"}), ("x[0]", {"name": "x[0]"}),
    ("C:\\\\dir", {"name": "C:\\dir"}), ("a\\b", {"name": "ab"}), ("s3cr3t\\", {"name": "s3cr3t"}),
    ("'42'", {"name": "42"}), ("'a,b=c'", {"name": "a", "b": "c"}),  # quoted: --set-string, still split
    ("'{x,7}'", {"name": ["x", "7"]}), ("\"'x'\"", {"name": "x"}), ("'x\"", {"name": "'x\""}),
    ("\"", {"name": ""}), ("", {"name": ""}), ("{}", {"name": [""]}),
])
def test_target_values_as_flux_replace_path_value(value: str, expected: dict[str, Any]) -> None:
    got = target("name", value)
    assert got == expected
    assert [type(v) for v in got.values()] == [type(v) for v in expected.values()]


def test_target_paths_with_escaped_dots_and_indices() -> None:
    assert target("nodeSelector.kubernetes\\.io/role", "master") == {"nodeSelector": {"kubernetes.io/role": "master"}}
    assert target("merge.at[2]", "value") == {"merge": {"at": [None, None, "value"]}}
    assert target("m[1][0]", "z") == {"m": [None, ["z"]]}
    assert target("a.b", "v", {"a": {"keep": 1}}) == {"a": {"keep": 1, "b": "v"}}


@pytest.mark.parametrize(("value", "problem"), [
    ("a,b", "key 'b' has no value"),
    ("a,b,c", "cannot end with ,"),
    ("{a,b", "list must terminate with '}'"),
    ("a,x[y]=1", "not a number"),
    ("a,x[-1]=1", "negative -1 index not allowed"),
    (f"a,x[{MAX_INDEX + 1}]=1", "greater than maximum supported index"),
    ("a,x[0]y=1", "unexpected data at end of array index"),
    ("a," + ".".join(["k"] * 32) + "=1", "maximum supported nested level of 30"),
])
def test_target_values_helm_refuses(value: str, problem: str) -> None:
    with pytest.raises(PathError, match=problem.replace("[", r"\[")):
        target_assignments("name", value)


def test_setting_goes_as_helms_parser() -> None:
    values: dict[str, Any] = {"a": {"keep": 1, "b": {"old": True}}, "l": [{"x": 1}, "s"], "m": [0, 1]}
    shared_b, shared_l, shared_m = values["a"]["b"], values["l"], values["m"]
    out = apply(values, parse_assignments("a.b.c=v,l[2].name=n,l[1].k=2,m[0]=9"))
    assert out == {"a": {"keep": 1, "b": {"old": True, "c": "v"}}, "l": [{"x": 1}, {"k": 2}, {"name": "n"}],
                   "m": [9, 1]}
    # In place, as Go's maps and slices: a map along the path and a list set within its length are changed where
    # they are (whoever shares them sees it); a list grown past its end is a new one (helm's setIndex copies).
    assert shared_b == {"old": True, "c": "v"} and shared_m == [9, 1] and out["m"] is shared_m
    assert shared_l == [{"x": 1}, "s"] and out["l"] is not shared_l
    assert apply({"a": {"b": {"deep": 1}}}, parse_assignments("a.b=flat")) == {"a": {"b": "flat"}}
    assert apply({"l": [None]}, parse_assignments("l[0][1]=x")) == {"l": [[None, "x"]]}


@pytest.mark.parametrize(("values", "path", "problem"), [
    ({"a": "text"}, "a.b", "a holds a str, not a map"),
    ({"a": None}, "a.b", "a holds null, not a map"),  # Go's type assertion of a nil fails in helm
    ({"a": {"b": 1}}, "a[0]", "a holds a map, not a list"),
    ({"l": ["s"]}, "l[0][0]", r"l\[0\] holds a str, not a list"),
])
def test_setting_refuses_to_go_through_another_type(values: dict[str, Any], path: str, problem: str) -> None:
    with pytest.raises(PathError, match=problem):
        apply(values, parse_assignments(f"{path}=1"))


def test_list_padding_is_bounded() -> None:
    many = ",".join(f"k{i}[{MAX_INDEX}]=1" for i in range(MAX_PADDING // MAX_INDEX + 1))
    with pytest.raises(PathError, match="padded"):
        apply({}, parse_assignments(many))
