"""`txcl run`: output shaping, exit codes, clear errors."""

from __future__ import annotations

import json

from click.testing import CliRunner

from txcl.cli.main import cli


def _run(*args: str):
    return CliRunner().invoke(cli, ["run", *args])


def test_run_prints_shaped_envelope(workspace):
    ws = workspace({"OPS/shop/0100/a.txcl": "EMIT .total = &add(.a, 1)"})
    result = _run(str(ws), "--input", '{"a": 1, "_private": 2}')
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"a": 1, "total": 2}
    assert "\n  " in result.stdout  # indented by default
    compact = _run(str(ws), "--input", '{"a": 1}', "--compact")
    assert compact.stdout.strip() == '{"a":1,"total":2}'
    private = json.loads(_run(str(ws), "--input", '{"a": 1}', "--private").stdout)
    assert private["_txc"]["src"] == "cli" and private["_txc"]["stack"] == "shop"
    assert "ttl" not in private["_txc"] and "fuel_used" not in private["_txc"] and "_seen" not in private["_txc"]


def test_run_input_file_and_mock_request(workspace):
    ws = workspace({
        "OPS/shop/0100/a.txcl": "EMIT .seen = .who",
        "OPS/shop/0100/mock-request.json": '{"who": "fixture"}',
        "in.json": '{"who": "file"}',
    })
    assert json.loads(_run(str(ws), "--input", f"@{ws / 'in.json'}").stdout)["seen"] == "file"
    result = _run(str(ws), "--mock-request", str(ws / "OPS/shop/0100/mock-request.json"))
    assert json.loads(result.stdout)["seen"] == "fixture"
    both = _run(str(ws), "--input", "{}", "--mock-request", str(ws / "in.json"))
    assert both.exit_code == 2 and "exclude each other" in both.output


def test_run_failure_exit_1_with_payload(workspace, monkeypatch):
    monkeypatch.setenv("TXCL_OP_REPEAT_PENALTY_MS", "0")
    ws = workspace({"OPS/s/0100/a.txcl": 'EMIT @goto = "100"'})
    result = _run(str(ws), "--db", str(ws / "x.db"))
    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert payload["code"] in ("txco_fuel_exhausted", "txcl_scope_ttl_exhausted")


def test_run_stack_selection(workspace):
    ws = workspace({"OPS/a/0100/x.txcl": "EMIT .a = 1", "OPS/b/0100/x.txcl": "EMIT .b = 1",
                    "OPS/_sys/health/0100/x.txcl": "EMIT .h = 1"})
    result = _run(str(ws))
    assert result.exit_code == 2 and "a, b" in result.output and "--stack" in result.output
    assert json.loads(_run(str(ws), "--stack", "b").stdout) == {"b": 1}
    unknown = _run(str(ws), "--stack", "zzz")
    assert unknown.exit_code == 2 and 'unknown stack "zzz"' in unknown.output


def test_run_load_error_exit_2_names_file(workspace):
    ws = workspace({"OPS/s/0100/bad.txcl": "WHEN .x >", "OPS/s/0100/py.txcl": 'EXEC "py://mod_cli_missing:f"'})
    result = _run(str(ws))
    assert result.exit_code == 2
    assert "OPS/s/0100/bad.txcl:1:" in result.output and "py.txcl:1:6: TX104" in result.output
    assert "Traceback" not in result.output
    assert "failed to load (2 errors)" in result.output


def test_run_usage_errors(workspace, tmp_path):
    ws = workspace({"OPS/s/0100/a.txcl": "EMIT .a = 1"})
    bad_json = _run(str(ws), "--input", "{nope")
    assert bad_json.exit_code == 2 and "invalid JSON" in bad_json.output
    not_object = _run(str(ws), "--input", "[1]")
    assert not_object.exit_code == 2 and "JSON object" in not_object.output
    empty = tmp_path / "empty"
    empty.mkdir()
    none = _run(str(empty))
    assert none.exit_code == 2 and "no OPS/ directory" in none.output


def test_run_bad_setting_names_source(workspace, monkeypatch):
    ws = workspace({"OPS/s/0100/a.txcl": "EMIT .a = 1", "txcl.toml": '[serve]\nop_timeout = "forever"\n'})
    result = _run(str(ws))
    assert result.exit_code == 2 and "op-timeout" in result.output and "txcl.toml" in result.output
    monkeypatch.setenv("TXCL_OP_LOOP_MAX", "lots")
    ws2 = workspace({"OPS/s/0100/a.txcl": "EMIT .a = 1"})
    result = _run(str(ws2))
    assert result.exit_code == 2 and "TXCL_OP_LOOP_MAX" in result.output


def test_db_defaults_beside_ops(workspace):
    ws = workspace({"OPS/s/0100/a.txcl": "EMIT .a = 1"})
    assert _run(str(ws / "OPS")).exit_code == 0
    assert (ws / ".txcl-data" / "txcl.db").is_file()


def test_run_mock_flag(workspace):
    ws = workspace({
        "OPS/s/0100/a.txcl": 'EXEC "py://mod_cli_mock_real:fn"',
        "OPS/s/0100/mock-response.json": '{"from": "mock"}',
        "mod_cli_mock_real.py": "def fn(inp, ctx):\n    return {'from': 'real'}\n",
    })
    assert json.loads(_run(str(ws)).stdout) == {"from": "real"}
    assert json.loads(_run(str(ws), "--mock", "s/*").stdout) == {"from": "mock"}
    assert json.loads(_run(str(ws), "--mock", "s/*", "--mock", "!s/100/a").stdout) == {"from": "real"}


def test_python_api_exports():
    import txcl

    assert txcl.Interpreter.__name__ == "Interpreter" and txcl.OpContext.__name__ == "OpContext"
    assert txcl.load_ops.__name__ == "load_ops"
