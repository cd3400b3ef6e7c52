"""Around `txcl test`: `txcl check` and the language server report test-file problems, the
JSON Schema shipped for editors agrees with the reader, coverage and `--update` work, and every
example's test file passes (so the examples do what their READMEs say)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from txcl.cli.main import cli

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
SCHEMA = json.loads((REPO / "txcl" / "ruletest" / "test-file.schema.json").read_text())


@pytest.mark.parametrize("example", ["quickstart", "approval", "deferred-join", "payments"])
def test_every_example_has_a_passing_test_file(example: str, tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / example
    shutil.copytree(EXAMPLES / example, root, ignore=shutil.ignore_patterns(".txcl-data", "out", "__pycache__"))
    monkeypatch.chdir(root)
    result = CliRunner().invoke(cli, ["test", "--color", "never"])
    assert result.exit_code == 0, result.stdout + result.stderr
    passed = int(result.stdout.splitlines()[-1].split()[0])
    assert passed >= 3


def test_check_reports_test_file_problems_and_passes_good_ones(ws, monkeypatch) -> None:
    root = ws({"OPS/shop/100/a.txcl": 'EXEC "https://pricing.example.net/quote"',
               "good.test.yaml": "stack: shop\ncases:\n  - name: a\n    mocks:\n"
                                 "      \"https://pricing.example.net/quote\": {output: {}}\n",
               "bad.test.yaml": "stack: shop\ncases:\n  - name: a\n    expcet: {}\n"
                                "    workers: {\"https://w.example/x\": {after: 1s}}\n"})
    monkeypatch.chdir(root)
    result = CliRunner().invoke(cli, ["check", "--output-format", "concise", "--color", "never"])
    assert result.exit_code == 1
    lines = [line for line in result.stdout.splitlines() if line.startswith("bad.test.yaml")]
    assert lines == ["bad.test.yaml:4:5: TX401 unknown key 'expcet' in case 'a'"]
    root.joinpath("bad.test.yaml").unlink()
    root.joinpath("odd.test.yaml").write_text(
        "stack: shop\ncases:\n  - name: a\n    workers: {\"https://w.example/x\": {after: 1s}}\n")
    result = CliRunner().invoke(cli, ["check", "--output-format", "concise", "--color", "never"])
    assert "odd.test.yaml:4:5: TX407 case 'a': workers names https://w.example/x, which no rule calls" in result.stdout


def test_the_language_server_reports_test_file_problems(ws) -> None:
    from txcl.lsp.analysis import diagnostics_for

    root = ws({"OPS/shop/100/a.txcl": "EMIT .a = 1"})
    path = str(root / "x.test.yaml")
    found = diagnostics_for("stack: shpo\ncases:\n  - name: a\n    clock: soon\n", path)
    assert sorted(d.code for d in found) == ["TX405"]  # a shape error stops before the tree checks
    found = diagnostics_for("stack: shpo\ncases:\n  - name: a\n  - name: b\n", path)
    assert [(d.code, d.line) for d in found] == [("TX403", 1)]  # the file's stack: once, where it is written
    found = diagnostics_for("stack: shop\ncases:\n  - name: a\n    expect:\n      not_ran: [shop/100/b, shop/100/aa]\n",
                            path)
    assert [(d.code, d.line) for d in found] == [("TX408", 4), ("TX408", 4)]
    assert found[1].hint == "did you mean shop/100/a?"


def test_the_schema_knows_exactly_the_keys_the_reader_knows() -> None:
    from txcl.ruletest import spec

    defs = SCHEMA["$defs"]
    assert tuple(SCHEMA["properties"]) == spec.FILE_KEYS
    assert tuple(defs["case"]["properties"]) == spec.CASE_KEYS
    assert tuple(defs["mock"]["properties"]) == spec.MOCK_KEYS
    assert tuple(defs["answer"]["properties"]) == spec.ANSWER_KEYS
    assert tuple(defs["expect"]["properties"]) == spec.EXPECT_KEYS
    assert defs["expect"]["properties"]["status"]["enum"] == list(spec.STATUSES)
    shipped = REPO / "editors" / "vscode" / "schemas" / "txcl-test.schema.json"
    assert json.loads(shipped.read_text()) == SCHEMA  # the copy the VS Code extension ships


def test_the_example_test_files_validate_against_the_schema() -> None:
    import jsonschema

    from txcl.ruletest.spec import _yaml, plain

    files = sorted(EXAMPLES.glob("*/*.test.yaml"))
    assert len(files) == 4
    for path in files:
        jsonschema.validate(plain(_yaml().load(path.read_text())), SCHEMA)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"cases": [{"name": "a", "expcet": {}}]}, SCHEMA)


def test_vscode_associates_test_files_with_the_schema() -> None:
    manifest = json.loads((REPO / "editors" / "vscode" / "package.json").read_text())
    assert manifest["contributes"]["yamlValidation"] == [
        {"fileMatch": ["*.test.yaml", "*.test.yml"], "url": "./schemas/txcl-test.schema.json"}]
    assert manifest["contributes"]["jsonValidation"][0]["fileMatch"] == ["*.test.json"]


COVERED = {
    "OPS/s/100/a.txcl": "WHEN .x == 1 || .y == 2\nEMIT .a = 1",
    "OPS/s/100/b.txcl": "WHEN .x == 9\nEMIT .b = 1",
    "OPS/s/900/never.txcl": "EMIT .c = 1",
    "OPS/s/200/stop.txcl": "EMIT @halt = true",
    "t.test.yaml": "stack: s\ncases:\n  - name: one\n    input: {x: 1}\n  - name: two\n    input: {x: 2}\n",
}


def test_coverage_tells_ran_when_never_true_and_never_reached(ws, run_tests) -> None:
    root = ws(COVERED)
    code, out, _ = run_tests(root, "--coverage")
    assert code == 0
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.startswith("OPS/")}
    assert rows["OPS/s/100/a.txcl"][:2] == ["ran", "1"]
    assert rows["OPS/s/100/b.txcl"][:4] == ["when", "never", "true", "0"]
    assert rows["OPS/s/900/never.txcl"][:3] == ["never", "reached", "0"]
    assert ".x == 1 1/1, .y == 2 0/2" in out
    assert "rules: 50.0% ran" in out and "scopes: 2 of 3 entered" in out
    code, _, err = run_tests(root, "--fail-under", "60")
    assert code == 1 and "coverage 50.0% is under --fail-under 60%" in err
    code, _, _ = run_tests(root, "--fail-under", "50")
    assert code == 0


def test_coverage_as_lcov_and_json(ws, run_tests) -> None:
    root = ws(COVERED)
    code, _, _ = run_tests(root, "--coverage-report", "lcov", "--coverage-file", "lcov.info")
    assert code == 0
    lcov = root.joinpath("lcov.info").read_text()
    record = lcov.split("SF:" + str(root / "OPS/s/100/a.txcl"))[1].split("end_of_record")[0]
    assert "DA:1,1\nDA:2,1" in record and "BRDA:1,0,0,1\nBRDA:1,0,1,1\nBRDA:1,1,0,0\nBRDA:1,1,1,2" in record
    assert "BRF:4\nBRH:3" in record
    code, _, _ = run_tests(root, "--coverage-report", "json", "--coverage-file", "cov.json")
    data = json.loads(root.joinpath("cov.json").read_text())
    assert data["percent"] == 50.0
    assert {r["rule"]: r["status"] for r in data["rules"]}["s/900/never"] == "never reached"


def test_update_rewrites_what_the_failing_case_expected_and_keeps_the_rest(ws, run_tests) -> None:
    text = ("# the shop's tests\nstack: s\ncases:\n  - name: one   # first\n    input: {x: 1}\n"
            "    expect:\n      envelope: {a: 2, gone: true}  # stale\n  - name: two\n    input: {x: 2}\n")
    root = ws({**COVERED, "t.test.yaml": text})
    code, _, err = run_tests(root, "--update")
    assert code == 1 and "updated 1 case" in err
    import re

    updated = root.joinpath("t.test.yaml").read_text()
    assert re.sub(r"\}\s+#", "} #", updated) == text.replace("{a: 2, gone: true}  #", "{a: 1} #")
    code, _, _ = run_tests(root)
    assert code == 0
