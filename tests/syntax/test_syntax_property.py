"""Property tests: any text into parse_rule raises nothing but TxclSyntaxError."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from txcl.errors import TxclSyntaxError
from txcl.syntax import ast
from txcl.syntax.parser import clear_cache, get_parser, parse_rule

TOKENS = [
    "WHEN", "when", "SET", "SELECT", "WITH", "PRIORITY", "EXEC", "LOOP", "EMIT", "AS",
    "DEFAULT", "UNTIL", "EVERY", "every", "MAX", "max", "TRUE", "false", "NULL", "let",
    ".a", ".b.c", "@x", '.q."k.1"', ".a..b", ".", "@", '"s"', 'b64"x"', '"\\n"', '"open',
    "1", "-2", "3.5", "7-2", "99999999999999999999", "&f(", "&now(", "&add(", "&x", "&&",
    "||", ",", "!", "(", ")", "[", "]", "*", "=", "==", "!=", "<", "<=", ">", ">=", "=~",
    "!~", "/a/", "/(/", "/x", "{", "'", "|", "#c\n", "\n", " ", "timeout", "mode", '"async"',
    '"txco://noop"', '"https://h.example"', "join_at_scope", "each", "é", "\ufeff", "\r\n",
]


def _check(text: str) -> None:
    try:
        rule = parse_rule(text)
    except TxclSyntaxError as exc:
        assert exc.diagnostics, "an error without diagnostics"
        offsets = [d.span.start.offset for d in exc.diagnostics
                   if d.code.startswith("TX0")]
        assert offsets == sorted(offsets)
        for d in exc.diagnostics:
            assert d.code.startswith("TX") and d.message
            assert 1 <= d.line and 1 <= d.column
            str(exc)  # rendering never fails
    else:
        assert isinstance(rule, ast.Rule)
        ast.to_json(rule)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=200))
def test_arbitrary_text_raises_only_syntax_errors(text):
    _check(text)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(TOKENS), max_size=30), st.sampled_from([" ", "", "\n"]))
def test_token_soup_raises_only_syntax_errors(tokens, sep):
    before = get_parser().mismatches
    _check(sep.join(tokens))
    # the recursive-descent explainer always agrees with the LALR table
    assert get_parser().mismatches == before


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=120))
def test_arbitrary_bytes(data):
    from txcl.syntax.parser import parse_source

    try:
        parse_source(data)
    except TxclSyntaxError:
        pass


def test_cache_can_be_cleared():
    clear_cache()
    assert parse_rule("WHEN *").when is not None


@pytest.mark.slow
@settings(max_examples=20000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(TOKENS), max_size=40), st.sampled_from([" ", "", "\n"]))
def test_token_soup_stress(tokens, sep):
    before = get_parser().mismatches
    _check(sep.join(tokens))
    assert get_parser().mismatches == before
