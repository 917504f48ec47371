"""Unit tests of helm's --set path syntax and the bounded path setter (engine.resolve.strvals)."""

from __future__ import annotations

import pytest

from engine.resolve.strvals import MAX_INDEX, PathError, format_path, parse_path, set_path, typed_value


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


def test_set_path_creates_maps_and_pads_lists_without_touching_the_input() -> None:
    values = {"a": {"keep": 1, "b": {"old": True}}, "l": [{"x": 1}]}
    out = set_path(values, parse_path("a.b.c"), "v")
    assert out == {"a": {"keep": 1, "b": {"old": True, "c": "v"}}, "l": [{"x": 1}]}
    assert values == {"a": {"keep": 1, "b": {"old": True}}, "l": [{"x": 1}]}  # copied along the path
    out = set_path(values, parse_path("l[2].name"), "n")
    assert out["l"] == [{"x": 1}, None, {"name": "n"}] and values["l"] == [{"x": 1}]
    assert set_path({}, parse_path("l[0].y"), 2) == {"l": [{"y": 2}]}
    assert set_path({"l": [{"x": 1}]}, parse_path("l[0].y"), 2) == {"l": [{"x": 1, "y": 2}]}
    assert set_path({}, parse_path("m[1][0]"), "z") == {"m": [None, ["z"]]}
    assert set_path({"a": None}, parse_path("a.b"), 1) == {"a": {"b": 1}}
    assert set_path({"a": {"b": {"deep": 1}}}, parse_path("a.b"), "flat") == {"a": {"b": "flat"}}


@pytest.mark.parametrize(("values", "path", "problem"), [
    ({"a": "text"}, "a.b", "a holds a str, not a map"),
    ({"a": {"b": 1}}, "a[0]", "a holds a map, not a list"),
    ({"l": ["s"]}, "l[0].x", r"l\[0\] holds a str, not a map"),
])
def test_set_path_refuses_to_go_through_another_type(values: dict[str, object], path: str, problem: str) -> None:
    with pytest.raises(PathError, match=problem):
        set_path(values, parse_path(path), 1)


@pytest.mark.parametrize(("text", "value"), [
    ("true", True), ("FALSE", False), ("null", None), ("0", 0), ("42", 42), ("-7", -7),
    ("007", "007"), ("1.5", "1.5"), ("'42'", "42"), ('"true"', "true"), ("a,b", "a,b"), ("{a,b}", "{a,b}"),
    ("s3cr3t\\", "s3cr3t\\"), ("", ""), ("99999999999999999999", "99999999999999999999"), ("'x\"", "'x\""),
])
def test_typed_value_as_flux(text: str, value: object) -> None:
    assert typed_value(text) == value
    assert type(typed_value(text)) is type(value)
