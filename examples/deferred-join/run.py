"""Run the deferred-join example end to end with one command:

    python examples/deferred-join/run.py

It starts the research worker (127.0.0.1:8767) and `txcl serve` on a free 127.0.0.1 port with
a fresh database, sends two requests, prints what happens, and stops both processes:

1. `?delay=0`: the worker calls back while scope 120 runs; the join at 200 merges the result
   in the request: a synchronous 200, no 202;
2. `?delay=2`: the flow reaches scope 200 first and suspends there: 202 with a poll URL; the
   callback resumes the run, which renders the page; the poll then returns it.
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
    worker = subprocess.Popen([sys.executable, str(HERE / "worker.py")])
    time.sleep(0.5)
    with tempfile.TemporaryDirectory() as tmp:
        serve, base = start_serve(Path(tmp) / "txcl.db")
        try:
            status, _, body = get(base + "/?topic=tides&delay=0")
            print(flush=True) or print(f"\n1. fast worker: HTTP {status} (merged in the request, no 202)\n   {json.dumps(body)}")
            if status != 200:
                return 1
            status, headers, body = get(base + "/?topic=glaciers&delay=2")
            print(f"\n2. slow worker: HTTP {status} (suspended at the join), Location {headers.get('location')}")
            for _ in range(30):
                status, _, body = get(base + headers["location"])
                if status != 202:
                    break
            print(f"   poll: HTTP {status}\n   {json.dumps(body)}")
            return 0 if status == 200 and body.get("page") else 1
        finally:
            serve.terminate()
            serve.wait(20)
            worker.terminate()
            worker.wait(5)


if __name__ == "__main__":
    sys.exit(main())
