"""get, has, set, object, array (walkable rules, path strings, write rules)."""

from __future__ import annotations

import copy

import pytest

from txcl.functions.registry import call

from functions_testutil import fails

DOC = {"a": {"b": [1, {"c": None}]}, "k.x": 7}


@pytest.mark.parametrize("obj,path,expected", [
    (DOC, "a.b.0", 1),
    (DOC, "a.b.00", 1),
    (DOC, "a.b.01", {"c": None}),
    (DOC, "a.b.1.c", None),
    (DOC, "a.zz", None),
    (DOC, "k\\.x", 7),
    (DOC, "", None),
    (None, "a", None),
    ('{"a": [1, 2]}', "a.1", 2),
    ('"str"', "a", None),
    (5, "a", None),
    (True, "a", None),
    ([10, 20], "1", 20),
])
def test_get(obj, path, expected):
    assert call("get", [obj, path]) == expected


@pytest.mark.parametrize("obj,path,expected", [
    (DOC, "a.b.1.c", True),
    (DOC, "a.b.1", True),
    (DOC, "a.b.2", False),
    (DOC, "a.x", False),
    (None, "a", False),
    ('{"a": null}', "a", True),
    (5, "a", False),
])
def test_has(obj, path, expected):
    assert call("has", [obj, path]) is expected


@pytest.mark.parametrize("name", ["get", "has"])
def test_get_has_errors(name):
    assert fails(name, "not json", "a") == f"&{name}: string value is not valid JSON"
    fails(name, DOC, 1)
    fails(name, DOC, None)
    fails(name, DOC)


def test_set_copies_and_writes():
    obj = {"a": {"b": [1]}}
    before = copy.deepcopy(obj)
    out = call("set", [obj, "a.b.2", "x"])
    assert out == {"a": {"b": [1, None, "x"]}}
    assert obj == before


@pytest.mark.parametrize("obj,path,value,expected", [
    (None, "a.b", 1, {"a": {"b": 1}}),
    (None, "0", 1, [1]),
    (None, ":0", 1, {"0": 1}),
    ({}, "a.:2024", 1, {"a": {"2024": 1}}),
    ({}, "a.0", 1, {"a": [1]}),
    ({"a": {}}, "a.0", 1, {"a": {"0": 1}}),
    (5, "x", 1, {"x": 1}),
    ('{"a": 1}', "b", 2, {"a": 1, "b": 2}),
    ("[]", "1", 2, [None, 2]),
    ({}, "a\\.b", 1, {"a.b": 1}),
    ({}, "\\:x", 1, {":x": 1}),
    ({"l": [0]}, "l.0", {"n": [1]}, {"l": [{"n": [1]}]}),
])
def test_set(obj, path, value, expected):
    assert call("set", [obj, path, value]) == expected


def test_set_value_is_copied():
    value = {"x": [1]}
    out = call("set", [{}, "a", value])
    out["a"]["x"].append(2)
    assert value == {"x": [1]}


@pytest.mark.parametrize("args,match", [
    (({}, "", 1), "empty path"),
    (({}, 1, 1), "string"),
    (({}, None, 1), "string"),
    (("nope", "a", 1), "string value is not valid JSON"),
    (({"a": [1]}, "a.x", 1), 'cannot use key "x" on an array'),
    (({"a": [1]}, "a.:0", 1), "on an array"),
    (({}, "a.70000", 1), "65535"),
    (({}, "a.40000.30000", 1), "65535"),
])
def test_set_errors(args, match):
    fails("set", *args, match=match)


def test_set_arity():
    fails("set", {}, "a", match="takes 3 arguments, got 2")


def test_object():
    assert call("object", []) == {}
    assert call("object", ["a", 1, "b", [2]]) == {"a": 1, "b": [2]}
    assert call("object", ["a", 1, "a", 2]) == {"a": 2}
    fails("object", "a", match="even number")
    fails("object", 1, 2, match="key 1 must be a string")
    fails("object", "a", 1, None, 2, match="key 2")


def test_array():
    assert call("array", []) == []
    assert call("array", [1, None, "x"]) == [1, None, "x"]
