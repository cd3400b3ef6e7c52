"""Run the payments example end to end with one command:

    python examples/payments/run.py

It starts the simulated provider (127.0.0.1:8768) and `txcl serve` on a free 127.0.0.1 port
with a throw-away database, sends `GET /` (202: the run waits for 40 provider decisions,
at most 8 in flight), polls until the run completes, prints the summary and the head of the
output file (examples/payments/out/payments-results.csv, in record order), and stops both.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
TXCL = str(Path(sys.executable).parent / "txcl")


def get(url: str) -> tuple[int, dict, dict]:
    req = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, {k.lower(): v for k, v in resp.headers.items()}, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, json.loads(exc.read() or b"{}")


def start_serve(db: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([TXCL, "serve", str(HERE), "--port", "0", "--db", str(db)],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        found = re.search(r"on (http://127\.0\.0\.1:\d+)", line)
        if found:
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
            return proc, found.group(1)
    raise SystemExit("txcl serve did not start")


def main() -> int:
    provider = subprocess.Popen([sys.executable, str(HERE / "provider.py")])
    time.sleep(0.5)
    with tempfile.TemporaryDirectory() as tmp:
        serve, base = start_serve(Path(tmp) / "txcl.db")
        try:
            started = time.monotonic()
            status, headers, body = get(base + "/")
            print(f"GET / -> HTTP {status}, {body.get('batch')}; poll {headers.get('location')}", flush=True)
            while status == 202:
                status, _, body = get(base + headers["location"])
            summary = body.get("summary", body)
            print(f"\nrun finished: HTTP {status} after {time.monotonic() - started:.1f}s", flush=True)
            print(json.dumps(summary, indent=2), flush=True)
            if status != 200:
                return 1
            lines = Path(summary["output_file"]).read_text().splitlines()
            print("\n" + "\n".join(lines[:8]) + f"\n… ({len(lines) - 1} records)")
            order = [row.split(",")[0] for row in lines[1:]]
            return 0 if order == sorted(order) else 1  # joined in record order, whatever the arrival order
        finally:
            serve.terminate()
            serve.wait(20)
            provider.terminate()
            provider.wait(5)


if __name__ == "__main__":
    sys.exit(main())
