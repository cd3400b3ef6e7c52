"""`txcl parse`: ok lines, rendered diagnostics, --json, exit codes."""

from __future__ import annotations

import json

from click.testing import CliRunner

from txcl.cli.main import cli


def _run(args):
    return CliRunner().invoke(cli, ["parse", *args])


def test_ok_and_errors(tmp_path):
    good = tmp_path / "good.txcl"
    good.write_text("WHEN .a == 1\nEMIT .b = 2\n")
    bad = tmp_path / "bad.txcl"
    bad.write_text('SET .x "v"\nEXEC 5\n')
    result = _run([str(good), str(bad)])
    assert result.exit_code == 1
    assert f"{good}: ok" in result.output
    assert f"{bad}:1:8: TX014 expected '=' after .x, found string \"v\"" in result.output
    assert f"{bad}:2:6: TX019 EXEC needs a string target" in result.output
    assert "Traceback" not in result.output


def test_all_ok_exits_zero(tmp_path):
    good = tmp_path / "g.txcl"
    good.write_text("WHEN *")
    result = _run([str(good)])
    assert result.exit_code == 0 and result.output.strip() == f"{good}: ok"


def test_unreadable_file_exits_two(tmp_path):
    result = _run([str(tmp_path / "missing.txcl")])
    assert result.exit_code == 2
    assert "cannot read" in result.output and "Traceback" not in result.output


def test_invalid_utf8_is_tx002(tmp_path):
    f = tmp_path / "enc.txcl"
    f.write_bytes(b'SET .x = "\xff"')
    result = _run([str(f)])
    assert result.exit_code == 1 and "TX002 file is not valid UTF-8" in result.output


def test_json_prints_the_ast(tmp_path):
    f = tmp_path / "r.txcl"
    f.write_text('WHEN .a == 1\nEXEC "txco://noop"\n')
    result = CliRunner().invoke(cli, ["parse", "--json", str(f)])
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc["node"] == "Rule"
    assert doc["exec"]["target"] == "txco://noop"
    assert doc["when"]["condition"]["left"]["text"] == ".a"


def test_json_with_several_files(tmp_path):
    a = tmp_path / "a.txcl"
    a.write_text("WHEN *")
    b = tmp_path / "b.txcl"
    b.write_text("EXEC 5")
    result = CliRunner().invoke(cli, ["parse", "--json", str(a), str(b)])
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert doc[0]["rule"]["node"] == "Rule"
    assert doc[1]["diagnostics"][0]["code"] == "TX019"
