"""The client side: 202 headers, 303 for browsers, JSON
long-poll returning on completion, 404 reasons, and the wait page in headless Chromium."""

from __future__ import annotations

import json
import subprocess
import threading

import pytest
from testtools import require_tool
from cont_support import barrier_tree, http_get


def test_suspend_answer_headers_and_body(shared):
    _, srv, worker = shared
    status, headers, body = http_get(srv.url + "/orders/7?a=1&b=2")
    assert status == 202
    data = json.loads(body)
    rcid = data["continuation"]
    assert data["status"] == "running" and rcid.startswith("rc_")
    assert headers["location"] == f"/orders/7?_txc.continuation={rcid}"  # other parameters dropped
    assert headers["retry-after"] == "1" and headers["cache-control"] == "no-store"
    assert headers["x-request-id"]
    assert not any(k.startswith("_") for k in data)
    worker.wait_job()


def test_browser_gets_303_then_the_wait_page(shared):
    _, srv, worker = shared
    status, headers, body = http_get(srv.url + "/go", accept="text/html,application/xhtml+xml")
    assert status == 303
    location = headers["location"]
    assert location.startswith("/go?_txc.continuation=rc_")
    status, headers, page = http_get(srv.url + location, accept="text/html")
    assert status == 202 and headers["cache-control"] == "no-store"
    assert headers["content-type"].startswith("text/html")
    text = page.decode()
    assert '<meta http-equiv="refresh" content="1">' in text and "still being worked on" in text
    assert "<script" not in text
    # format=json wins over the Accept header
    status, headers, body = http_get(srv.url + "/go?format=json", accept="text/html")
    assert status == 202 and json.loads(body)["status"] == "running"
    worker.wait_job()
    worker.wait_job()


def test_json_long_poll_returns_when_the_run_completes(shared):
    _, srv, worker = shared
    status, headers, _ = http_get(srv.url + "/go")
    job = worker.wait_job()
    result: dict = {}

    def poll() -> None:
        result["answer"] = http_get(srv.url + headers["location"] + "&format=json")

    poller = threading.Thread(target=poll)
    poller.start()
    threading.Timer(0.5, lambda: worker.callback(job, {"enriched": 5})).start()
    poller.join(30)
    status, _, body = result["answer"]
    # a poll that had not waited would have answered 202 running
    assert status == 200
    assert json.loads(body) == {"continuation": headers["location"].split("=", 1)[1], "status": "completed",
                                "result": {"enriched": 5, "side": 1, "after": 5}}
    # without format=json: exactly the synchronous answer, no-store added
    status, h2, body = http_get(srv.url + headers["location"])
    assert status == 200 and json.loads(body) == {"enriched": 5, "side": 1, "after": 5}
    assert h2["cache-control"] == "no-store" and h2["content-type"] == "application/json"


def test_running_json_poll_answers_202_after_the_long_poll(serve, workspace, worker):
    srv = serve(workspace(barrier_tree(worker.url())), "--continuation-longpoll-ms", "300")
    _, headers, _ = http_get(srv.url + "/go")
    status, h, body = http_get(srv.url + headers["location"])
    assert status == 202 and h["retry-after"] == "1"
    assert json.loads(body) == {"continuation": headers["location"].split("=", 1)[1], "status": "running"}


@pytest.mark.parametrize("query,reason", [
    ("_txc.continuation=", "empty_or_missing_rcid"),
    ("_txc.continuation=not-an-rcid", "malformed_rcid"),
    ("_txc.continuation=rc_" + "1" * 22, "unknown_or_expired"),
])
def test_unknown_continuations_are_404_with_a_reason(shared, query, reason):
    _, srv, _ = shared
    status, headers, body = http_get(srv.url + "/any/path?" + query)
    assert status == 404
    data = json.loads(body)
    assert data["error"]["code"] == "txcl_unknown_continuation" and data["error"]["reason"] == reason
    status, headers, page = http_get(srv.url + "/any/path?" + query, accept="text/html")
    assert status == 404 and headers["content-type"].startswith("text/html")


def _chromium(url: str, tmp_path, budget_ms: int | None = None) -> str:
    cmd = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'chrome-profile'}"]
    if budget_ms is not None:
        cmd.append(f"--virtual-time-budget={budget_ms}")
    cmd += ["--dump-dom", url]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=90).stdout


@pytest.mark.browser
def test_wait_page_in_headless_chromium_becomes_the_answer(shared, tmp_path):
    """The browser shows the wait page while the run waits; its refresh shows the answer."""
    require_tool("chromium")
    _, srv, worker = shared
    _, headers, _ = http_get(srv.url + "/go", accept="text/html")
    poll_url = srv.url + headers["location"]
    waiting = _chromium(poll_url, tmp_path)
    assert "Still working on your request" in waiting and 'http-equiv="refresh"' in waiting
    job = worker.wait_job()
    threading.Timer(1.0, lambda: worker.callback(job, {"enriched": "ready"})).start()
    # the page keeps refreshing (virtual time) until the run completed: the DOM is the answer
    final = _chromium(poll_url, tmp_path, budget_ms=120_000)
    assert "Still working" not in final
    assert '{"enriched":"ready","side":1,"after":"ready"}' in final
