"""examples/approval/: the README's three commands (worker, `txcl run` exit 3, `txcl complete`)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from cont_support import TXCL

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "approval"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_approval_example_in_three_commands(tmp_path):
    ws = tmp_path / "approval"
    shutil.copytree(EXAMPLE, ws, ignore=shutil.ignore_patterns(".txcl", ".txcl-data"))
    port = _free_port()
    rule = ws / "OPS/approval/0200_approve/ask.txcl"
    rule.write_text(rule.read_text().replace("127.0.0.1:8766", f"127.0.0.1:{port}"))
    worker = subprocess.Popen([sys.executable, str(ws / "worker.py"), str(port)], stderr=subprocess.PIPE, text=True)
    try:
        assert "ticket worker on" in worker.stderr.readline()
        ran = subprocess.run([TXCL, "run", str(ws), "--input", f"@{ws / 'expense.json'}"], capture_output=True,
                             text=True, timeout=60)
        assert ran.returncode == 3, ran.stderr
        run_id = json.loads(ran.stdout)["run_id"]
        assert "ticket filed: 'Expense of 120 for alice'" in worker.stderr.readline()
        done = subprocess.run([TXCL, "complete", run_id, "--workspace", str(ws), "--output",
                               '{"approved": true, "by": "bob"}'], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["run_status"] == "completed"
        shown = json.loads(subprocess.run([TXCL, "runs", "show", run_id, "--workspace", str(ws), "--json"],
                                          capture_output=True, text=True, timeout=60).stdout)
        assert shown["result"]["status"] == "approved" and shown["result"]["paid"] == 120
        assert shown["result"]["approval"] == {"approved": True, "by": "bob"}
    finally:
        worker.terminate()
        worker.wait(5)

