"""b64encode/b64decode, urlencode/urldecode, json, to_json."""

from __future__ import annotations

import pytest

from txcl.functions.registry import call

from functions_testutil import fails


@pytest.mark.parametrize("s,expected", [("", ""), ("a", "YQ=="), ("ab", "YWI="), ("abc", "YWJj"),
                                        ("é", "w6k="), ("a" * 100, "YWFh" * 33 + "YQ==")])
def test_b64encode(s, expected):
    assert call("b64encode", [s]) == expected
    assert call("b64decode", [expected]) == s


def test_b64encode_non_string():
    fails("b64encode", None)
    fails("b64encode", 5)


@pytest.mark.parametrize("s,expected", [
    ("YQ==", "a"), ("YQ==\r\n", "a"), ("YW\nJj", "abc"), ("Y\r\nQ\n=\n=", "a"), ("", ""),
    ("/w==", "\ufffd"),  # invalid UTF-8 replaced
    ("8J+YgA==", "😀"),
])
def test_b64decode(s, expected):
    assert call("b64decode", [s]) == expected


@pytest.mark.parametrize("s", ["YQ", "YQ=", "Y===", "YQ==YQ==", "Y Q==", "YQ== ", "-_8=", "YW_j",
                               "YQ\t==", "é===", "=YQ="])
def test_b64decode_errors(s):
    fails("b64decode", s)


def test_b64decode_non_string():
    fails("b64decode", None)


@pytest.mark.parametrize("s,expected", [
    ("a b", "a+b"), ("a/b?c=d&e", "a%2Fb%3Fc%3Dd%26e"), ("AZaz09-_.~", "AZaz09-_.~"),
    ("é", "%C3%A9"), ("+", "%2B"), ("", ""), ("%", "%25"), ("*'()!", "%2A%27%28%29%21"),
])
def test_urlencode(s, expected):
    assert call("urlencode", [s]) == expected
    assert call("urldecode", [expected]) == s


@pytest.mark.parametrize("s,expected", [
    ("a+b", "a b"), ("%2f%2F", "//"), ("%C3%A9", "é"), ("%ff", "\ufffd"), ("plain", "plain"),
    ("%2B", "+"),
])
def test_urldecode(s, expected):
    assert call("urldecode", [s]) == expected


@pytest.mark.parametrize("s", ["%", "%2", "%zz", "a%g1", "100%"])
def test_urldecode_errors(s):
    fails("urldecode", s, match="invalid URL escape")


def test_url_non_string():
    fails("urlencode", 1)
    fails("urldecode", None)


@pytest.mark.parametrize("s,expected", [
    ("null", None), ("5", 5), ("5.0", 5.0), ("1e2", 100.0), ('"x"', "x"), ("true", True),
    ('{"a": [1, 2.5]}', {"a": [1, 2.5]}), ('{"a": 1, "a": 2}', {"a": 2}), (" [] ", []),
])
def test_json(s, expected):
    got = call("json", [s])
    assert got == expected and type(got) is type(expected)


def test_json_empty_input_exact():
    assert fails("json", "") == "&json: empty input"


@pytest.mark.parametrize("s", ["oops", "{'a': 1}", "[1] x", "NaN", "[Infinity]", "{", " "])
def test_json_invalid(s):
    fails("json", s)


def test_json_non_string():
    fails("json", None)
    fails("json", {"a": 1})


@pytest.mark.parametrize("value,expected", [
    (None, "null"),
    ({"b": 1, "a": {"d": 1.0, "c": [1e-7, 1.5e21]}}, '{"a":{"c":[1e-7,1.5e+21],"d":1},"b":1}'),
    ("<b>&é\u2028\u2029", '"\\u003cb\\u003e\\u0026é\\u2028\\u2029"'),
    ([True, False, 42, "x"], '[true,false,42,"x"]'),
    (1.7e9, "1700000000"),
])
def test_to_json(value, expected):
    assert call("to_json", [value]) == expected


def test_to_json_arity():
    fails("to_json", match="takes 1 argument, got 0")
    fails("to_json", 1, 2)
