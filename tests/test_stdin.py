"""Standard input where users expect it: `txcl run --input -` (and `@-`), `txcl eval` and
`txcl match` envelopes, `txcl check -` with `--stdin-filename`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

TXCL = str(Path(sys.executable).parent / "txcl")


def txcl(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([TXCL, *args], input=stdin, capture_output=True, text=True, timeout=60)


def test_run_reads_the_envelope_from_stdin(tmp_path):
    (tmp_path / "OPS" / "s" / "100").mkdir(parents=True)
    (tmp_path / "OPS" / "s" / "100" / "a.txcl").write_text("EMIT .b = &add(.a, 1)\n")
    for flag in ("-", "@-"):
        done = txcl("run", str(tmp_path), "--input", flag, "--compact", stdin='{"a": 41}')
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == {"a": 41, "b": 42}
    bad = txcl("run", str(tmp_path), "--input", "-", stdin="{nope")
    assert bad.returncode == 2 and "--input (standard input): invalid JSON" in bad.stderr


def test_eval_and_match_read_the_envelope_from_stdin(tmp_path):
    assert txcl("eval", "&add(.x, 1)", "--input", "-", stdin='{"x": 2}').stdout.strip() == "3"
    rule = tmp_path / "r.txcl"
    rule.write_text("WHEN .x > 1\nEMIT .ok = true\n")
    done = txcl("match", str(rule), "--input", "-", stdin='{"x": 2}')
    assert done.returncode == 0 and "true" in done.stdout.lower()


def test_check_reads_one_rule_from_stdin(tmp_path):
    done = txcl("check", "-", "--stdin-filename", "OPS/s/100/r.txcl", "--output-format", "concise",
                stdin="WHEN .a == 01\nEMIT .b = 1\n")
    assert done.returncode == 0
    assert done.stdout.startswith("OPS/s/100/r.txcl:1:12: TX201")
    broken = txcl("check", "-", stdin="WHEN .a ==\n")
    assert broken.returncode == 1 and broken.stdout.startswith("-:1:")
    mixed = txcl("check", "-", str(tmp_path))
    assert mixed.returncode == 2 and "cannot be combined" in mixed.stderr
