"""Safe fixes: TX201, TX301 (never moving SET across SELECT), TX302; noqa and config respected."""

from __future__ import annotations

from txcl.check import check_source
from txcl.check.fix import fix_text, semantic_json
from txcl.syntax.parser import parse_rule


def _fix(text: str, **kw) -> str:
    new, _ = fix_text(text, "r.txcl", **kw)
    assert semantic_json(parse_rule(new)) == semantic_json(parse_rule(text))
    return new


def test_leading_zeros_everywhere() -> None:
    text = ('WHEN .a == 012\nSET .b = [007, -05]\nPRIORITY 010\nEXEC "https://api.example.net/x"\n'
            "LOOP UNTIL .done == true MAX 020 EVERY 0100\n")
    assert _fix(text) == ('WHEN .a == 12\nSET .b = [7, -5]\nPRIORITY 10\nEXEC "https://api.example.net/x"\n'
                          "LOOP UNTIL .done == true MAX 20 EVERY 100\n")


def test_clause_order_keeps_set_pre_and_post_sides() -> None:
    text = 'EXEC "txco://echo"\nSET .pre = 1\nSELECT .a\nWHEN .a == 1\nSET .post = 2\n'
    new = _fix(text)
    assert new == 'WHEN .a == 1\nSET .pre = 1\nSELECT .a\nSET .post = 2\nEXEC "txco://echo"\n'
    rule = parse_rule(new)
    assert [a.target.text for a in rule.set_pre] == [".pre"]
    assert [a.target.text for a in rule.set_post] == [".post"]


def test_clause_order_moves_comments_with_their_clause() -> None:
    text = '# header\n\n# the target\nEXEC "txco://echo"  # echo\n# only gold\nWHEN .tier == "gold"\n'
    assert _fix(text) == '# header\n\n# only gold\nWHEN .tier == "gold"\n# the target\nEXEC "txco://echo"  # echo\n'


def test_clauses_on_one_line_are_split_when_reordered() -> None:
    assert _fix('EXEC "txco://echo" WHEN .a == 1') == 'WHEN .a == 1\nEXEC "txco://echo"'


def test_split_lists_are_joined() -> None:
    assert _fix("EMIT .a = 1 EMIT .b = 2\n") == "EMIT .a = 1, .b = 2\n"
    assert _fix("WITH timeout = \"1s\"  # t\nWITH mode = \"sync\"\n") == \
        'WITH timeout = "1s",  # t\n     mode = "sync"\n'
    text = "SET .a = 1\nEMIT .x = 1\nSET .b = 2\n"
    assert _fix(text) == "SET .a = 1,\n    .b = 2\nEMIT .x = 1\n"
    assert check_source(_fix(text), "r.txcl") == []


def test_noqa_and_disabled_codes_are_not_fixed() -> None:
    assert _fix("EMIT .a = 012  # noqa: TX201\n") == "EMIT .a = 012  # noqa: TX201\n"
    assert _fix("EMIT .a = 012\n", codes=lambda c: c != "TX201") == "EMIT .a = 012\n"
    assert _fix('EXEC "txco://echo"\nWHEN .a == 1  # noqa: TX301\n') == 'EXEC "txco://echo"\nWHEN .a == 1  # noqa: TX301\n'


def test_files_with_syntax_errors_are_left_alone() -> None:
    text = "EMIT .a = 012 .b\n"
    assert fix_text(text, "r.txcl") == (text, [])


def test_rules_with_only_load_errors_are_still_fixed() -> None:
    text = 'EMIT .n = &lenght(.x), .m = 012\n'
    assert fix_text(text, "r.txcl")[0] == 'EMIT .n = &lenght(.x), .m = 12\n'
