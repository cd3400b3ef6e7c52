"""WHEN semantics: the coercion table of docs/language.md, row by row."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import txcl
from txcl.evaluate.when import condition_matches


def matches(condition: str, envelope: dict) -> bool:
    return txcl.when_matches(txcl.parse_rule(f"WHEN {condition}"), envelope)


# (condition, envelope, expected)
TABLE = [
    # integer literal: integer form of the left side
    (".q == 3", {"q": 3}, True),
    (".q == 3", {"q": 3.7}, True),
    (".q == 3", {"q": "3"}, True),
    (".q == 3", {"q": "3.0"}, False),
    (".q == 3", {"q": " 3"}, False),
    (".q == 1", {"q": True}, True),
    (".q == 0", {}, True),
    (".q == 0", {"q": None}, True),
    (".q == 0", {"q": [1]}, True),
    (".q < 0", {"q": -2.5}, True),
    (".q > 1000", {"q": 1001}, True),
    (".q >= 1000", {"q": "999"}, False),
    (".q == -2", {"q": -2.9}, True),
    # float literal: float form
    (".q == 2.5", {"q": "2.5"}, True),
    (".q > 2.5", {"q": "1e3"}, True),
    (".q == 1.0", {"q": True}, True),
    (".q == 0.0", {"q": "abc"}, True),
    (".q != 1.5", {"q": "nan"}, True),
    (".q == 1.5", {"q": "nan"}, False),
    (".q < 1.5", {"q": "nan"}, False),
    # string literal / null: text form, code-point order
    ('.s == "abc"', {"s": "abc"}, True),
    ('.s == "40"', {"s": 40}, True),
    ('.s < "5"', {"s": 40}, True),
    ('.s == "true"', {"s": True}, True),
    ('.s == "2.5"', {"s": 2.50}, True),
    ('.s == "4"', {"s": 4.0}, True),
    ('.s == "[1,2]"', {"s": [1, 2]}, True),
    ('.s == "{\\"a\\":1}"', {"s": {"a": 1}}, True),
    ('.s == ""', {}, True),
    (".s == null", {}, True),
    (".s == null", {"s": None}, True),
    (".s == null", {"s": ""}, True),
    (".s != null", {"s": 0}, True),
    (".s != null", {"s": False}, True),
    ('.s > "a"', {"s": "é"}, True),
    # booleans: boolean form, only == and !=
    (".b == true", {"b": "TRUE"}, True),
    (".b == true", {"b": "T"}, True),
    (".b == true", {"b": "1"}, True),
    (".b == true", {"b": "yes"}, False),
    (".b == true", {"b": " true"}, False),
    (".b == true", {"b": 2}, True),
    (".b == false", {}, True),
    (".b == false", {"b": {}}, True),
    (".b != false", {"b": 0.5}, True),
    (".b < true", {"b": False}, False),
    (".b >= false", {"b": True}, False),
    # regex: unanchored search on the text form
    (".status =~ /^5/", {"status": 503}, True),
    (".status !~ /^5/", {"status": 404}, True),
    ('.name =~ "^a.c$"', {"name": "abc"}, True),
    (".name =~ null", {}, True),
    (".name !~ null", {"name": "x"}, False),
    (".id =~ /^u_/", {"id": "u_1"}, True),
    (".id =~ /(?i)^U_/", {"id": "u_1"}, True),
    # calls on the right: the result type decides
    (".n == &add(1, 2)", {"n": "3"}, True),
    ('.s == &concat("a", "b")', {"s": "ab"}, True),
    (".n == &div(1, 0)", {"n": 0}, False),
    (".n != &div(1, 0)", {"n": 0}, False),
    (".n == &try_json(\"null\")", {}, False),
    ('.n == &json("[1]")', {"n": [1]}, False),
    ('.b == &json("true")', {"b": "t"}, True),
    ('.n == &json("5")', {"n": 5.9}, True),
    # missing equals 0, 0.0, "", false and null
    (".m == 0 && .m == 0.0 && .m == \"\" && .m == false && .m == null", {}, True),
]


@pytest.mark.parametrize("condition,envelope,expected", TABLE)
def test_coercion_table(condition: str, envelope: dict, expected: bool) -> None:
    assert matches(condition, envelope) is expected


def test_precedence_not_binds_one_operand() -> None:
    cond = "!.paid == true && .due > 0"
    assert matches(cond, {"paid": False, "due": 5})
    assert not matches(cond, {"paid": True, "due": 5})
    assert not matches(cond, {"paid": False, "due": 0})


def test_or_and_comma() -> None:
    assert matches('.a == 1 || .b == 1, .c == 1', {"b": 1, "c": 1})
    assert not matches('.a == 1 || .b == 1, .c == 1', {"b": 1})
    assert matches('.a == 1 || .b == 1, .c == 1', {"a": 1})
    assert matches('(.a == 1 || .b == 1) && .c == 1', {"b": 1, "c": 1})


def test_star_bare_and_absent_when_match_everything() -> None:
    for text in ("WHEN *", "WHEN", "", "EMIT .x = 1"):
        assert txcl.when_matches(txcl.parse_rule(text), {})


def test_no_envelope_matches_nothing() -> None:
    assert not txcl.when_matches(txcl.parse_rule("WHEN *"), None)


def test_at_sugar_reads_txc() -> None:
    assert matches('@src == "http"', {"_txc": {"src": "http"}})
    assert not matches('@src == "http"', {"src": "http"})


def test_array_index_and_quoted_segments() -> None:
    assert matches(".items.1 == 20", {"items": [10, 20]})
    assert matches('.labels."app.kubernetes.io/name" == "web"',
                   {"labels": {"app.kubernetes.io/name": "web"}})
    assert matches(".headers.content-type == \"json\"", {"headers": {"content-type": "json"}})


def test_loop_until_uses_the_same_semantics() -> None:
    rule = txcl.parse_rule('LOOP UNTIL .done == true MAX 3 EXEC "txco://copy"')
    assert condition_matches(rule.loop.until, {"done": "true"})
    assert not condition_matches(rule.loop.until, {})


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3),
    max_leaves=10,
)


@settings(max_examples=200, deadline=None)
@given(envelope=st.dictionaries(st.sampled_from(["a", "b", "s", "n", "_txc"]), json_values, max_size=5))
def test_when_never_raises(envelope: dict) -> None:
    rule = txcl.parse_rule(
        'WHEN .a == 1 || .b =~ /x/ && .s < "m" , !(.n >= 2.5) || .a.b.c == true || .s == &len("abc")'
    )
    assert txcl.when_matches(rule, envelope) in (True, False)
