"""Test files as input: every TX4xx problem with its line, column and caret (never a
traceback), and `txcl check` and `txcl rule` knowing them."""

from __future__ import annotations

from pathlib import Path

import pytest

from txcl.ruletest.spec import parse_test_text

TREE = {"OPS/shop/100/a.txcl": 'EXEC "https://pricing.example.net/quote"',
        "OPS/other/100/b.txcl": "EMIT .b = 1"}


def _diags(text: str, name: str = "t.test.yaml"):
    _, diags = parse_test_text(Path(name), text)
    return [(d.code, d.line, d.column, d.message) for d in diags]


@pytest.mark.parametrize("text,code,line,column,words", [
    ("cases:\n  - name: a\n    input: {order: {x: 1}\n", "TX400", 4, 1, "not valid YAML"),
    ("cases:\n  - name: a\n    inptu: {}\n", "TX401", 3, 5, "unknown key 'inptu'"),
    ("cases:\n  - name: a\n    expect: {status: done}\n", "TX402", 3, 22, "one of completed, halted"),
    ("cases:\n  - name: a\n    mocks: [x]\n", "TX402", 3, 12, "must be a mapping"),
    ("cases:\n  - name: a\n  - name: a\n", "TX404", 3, 11, "used twice"),
    ("cases:\n  - name: a\n    workers: {\"https://w\": {after: soon}}\n", "TX405", 3, 36, "not a duration"),
    ("cases:\n  - name: a\n    clock: yesterday\n", "TX405", 3, 12, "not a time"),
    ("cases:\n  - name: a\n    input: {day: 2026-01-01}\n", "TX406", 3, 12, "not JSON"),
    ("cases:\n  - name: a\n    input: [1, 2]\n", "TX406", 3, 12, "must be a JSON object"),
    ("cases:\n  - name: a\n    expect: {absent: [x]}\n", "TX402", 3, 23, "not a path"),
    ("stack: shop\n", "TX402", 1, 1, "no `cases:`"),
])
def test_each_problem_has_its_code_and_position(text, code, line, column, words) -> None:
    found = _diags(text)
    assert found and found[0][:3] == (code, line, column), found
    assert words in found[0][3]


def test_json_files_report_json_errors_with_their_position() -> None:
    found = _diags('{"cases": [\n  {"name": "a",}\n]}', "t.test.json")
    assert found[0][:3] == ("TX400", 2, 16) and "not valid JSON" in found[0][3]


def test_a_did_you_mean_for_a_misspelled_key() -> None:
    _, diags = parse_test_text(Path("t.test.yaml"), "cases:\n  - name: a\n    expcet: {}\n")
    assert diags[0].hint == "did you mean 'expect'?"
    rendered = diags[0].render()
    assert "3 |     expcet: {}" in rendered and "|     ^^^^^^" in rendered


def test_tree_problems_unknown_stack_and_unused_mock(ws, run_tests) -> None:
    root = ws({**TREE, "t.test.yaml": "stack: shpo\ncases:\n  - name: a\n"})
    code, _, err = run_tests(root)
    assert code == 2 and "TX403" in err and "no stack 'shpo'" in err and "did you mean 'shop'" in err
    root.joinpath("t.test.yaml").write_text(
        "stack: shop\ncases:\n  - name: a\n    mocks:\n      \"https://pricing.example.net/quota\": {}\n"
        "      \"https://pricing.example.net/quote\": {output: {}}\n")
    code, _, err = run_tests(root)
    assert code == 0 and "TX407" in err and "quota, which no rule calls" in err  # a warning: the case runs
    root.joinpath("t.test.yaml").write_text("cases:\n  - name: a\n")
    code, _, err = run_tests(root)
    assert code == 2 and "names no stack and the workspace has several" in err


def test_txcl_rule_explains_the_test_codes() -> None:
    from click.testing import CliRunner

    from txcl.cli.main import cli

    result = CliRunner().invoke(cli, ["rule", "TX401"])
    assert result.exit_code == 0 and "test-unknown-key" in result.stdout and "inptu" in result.stdout


def test_every_test_file_code_is_exercised_here() -> None:
    from txcl.codes import CODES

    source = Path(__file__).read_text() + Path(__file__).with_name("test_ruletest_check.py").read_text()
    assert {c for c in CODES if c.startswith("TX4")} <= {c for c in CODES if c in source}


def test_the_test_file_shown_in_the_docs_reads_without_a_problem() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "testing.md").read_text()
    block = docs.split("```yaml\n", 1)[1].split("```", 1)[0]
    test_file, diags = parse_test_text(Path("docs.test.yaml"), block)
    assert diags == [] and test_file is not None
    case = test_file.cases[0]
    assert case.workers["https://research.example.com/start"][0].after_ms == 300_000
    assert case.expect.ran == ("shop/200/total",)


def test_mocks_take_a_list_of_answers_per_call_and_a_quoted_duration_is_read(ws, run_tests) -> None:
    """`mocks` take one answer per call as `workers` do; and a quoted `after: "2s"` beside a
    problem elsewhere in the file (which makes it read again with positions) is a duration."""
    root = ws({"OPS/s/0100/a.txcl": 'EXEC "https://x.example.net/a"',
               "OPS/s/0200/a.txcl": 'EXEC "https://x.example.net/a"\nEMIT .second = .v',
               "OPS/s/0300/b.txcl": 'WITH mode = "async"\nEXEC "https://w.example.net/b"',
               "t.test.yaml": "stack: s\ncases:\n  - name: one\n    mocks:\n      \"https://x.example.net/a\":\n"
                              "        - {output: {v: 1}}\n        - {output: {v: 2}}\n    workers:\n"
                              "      \"https://w.example.net/b\": {after: \"2s\", output: {ok: true}}\n"
                              "    expect:\n      envelope: {v: 2, second: 2, ok: true}\n"})
    code, out, err = run_tests(root)
    assert code == 0, out + err
    root.joinpath("t.test.yaml").write_text(root.joinpath("t.test.yaml").read_text().replace(
        "    expect:", "    expcet: {}\n    expect:"))
    code, _, err = run_tests(root)
    assert "TX401" in err and "TX405" not in err  # the misspelled key only
