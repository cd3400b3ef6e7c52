"""One colour policy for every command that prints diagnostics or diffs: `--color
auto|always|never`, then NO_COLOR (off) and FORCE_COLOR (on), then whether it is a terminal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TXCL = str(Path(sys.executable).parent / "txcl")
ESC = "\x1b["


def txcl(*args: str, env: dict | None = None, stdin: str = "") -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    return subprocess.run([TXCL, *args], capture_output=True, text=True, timeout=60, input=stdin,
                          env={**base, **(env or {})})


@pytest.fixture
def bad_rule(tmp_path):
    path = tmp_path / "bad.txcl"
    path.write_text("WHEN .a ==\n")
    return str(path)


@pytest.mark.parametrize("command", [["parse"], ["check"], ["fmt", "--check"], ["match", "--input", "{}"]])
def test_every_diagnostic_command_follows_the_policy(bad_rule, command):
    out = lambda r: r.stdout + r.stderr  # noqa: E731
    assert ESC not in out(txcl(*command, bad_rule))  # not a terminal: plain
    assert ESC in out(txcl(*command, bad_rule, env={"FORCE_COLOR": "1"}))
    assert ESC not in out(txcl(*command, bad_rule, env={"FORCE_COLOR": "1", "NO_COLOR": "1"}))
    assert ESC in out(txcl(*command, bad_rule, "--color", "always", env={"NO_COLOR": "1"}))
    assert ESC not in out(txcl(*command, bad_rule, "--color", "never", env={"FORCE_COLOR": "1"}))


def test_eval_and_run_colour_their_carets_too(tmp_path):
    assert ESC in txcl("eval", "&add(1,", "--color", "always").stderr
    (tmp_path / "OPS" / "s" / "100").mkdir(parents=True)
    (tmp_path / "OPS" / "s" / "100" / "a.txcl").write_text("EMIT .a =\n")
    done = txcl("run", str(tmp_path), env={"FORCE_COLOR": "1"})
    assert done.returncode == 2 and ESC in done.stderr


def test_diffs_are_coloured_by_the_same_policy(tmp_path):
    rule = tmp_path / "r.txcl"
    rule.write_text("emit .a = 1\n")
    plain = txcl("fmt", "--diff", str(rule))
    coloured = txcl("fmt", "--diff", str(rule), "--color", "always")
    assert "+EMIT .a = 1" in plain.stdout and ESC not in plain.stdout
    assert "\x1b[32m+EMIT .a = 1" in coloured.stdout


def test_the_repl_spells_the_option_the_same_way():
    done = txcl("repl", "--color", "never", stdin=".a\n")
    assert done.returncode in (0, 1) and ESC not in done.stdout
    old = txcl("repl", "--no-color", stdin="")
    assert old.returncode == 2
