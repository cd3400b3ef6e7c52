"""The language's vocabulary in one module: keywords, WITH keys (which drive TX209 and the
editor's documentation), reserved paths, the duration parser and the JSON type names."""

from __future__ import annotations

import pytest

from txcl import vocabulary as v


def test_the_keywords_are_the_lexers_and_the_highlighters():
    from txcl import highlight
    from txcl.syntax import tokens

    assert tokens.CLAUSE_KEYWORDS is v.CLAUSE_KEYWORDS and highlight.CLAUSE_KEYWORDS is v.CLAUSE_KEYWORDS
    assert set(tokens.KEYWORDS.values()) == {*v.CLAUSE_KEYWORDS, *v.ITEM_WORDS, "UNTIL", *v.CONSTANTS}
    assert tokens.RESERVED == {w.lower() for w in v.RESERVED_WORDS}


@pytest.mark.parametrize("text, ns", [("250ms", 250_000_000), ("1h30m", 5_400_000_000_000), ("-1.5s", -1_500_000_000),
                                      (".5s", 500_000_000), ("0", 0), ("1.5µs", 1_500), ("5", None), ("5sec", None),
                                      ("", None), ("2d", None), ("9999999999h", None)])
def test_one_go_duration_parser(text, ns):
    assert v.parse_duration_ns(text) == ns


def test_settings_take_days_through_the_same_parser():
    from txcl.runtime.config import parse_duration_ms

    assert v.parse_duration_ns("2d", days=True) == 2 * v.DAY_NS
    assert parse_duration_ms("1d12h") == 36 * 3_600_000 and parse_duration_ms("1.5s") == 1_500
    with pytest.raises(ValueError):
        parse_duration_ms("-5s")


def test_one_json_type_function_worded_by_each_message():
    from txcl.evaluate.rule import json_type as evaluate_type
    from txcl.functions.helpers import describe
    from txcl.types.shape import type_of

    values = [None, True, 3, 2.5, "s", [1], {"a": 1}]
    assert [v.json_type(x) for x in values] == ["null", "boolean", "integer", "number", "string", "array", "object"]
    assert [type_of(x) for x in values] == [v.json_type(x) for x in values]
    assert evaluate_type(3) == "number" and describe([1]) == "a list" and describe(3) == "an integer"
    assert v.with_article("integer") == "an integer" and v.with_article("string") == "a string"


def test_every_with_key_states_what_it_takes_and_needs_known_keys():
    names = {k.name for k in v.WITH_KEYS}
    checks = {"duration", "choice", "integer", "scope", "array", "path", "string", "literal-string", "boolean",
              "count-or-percent", "url", None}
    for key in v.WITH_KEYS:
        assert key.check in checks, key.name
        assert all(needed in names for needed, _ in key.requires), key.name
        if key.check == "choice":
            assert key.choices, key.name
        if key.check == "integer":
            assert key.minimum is not None and key.maximum is not None, key.name


def test_tx209_follows_the_table(monkeypatch):
    """A key's entry alone decides what TX209 says: a changed range is checked at once."""
    import attrs

    from txcl.check.engine import check_source

    def messages(text):
        return [d.message for d in check_source(text, "r.txcl") if d.code == "TX209"]

    rule = 'WITH mode = "async", retries = 7\nEXEC "https://w.example/x"\n'
    assert messages(rule) == []
    narrow = {**v.WITH_KEY_DOCS, "retries": attrs.evolve(v.WITH_KEY_DOCS["retries"], maximum=5)}
    monkeypatch.setattr("txcl.check.rules.with_.WITH_KEY_DOCS", narrow)
    # (another text: findings are cached by a file's bytes)
    assert messages(rule.replace("/x", "/y")) == ["retries must be an integer from 0 to 5, got 7"]
    assert messages('WITH window = 4\nEXEC "https://w.example/x"\n') == ["window has no effect without each"]


def test_the_reserved_paths_are_stated_once():
    from txcl.check.rules import assign
    from txcl.values import reserved

    assert reserved.AUTHOR_WRITABLE is v.AUTHOR_WRITABLE
    assert {("_txc", *p) for p in assign.DELETABLE_FACTS} == v.DELETE_ONLY_INBOUND


def test_the_editor_explains_a_with_key_from_its_entry():
    from txcl.lsp import analysis

    text = 'WITH retries = 3\nEXEC "https://w.example/x"\n'
    shown = analysis.hover(text, text.index("retries") + 2).markdown
    entry = v.WITH_KEY_DOCS["retries"]
    assert entry.doc in shown and "Default: 0." in shown and 'Has an effect only with mode = "async".' in shown
