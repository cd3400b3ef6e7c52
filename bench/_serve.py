"""Starting `txcl serve` for a benchmark: the process and the base URL it printed."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from pathlib import Path

TXCL = str(Path(sys.executable).parent / "txcl")


def start_serve(*args: str) -> tuple[subprocess.Popen, str]:
    """`txcl serve ARGS --port 0`; returns once it listens. Its stderr is drained in the
    background so the server never blocks on a full pipe."""
    proc = subprocess.Popen([TXCL, "serve", *args, "--port", "0"], stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True)
    assert proc.stderr is not None
    base = ""
    for line in proc.stderr:
        m = re.search(r"on (http://127\.0\.0\.1:\d+)", line)
        if m:
            base = m.group(1)
            break
    if not base:
        proc.kill()
        raise RuntimeError("txcl serve did not start")
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
    return proc, base
