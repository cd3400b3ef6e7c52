"""`txcl test --generate N`: typed stacks walked over generated inputs with generated op
answers; a failure is shrunk to a small input and printed as a case that `txcl test` runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

TXCL = [sys.executable, "-m", "txcl"]


def _tree(root: Path, big_label: str = '"big"') -> Path:
    files = {
        "OPS/s/schema.json": json.dumps({"$defs": {
            "input": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
            "output": {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"},
                                                        "score": {"type": "number"}},
                       "required": ["y"]}}}),
        "OPS/s/0100/small.txcl": "WHEN .x <= 100\nEMIT .y = 1\n",
        "OPS/s/0100/big.txcl": f"WHEN .x > 100\nEMIT .y = {big_label}\n",
        "OPS/s/0200/score.txcl": 'SELECT .x\nEXEC "https://score.example.net/"\n',
        "OPS/s/0200/score.schema.json": json.dumps({"$defs": {"output": {
            "type": "object", "properties": {"score": {"type": "number"}}, "required": ["score"]}}}),
    }
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


def test_a_broken_answer_is_shrunk_to_a_case_that_reproduces_it(tmp_path):
    ws = _tree(tmp_path)
    done = subprocess.run([*TXCL, "test", "--generate", "60", "--seed", "3"], cwd=ws, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "s: FAILED: the answer breaks $defs.output: /y:" in done.stdout
    case = done.stdout[done.stdout.index("  - name: generated"):]
    assert '"x": 101' in case  # shrunk to the smallest input past the edge
    assert '"https://score.example.net/": {output: {"score":' in case  # the op's answer, generated
    (ws / "s.test.yaml").write_text("stack: s\ncases:\n" + case + "\n    expect:\n      envelope: {y: 1}\n")
    again = subprocess.run([*TXCL, "test", "s.test.yaml"], cwd=ws, capture_output=True, text=True, timeout=120)
    assert again.returncode == 1 and "1 failed" in again.stdout  # the pasted case runs and shows the bug


def test_a_correct_stack_passes_and_the_seed_repeats(tmp_path):
    ws = _tree(tmp_path, big_label="2")
    runs = [subprocess.run([*TXCL, "test", "--generate", "25", "--seed", "7"], cwd=ws, capture_output=True,
                           text=True, timeout=300) for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[0].stdout + runs[0].stderr
    assert runs[0].stdout == runs[1].stdout == "s: 25 generated runs passed\n"


def test_without_a_typed_stack_it_says_so(tmp_path):
    (tmp_path / "OPS/s/0100").mkdir(parents=True)
    (tmp_path / "OPS/s/0100/a.txcl").write_text("EMIT .a = 1\n")
    done = subprocess.run([*TXCL, "test", "--generate", "5"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2 and "no typed stack" in done.stderr and "Traceback" not in done.stderr
