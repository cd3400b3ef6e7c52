"""`txcl serve --metrics`: the Prometheus endpoint of a real server, parsed with
`prometheus_client`'s own parser, after a sync request, an itemized run whose items are queued
and in flight, worker callbacks (accepted, duplicated, rejected) and a retry."""

from __future__ import annotations

import json
import socket
import urllib.request

import pytest
from cont_support import http_get, wait_until
from contworker import TestWorker

pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

TOKEN = "metrics-admin-token-0123456789"


def scrape(url: str, token: str | None = None) -> dict[str, list]:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.headers["content-type"].startswith("text/plain; version=")
        text = answer.read().decode()
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


def value(families: dict, name: str, sample: str | None = None, **labels: str) -> float:
    family = families[name]
    found = [s.value for s in family if (sample is None or s.name == sample)
             and all(s.labels.get(k) == v for k, v in labels.items())]
    assert found, (name, labels, family)
    return sum(found)


def test_the_endpoint_counts_requests_ops_callbacks_and_open_work(serve, workspace):
    with TestWorker() as worker:
        ws = workspace({
            "OPS/quick/100/hello.txcl": "EMIT .hello = true",
            "OPS/quick/200/noop.txcl": 'EXEC "txco://noop"',
            "OPS/pay/100/charge.txcl": ('WITH mode = "async", each = .orders, window = 2, into = "receipts"\n'
                                        f'EXEC "{worker.url()}"'),
            "txcl.toml": '[serve]\ndefault_stack = "pay"\n\n[[serve.routes]]\npath = "/quick"\nstack = "quick"\n',
        })
        srv = serve(ws, "--metrics", "--metrics-refresh", "200ms", "--admin-token", TOKEN)
        for _ in range(3):
            assert http_get(srv.url + "/quick")[0] == 200
        # a JSON body makes .orders an array of five items: two go out, three wait their turn
        body = json.dumps({"orders": [{"n": i} for i in range(5)]}).encode()
        request = urllib.request.Request(srv.url + "/pay", data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.status == 202
        first, second = worker.wait_job(), worker.wait_job()

        def open_items():
            got = scrape(srv.url + "/_txc/metrics", TOKEN)
            items = [s for s in got["txcl_itemized_items"] if s.labels["op"] == "pay/charge"]
            return got if items and value(got, "txcl_itemized_items", state="queued", op="pay/charge") == 3 else None

        families = wait_until(open_items, timeout=10)
        assert value(families, "txcl_itemized_items", state="in_flight", op="pay/charge") == 2
        assert value(families, "txcl_runs", state="waiting") >= 1
        assert value(families, "txcl_parked_runs", age="1m") >= 1
        assert value(families, "txcl_requests", "txcl_requests_total", stack="quick", status="200") == 3
        assert value(families, "txcl_request_duration_seconds", "txcl_request_duration_seconds_count",
                     stack="quick") == 3
        assert value(families, "txcl_scope_duration_seconds", "txcl_scope_duration_seconds_count", stack="quick") >= 3
        ops = {(s.labels["scheme"], s.labels["outcome"]): s.value for s in families["txcl_op_duration_seconds"]
               if s.name == "txcl_op_duration_seconds_count"}
        assert ops.get(("txco", "ok")) == 3 and ops.get(("async", "pending")) == 1, ops
        assert value(families, "txcl_store_commit_duration_seconds", "txcl_store_commit_duration_seconds_count") >= 1
        assert "process_cpu_seconds" in families

        assert worker.callback(first, {"ok": 1})[0] == 200
        assert worker.callback(first, {"ok": 1})[0] == 200  # the same answer again: a duplicate
        assert worker.callback(second, {"ok": 2}, token="not-the-token")[0] == 401
        families = scrape(srv.url + "/_txc/metrics", TOKEN)
        assert value(families, "txcl_callbacks", "txcl_callbacks_total", outcome="duplicate") == 1
        assert value(families, "txcl_callbacks", "txcl_callbacks_total", outcome="rejected",
                     code="txcl_bad_token") == 1
        assert value(families, "txcl_callbacks", "txcl_callbacks_total") == 3

        # without the admin token: 401, and nothing of the numbers
        status, _, body = http_get(srv.url + "/_txc/metrics")
        assert status == 401 and b"txcl_requests" not in body


def test_metrics_on_their_own_port_without_the_main_path(serve, workspace):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    srv = serve(workspace({"OPS/quick/100/hello.txcl": "EMIT .hello = true"}), "--metrics", "--metrics-port", str(port))
    assert http_get(srv.url + "/quick")[0] == 200
    families = scrape(f"http://127.0.0.1:{port}/metrics")
    assert value(families, "txcl_requests", "txcl_requests_total", stack="quick") == 1
    assert http_get(srv.url + "/_txc/metrics")[0] == 404


def test_without_metrics_there_is_no_endpoint(serve, workspace):
    srv = serve(workspace({"OPS/quick/100/hello.txcl": "EMIT .hello = true"}))
    assert http_get(srv.url + "/_txc/metrics")[0] == 404


def test_retries_sent_and_their_callbacks_are_counted(serve, workspace, worker):
    ws = workspace({"OPS/shop/100/job.txcl": 'WITH mode = "async", into = "job", retries = 1, retry_backoff = "100ms"\n'
                                             f'EXEC "{worker.url()}"'})
    srv = serve(ws, "--metrics")
    assert http_get(srv.url + "/go")[0] == 202
    job = worker.wait_job()
    assert worker.callback(job, status="failed", error="busy", retryable=True)[1] == {"status": "retrying"}
    again = worker.wait_job()
    assert worker.callback(again, {"ok": 1})[0] == 200
    families = wait_until(lambda: (f := scrape(srv.url + "/_txc/metrics"))
                          and value(f, "txcl_callbacks", "txcl_callbacks_total") == 2 and f)
    assert value(families, "txcl_retries_sent", "txcl_retries_sent_total") == 1
    assert value(families, "txcl_callbacks", "txcl_callbacks_total", outcome="retrying") == 1
    assert value(families, "txcl_callbacks", "txcl_callbacks_total", outcome="resumed") == 1
