"""`txcl repl` with piped stdin runs in batch mode (no prompt UI)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from txcl.repl.app import batch_entries

TXCL = [sys.executable, "-m", "txcl"]


def run(stdin: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, TXCL_DATA_DIR=str(cwd or Path.cwd()))
    return subprocess.run([*TXCL, "repl", *args], input=stdin, capture_output=True, text=True,
                          timeout=60, cwd=cwd, env=env)


def test_batch_session_through_a_subprocess(tmp_path: Path) -> None:
    script = "\n".join([
        ".user.id",
        "WHEN .user.id == 7",
        "EMIT .seen = true",
        "",
        ".env .seen",
        '.set .n 41',
        "&add(.n, 1)",
        f".save {tmp_path / 'out.json'}",
    ]) + "\n"
    proc = run(script, "--input", '{"user": {"id": 7}}', cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "txcl>" not in proc.stdout  # no prompt in batch mode
    assert "\x1b[" not in proc.stdout  # no colour when not a terminal
    lines = proc.stdout.splitlines()
    assert lines[0] == "7"
    assert "WHEN matches" in lines
    assert "+ .seen = true" in lines
    assert lines[-3:] == ["+ .n = 41", "42", f"saved the envelope to {tmp_path / 'out.json'}"]
    assert '"seen": true' in (tmp_path / "out.json").read_text()


def test_batch_errors_set_the_exit_status_and_never_show_tracebacks(tmp_path: Path) -> None:
    proc = run("&div(1, 0)\nWHEN .a ==\n\n.user.id\n", cwd=tmp_path)
    assert proc.returncode == 1
    assert "error: &div: division by zero" in proc.stdout
    assert "TX026" in proc.stdout and "^" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("null")


def test_quit_stops_batch_mode(tmp_path: Path) -> None:
    proc = run("&add(1, 1)\n.quit\n&add(2, 2)\n", cwd=tmp_path)
    assert proc.returncode == 0
    assert proc.stdout.split() == ["2"]


def test_input_from_a_file_and_bad_input(tmp_path: Path) -> None:
    (tmp_path / "env.json").write_text('{"k": "v"}')
    proc = run(".k\n", "--input", f"@{tmp_path / 'env.json'}", cwd=tmp_path)
    assert proc.stdout.strip() == '"v"'
    proc = run(".k\n", "--input", "[1, 2]", cwd=tmp_path)
    assert proc.returncode == 2
    assert "must be a JSON object" in proc.stderr
    proc = run(".k\n", "--input", "{nope", cwd=tmp_path)
    assert proc.returncode == 2 and "invalid JSON" in proc.stderr


def test_batch_entry_splitting() -> None:
    lines = [
        ".help",
        "WHEN .a == 1",
        "  && .b == 2",
        "# a comment line continues the rule",
        "EMIT .c = 3",
        ".user.id",          # not a rule line: ends the rule
        "WHEN .x ==",        # incomplete: the next line continues it
        "5",
        "",
        "SET .y = 1",
        "",
        "",
        "WHEN *",
    ]
    assert list(batch_entries(lines)) == [
        ".help",
        "WHEN .a == 1\n  && .b == 2\n# a comment line continues the rule\nEMIT .c = 3",
        ".user.id",
        "WHEN .x ==\n5",
        "SET .y = 1",
        "WHEN *",
    ]
