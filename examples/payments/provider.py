"""A simulated payment provider for the payments example (the async worker contract).

Each POST carries one payment record (`input`) and its `_txc.item_index`; the provider acks
202 at once and, after a random delay (0.05–1.2 s), calls back with its decision — so
decisions arrive out of record order. Amounts over 2 000 are rejected ("over limit"), and
about one in eight others is rejected for "insufficient funds" (seeded by the payment id).

    python examples/payments/provider.py [PORT]      # listens on 127.0.0.1:8768
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def decide(record: dict) -> dict:
    pid = str(record.get("payment_id"))
    seed = int(hashlib.sha256(pid.encode()).hexdigest()[:8], 16)
    if float(record.get("amount", 0)) > 2000:
        return {"payment_id": pid, "status": "rejected", "reason": "over limit"}
    if seed % 8 == 0:
        return {"payment_id": pid, "status": "rejected", "reason": "insufficient funds"}
    return {"payment_id": pid, "status": "approved", "reference": f"AUTH-{seed % 1_000_000:06d}"}


def call_back(url: str, token: str, record: dict, index: int) -> None:
    time.sleep(random.uniform(0.05, 1.2))
    data = json.dumps({"status": "completed", "output": decide(record)}).encode()
    req = urllib.request.Request(url, data=data, method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"})
    for attempt in range(5):  # retry on connection errors, 500 and 503
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                print(f"provider: item {index:2d} {record.get('payment_id')} answered -> {resp.status}",
                      file=sys.stderr, flush=True)
                return
        except urllib.error.HTTPError as exc:
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
        data = json.dumps({"job_id": "prov-" + str(txc.get("op_continuation_id", ""))[-6:]}).encode()
        self.send_response(202)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        if txc.get("callback_url"):
            args = (txc["callback_url"], self.headers.get("X-Txco-Continuation-Token", ""), body.get("input") or {},
                    int(txc.get("item_index", 0)))
            threading.Thread(target=call_back, args=args, daemon=True).start()

    def log_message(self, fmt: str, *args) -> None:
        pass


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128


def main(port: int = 8768) -> None:
    server = Server(("127.0.0.1", port), Handler)
    print(f"payment provider on http://127.0.0.1:{port}", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 8768)
