"""The `repl` and `lsp` commands are registered and documented."""

from __future__ import annotations

from click.testing import CliRunner

from txcl.cli.main import cli


def test_repl_and_lsp_commands_exist() -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["repl", "--help"])
    assert result.exit_code == 0
    assert "OPS_DIR" in result.output and "--input" in result.output
    result = runner.invoke(cli, ["lsp", "--help"])
    assert result.exit_code == 0
    assert "language server" in result.output


def test_repl_batch_via_click_runner() -> None:
    result = CliRunner().invoke(cli, ["repl", "--input", '{"a": {"b": 2}}'], input=".a.b\n&add(.a.b, 1)\n")
    assert result.exit_code == 0
    assert result.output.split() == ["2", "3"]
