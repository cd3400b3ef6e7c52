"""Run the MCP example end to end with one command:

    python examples/mcp/run.py

It starts the example's MCP server (127.0.0.1:8768) and `txcl serve` on a free 127.0.0.1 port
with a fresh database, asks the server for its tools (`txcl mcp doctor`), posts article.json,
follows the poll URL until the run is done, prints the result and stops both processes.
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


def request(url: str, body: bytes | None = None) -> tuple[int, dict, dict]:
    req = urllib.request.Request(url, data=body, method="POST" if body is not None else "GET",
                                 headers={"Accept": "application/json", "Content-Type": "application/json"})
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


def wait_for_tools(url: str) -> bool:
    for _ in range(50):
        done = subprocess.run([TXCL, "mcp", "doctor", url], capture_output=True, text=True)
        if done.returncode == 0:
            print(done.stdout)
            return True
        time.sleep(0.2)
    print(done.stderr, file=sys.stderr)
    return False


def main() -> int:
    tools = subprocess.Popen([sys.executable, str(HERE / "tools_server.py")], stdout=subprocess.DEVNULL)
    try:
        if not wait_for_tools("http://127.0.0.1:8768/mcp"):
            return 1
        with tempfile.TemporaryDirectory() as tmp:
            serve, base = start_serve(Path(tmp) / "txcl.db")
            try:
                status, headers, body = request(base + "/", (HERE / "article.json").read_bytes())
                print(f"POST /: HTTP {status}, words counted already: {body.get('stats')}")
                if status == 202:
                    print(f"   suspended; polling {headers['location']}")
                    for _ in range(60):
                        status, _, body = request(base + headers["location"])
                        if status != 202:
                            break
                print(f"result: HTTP {status}")
                print(json.dumps({k: body.get(k) for k in ("page", "scores")}, indent=2))
                return 0 if status == 200 and body.get("page") else 1
            finally:
                serve.terminate()
                serve.wait(30)
    finally:
        tools.terminate()
        tools.wait(10)


if __name__ == "__main__":
    sys.exit(main())
