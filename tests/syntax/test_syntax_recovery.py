"""Error recovery: independent errors in file order, no consequences."""

from __future__ import annotations

import pytest

from txcl.errors import TxclSyntaxError
from txcl.syntax.parser import get_parser, parse_rule


def _codes(source: str) -> list[tuple[str, int, int]]:
    with pytest.raises(TxclSyntaxError) as info:
        parse_rule(source)
    return [(d.code, d.line, d.column) for d in info.value.diagnostics]


def test_errors_in_three_clauses_all_reported_in_order():
    source = (
        "WHEN .a == .b\n"          # TX026
        "SET .x \"v\"\n"           # TX014
        "SELECT .ok\n"
        "EXEC 5\n"                 # TX019
        "EMIT .done = true\n"
    )
    assert _codes(source) == [("TX026", 1, 12), ("TX014", 2, 8), ("TX019", 4, 6)]


def test_rest_of_a_broken_clause_is_skipped():
    # after the first error the other bad characters of the SET clause (';', '}') are skipped
    assert _codes("SET .x 'x' ; .y = 5 }\nEXEC \"txco://noop\"") == [("TX001", 1, 8)]


def test_resumes_at_offending_clause_keyword():
    # the SELECT that ended the WHEN too early is parsed as a clause of its own
    assert _codes("WHEN .a == SELECT .b AS 5") == [("TX026", 1, 12), ("TX021", 1, 25)]


def test_keyword_used_as_with_key_does_not_start_a_clause():
    assert _codes("WITH set = 1\nEXEC 5") == [("TX018", 1, 6), ("TX019", 2, 6)]


def test_lexical_errors_in_skipped_text_are_not_reported():
    assert _codes("SET .x = 1 2 'q' 7-2\nPRIORITY x") == [("TX010", 1, 12), ("TX020", 2, 10)]


def test_syntax_and_value_errors_are_merged_in_file_order():
    source = 'LOOP UNTIL .a =~ /(/ MAX 0 EVERY "x"\nWHEN .b ==\n'
    assert _codes(source) == [("TX005", 1, 18), ("TX030", 1, 26), ("TX031", 1, 34),
                              ("TX026", 2, 11)]


def test_repeated_clause_with_error_inside_reports_both():
    assert _codes("EXEC \"txco://a\"\nEXEC \"txco://b\"\nWHEN .x") == [
        ("TX011", 2, 1), ("TX023", 3, 8)]


def test_semantic_checks_wait_for_syntax_errors():
    # the unknown function is not reported while the file has a syntax error
    assert _codes("SET .x = &nope(1)\nEXEC 5") == [("TX019", 2, 6)]
    assert _codes("SET .x = &nope(1)") == [("TX101", 1, 10)]


def test_unterminated_string_swallows_the_rest():
    assert _codes('SET .x = "abc\nEXEC 5\nWHEN .a 1') == [("TX003", 1, 10)]


def test_no_explainer_disagreement_on_recovery_cases():
    before = get_parser().mismatches
    for source in ("WHEN ((.a == 1) SET .x", "LOOP MAX SET .x = 1 UNTIL", "SELECT * .a, .b AS",
                   "WITH a.b .c = 1", "EMIT .a = [1, [2, .x]]"):
        with pytest.raises(TxclSyntaxError):
            parse_rule(source)
    assert get_parser().mismatches == before


def test_explaining_many_errors_makes_each_token_object_once(monkeypatch):
    """The explainer's token objects are made once per parse, not once per error (a file
    with thousands of mistakes must not cost the square of its length)."""
    import txcl.syntax.parser as parser_module
    from txcl.syntax.parser import get_parser
    from txcl.syntax.tokens import Tok

    made = 0

    class CountingTok(Tok):
        __slots__ = ()

        def __init__(self, *args):
            nonlocal made
            made += 1
            super().__init__(*args)

    monkeypatch.setattr(parser_module, "Tok", CountingTok)
    text = "WHEN .a == == 1\nLOOP UNTIL .a == 1 every every 5\n" * 300
    rule, diags = get_parser().parse(text, "many.txcl")
    assert rule is None and len(diags) == 600
    tokens = 6 * 300 + 8 * 300
    assert made <= tokens + 1 + 300  # every token, `$END`, and each `every` turned keyword again
