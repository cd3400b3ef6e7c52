"""Property test: every diagnostic of `txcl check` points inside the text it is about — its
offsets within the text, its line and column consistent with its offset, its end not before
its start. Editors place squiggles from these numbers; one past the text breaks them."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from txcl.check import check_source

SOUP = [
    "WHEN", "when", "SET", "SELECT", "WITH", "PRIORITY", "EXEC", "LOOP", "EMIT", "AS", "DEFAULT",
    "UNTIL", "EVERY", "MAX", ".a", ".b.c", "@x", '.q."k.1"', ".a..b", ".", "@", '"s"', 'b64"x"',
    '"open', "1", "-2", "3.5", "012", "7-2", "99999999999999999999", "&f(", "&concat(", "&ad(",
    "&&", "||", ",", "!", "(", ")", "[", "]", "*", "=", "==", "!=", ">=", "=~", "/a/", "/(/",
    "{", "#c\n", "# noqa: TX201\n", "# noqa: TX999\n", "# txcl: noqa\n", "\n", " ", "\r", "\r\n",
    "\t", "timeout", "mode", '"async"', '"txco://noop"', '"https://h.example"', "join_at_scope",
    "each", "é", "😀", "\ufeff", "\x00", "\ud800",
]


def _lines(text: str) -> list[str]:
    return text.split("\n")


def _assert_inside(text: str) -> None:
    lines = _lines(text)
    for d in check_source(text, "x.txcl"):
        start, end = d.span.start, d.span.end
        where = f"{d.code} {d.span.as_list()} offsets {start.offset}..{end.offset} in {text!r}"
        assert 0 <= start.offset <= end.offset <= len(text), where
        assert 1 <= start.line <= len(lines) and 1 <= end.line <= len(lines), where
        assert (start.line, start.column) <= (end.line, end.column), where
        for pos in (start, end):
            line = lines[pos.line - 1]
            assert 1 <= pos.column <= len(line) + 1, where
            line_start = sum(len(x) + 1 for x in lines[:pos.line - 1])
            assert line_start + pos.column - 1 == pos.offset, where


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(SOUP), max_size=30), st.sampled_from([" ", "", "\n"]))
def test_diagnostics_of_token_soup_lie_inside_the_text(tokens, sep) -> None:
    _assert_inside(sep.join(tokens))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=120))
def test_diagnostics_of_arbitrary_text_lie_inside_the_text(text) -> None:
    _assert_inside(text)


def test_a_noqa_comment_after_an_unclosed_quoted_segment_is_placed_on_its_own_line() -> None:
    """Found by the stress run: the comment scan skipped the line break that ends an unclosed
    quoted path segment (and one escaped inside a string), so a later `# noqa` was reported
    one line too high."""
    from txcl.check.noqa import scan_comments

    for text in ['."open#c\n# noqa: TX999\n', 'SET .a = "x\\\n# noqa: TX999\n"\n# noqa: TX999\n']:
        _assert_inside(text)
    assert scan_comments('."open#c\n# noqa: TX999\n') == [(2, 1, 9, " noqa: TX999")]
    assert [c[:3] for c in scan_comments('SET .a = "x\\\ny"\n# z\n')] == [(3, 1, 16)]


def test_diagnostics_at_the_end_of_the_text_lie_inside_it() -> None:
    for text in ["WHEN .a ==", "SET .a = \"open", "WHEN (", "EMIT .a = 1 # noqa: TX999",
                 "SET .a = 012\r", "WHEN .a == 1\n\n\n", "\ufeffWHEN", "SET .a = &concat(1,"]:
        _assert_inside(text)


@pytest.mark.slow
@settings(max_examples=20000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(SOUP), max_size=60), st.sampled_from([" ", "", "\n"]))
def test_diagnostics_of_token_soup_lie_inside_the_text_stress(tokens, sep) -> None:
    _assert_inside(sep.join(tokens))
