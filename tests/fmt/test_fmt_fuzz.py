"""Hypothesis: generated rules, then written the way people write them (keywords in any case,
comments between any two tokens, including between LOOP modifiers, `# noqa` directives at
line ends, leading-zero numbers, CRLF line ends). `txcl fmt` must format every one of them
(never refuse a valid rule), be idempotent, keep the rule and its comments, and leave the
lint findings as they were: a `# noqa` still suppresses what it suppressed."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fmt_roundtrip import rules

from txcl.check import check_source
from txcl.check.analyze import parse
from txcl.check.fix import semantic_json
from txcl.check.config import CheckConfig
from txcl.fmt import FORMAT_FIXES, FormatError, format_text
from txcl.syntax.lexer import scan
from txcl.syntax.printer import print_rule
from txcl.syntax.tokens import ALL_KEYWORD_TYPES



def _mixed_case(word: str, pattern: list[bool]) -> str:
    return "".join(ch.upper() if up else ch.lower() for ch, up in zip(word, pattern * len(word)))


PLAIN_COMMENTS = ["  # c{n}\n", "\n# c{n}\n"]
NOQA_COMMENTS = ["  # noqa: TX201\n", " # noqa: TX201\n\n"]
# where people put a `# noqa`: at the end of a clause, a list item or a LOOP modifier
ITEM_ENDS = {"WHEN", "SET", "SELECT", "WITH", "PRIORITY", "EXEC", "LOOP", "EMIT", "UNTIL", "EVERY", "MAX"}


@st.composite
def written(draw, noqa_anywhere: bool = False):
    text = print_rule(draw(rules()))
    tokens = [t for t in scan(text).tokens if t.type != "EOF"]
    out, pos, n, previous, depth, item_broken = [], 0, 0, None, 0, False
    for tok in tokens:
        gap = text[pos:tok.start]
        at_item_end = depth == 0 and (tok.type in ITEM_ENDS or (previous is not None and previous.type == "COMMA"))
        if pos and draw(st.integers(0, 4)) == 0:
            # a noqa after an item written on several lines would cover all of it once fmt
            # joins it: that is the refused case, tested below
            clean = at_item_end and not item_broken
            choices = PLAIN_COMMENTS + (NOQA_COMMENTS if noqa_anywhere or clean else [])
            gap = draw(st.sampled_from(choices)).format(n=n)
            n += 1
            item_broken = item_broken or not at_item_end
        if at_item_end:
            item_broken = False
        previous = tok
        depth += (tok.type in ("LPAR", "LSQB") or tok.value.endswith("(")) - (tok.type in ("RPAR", "RSQB"))
        value = tok.value
        if tok.type in ALL_KEYWORD_TYPES and draw(st.booleans()):
            value = _mixed_case(value, draw(st.lists(st.booleans(), min_size=1, max_size=3)))
        elif tok.type == "INT" and value.isdigit() and draw(st.integers(0, 3)) == 0:
            value = "0" + value  # TX201: a leading zero
        out += [gap, value]
        pos = tok.end
    out.append(text[pos:])
    result = "".join(out)
    if draw(st.booleans()):
        result = result.replace("\n", "\r\n")
    return text, result


def _findings(text: str) -> Counter:
    # what fmt is there to change (clause order, split clauses) is not compared
    return Counter(d.code for d in check_source(text, "x.txcl", CheckConfig(ignore=FORMAT_FIXES)))


def _parses_as_generated(original: str, text: str):
    rule, _ = parse(text, "x.txcl")
    expected, _ = parse(original, "x.txcl")
    if rule is None or semantic_json(rule) != semantic_json(expected):
        return None  # a comment inside a regex literal or a string: not a place for one
    return rule


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(written())
def test_fmt_formats_rules_as_people_write_them(pair) -> None:
    original, text = pair
    rule = _parses_as_generated(original, text)
    if rule is None:
        return
    once = format_text(text, "x.txcl")  # raises FormatError on a refusal
    assert format_text(once, "x.txcl") == once
    again, _ = parse(once, "y.txcl")
    assert semantic_json(again) == semantic_json(rule)
    assert sorted(c.text.rstrip() for c in again.comments) == sorted(c.text.rstrip() for c in rule.comments)
    assert ("\r\n" in once) == ("\r\n" in text)
    assert _findings(once) == _findings(text), once


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(written(noqa_anywhere=True))
def test_a_noqa_inside_an_item_is_kept_working_or_refused_with_the_reason(pair) -> None:
    """A `# noqa` between the tokens of one item (`.a  # noqa` / `== 1`) cannot always keep
    covering the same findings once the item is on one line: fmt then refuses the file and
    says so, rather than silently dropping a suppression."""
    original, text = pair
    if _parses_as_generated(original, text) is None:
        return
    try:
        once = format_text(text, "x.txcl")
    except FormatError as exc:
        assert "noqa" in text and "# noqa` comment away from the finding" in str(exc)
        return
    assert _findings(once) == _findings(text), once


def test_the_minimal_refusals_found_by_fuzzing_are_formatted() -> None:
    cases = [
        'when *  # noqa: TX201\nwith every = "1h", max = 20, Until_x = 1  # noqa: TX201\n'
        'exec "py://tasks.poll:run"  # noqa: TX201\nloop max 5 every  # note\n'
        '250 until .ok == TRUE set .n = 1  # noqa: TX201\npriority -3  # noqa: TX201\n',
        'LOOP EVERY # c\n250 UNTIL .k == true\nEXEC "txco://echo"\n',
    ]
    for text in cases:
        once = format_text(text, "x.txcl")
        assert once.count("#") == text.count("#")
        assert "EVERY 250" in once


def test_a_noqa_keeps_the_items_of_its_line_together_when_a_clause_breaks() -> None:
    items = ", ".join(f".field_number_{i} AS .dest_{i}" for i in range(6))
    text = f'SELECT .y,\n  .x DEFAULT 012, {items}  # noqa: TX201\nEXEC "txco://noop"\n'
    once = format_text(text, "x.txcl")
    assert once.splitlines()[1].lstrip().startswith(".x DEFAULT 012, .field_number_0")
    assert [d.code for d in check_source(once, "x.txcl")] == []
