"""`http(s)://` ops against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from txcl.runtime.interpreter import Completed


class _Handler(BaseHTTPRequestHandler):
    server_version = "testworker"
    hits = 0
    release: threading.Event

    def log_message(self, *args):  # keep test output quiet
        pass

    def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        path = self.path
        if path == "/json":
            answer = {
                "ok": True, "method": self.command,
                "got": json.loads(body) if body else None,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "_txc": {"rid": "forged", "ttl": 99999, "web": {"res": {"status": 202}}},
            }
            self._send(200, json.dumps(answer).encode())
        elif path.startswith("/status/"):
            self._send(int(path.rsplit("/", 1)[1]), b'{"problem": true}')
        elif path == "/slow":
            self.server.release.wait(10)  # type: ignore[attr-defined]
            self._send(200, b'{"late": true}')
        elif path == "/big":
            self._send(200, json.dumps({"blob": "x" * 5000}).encode())
        elif path == "/text":
            self._send(200, b"hello there", "text/plain")
        elif path == "/echo":
            self._send(200, json.dumps({"raw": body.decode(), "ctype": self.headers.get("Content-Type")}).encode())
        elif path == "/counter":
            _Handler.hits += 1
            self._send(200, json.dumps({"count": _Handler.hits}).encode())
        elif path == "/empty":
            self.send_response(204)
            self.end_headers()
        else:
            self._send(404, b"{}")

    do_GET = do_POST = do_PUT = do_DELETE = _handle


@pytest.fixture(scope="module")
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.release = threading.Event()  # type: ignore[attr-defined]
    srv.daemon_threads = True
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.release.set()  # type: ignore[attr-defined]
    srv.shutdown()
    srv.server_close()


def _steps(store, outcome):
    return {s["name"]: s for s in store.get_trace(outcome.rid).steps}


def test_post_json_sanitises_txc(workspace, run_tree, server):
    ws = workspace({"OPS/s/0100/call.txcl": f'SELECT .order\nEXEC "{server}/json"'})
    outcome, store = run_tree(ws, {"order": {"id": 1}, "other": 2})
    assert isinstance(outcome, Completed)
    env = outcome.envelope
    assert env["ok"] is True and env["method"] == "POST"
    assert env["got"]["order"] == {"id": 1} and "other" not in env["got"]
    assert env["got"]["_txc"] == {"op": "s/call", "step": 100}
    headers = env["headers"]
    assert headers["x-request-id"] == outcome.rid
    assert headers["user-agent"].startswith("txcl/") and headers["content-type"] == "application/json"
    # untrusted: _txc.rid and _txc.ttl dropped, web.res kept
    assert env["_txc"]["rid"] == outcome.rid and "ttl" not in env["_txc"]
    assert env["_txc"]["web"]["res"]["status"] == 202
    step = _steps(store, outcome)["call"]
    assert step["transport"] == "http" and step["status"] == "ok" and step["output_bytes"] > 0


def test_get_sends_no_body_and_custom_headers(workspace, run_tree, server):
    ws = workspace({"OPS/s/0100/call.txcl": f'WITH method = "GET", headers.x-trace = "abc"\nEXEC "{server}/json"'})
    env = run_tree(ws, {"a": 1})[0].envelope
    assert env["method"] == "GET" and env["got"] is None and env["headers"]["x-trace"] == "abc"


def test_url_directive_overrides_target(workspace, run_tree, server):
    ws = workspace({"OPS/s/0100/call.txcl": f'WITH url = "{server}/json"\nEXEC "{server}/nothing-here"'})
    assert run_tree(ws, {})[0].envelope["ok"] is True


def test_non_2xx_is_op_error(workspace, run_tree, server):
    ws = workspace({
        "OPS/s/0100/call.txcl": f'EXEC "{server}/status/503"\nEMIT .never = true',
        "OPS/s/0200/next.txcl": "EMIT .next = true",
    })
    outcome, store = run_tree(ws, {})
    assert outcome.envelope["next"] is True and "never" not in outcome.envelope
    step = _steps(store, outcome)["call"]
    assert step["status"] == "error" and step["error"] == f"http {server}/status/503: status 503"


def test_status_into_accepts_non_2xx(workspace, run_tree, server):
    ws = workspace({"OPS/s/0100/call.txcl": f'WITH into = "r", status_into = "r_status"\nEXEC "{server}/status/404"'})
    env = run_tree(ws, {})[0].envelope
    assert env["r"] == {"problem": True} and env["r_status"] == 404


def test_timeout(workspace, run_tree, server):
    ws = workspace({
        "OPS/s/0100/call.txcl": f'WITH timeout = "150ms"\nEXEC "{server}/slow"',
        "OPS/s/0200/next.txcl": "EMIT .next = true",
    })
    outcome, store = run_tree(ws, {})
    assert outcome.envelope["next"] is True and "late" not in outcome.envelope
    step = _steps(store, outcome)["call"]
    assert step["status"] == "timeout"


def test_oversize_answer_refused(workspace, run_tree, server):
    ws = workspace({"OPS/s/0100/call.txcl": f'EXEC "{server}/big"'})
    outcome, store = run_tree(ws, {}, op_payload_max=1000)
    assert "blob" not in outcome.envelope
    step = _steps(store, outcome)["call"]
    assert step["status"] == "error" and "larger than --op-payload-max (1000 bytes)" in step["error"]


def test_oversize_request_refused(workspace, run_tree, server):
    ws = workspace({"OPS/s/0100/call.txcl": f'EXEC "{server}/json"'})
    outcome, store = run_tree(ws, {"blob": "y" * 3000}, op_payload_max=1000)
    assert "ok" not in outcome.envelope
    assert "exceeds --op-payload-max" in _steps(store, outcome)["call"]["error"]


def test_text_answer_needs_into(workspace, run_tree, server):
    ws = workspace({
        "OPS/s/0100/a.txcl": f'WITH method = "GET", into = "greeting"\nEXEC "{server}/text"',
        "OPS/s/0100/b.txcl": f'WITH method = "GET"\nEXEC "{server}/text"',
        "OPS/s/0100/c.txcl": f'EXEC "{server}/empty"\nEMIT .empty_ok = true',
    })
    outcome, store = run_tree(ws, {})
    assert outcome.envelope["greeting"] == "hello there"
    assert outcome.envelope["empty_ok"] is True
    steps = _steps(store, outcome)
    assert steps["b"]["status"] == "error" and "not a JSON object" in steps["b"]["error"]


def test_connection_refused_is_op_error(workspace, run_tree):
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    ws = workspace({"OPS/s/0100/call.txcl": f'EXEC "http://127.0.0.1:{port}/x"'})
    outcome, store = run_tree(ws, {})
    assert isinstance(outcome, Completed)
    assert _steps(store, outcome)["call"]["status"] == "error"


def test_urlencoded_body(workspace, run_tree, server):
    ws = workspace({"OPS/s/0100/call.txcl": (f'WITH body_encoding = "urlencoded", body_path = "form", into = "r"\n'
                                             f'EXEC "{server}/echo"')})
    env = run_tree(ws, {"form": {"a": "1 2", "b": True}})[0].envelope
    assert env["r"] == {"raw": "a=1+2&b=true", "ctype": "application/x-www-form-urlencoded"}


def test_loop_over_http(workspace, run_tree, server):
    _Handler.hits = 0
    ws = workspace({"OPS/s/0100/poll.txcl": f'EXEC "{server}/counter"\nLOOP UNTIL .count >= 3 EVERY 2'})
    outcome, store = run_tree(ws, {})
    assert outcome.envelope["count"] == 3
    assert outcome.envelope["_txc"]["runtime"]["loop"]["poll"]["passes"] == 3
    step = store.get_trace(outcome.rid).steps[0]
    assert step["transport"] == "http" and step["stop"] == "done"
