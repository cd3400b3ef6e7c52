"""The deferred-join example's research worker: acks 202 at once, then calls back after a
delay with the research result (the ordinary async worker contract).

The delay is the request's `delay` query parameter (seconds, default 2), so one worker shows
both outcomes of the join: a result that is in before the flow reaches scope 200 is merged in
the request (a synchronous answer), a slower one makes the flow suspend at 200 (202 + poll).

    python examples/deferred-join/worker.py [PORT]      # listens on 127.0.0.1:8767
"""

from __future__ import annotations

import json
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def _query(body: dict, name: str, default: str) -> str:
    try:
        return body["input"]["_txc"]["web"]["req"]["url"]["query"][name][0]
    except (KeyError, IndexError, TypeError):
        return default


def call_back(url: str, token: str, delay: float, topic: str) -> None:
    time.sleep(delay)
    output = {"research": {"done": True, "topic": topic,
                           "summary": f"{len(topic) * 7} sources read in {delay:g}s"}}
    data = json.dumps({"status": "completed", "output": output}).encode()
    req = urllib.request.Request(url, data=data, method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"})
    for attempt in range(5):  # retry on connection errors, 500 and 503 (the contract's advice)
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                print(f"worker: callback answered {resp.status} {resp.read().decode()}", file=sys.stderr, flush=True)
                return
        except urllib.error.HTTPError as exc:
            print(f"worker: callback answered {exc.code}", file=sys.stderr, flush=True)
            if exc.code not in (500, 503):
                return
        except OSError:
            pass
        time.sleep(0.2 * (attempt + 1))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        txc = body.get("_txc", {})
        token = self.headers.get("X-Txco-Continuation-Token", "")
        delay = float(_query(body, "delay", "2"))
        topic = _query(body, "topic", "tides")
        data = json.dumps({"job_id": "research-" + str(txc.get("op_continuation_id", ""))[-6:]}).encode()
        self.send_response(202)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        print(f"worker: research on {topic!r} accepted, answering in {delay:g}s", file=sys.stderr, flush=True)
        if txc.get("callback_url"):
            threading.Thread(target=call_back, args=(txc["callback_url"], token, delay, topic), daemon=True).start()

    def log_message(self, fmt: str, *args) -> None:
        pass


def main(port: int = 8767) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"research worker on http://127.0.0.1:{port}", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 8767)
