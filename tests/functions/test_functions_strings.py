"""concat, len, split, join, substr, repeat, pad, sha256."""

from __future__ import annotations

import hashlib

import pytest

from txcl.functions.registry import call

from functions_testutil import fails

MIB = 1_048_576


@pytest.mark.parametrize("args,expected", [
    ([], ""),
    (["a", "b"], "ab"),
    (["a", None, "b"], "ab"),
    ([True, False], "truefalse"),
    ([1, -2, 2.5], "1-22.5"),
    ([1.7e9], "1700000000"),
    ([1234567.5], "1.2345675e+06"),
    ([0.00005], "5e-05"),
    ([3e21], "3e+21"),
    ([[1, "a", None, [2.5]]], "[1 a <nil> [2.5]]"),
    ([{"b": 2, "a": None}], "map[a:<nil> b:2]"),
    (["x=", {"k": [True]}], "x=map[k:[true]]"),
    ([None], ""),
])
def test_concat(args, expected):
    assert call("concat", args) == expected


@pytest.mark.parametrize("value,expected", [
    ("abc", 3), ("é", 2), ("😀", 4), ("", 0), ([1, 2], 2), ({"a": 1}, 1), (None, 0), ([], 0),
])
def test_len(value, expected):
    assert call("len", [value]) == expected


@pytest.mark.parametrize("value", [1, 1.5, True, False])
def test_len_errors(value):
    fails("len", value)


def test_len_arity():
    fails("len", match="takes 1 argument, got 0")
    fails("len", "a", "b")


@pytest.mark.parametrize("s,sep,expected", [
    ("a,b,,c", ",", ["a", "b", "", "c"]),
    ("abc", "", ["a", "b", "c"]),
    ("héé", "", ["h", "é", "é"]),
    ("", "", []),
    ("", ",", [""]),
    ("abc", "x", ["abc"]),
    ("a--b", "--", ["a", "b"]),
])
def test_split(s, sep, expected):
    assert call("split", [s, sep]) == expected


@pytest.mark.parametrize("args", [[1, ","], ["a", None], [["a"], ","]])
def test_split_errors(args):
    fails("split", *args)


@pytest.mark.parametrize("items,sep,expected", [
    (["a", "b"], ",", "a,b"),
    ([1, None, 2.5, True, "x"], "-", "1--2.5-true-x"),
    ([], ",", ""),
    ([[1, 2], {"a": 1}], "|", "[1 2]|map[a:1]"),
    ([1.7e9, 1e-7], " ", "1700000000 1e-07"),
])
def test_join(items, sep, expected):
    assert call("join", [items, sep]) == expected


def test_join_errors():
    fails("join", "a,b", ",", match="first argument must be a list")
    fails("join", {"a": 1}, ",")
    fails("join", ["a"], None)
    fails("join", ["a"], 1)
    fails("join", ["a"])


@pytest.mark.parametrize("s,start,end,expected", [
    ("hello", 1, 3, "el"),
    ("hello", 0, 5, "hello"),
    ("hello", 2, 2, ""),
    ("héllo", 0, 3, "hé"),
    ("héllo", 0, 2, "h\ufffd"),
    ("héllo", 2, 4, "\ufffdl"),
    ("hello", 1.0, 3.0, "el"),
])
def test_substr(s, start, end, expected):
    assert call("substr", [s, start, end]) == expected


@pytest.mark.parametrize("args,match", [
    (["hello", -1, 2], "negative"),
    (["hello", 3, 2], "after"),
    (["hello", 0, 6], "beyond"),
    (["é", 0, 3], "beyond"),
    ([5, 0, 1], "string"),
    (["hello", "1", 2], "integer"),
    (["hello", 0, 1.5], "integer"),
    (["hello", True, 2], "integer"),
    (["hello", None, 2], "integer"),
])
def test_substr_errors(args, match):
    fails("substr", *args, match=match)


def test_repeat():
    assert call("repeat", ["ab", 3]) == "ababab"
    assert call("repeat", ["ab", 0]) == ""
    assert call("repeat", ["", 10**30]) == ""
    assert len(call("repeat", ["a", MIB])) == MIB
    assert call("repeat", ["é", 2.0]) == "éé"


@pytest.mark.parametrize("args,match", [
    (["a", -1], "negative"),
    (["a", MIB + 1], "1048576"),
    (["é", MIB // 2 + 1], "1048576"),
    (["ab", 10**30], "1048576"),
    ([1, 2], "string"),
    (["a", "2"], "integer"),
    (["a", 1.5], "integer"),
])
def test_repeat_errors(args, match):
    fails("repeat", *args, match=match)


@pytest.mark.parametrize("s,width,fill,expected", [
    ("x", 5, "ab", "ababx"),
    ("x", -5, "ab", "xabab"),
    ("7", 3, "0", "007"),
    ("hello", 3, "", "hello"),          # long enough: unchanged even with empty fill
    ("hello", -5, "", "hello"),
    ("x", 3, "é", "éx"),
    ("x", 4, "é", "é\ufffdx"),          # fill cut inside a character
    ("é", 3, "-", "-é"),                 # widths count bytes
])
def test_pad(s, width, fill, expected):
    assert call("pad", [s, width, fill]) == expected


@pytest.mark.parametrize("args,match", [
    (["x", 0, "a"], "width"),
    (["", 0, ""], "width"),
    (["x", 3, ""], "empty fill"),
    (["x", MIB + 1, "a"], "1048576"),
    (["x", -(MIB + 1), "a"], "1048576"),
    ([1, 3, "a"], "string"),
    (["x", 3, 1], "string"),
    (["x", "3", "a"], "integer"),
    (["x", 2.5, "a"], "integer"),
])
def test_pad_errors(args, match):
    fails("pad", *args, match=match)


def test_pad_at_cap_is_fine():
    assert len(call("pad", ["", MIB, "ab"])) == MIB


def test_sha256():
    assert call("sha256", ["abc"]) == hashlib.sha256(b"abc").hexdigest()
    assert call("sha256", ["é"]) == hashlib.sha256("é".encode()).hexdigest()
    fails("sha256", None)
    fails("sha256", 1)
