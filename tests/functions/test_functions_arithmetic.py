"""add, sub, mul, div, mod: results, int/float typing, num coercion, errors."""

from __future__ import annotations

import pytest

from txcl.functions.registry import call

from functions_testutil import fails


@pytest.mark.parametrize("name,a,b,expected", [
    ("add", 4, 5, 9),
    ("add", 1.25, 0.5, 1.75),
    ("add", 0.5, 1.5, 2.0),
    ("mul", 3.0, 2.0, 6),
    ("div", 9, 3, 3),
    ("div", 9, 2, 4.5),
    ("sub", "250", 50, 200),
    ("add", "1e3", 1, 1001),
    ("add", "+7", "-0.5", 6.5),
    ("add", "0x10p0", 0, 16),
    ("sub", 1, 3, -2),
    ("mul", 2**53, 1, 2**53),
    ("mul", 2**53, 2, 2.0**54),
    ("add", 2**53 + 1, 0, 2**53),      # computed in doubles
    ("div", 1, 3, 1 / 3),
    ("div", -7.0, 2, -3.5),
    ("mul", 1.5, 2, 3.0),               # an operand is not integral: float
    ("sub", 0.3, 0.1, 0.3 - 0.1),
])
def test_results_and_types(name, a, b, expected):
    got = call(name, [a, b])
    assert got == expected
    assert type(got) is type(expected)


@pytest.mark.parametrize("a,b,expected", [
    (-9, 4, -1), (9, 4, 1), (9, -4, 1), (-9, -4, -1), (8, 4, 0), (7.0, "2", 1), ("10", 3, 1),
    (2**53, 3, 2**53 % 3),
])
def test_mod_truncated(a, b, expected):
    got = call("mod", [a, b])
    assert got == expected and type(got) is int


@pytest.mark.parametrize("bad", [None, True, False, [1], {"a": 1}, "", " 1", "1 ", "abc",
                                 "NaN", "nan", "Inf", "-Infinity", "infinity", "1e400", "1_0",
                                 10**400])
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "mod"])
def test_non_num_operands(name, bad):
    fails(name, bad, 1)
    fails(name, 1, bad)


def test_error_messages_name_the_operand():
    assert "first argument" in fails("add", None, 1)
    assert "second argument" in fails("mul", 1, "x")


def test_division_by_zero_exact_text():
    assert fails("div", 1, 0) == "&div: division by zero"
    assert fails("div", 1.5, 0.0) == "&div: division by zero"
    assert fails("div", 1, "-0") == "&div: division by zero"


def test_modulo_by_zero_exact_text():
    assert fails("mod", 1, 0) == "&mod: modulo by zero"


def test_mod_non_integral_and_too_large():
    fails("mod", 7.5, 2, match="not an integer")
    fails("mod", 7, 2.5, match="not an integer")
    fails("mod", 2**53 + 2, 3, match="2^53")
    fails("mod", 3, -(2**54), match="2^53")


@pytest.mark.parametrize("name,a,b", [("mul", 1e200, 1e200), ("add", 1.7e308, 1.7e308),
                                      ("div", 1e300, 1e-300), ("sub", -1.7e308, 1.7e308)])
def test_non_finite_result(name, a, b):
    fails(name, a, b, match="not finite")


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "mod"])
def test_arity(name):
    fails(name, 1, match="takes 2 arguments, got 1")
    fails(name, 1, 2, 3, match="takes 2 arguments, got 3")
