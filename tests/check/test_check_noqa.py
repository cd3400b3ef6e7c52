"""Inline suppression and TX303 unused-noqa."""

from __future__ import annotations

from txcl.check import check_source
from txcl.check.config import CheckConfig
from txcl.check.noqa import parse_directives, scan_comments


def _codes(text: str, config: CheckConfig | None = None) -> list[tuple[str, int]]:
    return [(d.code, d.line) for d in check_source(text, "r.txcl", config)]


def test_line_noqa_with_code_suppresses_that_code_only() -> None:
    assert _codes("EMIT .a = 012  # noqa: TX201\n") == []
    assert _codes("WHEN  # noqa: TX201\nEMIT .a = 012\n") == [("TX202", 1), ("TX303", 1), ("TX201", 2)]


def test_blanket_noqa_and_lists() -> None:
    assert _codes("EMIT .a = 012, .a = 013  # noqa\n") == []
    assert _codes("EMIT .a = 012, .a = 013  # NOQA: tx201,TX204\n") == []


def test_file_level_noqa() -> None:
    assert _codes("# txcl: noqa\nWHEN\nEMIT .a = 012\n") == []
    assert _codes("WHEN\nEMIT .a = 012\n# txcl: noqa: TX201\n") == [("TX202", 1)]


def test_noqa_after_another_comment_and_not_inside_strings() -> None:
    assert _codes("EMIT .a = 012  # legacy value # noqa: TX201\n") == []
    assert _codes('EMIT .a = 012, .s = "# noqa: TX201"\n') == [("TX201", 1)]
    assert _codes('WHEN .s =~ /#noqa/ && .n == 012\n') == [("TX201", 1)]


def test_unused_noqa_is_tx303_and_can_be_ignored() -> None:
    text = "EMIT .a = 12  # noqa: TX201\n"
    assert _codes(text) == [("TX303", 1)]
    assert _codes(text, CheckConfig(ignore=("TX303",))) == []


def test_noqa_for_a_disabled_code_is_not_unused() -> None:
    assert _codes("EMIT .a = 12  # noqa: TX201\n", CheckConfig(ignore=("TX201",))) == []


def test_scan_comments_skips_strings_regexes_and_quoted_segments() -> None:
    text = 'WHEN .a."x#y" == "#no" && .b =~ /a#b/ # real\nEMIT .s = "multi\n# line" # two\n'
    assert [c[3] for c in scan_comments(text)] == [" real", " two"]
    assert [(d.line, d.codes) for d in parse_directives("EMIT .a = 1 # noqa: TX201 TX202\n")] == [
        (1, ("TX201", "TX202"))]


def test_noqa_in_a_file_that_does_not_parse_is_not_unused() -> None:
    assert _codes("EMIT .a = 012  # noqa: TX201\nEMIT .b 1\n") == [("TX014", 2)]
    assert _codes("EMIT .a = 12  # noqa\nEMIT .b 1\n") == [("TX014", 2)]
    assert _codes("EMIT .a = 12  # noqa: TX001\nEMIT .b 1\n") == [("TX303", 1), ("TX014", 2)]
