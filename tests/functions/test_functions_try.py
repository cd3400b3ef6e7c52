"""The six try_ variants: the base result, or None on any failure (wrong arity included)."""

from __future__ import annotations

import pytest

from txcl.functions.registry import call


@pytest.mark.parametrize("name,args,expected", [
    ("try_json", ['{"a": 1}'], {"a": 1}),
    ("try_json", ["null"], None),
    ("try_b64decode", ["YQ=="], "a"),
    ("try_urldecode", ["a+b"], "a b"),
    ("try_get", [{"a": 1}, "a"], 1),
    ("try_substr", ["hello", 1, 3], "el"),
    ("try_tz_offsets", ["Asia/Kathmandu", "2026-01-01T00:00:00Z", 1],
     {"zone": "Asia/Kathmandu", "offset": 345, "changes": []}),
])
def test_try_success(name, args, expected):
    assert call(name, args) == expected


@pytest.mark.parametrize("name,args", [
    ("try_json", ["oops"]), ("try_json", [""]), ("try_json", [None]),
    ("try_b64decode", ["YQ"]), ("try_b64decode", [1]),
    ("try_urldecode", ["%zz"]),
    ("try_get", ["not json", "a"]), ("try_get", [{}, 1]),
    ("try_substr", ["hello", 3, 99]), ("try_substr", ["hello", -1, 2]),
    ("try_tz_offsets", ["Nowhere/City", "2026-01-01T00:00:00Z", 1]),
    ("try_tz_offsets", ["UTC", "yesterday", 1]),
])
def test_try_failure_gives_none(name, args):
    assert call(name, args) is None


@pytest.mark.parametrize("name,args", [
    ("try_json", []), ("try_json", ["1", "2"]),
    ("try_b64decode", []), ("try_urldecode", ["a", "b"]),
    ("try_get", [{}]), ("try_get", [{}, "a", "b"]),
    ("try_substr", ["a"]), ("try_substr", []),
    ("try_tz_offsets", ["UTC"]),
])
def test_try_wrong_arity_gives_none(name, args):
    assert call(name, args) is None
