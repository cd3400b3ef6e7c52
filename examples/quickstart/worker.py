"""A tiny stock service for the quickstart's HTTP op: POST /stock answers for each item.

Run it with `python examples/quickstart/worker.py` (listens on 127.0.0.1:8765).
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STOCK = {"tea": 40, "pot": 3}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        items = body.get("items") or []
        answer = {"available": {i["sku"]: STOCK.get(i["sku"], 0) >= i.get("qty", 1)
                                for i in items if isinstance(i, dict) and "sku" in i},
                  "request_id": self.headers.get("X-Request-ID")}
        data = json.dumps(answer).encode()
        self.send_response(200 if self.path == "/stock" else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, fmt: str, *args) -> None:
        sys.stderr.write("worker: " + fmt % args + "\n")


def main(port: int = 8765) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"stock worker on http://127.0.0.1:{port}", file=sys.stderr)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 8765)
