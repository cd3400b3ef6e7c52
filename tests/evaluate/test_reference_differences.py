"""Places where txcl deliberately answers differently from the Go reference, or where it
was made to match it after differential runs. Each test pins the behaviour docs/differences.md
describes, so a change to either shows up here."""

from __future__ import annotations

import pytest

import txcl
from txcl.functions.registry import call
from txcl.values.jsonio import loads

FORTY_DIGITS = "0123456789012345678901234567890123456789"


def matches(condition: str, envelope: dict) -> bool:
    return txcl.when_matches(txcl.parse_rule(f"WHEN {condition}"), envelope)


# ------------------------------------------------------------------ big integers in WHEN

@pytest.mark.parametrize("value", [FORTY_DIGITS, 1e20, 10**30, "100000000000000000000"])
def test_numeric_comparisons_beyond_64_bits_are_exact(value):
    """The reference converts to a 64-bit integer and wraps around (so 1e20 >= 10 is false
    there); txcl compares the exact value."""
    assert matches(".A >= 10", {"A": value}) is True
    assert matches(".A < 10", {"A": value}) is False
    assert matches(".A == 10", {"A": value}) is False


def test_exact_comparison_against_the_largest_literal():
    """Literals stay within 64 bits (a larger one is TX007); the envelope's value need not."""
    top = 2**63 - 1
    assert matches(f".A > {top}", {"A": 2**64 + 1}) is True  # wrapped, 2**64 + 1 would be 1
    assert matches(f".A == {top}", {"A": top}) is True
    assert matches(f".A == {top}", {"A": top + 2**64}) is False


# ------------------------------------------------------------------ invalid UTF-8: one U+FFFD per byte

@pytest.mark.parametrize("name,args,expected", [
    ("b64decode", ["4pw="], "\ufffd\ufffd"),  # e2 9c: a cut three-byte sequence is two bytes
    ("substr", ["\U0001F600", 0, 2], "\ufffd\ufffd"),
    ("substr", ["\U0001F600", 1, 4], "\ufffd\ufffd\ufffd"),
    ("urldecode", ["%E2%9C%FF"], "\ufffd\ufffd\ufffd"),
    ("urldecode", ["%F0%9F%98a"], "\ufffd\ufffd\ufffda"),
    ("pad", ["x", 4, "\u00e9"], "\u00e9\ufffdx"),
])
def test_each_invalid_byte_becomes_one_replacement_character(name, args, expected):
    assert call(name, args) == expected


def test_the_try_forms_decode_the_same_way():
    assert call("try_b64decode", ["4pw="]) == "\ufffd\ufffd"
    assert call("try_substr", ["\U0001F600", 0, 2]) == "\ufffd\ufffd"


def test_json_bytes_decode_the_same_way():
    assert loads(b'{"a": "\xe2\x9cz"}') == {"a": "\ufffd\ufffdz"}
    assert loads(b'{"a": "\xe2\x9c\x85"}') == {"a": "\u2705"}  # valid sequences are untouched


# ------------------------------------------------------------------ &set with a ":" key on an array

def test_colon_segment_is_a_key_and_an_array_has_none():
    """`:0` means the object key "0", never an index: on an object it sets the key, on an
    array it is an error (the reference sets element 0 there)."""
    assert call("set", [{}, ":0", 9]) == {"0": 9}
    assert call("set", [[1, 2], "0", 9]) == [9, 2]
    with pytest.raises(txcl.TxclEvalError, match='cannot use key "0" on an array'):
        call("set", [[1, 2], ":0", 9])
    assert call("get", [[1, 2], ":0"]) is None  # reading agrees: an array has no key "0"


# ------------------------------------------------------------------ a failing WITH value

def test_a_failing_with_value_reports_the_error_to_the_op():
    """The reference drops the key and runs the op on its input as if nothing happened;
    txcl gives the op the error (as a failing SET does) and applies no directive."""
    rule = txcl.parse_rule('WITH k = &div(1, 0), timeout = "2s"\nEXEC "txco://noop"')
    result = txcl.apply_rule(rule, {"x": 5})
    assert result.op_input == {"error": {"message": "WITH k: &div: division by zero"}}
    assert result.directives == {}


def test_with_after_a_set_error_is_kept_as_the_reference_does():
    rule = txcl.parse_rule('SET .a = &div(1, 0)\nWITH k = 1\nEXEC "txco://noop"')
    result = txcl.apply_rule(rule, {"x": 5})
    assert result.directives == {"k": 1}
    assert result.op_input["error"]["message"].startswith("decorate .a:")
