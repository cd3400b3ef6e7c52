"""Hypothesis: random rules are printed, re-parsed, and give the same AST; printing the
re-parsed rule from its own text is stable (idempotent)."""

from __future__ import annotations

import base64

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from txcl.check.analyze import parse
from txcl.syntax import ast
from txcl.syntax.ast import to_json
from txcl.syntax.printer import print_rule

KEYWORDS = {"when", "set", "select", "with", "priority", "exec", "loop", "emit", "as", "default",
            "until", "true", "false", "null", "fn", "let", "if", "else", "return"}

ident = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)
with_ident = ident.filter(lambda s: s.lower() not in KEYWORDS)
plain_seg = st.from_regex(r"[A-Za-z0-9_-]{1,6}", fullmatch=True)
quoted_seg = st.text(st.characters(blacklist_characters='"\n\r\x00', blacklist_categories=("Cs",)),
                     min_size=1, max_size=6)
segment = st.one_of(plain_seg, plain_seg, quoted_seg)


@st.composite
def paths(draw):
    if draw(st.booleans()):
        first = draw(ident)
        rest = draw(st.lists(segment, max_size=3))
        return ast.Path(("_txc", first, *rest), at_sugar=True)
    first = draw(ident)
    return ast.Path((first, *draw(st.lists(segment, max_size=3))), at_sugar=False)


ints = st.integers(min_value=-(2**63), max_value=2**63 - 1).map(lambda v: ast.IntLit(v, str(v)))
floats = st.tuples(st.integers(-10**6, 10**6), st.integers(0, 999)).map(
    lambda t: ast.FloatLit(float(f"{t[0]}.{t[1]}"), f"{t[0]}.{t[1]}"))
text_chars = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=12)


@st.composite
def strings(draw):
    plain = draw(text_chars)
    if draw(st.integers(0, 4)) == 0:
        encoded = base64.b64encode(plain.encode("utf-8")).decode("ascii")
        return ast.StringLit(encoded, b64=True, plain=plain)
    return ast.StringLit(plain, b64=False, plain=plain)


bools = st.booleans().map(ast.BoolLit)
scalar_lits = st.one_of(ints, floats, strings(), bools)
arrays = st.recursive(st.lists(scalar_lits, max_size=3).map(lambda xs: ast.ArrayLit(tuple(xs))),
                      lambda inner: st.lists(st.one_of(scalar_lits, inner), max_size=3)
                      .map(lambda xs: ast.ArrayLit(tuple(xs))), max_leaves=6)
literals = st.one_of(scalar_lits, arrays)


def calls(args):
    return st.builds(lambda name, a: ast.Call(name, tuple(a)), ident, st.lists(args, max_size=3))


values = st.recursive(st.one_of(literals, paths()), calls, max_leaves=6)
const_calls = st.recursive(calls(literals), lambda inner: calls(st.one_of(literals, inner)), max_leaves=4)

regex_pattern = st.from_regex(r"[a-z0-9/ .]{0,6}", fullmatch=True)
ORDER = [ast.CmpOp.EQ, ast.CmpOp.NE, ast.CmpOp.LT, ast.CmpOp.LE, ast.CmpOp.GT, ast.CmpOp.GE]


@st.composite
def comparisons(draw):
    left = draw(paths())
    if draw(st.integers(0, 3)) == 0:
        op = draw(st.sampled_from([ast.CmpOp.MATCH, ast.CmpOp.NOT_MATCH]))
        source = draw(st.sampled_from(["literal", "string", "null"]))
        pattern = "" if source == "null" else draw(regex_pattern)
        return ast.Comparison(left, op, ast.Regex(pattern, source))
    op = draw(st.sampled_from(ORDER))
    right = draw(st.one_of(ints, floats, strings(), bools, st.just(ast.NullLit()), const_calls))
    return ast.Comparison(left, op, right)


def _extend(inner):
    def make_and(items, seps):
        flat = tuple(i for i in items)
        return ast.And(flat, tuple(seps[: len(flat) - 1]))
    and_items = inner.filter(lambda c: not isinstance(c, ast.And))
    or_items = inner.filter(lambda c: not isinstance(c, ast.Or))
    return st.one_of(
        inner.map(ast.Not),
        st.builds(make_and, st.lists(and_items, min_size=2, max_size=3),
                  st.lists(st.sampled_from(["&&", ","]), min_size=2, max_size=2)),
        st.lists(or_items, min_size=2, max_size=3).map(lambda xs: ast.Or(tuple(xs))),
    )


conditions = st.recursive(comparisons(), _extend, max_leaves=5)
assignments = st.builds(ast.Assignment, paths(), values)
assignment_lists = st.lists(assignments, max_size=3).map(tuple)


@st.composite
def rules(draw):
    when = draw(st.one_of(st.none(), st.builds(ast.Star, st.booleans()).map(ast.When), conditions.map(ast.When)))
    select = draw(st.one_of(
        st.none(), st.just(ast.Select(True)),
        st.lists(st.builds(ast.SelectItem, paths(), st.one_of(st.none(), paths()), st.one_of(st.none(), values)),
                 min_size=1, max_size=3).map(lambda xs: ast.Select(False, tuple(xs)))))
    with_ = draw(st.lists(st.builds(lambda k, rest, v: ast.WithPair((k, *rest), v),
                                    with_ident, st.lists(segment, max_size=2), values), max_size=3))
    loop = draw(st.one_of(st.none(), st.builds(
        ast.Loop, conditions, assignment_lists,
        st.one_of(st.none(), st.integers(0, 10**6).map(lambda ms: ms * 1_000_000)),
        st.one_of(st.none(), st.integers(1, 5000)))))
    return ast.Rule(
        when=when,
        set_pre=draw(assignment_lists),
        select=select,
        set_post=draw(assignment_lists) if select is not None else (),
        with_=tuple(with_),
        priority=draw(st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1).map(ast.Priority))),
        exec=draw(st.one_of(st.none(), st.text(max_size=20).filter(lambda s: "\x00" not in s).map(ast.Exec))),
        loop=loop,
        emit=draw(assignment_lists),
    )


def _shape(node):
    """to_json without spans, clause marks, comments and the file name."""
    def strip(n):
        if isinstance(n, dict):
            return {k: strip(v) for k, v in n.items()
                    if k not in ("span", "name_span", "key_span", "target_span", "clauses", "comments",
                                 "filename", "modifiers")}
        if isinstance(n, list):
            return [strip(v) for v in n]
        return n
    return strip(to_json(node))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules())
def test_printed_rules_parse_back_to_the_same_ast(rule: ast.Rule) -> None:
    text = print_rule(rule)
    parsed, diags = parse(text, "gen.txcl")
    assert parsed is not None, (text, [d.message for d in diags])
    assert _shape(parsed) == _shape(rule), text
    # formatting the parsed rule from its own text changes nothing
    assert print_rule(parsed, text) == text
