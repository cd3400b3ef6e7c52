"""`txcl eval` and `txcl match`: results on stdout, clear errors and exit codes, no tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def txcl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "txcl", *args], capture_output=True, text=True, timeout=60)


def test_eval_prints_json() -> None:
    proc = txcl("eval", '&concat("a", .x)', "--input", '{"x": 7}')
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == "a7"
    proc = txcl("eval", "&array(1, 2.5, .missing)", "--compact")
    assert proc.stdout.strip() == "[1,2.5,null]"


def test_eval_input_from_file(tmp_path: Path) -> None:
    envelope = tmp_path / "env.json"
    envelope.write_text('{"a": {"b": 41}}', encoding="utf-8")
    proc = txcl("eval", "&add(.a.b, 1)", "--input", f"@{envelope}")
    assert proc.returncode == 0 and proc.stdout.strip() == "42"


def test_eval_function_failure_exits_1() -> None:
    proc = txcl("eval", "&div(1, 0)")
    assert proc.returncode == 1
    assert "&div: division by zero" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_eval_syntax_error_has_caret() -> None:
    proc = txcl("eval", "&add(1 2)")
    assert proc.returncode == 1
    assert "TX017" in proc.stderr and "^" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_eval_bad_input_json_exits_2() -> None:
    proc = txcl("eval", ".a", "--input", "{nope")
    assert proc.returncode == 2
    assert "invalid JSON" in proc.stderr and "Traceback" not in proc.stderr
    proc = txcl("eval", ".a", "--input", "@/no/such/file.json")
    assert proc.returncode == 2 and "cannot read" in proc.stderr


def test_match_true_false_and_errors(tmp_path: Path) -> None:
    rule = tmp_path / "r.txcl"
    rule.write_text('WHEN .amount > 1000 && .user.id =~ /^u_/\n', encoding="utf-8")
    assert txcl("match", str(rule), "--input", '{"amount": 1500, "user": {"id": "u_1"}}').stdout.strip() == "true"
    assert txcl("match", str(rule), "--input", '{"amount": 10}').stdout.strip() == "false"
    broken = tmp_path / "broken.txcl"
    broken.write_text("WHEN .a == \n", encoding="utf-8")
    proc = txcl("match", str(broken), "--input", "{}")
    assert proc.returncode == 1
    assert f"{broken}:1:" in proc.stderr and "Traceback" not in proc.stderr
    proc = txcl("match", str(tmp_path / "missing.txcl"), "--input", "{}")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    proc = txcl("match", str(rule), "--input", "[1]")
    assert proc.returncode == 2 and "JSON object" in proc.stderr
