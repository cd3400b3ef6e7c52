"""`txcl serve` with a JSON body and typed stacks: the JSON object body is the envelope's root
(as `txcl run --input` makes it), `--validate-input` answers 422 with JSON pointers and runs
nothing, `--validate-output` logs or (strict) refuses an answer that breaks `$defs.output`."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import httpx

SCHEMA = {
    "$defs": {
        "input": {"type": "object", "properties": {"order": {"$ref": "#/$defs/order"}}, "required": ["order"]},
        "order": {"type": "object", "properties": {"total": {"type": "number"}, "id": {"type": "string"}},
                  "required": ["total"]},
        "output": {"type": "object", "properties": {"big": {"type": "boolean"}, "order": {"type": "object"}},
                   "required": ["big"]},
    }
}

FILES = {
    "OPS/shop/schema.json": json.dumps(SCHEMA),
    "OPS/shop/0100/size.txcl": 'WHEN .order.total > 100\nEMIT .big = true',
    "OPS/shop/0100/count.txcl": 'EMIT .seen = @web.req.body, .calls = 1',
}


def test_a_json_body_is_the_envelope_root_and_the_raw_body_stays(workspace, serve):
    ws = workspace(FILES)
    server = serve(ws)
    body = json.dumps({"order": {"total": 150}, "_txc": {"stack": "evil"}, "_ts": "forged"})
    answer = httpx.post(server.url + "/", content=body, headers={"content-type": "application/json"}).json()
    assert answer["big"] is True and answer["order"] == {"total": 150}
    assert answer["seen"]  # the raw body is still there, base64
    assert "_txc" not in answer
    # the same document through txcl run gives the same envelope
    done = subprocess.run([sys.executable, "-m", "txcl", "run", str(ws), "--input", json.dumps({"order": {"total": 150}})],
                          capture_output=True, text=True, timeout=60)
    assert json.loads(done.stdout)["big"] is True
    # not JSON by its content type: not merged
    answer = httpx.post(server.url + "/", content=body, headers={"content-type": "text/plain"}).json()
    assert "big" not in answer and "order" not in answer


def test_the_merge_can_be_turned_off(workspace, serve):
    server = serve(workspace(FILES), "--no-web-json-body")
    answer = httpx.post(server.url + "/", json={"order": {"total": 150}}).json()
    assert "order" not in answer and "big" not in answer


def test_validate_input_answers_422_with_pointers_and_runs_nothing(workspace, serve):
    ws = workspace(FILES)
    server = serve(ws, "--validate-input", "--trace-mode", "summary")
    bad = httpx.post(server.url + "/", json={"order": {"total": "lots", "id": 5}})
    assert bad.status_code == 422
    error = bad.json()["error"]
    assert error["code"] == "txcl_invalid_input"
    assert {e["pointer"] for e in error["errors"]} == {"/order/total", "/order/id"}
    missing = httpx.post(server.url + "/", json={}).json()["error"]["errors"]
    assert missing[0]["pointer"] == "" and "order" in missing[0]["message"]
    not_json = httpx.post(server.url + "/", content=b"{nope", headers={"content-type": "application/json"})
    assert not_json.status_code == 422 and "not valid JSON" in not_json.json()["error"]["errors"][0]["message"]
    good = httpx.post(server.url + "/", json={"order": {"total": 5}})
    assert good.status_code == 200 and good.json()["calls"] == 1


def test_validate_output_logs_and_strict_refuses(workspace, serve):
    ws = workspace(FILES)
    logged = serve(ws, "--validate-output")
    answer = httpx.post(logged.url + "/", json={"order": {"total": 5}})
    assert answer.status_code == 200  # .big is required but not written: logged only
    logged.wait_for(r"does not match the \$defs.output of stack shop: /: \"big\" is a required property")
    events: list = []
    deadline = time.monotonic() + 20
    while not events and time.monotonic() < deadline:  # traces are written in batches, off the request
        traced = subprocess.run([sys.executable, "-m", "txcl", "trace", "last", "--json"], cwd=ws,
                                capture_output=True, text=True, timeout=60)
        if traced.returncode == 0:
            events = [e for e in json.loads(traced.stdout)["events"] if e["kind"] == "output.invalid"]
        if not events:
            time.sleep(0.2)
    assert events and events[0]["data"]["errors"][0]["pointer"] == ""  # the violation is in the trace too
    strict = serve(workspace(FILES), "--validate-output", "strict")
    refused = httpx.post(strict.url + "/", json={"order": {"total": 5}})
    assert refused.status_code == 500 and refused.json()["error"]["code"] == "txcl_invalid_output"
    assert httpx.post(strict.url + "/", json={"order": {"total": 500}}).status_code == 200


def test_run_validates_input_and_output(workspace):
    ws = workspace(FILES)
    run = [sys.executable, "-m", "txcl", "run", str(ws)]
    bad = subprocess.run([*run, "--validate-input", "--input", '{"order": {"total": "x"}}'], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and "invalid input at /order/total" in bad.stderr and "Traceback" not in bad.stderr
    strict = subprocess.run([*run, "--validate-output", "strict", "--input", '{"order": {"total": 1}}'],
                            capture_output=True, text=True, timeout=60)
    assert strict.returncode == 1 and json.loads(strict.stdout)["error"]["code"] == "txcl_invalid_output"
    ok = subprocess.run([*run, "--validate-input", "--validate-output", "strict", "--input",
                         '{"order": {"total": 200}}'], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and json.loads(ok.stdout)["big"] is True


def test_a_callback_url_asked_with_get_answers_405_in_json(workspace, serve):
    server = serve(workspace(FILES))
    answer = httpx.get(server.url + "/_txc/continuations/op/opc_123456789abcdefghijk/complete")
    assert answer.status_code == 405 and answer.headers["allow"] == "POST"
    assert answer.json()["error"]["code"] == "txcl_method_not_allowed"
    # the startup line counts the tree's own rules (not the system stacks'), and says so once
    server.wait_for(r"serving .* \(2 rules\)")


def _raw(url: str):
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return socket.create_connection((parts.hostname, parts.port), timeout=10)


def test_half_open_connections_are_closed_and_bounded(workspace, serve):
    """A connection that never finishes its headers is closed after --web-header-timeout (one
    that sends nothing, one that sends half a request, one that pauses after a complete
    request and then sends half of the next); past --web-max-connections new requests get
    503 instead of the server running out of descriptors; healthz answers again after."""
    server = serve(workspace(FILES), "--web-header-timeout", "1s", "--web-max-connections", "4")
    silent, partial, kept = _raw(server.url), _raw(server.url), _raw(server.url)
    partial.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    kept.sendall(b"GET /_txc/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert kept.recv(4096).startswith(b"HTTP/1.1 200")
    kept.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # the next request, never finished
    crowded = httpx.get(server.url + "/_txc/healthz")  # 3 connections held, this is the 4th
    assert crowded.status_code == 503  # past the limit: answered at once, not held
    started = time.monotonic()
    for sock in (silent, partial, kept):
        sock.settimeout(10)
        while sock.recv(4096):  # drained until the server closes it
            pass
    assert time.monotonic() - started < 8
    assert httpx.get(server.url + "/_txc/healthz").status_code == 200
    with httpx.Client() as client:  # a kept-alive client that sends whole requests is never cut off
        for _ in range(3):
            assert client.get(server.url + "/_txc/healthz").status_code == 200
            time.sleep(0.5)


def test_access_log_writes_a_line_per_request(workspace, serve):
    server = serve(workspace(FILES), "--access-log")
    answer = httpx.post(server.url + "/orders", json={"order": {"total": 5}})
    server.wait_for(rf"txcl: POST /orders 200 {answer.headers['x-request-id']}")
