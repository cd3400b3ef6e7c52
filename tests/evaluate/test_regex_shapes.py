"""Regexes that are plain text are answered by string tests, the others by RE2's own match
call: both must agree with an RE2 search on every text (txcl.evaluate.regex_shapes)."""

from __future__ import annotations

import random

import pytest
import re2

from txcl.evaluate.regex_shapes import (
    CONTAINS,
    EXACT,
    PREFIX,
    SUFFIX,
    literal_shape,
    match_span_reader,
)
from txcl.evaluate.when import closure_condition, compile_condition
from txcl.syntax import ast
from txcl.syntax.transform import compile_regex


@pytest.mark.parametrize("pattern, shape", [
    ("^u_", (PREFIX, "u_")),
    ("error", (CONTAINS, "error")),
    ("\\.json$", (SUFFIX, ".json")),
    ("^ok$", (EXACT, "ok")),
    ("^$", (EXACT, "")),
    ("^", (PREFIX, "")),
    ("", (CONTAINS, "")),
    ("a\\$", (CONTAINS, "a$")),
    ("^https://api\\.example\\.com/v1", (PREFIX, "https://api.example.com/v1")),
    ("a-b c:d@e", (CONTAINS, "a-b c:d@e")),
])
def test_plain_text_patterns_are_recognised(pattern, shape):
    assert literal_shape(pattern) == shape


@pytest.mark.parametrize("pattern", [
    "a.b", "^a+", "a^", "x|y", "[ab]", "a?", "(?i)abc", "\\d", "\\bword", "a{2}", "é", "^a\\", "a\\\\$", "}", "\\x41",
])
def test_patterns_with_a_meaning_keep_re2(pattern):
    assert literal_shape(pattern) is None


def test_this_google_re2_exposes_the_direct_match_call():
    # where it does not, generated WHENs fall back to `search` (slower, same results)
    match = match_span_reader(re2.compile(b"b+"))
    assert match is not None


def _condition(pattern: str, negate: bool) -> ast.Comparison:
    compiled = compile_regex(pattern)
    assert not isinstance(compiled, str), compiled
    op = ast.CmpOp.NOT_MATCH if negate else ast.CmpOp.MATCH
    return ast.Comparison(ast.Path(("a",)), op, ast.Regex(pattern, "literal", compiled))


_PATTERN_ALPHABET = ["a", "b", "A", "_", "-", ".", "^", "$", "\\", "*", "+", "?", "(", ")", "[", "]", "|",
                     " ", ":", "/", "é", "{", "}", "0"]
_TEXT_ALPHABET = ["a", "b", "A", "_", "-", ".", "$", "^", "\\", " ", "\n", "é", "日", "0", ":"]


def test_generated_matches_agree_with_an_re2_search_on_random_patterns_and_texts():
    rnd = random.Random(20261203)
    checked = plain = 0
    texts = ["", "a", "ab", "aab", "a.b", "a$", "é", "aé", "\n", "ab\n", 17, None, True, 2.5, ["a"]]
    texts += ["".join(rnd.choice(_TEXT_ALPHABET) for _ in range(rnd.randint(0, 6))) for _ in range(60)]
    while checked < 400:
        pattern = "".join(rnd.choice(_PATTERN_ALPHABET) for _ in range(rnd.randint(0, 5)))
        if rnd.random() < 0.5:  # more of the plain shapes the fast path takes
            pattern = rnd.choice(["", "^", ""]) + "".join(rnd.choice("ab._-") for _ in range(rnd.randint(0, 3))) \
                + rnd.choice(["", "$"])
            pattern = pattern.replace(".", "\\.")
        if isinstance(compile_regex(pattern), str):
            continue  # RE2 refuses it: the checker reports it (TX005), nothing runs it
        checked += 1
        plain += literal_shape(pattern) is not None
        for negate in (False, True):
            node = _condition(pattern, negate)
            generated, reference = compile_condition(node), closure_condition(node)
            for text in texts:
                env = {"a": text}
                assert generated(env) == reference(env), (pattern, negate, text, generated.source)
    assert plain > 100  # both paths were exercised


def test_a_lone_surrogate_fails_as_before():
    # RE2 reads UTF-8: a text that has none fails the encoding, on both paths alike
    for pattern in ("^u_", "u_[0-9]"):
        node = _condition(pattern, False)
        for fn in (compile_condition(node), closure_condition(node)):
            with pytest.raises(UnicodeEncodeError):
                fn({"a": "u_\ud800"})


def test_a_plain_prefix_is_tested_with_startswith_and_a_regex_with_re2():
    assert "startswith" in compile_condition(_condition("^u_", False)).source
    source = compile_condition(_condition("^u_[0-9]+$", False)).source
    assert "startswith" not in source and "[0][0] != -1" in source
