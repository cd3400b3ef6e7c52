"""The approval example's ticket worker: it files a ticket (prints it) and acks 202.

It never calls back: a person completes the interaction later with `txcl complete`.
Run it with `python examples/approval/worker.py` (listens on 127.0.0.1:8766).
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        txc = body.get("_txc", {})
        ticket = body.get("input", {}).get("ticket", {})
        print(f"ticket filed: {ticket.get('title')!r} (run {txc.get('run_id')}, op {txc.get('op')})",
              file=sys.stderr, flush=True)
        data = json.dumps({"job_id": "ticket-" + str(txc.get("op_continuation_id", ""))[-6:]}).encode()
        self.send_response(202)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, fmt: str, *args) -> None:
        pass


def main(port: int = 8766) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"ticket worker on http://127.0.0.1:{port}", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 8766)
