"""A complete async worker for txcl, with the standard library only.

It accepts txcl's dispatches (`WITH mode = "async"`), answers 202 at once, does the work in a
thread, and calls back with the result: `python worker.py 8770`, then point a rule at it:

    WITH mode = "async", timeout = "10m", into = "summary"
    EXEC "http://127.0.0.1:8770/summarize"

Dispatches are at least once: the same `Idempotency-Key` can arrive twice, so the worker
remembers what it has accepted. Callbacks are retried on connection errors, 500 and 503
(with the Retry-After txcl sends), and never on other answers.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

accepted: set[str] = set()
lock = threading.Lock()


def work(payload: dict) -> dict:
    """The job itself: here, count the words of `text`."""
    text = str(payload.get("text", ""))
    return {"words": len(text.split()), "chars": len(text)}


def call_back(url: str, token: str, body: dict, attempts: int = 8) -> None:
    data = json.dumps(body).encode()
    for attempt in range(attempts):
        request = urllib.request.Request(url, data=data, method="POST", headers={
            "Content-Type": "application/json", "Authorization": f"Bearer {token}"})
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                print(f"callback answered {answer.status} {answer.read().decode()}", file=sys.stderr)
                return
        except urllib.error.HTTPError as exc:
            if exc.code not in (500, 503):  # 400, 401, 404, 409, 410, 413: retrying cannot help
                print(f"callback refused: {exc.code} {exc.read().decode()}", file=sys.stderr)
                return
            wait = float(exc.headers.get("Retry-After") or 2 ** attempt)
        except OSError:
            wait = 2 ** attempt
        time.sleep(min(wait, 60))


def run_job(dispatch: dict, token: str) -> None:
    txc = dispatch["_txc"]
    try:
        outcome = {"status": "completed", "output": work(dispatch.get("input") or {})}
    except Exception as exc:  # the op fails with this message
        outcome = {"status": "failed", "error": {"message": str(exc)}}
    if txc.get("callback_url"):
        call_back(txc["callback_url"], token, outcome)


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - the http.server naming
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        key = self.headers.get("Idempotency-Key", "")
        token = self.headers.get("X-Txco-Continuation-Token", "")
        with lock:
            fresh = key not in accepted
            accepted.add(key)
        if fresh:
            threading.Thread(target=run_job, args=(body, token), daemon=True).start()
        reply = json.dumps({"job_id": key}).encode()
        self.send_response(202)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, fmt: str, *args) -> None:
        print("worker:", fmt % args, file=sys.stderr)


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8770
    print(f"worker on http://127.0.0.1:{port}", file=sys.stderr, flush=True)
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
