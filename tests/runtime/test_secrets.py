"""Secrets in sync http(s) ops, against a real server that echoes what it received: the value
goes into the request (header or body field), never into the op's input view, and an answer
that echoes it back carries `[secret]` instead."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import pytest

from txcl.secrets import SecretProvider, mask

SECRET = "sk_test_4f9a1c77e0b2"


class _Echo(BaseHTTPRequestHandler):
    received: list = []

    def log_message(self, *args):
        pass

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k.lower(): v for k, v in self.headers.items()}
        _Echo.received.append((headers, raw))
        if headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            body = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
        else:
            body = json.loads(raw or b"{}")
        answer = json.dumps({"headers": headers, "body": body}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


@pytest.fixture(scope="module")
def echo():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def _step(store, outcome, name="call"):
    return {s["name"]: s for s in store.get_trace(outcome.rid).steps}[name]


def test_a_header_and_a_body_field_from_the_environment(workspace, run_tree, echo, monkeypatch):
    monkeypatch.setenv("TXCL_SECRET_API_KEY", SECRET)
    ws = workspace({"OPS/s/0100/call.txcl": (
        'SELECT .order\n'
        'WITH secrets.headers.authorization.secret = "API_KEY", secrets.headers.authorization.format = "Bearer {}",\n'
        '     secrets.body.auth.token.secret = "API_KEY", into = "echo"\n'
        f'EXEC "{echo}/x"')})
    _Echo.received.clear()
    outcome, store = run_tree(ws, {"order": {"id": 7}}, trace_mode="full")
    headers, raw = _Echo.received[-1]
    assert headers["authorization"] == f"Bearer {SECRET}"
    assert json.loads(raw)["auth"] == {"token": SECRET} and json.loads(raw)["order"] == {"id": 7}
    echoed = outcome.envelope["echo"]
    assert echoed["headers"]["authorization"] == "Bearer [secret]" and echoed["body"]["auth"]["token"] == "[secret]"
    step = _step(store, outcome)
    assert step["status"] == "ok" and SECRET not in json.dumps(step)
    assert "auth" not in json.dumps(step.get("input", {}))  # the input view is what the rule selected
    assert SECRET not in json.dumps(outcome.envelope)


def test_files_in_a_secrets_directory(workspace, run_tree, echo, tmp_path):
    folder = tmp_path / "secrets"
    folder.mkdir()
    (folder / "VENDOR").write_text("from-a-file\n")
    ws = workspace({"OPS/s/0100/call.txcl": f'WITH secrets.headers.x-api-key.secret = "VENDOR"\nEXEC "{echo}/x"'})
    _Echo.received.clear()
    run_tree(ws, {}, secrets_provider="dir", secrets_dir=str(folder))
    assert _Echo.received[-1][0]["x-api-key"] == "from-a-file"  # one trailing newline removed


def test_a_missing_secret_is_an_op_error_naming_it(workspace, run_tree, echo, monkeypatch):
    monkeypatch.delenv("TXCL_SECRET_NOPE", raising=False)
    ws = workspace({"OPS/s/0100/call.txcl": f'WITH secrets.headers.x-key.secret = "NOPE"\nEXEC "{echo}/x"',
                    "OPS/s/0200/next.txcl": "EMIT .next = true"})
    _Echo.received.clear()
    outcome, store = run_tree(ws, {})
    step = _step(store, outcome)
    assert step["status"] == "error"
    assert step["error"] == ("secret NOPE (WITH secrets.headers.x-key) is not set: txcl looked for the environment "
                             "variable TXCL_SECRET_NOPE")
    assert outcome.envelope["next"] is True and _Echo.received == []  # nothing was sent


def test_an_optional_secret_that_is_missing_is_left_out(workspace, run_tree, echo, monkeypatch):
    monkeypatch.delenv("TXCL_SECRET_MAYBE", raising=False)
    ws = workspace({"OPS/s/0100/call.txcl": (
        'WITH secrets.headers.x-key.secret = "MAYBE", secrets.headers.x-key.optional = true\n'
        f'EXEC "{echo}/x"')})
    _Echo.received.clear()
    outcome, _ = run_tree(ws, {})
    assert "x-key" not in _Echo.received[-1][0] and outcome.envelope["headers"]


def test_a_value_a_header_cannot_carry_is_refused_without_showing_it(workspace, run_tree, echo, monkeypatch):
    monkeypatch.setenv("TXCL_SECRET_BROKEN", "abc\r\nInjected: 1")
    ws = workspace({"OPS/s/0100/call.txcl": f'WITH secrets.headers.x-key.secret = "BROKEN"\nEXEC "{echo}/x"'})
    outcome, store = run_tree(ws, {})
    error = _step(store, outcome)["error"]
    assert error == "secret BROKEN (WITH secrets.headers.x-key) holds a line break or NUL, which a header cannot carry"


def test_a_form_body_gets_the_field_too(workspace, run_tree, echo, monkeypatch):
    monkeypatch.setenv("TXCL_SECRET_PW", SECRET)
    ws = workspace({"OPS/s/0100/call.txcl": (
        'WITH body_encoding = "urlencoded", body_path = "form", secrets.body.password.secret = "PW"\n'
        f'EXEC "{echo}/x"')})
    _Echo.received.clear()
    run_tree(ws, {"form": {"user": "ann"}})
    assert _Echo.received[-1][1].decode() == f"user=ann&password={SECRET}"


def test_mask_replaces_every_occurrence_in_keys_and_values():
    value = {"a": f"x{SECRET}y{SECRET}", SECRET: [SECRET, 1, None], "n": 5}
    assert mask(value, (SECRET,)) == {"a": "x[secret]y[secret]", "[secret]": ["[secret]", 1, None], "n": 5}


def test_the_dir_provider_reads_only_plain_names(tmp_path):
    (tmp_path / "OK").write_text("v")
    provider = SecretProvider("dir", str(tmp_path / "sub"))
    assert provider.lookup("../OK") is None and provider.lookup("OK") is None
    assert SecretProvider("dir", str(tmp_path)).lookup("OK") == "v"
