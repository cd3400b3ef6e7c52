"""The generated functions (`txcl.evaluate.codegen`) against the reference closures.

Every condition and value expression of the test corpus — the `.txcl` files of the repository
and every rule written as a string in the tests — and of generated rules is evaluated both
ways over envelopes that put values of every JSON kind at the paths the rule reads; the two
must give the same result, or fail with the same error.
"""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
from corpus import corpus_rules, deterministic, envelopes_for, paths_read
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from txcl.errors import TxclError
from txcl.evaluate.values import closure_value, compile_value
from txcl.evaluate.when import closure_condition, compile_condition
from txcl.syntax import ast
from txcl.syntax.parser import parse_rule
from txcl.values.paths import write

def _conditions(rule: ast.Rule) -> list[Any]:
    found = []
    if rule.when is not None:
        found.append(rule.when.condition)
    if rule.loop is not None:
        found.append(rule.loop.until)
    return found


def _values(rule: ast.Rule) -> list[Any]:
    found = [a.value for a in (*rule.set_pre, *rule.set_post, *rule.emit)]
    found += [pair.value for pair in rule.with_]
    if rule.select is not None and not rule.select.star:
        found += [item.default for item in rule.select.items if item.default is not None]
    if rule.loop is not None:
        found += [a.value for a in rule.loop.set]
    return found


def _outcome(fn: Any, *args: Any) -> tuple[str, Any]:
    try:
        value = fn(*args)
    except TxclError as exc:
        return "error", str(exc)
    except Exception as exc:  # noqa: BLE001 - both paths must fail alike
        return "raised", type(exc).__name__
    if isinstance(value, float) and math.isnan(value):
        return "nan", None
    return "value", (type(value).__name__, value)


def _check_condition(node: Any, envelopes: list[dict]) -> None:
    generated, reference = compile_condition(node), closure_condition(node)
    for env in envelopes:
        got, want = _outcome(generated, env), _outcome(reference, env)
        assert got == want, f"{node!r} on {env!r}: generated {got}, reference {want}\n{generated.source}"


def _check_value(node: Any, envelopes: list[dict]) -> None:
    generated, reference = compile_value(node), closure_value(node)
    for env in envelopes:
        for fallback in (None, {"k": 1, **env}):
            got, want = _outcome(generated, env, fallback), _outcome(reference, env, fallback)
            assert got == want, f"{node!r} on {env!r}: generated {got}, reference {want}\n{generated.source}"


CORPUS = corpus_rules()


def test_the_corpus_is_the_size_expected():
    # hundreds of rules from the .txcl files and the tests: the comparison below means something
    assert len(CORPUS) > 500
    assert sum(1 for _, rule in CORPUS if rule.when is not None) > 150
    assert sum(len(_values(rule)) for _, rule in CORPUS) > 800


@pytest.mark.parametrize("chunk", range(4))
def test_every_corpus_rule_evaluates_alike_both_ways(chunk):
    rnd = random.Random(chunk)
    checked = 0
    for _where, rule in CORPUS[chunk::4]:
        for node in _conditions(rule):
            if deterministic(node):
                _check_condition(node, envelopes_for(paths_read(node), rnd, 12))
                checked += 1
        for node in _values(rule):
            if deterministic(node):
                _check_value(node, envelopes_for(paths_read(node), rnd, 6))
                checked += 1
    assert checked > 50


# ------------------------------------------------------------------ generated rules

_segments = st.lists(st.sampled_from(["a", "b", "0", "1", "k", "x y", "ü"]), min_size=1, max_size=3)
_paths_text = _segments.map(lambda segs: "." + ".".join(f'"{s}"' if not s.isalnum() else s for s in segs))
_literals = st.one_of(
    st.integers(-5, 12).map(str), st.sampled_from(["2.5", "-0.5", "1e3", "0.0", "1.0"]),
    st.sampled_from(['"gold"', '""', '"10"', '"true"', '"a b"']), st.sampled_from(["true", "false", "null"]))
_regexes = st.sampled_from(["/^u_/", "/gold/i", "/^$/", "/[0-9]+/", "/null/", '"^g"'])
_comparison = st.one_of(
    st.tuples(_paths_text, st.sampled_from(["==", "!=", "<", "<=", ">", ">="]), _literals).map(" ".join),
    st.tuples(_paths_text, st.sampled_from(["=~", "!~"]), _regexes).map(" ".join),
    st.tuples(_paths_text, st.sampled_from(["==", ">"]), st.sampled_from(['&concat("a", "b")', "&add(1, 2)",
                                                                         "&lower(\"GOLD\")"])).map(" ".join),
)
_conditions_text = st.recursive(
    _comparison,
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["&&", "||"]), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        inner.map(lambda c: f"!({c})")),
    max_leaves=5)
_value_text = st.recursive(
    st.one_of(_paths_text, _literals, st.just("[1, \"a\", [true]]")),
    lambda inner: st.tuples(st.sampled_from(["concat", "add", "lower", "len", "json", "coalesce", "default",
                                              "upper", "sub", "eq"]),
                            st.lists(inner, min_size=0, max_size=3)).map(lambda t: f"&{t[0]}({', '.join(t[1])})"),
    max_leaves=6)


def _generated(text: str) -> ast.Rule:
    """The rule of a generated text; texts that do not parse are discarded (`assume`), and
    hypothesis fails the test when too many are."""
    try:
        return parse_rule(text)
    except TxclError:
        assume(False)
        raise


@settings(max_examples=300, deadline=None)
@given(_conditions_text, st.randoms(use_true_random=False))
def test_generated_conditions_evaluate_alike_both_ways(text, rnd):
    node = _generated(f"WHEN {text}").when.condition
    _check_condition(node, envelopes_for(paths_read(node), rnd, 10))


@settings(max_examples=300, deadline=None)
@given(_value_text, st.randoms(use_true_random=False))
def test_generated_values_evaluate_alike_both_ways(text, rnd):
    node = _generated(f"SET .out = {text}").set_pre[0].value
    _check_value(node, envelopes_for(paths_read(node), rnd, 6))


def test_a_generated_function_reads_paths_directly():
    """The point of generating source: a path read is a chain of dict lookups, typed at load."""
    node = parse_rule('WHEN .user.id =~ /^u_/ && .amount > 1000').when.condition
    source = compile_condition(node).source
    assert ".get('user', M)" in source and ".get('amount', M)" in source and "is int else _int(" in source
    assert "closure" not in source and compile_condition(node)({"user": {"id": "u_1"}, "amount": 1001}) is True


def test_deep_nesting_and_long_paths_evaluate_alike_both_ways():
    """Long paths are read by the generic loop, and an expression too deep for Python's
    compiler keeps its reference closure: either way the results agree."""
    long_path = "." + ".".join(f"p{i}" for i in range(100))
    rule = parse_rule(f"WHEN {long_path} == 1 && .a.b.c.d.e.f.g.h.i.j.k.l.m > 2\nSET .y = {long_path}")
    env = write(write({}, tuple(f"p{i}" for i in range(100)), 1), tuple("abcdefghijklm"), 5)
    _check_condition(rule.when.condition, [env, {}])
    assert compile_condition(rule.when.condition)(env) is True
    _check_value(rule.set_pre[0].value, [env, {}])
    deep = parse_rule("WHEN " + "!(" * 60 + ".a.b.c.d.e.f.g.h.i.j.k.l == 1" + ")" * 60)
    _check_condition(deep.when.condition, [{}, write({}, tuple("abcdefghijkl"), 1)])
    calls = parse_rule("SET .x = " + "&concat(" * 60 + ".a.b.c.d.e.f.g.h.i.j.k.l" + ")" * 60)
    _check_value(calls.set_pre[0].value, [{}, write({}, tuple("abcdefghijkl"), "z")])


@pytest.mark.parametrize("text, env, message", [
    ('&div(.a, 0)', {"a": 1}, "&div: "),  # the implementation's own error
    ('&join(.parts, "")', {"parts": [1234567890] * 200_000}, "&join: result would be "),  # the size limit
    ('&to_json(.a)', {"a": float("nan")}, "&to_json: "),  # a value the implementation cannot take
])
def test_a_call_that_fails_fails_alike_both_ways(text, env, message):
    """A generated call runs the function's implementation directly (its arity settled when
    the rule is loaded): errors and the size limit must come out as through `call`."""
    node = parse_rule(f"SET .x = {text}").set_pre[0].value
    source = compile_value(node).source
    assert "_call(" not in source and "_growth(" in source
    got, want = _outcome(compile_value(node), env, None), _outcome(closure_value(node), env, None)
    assert got == want and got[0] == "error" and got[1].startswith(message), (got, want)
