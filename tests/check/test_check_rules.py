"""One fixture per rule with the exact findings (code, line, column) it must produce."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from txcl.check import check_source, run_check
from txcl.check.config import load_config

FIXTURES = Path(__file__).parent / "fixtures"

RULE_FIXTURES = {
    "TX010_syntax": [("TX010", 1, 22)],
    "TX101_load": [("TX101", 1, 11), ("TX201", 1, 33)],
    "TX201": [("TX201", 1, 15), ("TX201", 2, 14), ("TX201", 2, 25), ("TX201", 3, 10), ("TX201", 5, 30),
              ("TX201", 5, 40)],
    "TX202": [("TX202", 1, 1)],
    "TX203": [("TX302", 2, 1), ("TX203", 2, 6), ("TX203", 2, 22)],
    "TX204": [("TX204", 1, 24), ("TX204", 3, 21), ("TX302", 5, 1), ("TX204", 5, 6)],
    "TX205": [("TX205", 2, 5), ("TX205", 3, 16), ("TX205", 3, 59), ("TX301", 4, 1), ("TX301", 5, 1),
              ("TX205", 5, 30)],
    "TX206": [("TX206", 1, 5), ("TX206", 1, 19), ("TX206", 1, 36)],
    "TX207": [("TX207", 1, 16), ("TX207", 2, 35), ("TX207", 3, 26)],
    "TX208": [("TX208", 1, 11), ("TX208", 1, 55)],
    "TX209": [("TX209", 1, 16), ("TX209", 1, 40), ("TX302", 2, 1), ("TX209", 2, 15), ("TX209", 2, 37),
              ("TX209", 2, 54), ("TX209", 2, 79), ("TX302", 3, 1), ("TX209", 3, 15), ("TX209", 3, 32),
              ("TX209", 3, 48)],
    "TX210": [("TX210", 2, 12), ("TX210", 2, 33), ("TX210", 2, 53)],
    "TX211": [("TX211", 2, 26)],
    "TX212": [("TX212", 1, 1)],
    "TX214": [("TX214", 1, 22), ("TX214", 1, 42)],
    "TX215": [("TX207", 1, 11), ("TX302", 2, 1), ("TX215", 2, 11)],
    "TX243": [("TX243", 2, 34), ("TX243", 3, 34), ("TX243", 4, 34)],  # the computed intent is left alone
    "TX244": [("TX244", 1, 6), ("TX244", 2, 34), ("TX244", 3, 10), ("TX244", 3, 36)],  # the others are fields
    "TX245": [("TX245", 2, 1)],
    "TX246": [("TX246", 2, 17)],
    "TX268": [("TX268", 1, 13)],  # untyped: a SELECT item under the op's own literal `into`
    "TX301": [("TX301", 2, 1), ("TX301", 3, 1), ("TX301", 4, 1), ("TX301", 5, 1)],
    "TX302": [("TX301", 3, 1), ("TX302", 3, 1), ("TX302", 4, 1), ("TX301", 5, 1), ("TX301", 6, 1),
              ("TX302", 6, 1)],
    "TX303": [("TX303", 1, 1), ("TX302", 3, 1), ("TX303", 3, 13), ("TX302", 4, 1), ("TX303", 4, 15)],
    "clean": [],
}

TREE_FIXTURES = {
    "TX120": [("OPS/shop/discount.txcl", "TX120", 1, 1)],
    "TX121": [("OPS/0100/check.txcl", "TX121", 1, 1)],
    "TX122": [("OPS/shop/0100_b/tax.txcl", "TX122", 1, 1)],
    "TX123": [("OPS/my shop/0100/check.txcl", "TX123", 1, 1), ("OPS/shop/0100/bad.name.txcl", "TX123", 1, 1)],
    "TX213": [("OPS/s/0100/poll.txcl", "TX213", 2, 1)],
    "TX220": [("OPS/s/0300/job.txcl", "TX220", 1, 22)],
    "TX221": [("OPS/s/0100/job.txcl", "TX221", 1, 22)],
    "TX222": [("OPS/s/0200/use.txcl", "TX222", 1, 6), ("OPS/s/0200/use.txcl", "TX222", 2, 29)],
    # the op writes .score by its EMIT (no `into`); scope 200 reads it in WHEN, scope 50 in a
    # function argument (a jump at scope 200 reaches it before the join), scope 300 in SELECT
    # and a SET value; ok.txcl there reads something else
    "TX222_jumps": [("OPS/s/0050/early.txcl", "TX222", 1, 27), ("OPS/s/0200/check.txcl", "TX222", 1, 6),
                    ("OPS/s/0300/sel.txcl", "TX222", 1, 8), ("OPS/s/0300/sel.txcl", "TX222", 2, 15)],
    "TX223": [("OPS/s/0100/a.txcl", "TX223", 1, 22)],
    # (d.txcl, with every join option well placed, reports nothing)
    "TX224": [("OPS/s/0100/a.txcl", "TX224", 1, 22), ("OPS/s/0100/b.txcl", "TX224", 1, 43),
              ("OPS/s/0100/c.txcl", "TX224", 1, 65)],
    "TX230": [("OPS/s/0100/again.txcl", "TX230", 1, 6), ("OPS/s/0200/jump.txcl", "TX230", 1, 1)],
    "TX231": [("OPS/s/0100/a.txcl", "TX231", 1, 1)],
    "TX232": [("OPS/shop/0100/go.txcl", "TX232", 1, 6), ("OPS/shop/0200/guarded.txcl", "TX232", 2, 1)],
    "TX233": [("OPS/shop/0100/go.txcl", "TX233", 1, 6)],
    "TX240": [("OPS/shop/0100/check.txcl.bak", "TX240", 1, 1), ("OPS/shop/0100/rule.TXCL", "TX240", 1, 1)],
    # [egress] refuses private addresses, allows 10.9/16 and denies *.evil.example; the metadata
    # address is refused by default; allowed.txcl and fine.txcl report nothing
    "TX241": [("OPS/s/0100/denied.txcl", "TX241", 1, 1), ("OPS/s/0100/meta.txcl", "TX241", 1, 1),
              ("OPS/s/0100/private.txcl", "TX241", 2, 3)],
    # secrets read from files in secrets/ (secrets-provider = "dir"): PRESENT is there, ABSENT is not
    "TX242": [("OPS/s/0100/call.txcl", "TX242", 2, 39)],
    # _schedule is one letter from _scheduled, so nothing receives what shop schedules; _cron is right
    "inlets": [("OPS/_schedule/0100/report.txcl", "TX248", 1, 1), ("OPS/shop/0100/remind.txcl", "TX247", 2, 1)],
    # typed envelopes: a stack schema with an op schema (shop), and a broken stack schema
    "typed": [("OPS/broken/schema.json", "TX260", 1, 30), ("OPS/shop/0100_a/d.txcl", "TX261", 2, 6),
              ("OPS/shop/0100_a/d.txcl", "TX263", 2, 27), ("OPS/shop/0100_a/early.txcl", "TX262", 2, 6),
              ("OPS/shop/0200_b/e.txcl", "TX263", 1, 6), ("OPS/shop/0200_b/e.txcl", "TX264", 2, 6),
              ("OPS/shop/0200_b/e.txcl", "TX267", 2, 30), ("OPS/shop/0300_c/score.txcl", "TX266", 1, 1),
              ("OPS/shop/0300_c/score.txcl", "TX268", 1, 33), ("OPS/shop/schema.json", "TX265", 21, 20)],
}


def _findings(name: str) -> list[tuple[str, int, int]]:
    text = (FIXTURES / "rules" / f"{name}.txcl").read_text(encoding="utf-8")
    return [(d.code, d.line, d.column) for d in check_source(text, f"{name}.txcl")]


@pytest.mark.parametrize("name", sorted(RULE_FIXTURES))
def test_rule_fixture_exact_findings(name: str) -> None:
    assert _findings(name) == RULE_FIXTURES[name]


def test_every_rule_fixture_is_listed() -> None:
    on_disk = {p.stem for p in (FIXTURES / "rules").glob("*.txcl")}
    assert on_disk == set(RULE_FIXTURES)


@pytest.mark.parametrize("name", sorted(TREE_FIXTURES))
def test_tree_fixture_exact_findings(name: str, monkeypatch) -> None:
    root = FIXTURES / "trees" / name
    monkeypatch.chdir(root)
    result = run_check(["."], load_config("."), cache_dir=False)
    got = [(d.file.replace(os.sep, "/"), d.code, d.line, d.column) for d in result.diagnostics]
    assert got == TREE_FIXTURES[name]


def test_every_check_code_has_a_fixture() -> None:
    """Each TX2xx/TX3xx code and each tree-layout code is exercised by some fixture."""
    from txcl.codes import CODES
    covered = {code for findings in RULE_FIXTURES.values() for code, _, _ in findings}
    covered |= {code for findings in TREE_FIXTURES.values() for _, code, _, _ in findings}
    wanted = {c for c in CODES if "TX120" <= c < "TX400"}  # TX4xx: test files (tests/ruletest)
    wanted -= {"TX250", "TX251", "TX252"}  # need a live MCP server: tests/test_mcp_cli.py
    assert wanted - covered == set()


def test_tree_rules_only_report_files_under_the_given_paths(monkeypatch) -> None:
    monkeypatch.chdir(FIXTURES / "trees" / "TX231")
    result = run_check(["OPS/s/0200"], cache_dir=False)
    # the cycle is reported on the 0100 rule, which lies outside the given path
    assert [d.code for d in result.diagnostics] == []
    result = run_check(["OPS/s/0100"], cache_dir=False)
    assert [d.code for d in result.diagnostics] == ["TX231"]


def test_loose_file_gets_per_file_rules_only(tmp_path) -> None:
    rule = tmp_path / "loose.txcl"
    rule.write_text('EMIT @goto = "other/100", .n = 012\n', encoding="utf-8")
    result = run_check([str(rule)], cache_dir=False)
    assert [d.code for d in result.diagnostics] == ["TX201"]


def test_disabled_directory_is_neither_checked_nor_reported(tmp_path) -> None:
    bad = tmp_path / "OPS" / "s" / "0100" / "_off" / "draft.txcl"
    bad.parent.mkdir(parents=True)
    bad.write_text("WHEN WHEN\n", encoding="utf-8")
    (tmp_path / "OPS" / "s" / "0100" / "ok.txcl").write_text("EMIT .a = 1\n", encoding="utf-8")
    result = run_check([str(tmp_path)], cache_dir=False)
    assert result.diagnostics == []
    assert result.files_checked == 1


def test_rule_docs_examples_trigger_their_codes(monkeypatch) -> None:
    """The bad example of each per-file code reports that code; the good one does not. (The
    good example of TX242 names a secret that is set: this test sets it.)"""
    from txcl.check.docs import DOCS
    monkeypatch.setenv("TXCL_SECRET_STRIPE_KEY", "sk_test_value")
    monkeypatch.delenv("TXCL_SECRET_STRIPE_KYE", raising=False)
    skip = {"TX002", "TX034"}  # the examples describe an encoding and a size, not a text
    problems = []
    for code, doc in DOCS.items():
        if doc.layout or doc.test_file or doc.mcp_server or code in skip:
            continue
        bad = {d.code for d in check_source(doc.bad + "\n", "bad.txcl")}
        good = {d.code for d in check_source(doc.good + "\n", "good.txcl")}
        if code not in bad or code in good:
            problems.append((code, bad, good))
    assert problems == []


def test_a_rule_file_over_one_mebibyte_is_refused_with_tx034(tmp_path) -> None:
    from txcl.syntax.parser import MAX_RULE_BYTES
    big = tmp_path / "big.txcl"
    big.write_text("EMIT .a = 1\n" + "# padding\n" * (MAX_RULE_BYTES // 10), encoding="utf-8")
    found = run_check([str(big)], cache_dir=False).diagnostics
    assert [d.code for d in found] == ["TX034"]
    assert "1,048,576 bytes" in found[0].message and found[0].line > 1
    just_under = "EMIT .a = 1\n" + "#" * (MAX_RULE_BYTES - 13) + "\n"
    assert len(just_under.encode()) == MAX_RULE_BYTES
    assert [d.code for d in check_source(just_under, "ok.txcl")] == []
    assert [d.code for d in check_source(just_under + "#", "big.txcl")] == ["TX034"]


@pytest.mark.parametrize("withs, message", [
    ('on_item_error = "tolerate", tolerated_failures = "lots"',
     'tolerated_failures must be a count (an integer from 0) or a percentage such as "10%", got "lots"'),
    ('on_item_error = "tolerate", tolerated_failures = "150%"',
     'tolerated_failures must be a count (an integer from 0) or a percentage such as "10%", got "150%"'),
    ('on_item_error = "collect", tolerated_failures = 3',
     'tolerated_failures has no effect without on_item_error = "tolerate"'),
    ('tolerated_failures = 3', 'tolerated_failures has no effect without on_item_error = "tolerate"'),
    ('on_item_error = "ignore"', 'on_item_error must be "fail", "collect" or "tolerate", got "ignore"'),
])
def test_tolerated_failures_is_checked(withs, message) -> None:
    rule = f'WITH mode = "async", each = .items, into = "out", {withs}\nEXEC "https://w.example/x"\n'
    found = [(d.code, d.message) for d in check_source(rule, "t.txcl")]
    assert ("TX209", message) in found


@pytest.mark.parametrize("value", ['3', '0', '"10%"', '"12.5%"', '"0%"'])
def test_good_tolerated_failures_values_pass(value) -> None:
    rule = (f'WITH mode = "async", each = .items, into = "out", on_item_error = "tolerate", '
            f'tolerated_failures = {value}\nEXEC "https://w.example/x"\n')
    assert [d.code for d in check_source(rule, "t.txcl")] == []


@pytest.mark.parametrize("withs, message", [
    ('join_at_scope = 300, join_deadline = "soon"', 'join_deadline needs milliseconds or a duration such as "3s", got "soon"'),
    ('join_at_scope = 300, join_wait = -5', 'join_wait needs milliseconds or a duration such as "3s", got -5'),
    ('join_at_scope = 300, join_deadline = "5s", on_join_deadline = "skip"',
     'on_join_deadline must be "fail" or "continue", got "skip"'),
    ('cancel_url = "ftp://w.example/c"', 'cancel_url needs an http(s) URL, got "ftp://w.example/c"'),
    ('retries = 101', 'retries must be an integer from 0 to 100, got 101'),
    ('retries = "3"', 'retries must be an integer from 0 to 100, got "3"'),
    ('retries = 2, retry_backoff = "later"', 'retry_backoff needs milliseconds or a duration such as "3s", got "later"'),
    ('retry_backoff = "2s"', 'retry_backoff has no effect without retries'),
])
def test_join_and_cancel_options_are_checked(withs, message) -> None:
    rule = f'WITH mode = "async", {withs}\nEXEC "https://w.example/x"\n'
    found = [(d.code, d.message) for d in check_source(rule, "t.txcl")]
    assert ("TX209", message) in found


def test_retries_need_async() -> None:
    rule = 'WITH retries = 3\nEXEC "https://w.example/x"\n'
    assert [(d.code, d.message) for d in check_source(rule, "t.txcl")] == [
        ("TX209", 'retries has no effect without mode = "async"')]


def test_good_retry_and_join_options_pass() -> None:
    rule = ('WITH mode = "async", retries = 3, retry_backoff = "500ms", cancel_url = "https://w.example/c"\n'
            'EXEC "https://w.example/x"\n')
    assert [d.code for d in check_source(rule, "t.txcl")] == []


def test_cancel_url_needs_async() -> None:
    rule = 'WITH cancel_url = "https://w.example/c"\nEXEC "https://w.example/x"\n'
    assert [(d.code, d.message) for d in check_source(rule, "t.txcl")] == [
        ("TX209", 'cancel_url has no effect without mode = "async"')]


def _layout_codes(layout: str, root) -> set[str]:
    for line in layout.splitlines():
        path, _, text = line.partition(": ")
        file = root / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(text + "\n", encoding="utf-8")
    return {d.code for d in run_check([str(root)], cache_dir=False).diagnostics}


@pytest.mark.parametrize("code", sorted(c for c, doc in __import__("txcl.check.docs", fromlist=["DOCS"]).DOCS.items()
                                        if doc.layout))
def test_layout_docs_examples_trigger_their_codes(code, tmp_path) -> None:
    """The bad layout of each tree-level code reports that code; the good one does not."""
    from txcl.check.docs import DOCS

    doc = DOCS[code]
    assert code in _layout_codes(doc.bad, tmp_path / "bad")
    assert code not in _layout_codes(doc.good, tmp_path / "good")


@pytest.mark.parametrize("rule, found", [
    ('WITH idempotency_key = "a", payload = .job\nEXEC "txco://schedule"\n', [("TX246", 2, 1)]),
    ('WITH idempotency_key = "a", schedule_at = "2026-06-30T08:00:00"\nEXEC "txco://schedule"\n', [("TX246", 1, 43)]),
    ('WITH idempotency_key = "a", cancel = true\nEXEC "txco://schedule"\n', []),
    ('WITH idempotency_key = .k, schedule_at = .at\nEXEC "txco://schedule"\n', []),  # computed: run time decides
    ('WITH idempotency_key = "a", schedule_at = "2026-06-30T10:00:00+02:00"\nEXEC "txco://schedule"\n', []),
])
def test_schedule_calls_are_checked(rule, found) -> None:
    assert [(d.code, d.line, d.column) for d in check_source(rule, "s.txcl")] == found
