"""examples/mcp/: its one command works, and its rules pass `txcl check --mcp-schemas`
against its own tool server."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path



EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mcp"
TXCL = str(Path(sys.executable).parent / "txcl")


def test_the_one_command_runs_the_example():
    done = subprocess.run([sys.executable, str(EXAMPLE / "run.py")], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "server     example-newsroom-tools" in done.stdout
    assert "POST /: HTTP 202, words counted already: {'words': 7}" in done.stdout
    result = json.loads(done.stdout[done.stdout.index("{\n"):])
    assert result["page"] == "7 words; in fr: day a twice in comes tide the"
    assert [s["title"] for s in result["scores"]] == ["Tides", "Why the moon pulls the sea",
                                                      "Surf report for the weekend"]
    assert "Traceback" not in done.stderr


def test_the_example_rules_match_the_tool_schemas(tmp_path):
    server = subprocess.Popen([sys.executable, str(EXAMPLE / "tools_server.py")], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            done = subprocess.run([TXCL, "check", str(EXAMPLE), "--mcp-schemas", "--no-cache"],
                                  capture_output=True, text=True, timeout=60)
            if "TX252" not in done.stdout:
                break
            time.sleep(0.2)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "All checks passed" in done.stdout
    finally:
        server.terminate()
        server.wait(10)
