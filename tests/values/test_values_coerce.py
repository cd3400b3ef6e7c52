"""The coercion table of WHEN row by row, the print form of numbers, Go float and duration syntax."""

from __future__ import annotations

import math

import pytest

from txcl.values.coerce import (
    bool_form, duration_to_ms, float_form, int_form, parse_duration_ns, parse_go_float,
    print_form, text_form,
)
from txcl.values.paths import MISSING

# ---------------------------------------------------------------- text form


@pytest.mark.parametrize("value,text", [
    (MISSING, ""),
    (None, ""),
    ("abc", "abc"),
    ("", ""),
    (True, "true"),
    (False, "false"),
    (42, "42"),
    (-7, "-7"),
    (0, "0"),
    (2.50, "2.5"),
    (4.0, "4"),
    (1e-7, "0.0000001"),
    (3e21, "3000000000000000000000"),
    (1.5e22, "15000000000000000000000"),
    (-0.25, "-0.25"),
    (123456789012.5, "123456789012.5"),
    (0.1 + 0.2, "0.30000000000000004"),
    ([1, "a", None, 2.0, {"b": 1.5}], '[1,"a",null,2,{"b":1.5}]'),
    ({"z": 1, "a": [True]}, '{"z":1,"a":[true]}'),  # document order, not sorted
    ({"x": 1e-7, "y": 3e21}, '{"x":1e-7,"y":3e+21}'),  # numbers in JSON form
    ([], "[]"),
    ({}, "{}"),
])
def test_text_form(value, text):
    assert text_form(value) == text


# ---------------------------------------------------------------- integer form


@pytest.mark.parametrize("value,expected", [
    (5, 5),
    (-12345678901234567890, -12345678901234567890),
    (7.9, 7),
    (-2.5, -2),
    (-0.5, 0),
    (True, 1),
    (False, 0),
    ("42", 42),
    ("-42", -42),
    ("007", 7),
    ("42.0", 0),
    (" 42", 0),
    ("42 ", 0),
    ("+42", 0),
    ("42\n", 0),
    ("", 0),
    ("abc", 0),
    ("\u0664\u0662", 0),  # non-ASCII digits
    (None, 0),
    (MISSING, 0),
    ([1], 0),
    ({"a": 1}, 0),
    (math.nan, 0),
    (math.inf, 0),
])
def test_int_form(value, expected):
    got = int_form(value)
    assert type(got) is int and got == expected


# ---------------------------------------------------------------- float form


@pytest.mark.parametrize("value,expected", [
    (3, 3.0),
    (2.5, 2.5),
    (True, 1.0),
    (False, 0.0),
    ("1e3", 1000.0),
    ("-0.5", -0.5),
    ("+7", 7.0),
    (".5", 0.5),
    ("5.", 5.0),
    ("0x1p-2", 0.25),
    ("1e400", math.inf),
    ("-1e400", -math.inf),
    ("inf", math.inf),
    ("-Infinity", -math.inf),
    ("abc", 0.0),
    (" 1", 0.0),
    ("1_000", 0.0),
    ("", 0.0),
    (None, 0.0),
    (MISSING, 0.0),
    ([1], 0.0),
    ({}, 0.0),
    (10**400, math.inf),
])
def test_float_form(value, expected):
    got = float_form(value)
    assert type(got) is float and got == expected


def test_float_form_nan_string():
    assert math.isnan(float_form("NaN"))


# ---------------------------------------------------------------- boolean form


@pytest.mark.parametrize("value,expected", [
    (True, True),
    (False, False),
    ("1", True),
    ("t", True),
    ("true", True),
    ("TRUE", True),
    ("T", True),
    ("True", True),
    ("yes", False),
    (" true", False),
    ("0", False),
    ("", False),
    ("false", False),
    (1, True),
    (0, False),
    (-3, True),
    (0.0, False),
    (0.1, True),
    (None, False),
    (MISSING, False),
    ([1], False),
    ({"a": 1}, False),
])
def test_bool_form(value, expected):
    assert bool_form(value) is expected


# ---------------------------------------------------------------- Go float syntax


@pytest.mark.parametrize("text,expected", [
    ("0", 0.0), ("-0.5", -0.5), ("+7", 7.0), ("1E3", 1000.0), ("1e+3", 1000.0), ("1.5e-3", 0.0015),
    (".5", 0.5), ("5.", 5.0), ("0x1p-2", 0.25), ("0X1.8P3", 12.0), ("-0x.8p1", -1.0),
    ("inf", math.inf), ("+Inf", math.inf), ("-INFINITY", -math.inf), ("infinity", math.inf),
    ("1e-400", 0.0), ("1e400", math.inf),
])
def test_parse_go_float_valid(text, expected):
    assert parse_go_float(text) == expected


@pytest.mark.parametrize("text", ["nan", "NaN", "nAn"])
def test_parse_go_float_nan(text):
    assert math.isnan(parse_go_float(text))


@pytest.mark.parametrize("text", [
    "", " 1", "1 ", "1_0", ".", "e5", "1e", "1e+", "+", "-", "0x1", "0x1.8", "0xp1", "+nan",
    "-nan", "infinit", "1,5", "١", "0b101", "1.2.3", "--1",
])
def test_parse_go_float_invalid(text):
    assert parse_go_float(text) is None


# ---------------------------------------------------------------- print form


@pytest.mark.parametrize("value,text", [
    (1234567.5, "1.2345675e+06"),
    (0.00005, "5e-05"),
    (3e21, "3e+21"),
    (3.25, "3.25"),
    (1.7e9, "1700000000"),
    (42.0, "42"),
    (0.0001, "0.0001"),
    (123456.5, "123456.5"),
    (1e-100, "1e-100"),
    (1e100, "1e+100"),
    (-2.5e-7, "-2.5e-07"),
    (7, "7"),
    (True, "true"),
    (False, "false"),
    ("str", "str"),
    (None, "<nil>"),
    ([1, "a", None, 2.5, True], "[1 a <nil> 2.5 true]"),
    ({"b": None, "a": [1, 2], "c": {"d": "x"}}, "map[a:[1 2] b:<nil> c:map[d:x]]"),
    ([], "[]"),
    ({}, "map[]"),
])
def test_print_form(value, text):
    assert print_form(value) == text


# ---------------------------------------------------------------- durations


@pytest.mark.parametrize("text,ns", [
    ("0", 0), ("-0", 0), ("+0", 0),
    ("250ms", 250_000_000), ("1.5s", 1_500_000_000), ("1h30m", 5_400_000_000_000),
    ("1ns", 1), ("2us", 2000), ("3µs", 3000), ("4μs", 4000), ("1m", 60_000_000_000),
    (".5s", 500_000_000), ("1.s", 1_000_000_000), ("-1.5h", -5_400_000_000_000),
    ("1h1m1s1ms1us1ns", 3_661_001_001_001), ("0.1ns", 0),
    ("9223372036854775807ns", 2**63 - 1), ("-9223372036854775808ns", -(2**63)),
])
def test_parse_duration_valid(text, ns):
    assert parse_duration_ns(text) == ns
    assert parse_duration_ns(text) == ns  # the remembered answer is the same


def test_durations_are_remembered_within_bounds(monkeypatch):
    """Short texts are parsed once (the walk meets the same WITH timeouts again and again);
    long ones never kept, and the memory is bounded."""
    from txcl.values import coerce

    calls: list[str] = []
    real = coerce._parse_duration_ns
    monkeypatch.setattr(coerce, "_parse_duration_ns", lambda s: calls.append(s) or real(s))
    monkeypatch.setattr(coerce, "_DURATIONS", {})
    assert [parse_duration_ns("7s") for _ in range(3)] == [7_000_000_000] * 3 and calls == ["7s"]
    long_text = "1ns" * 30
    assert parse_duration_ns(long_text) == parse_duration_ns(long_text) == 30 and calls.count(long_text) == 2
    for i in range(coerce._DURATIONS_MAX + 5):
        parse_duration_ns(f"{i}ms")
    assert len(coerce._DURATIONS) <= coerce._DURATIONS_MAX


@pytest.mark.parametrize("text", [
    "", "1", "s", ".s", "1x", "1 s", " 1s", "1s ", "1s2", "1S", "1H", "+", "-", "00", "1d",
    "9223372036854775808ns", "3000000h", "1.5", "--1s",
])
def test_parse_duration_invalid(text):
    assert parse_duration_ns(text) is None


@pytest.mark.parametrize("value,ms", [
    (250, 250), (0, 0), (-5, -5), (1500.0, 1500), ("1.5s", 1500), ("250ms", 250), ("0", 0),
    ("1500us", 1), ("999us", 0), ("-1500us", -1), ("1m", 60000),
])
def test_duration_to_ms(value, ms):
    assert duration_to_ms(value) == ms


@pytest.mark.parametrize("value", [True, False, None, 1.5, "abc", [1], {}, "1"])
def test_duration_to_ms_invalid(value):
    assert duration_to_ms(value) is None


# ---------------------------------------------------------------- properties of the number forms

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from txcl.values.numbers import decompose, float_json  # noqa: E402


@settings(max_examples=500, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_number_forms_read_back(x):
    for form in (text_form(x), print_form(x), float_json(x)):
        assert float(form) == x
    assert "e" not in text_form(x)
    neg, digits, dp = decompose(x)
    assert digits == "0" or (digits[0] != "0" and digits[-1] != "0")


def test_negative_zero_keeps_sign():
    assert text_form(-0.0) == "-0" and print_form(-0.0) == "-0" and float_json(-0.0) == "-0"


@pytest.mark.parametrize("x,text", [(1e-5, "0.00001"), (123.0, "123"), (1e16, "10000000000000000"),
                                    (1.5e16, "15000000000000000"), (2.5e-5, "0.000025")])
def test_text_form_more(x, text):
    assert text_form(x) == text


@pytest.mark.parametrize("x,text", [(999999.5, "999999.5"), (1000000.5, "1.0000005e+06"),
                                    (-1234567.5, "-1.2345675e+06"), (0.0001, "0.0001"),
                                    (0.00009, "9e-05"), (1e21, "1e+21"), (1e20, "100000000000000000000")])
def test_print_form_more(x, text):
    assert print_form(x) == text
