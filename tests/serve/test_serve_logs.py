"""`--log-format json`: one JSON object per line, an access line per request with its latency,
the request id on the lines of a request, and nothing secret in any line."""

from __future__ import annotations

import json
import logging

import httpx

from txcl.logs import JsonFormatter, Redactor, bind, never_log, redact

TOKEN = "admin-token-0123456789abcdef"


def test_json_lines_with_an_access_line_per_request(workspace, serve):
    ws = workspace({"OPS/shop/0100/hello.txcl": "EMIT .hello = true"})
    server = serve(ws, "--log-format", "json", "--access-log", "--admin-token", TOKEN)
    answer = httpx.post(server.url + "/orders", json={"a": 1}, headers={"Authorization": f"Bearer {TOKEN}"})
    rid = answer.headers["x-request-id"]
    server.wait_for(r'"event": "access"')
    server.stop()
    docs = [json.loads(line) for line in server.lines if line.startswith("{")]
    assert docs and len(docs) == len([line for line in server.lines if line.strip()])  # every line is JSON
    for doc in docs:
        assert {"time", "level", "logger", "message"} <= set(doc) and doc["time"].endswith("Z")
    access = [d for d in docs if d.get("event") == "access"]
    assert len(access) == 1
    line = access[0]
    assert line["request_id"] == rid and line["method"] == "POST" and line["path"] == "/orders"
    assert line["status"] == 200 and isinstance(line["latency_ms"], float) and line["latency_ms"] >= 0
    assert line["stack"] == "shop" and line["level"] == "info"
    assert any(d["message"].startswith("serving ") for d in docs)  # the "txcl: " prefix is dropped
    assert TOKEN not in "\n".join(server.lines)


def test_the_text_access_line_has_the_latency(workspace, serve):
    server = serve(workspace({"OPS/shop/0100/hello.txcl": "EMIT .hello = true"}), "--access-log")
    rid = httpx.get(server.url + "/x").headers["x-request-id"]
    server.wait_for(rf"^txcl: GET /x 200 {rid} [0-9]+\.[0-9]ms$")


def test_a_bad_log_format_is_a_usage_error(workspace):
    from serve_helpers import run_serve_expect_exit

    done = run_serve_expect_exit(workspace({"OPS/shop/0100/a.txcl": "EMIT .a = 1"}), "--log-format", "xml")
    code, text = done.returncode, done.stderr
    assert code == 2 and "log-format" in text and "must be text or json" in text and "Traceback" not in text


def _record(message: str, *args, exc_info=None) -> logging.LogRecord:
    return logging.LogRecord("txcl", logging.WARNING, __file__, 1, message, args, exc_info)


def test_the_redactor_removes_credentials_tokens_and_registered_values():
    never_log(["s3cr3t-value-xyz"])
    record = _record("calling %s with %s and Authorization: Basic dXNlcjpwYXNz", "https://x/?k=s3cr3t-value-xyz",
                     {"X-Txco-Continuation-Token": "tok_abcdef123", "a": "Bearer abc.def.ghi"})
    Redactor().filter(record)
    text = record.getMessage()
    assert "s3cr3t-value-xyz" not in text and "tok_abcdef123" not in text and "abc.def.ghi" not in text
    assert "dXNlcjpwYXNz" not in text and text.count("[redacted]") == 4
    try:
        raise ValueError("boom s3cr3t-value-xyz")
    except ValueError as exc:
        failing = _record("failed", exc_info=(type(exc), exc, exc.__traceback__))
    Redactor().filter(failing)
    assert "s3cr3t-value-xyz" not in failing.exc_text and "boom [redacted]" in failing.exc_text
    assert redact("nothing to hide") == "nothing to hide"


def test_the_json_formatter_takes_the_context_and_the_extras():
    record = _record("txcl: resume of %s abandoned", "run_1")
    record.event = "resume"
    with bind(run_id="run_1", request_id="seg_1", stack="shop"):
        doc = json.loads(JsonFormatter().format(record))
    assert doc["message"] == "resume of run_1 abandoned" and doc["level"] == "warning"
    assert doc["run_id"] == "run_1" and doc["request_id"] == "seg_1" and doc["stack"] == "shop"
    assert doc["event"] == "resume" and "scope" not in doc
    assert "run_id" not in json.loads(JsonFormatter().format(_record("outside")))
