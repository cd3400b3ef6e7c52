"""Request breakpoints (`txcl serve --debug-breakpoints`, `?_txc.break=<scope>`): the answer is
the envelope as it enters the scope, nothing of it runs; off by default (403); a bad target is
400; a segment that resumes a suspended run never stops."""

from __future__ import annotations

import json

import pytest
from cont_support import barrier_tree, http_get, wait_until

pytestmark = pytest.mark.parametrize("backend", ["sqlite"])

TREE = {"OPS/shop/100/a.txcl": "EMIT .a = 1", "OPS/shop/200/b.txcl": "EMIT .b = &add(.a, 1)",
        "OPS/shop/300/c.txcl": "EMIT .c = 3"}


def test_a_request_stops_as_it_enters_the_scope(serve, workspace, store_at):
    ws = workspace(TREE)
    srv = serve(ws, "--debug-breakpoints")
    status, headers, body = http_get(srv.url + "/?_txc.break=200")
    answer = json.loads(body)
    assert status == 200 and headers["x-txcl-breakpoint"] == "shop/200" and answer["breakpoint"] == "shop/200"
    envelope = answer["envelope"]
    assert envelope["a"] == 1 and "b" not in envelope and "c" not in envelope  # scope 200 did not run
    assert envelope["_txc"]["flag_breakpoint"] is True and envelope["_txc"]["stack"] == "shop"
    _, _, body = http_get(srv.url + "/?_txc.break=shop/300")
    assert {k: v for k, v in json.loads(body)["envelope"].items() if not k.startswith("_")} == {"a": 1, "b": 2}
    status, headers, body = http_get(srv.url + "/?_txc.break=900")
    assert status == 200 and headers["x-txcl-breakpoint"] == "not reached" and json.loads(body) == {
        "a": 1, "b": 2, "c": 3}
    status, _, body = http_get(srv.url + "/?_txc.break=other/200")  # another stack's scope: never entered
    assert json.loads(body) == {"a": 1, "b": 2, "c": 3}
    for bad in ("x/y", "-1", "shop/", "2e3"):
        status, _, body = http_get(srv.url + f"/?_txc.break={bad}")
        assert status == 400 and json.loads(body)["error"]["code"] == "txcl_bad_breakpoint", bad
    store = store_at(ws / ".txcl-data" / "txcl.db")
    traced = wait_until(lambda: [t for t in store.recent_traces(stack="shop", limit=20) if t["status"] == "halted"],
                        timeout=5)
    assert traced  # the stopped requests are traced as halted


def test_breakpoints_are_off_by_default(serve, workspace):
    srv = serve(workspace(TREE))
    status, _, body = http_get(srv.url + "/?_txc.break=200")
    assert status == 403 and json.loads(body)["error"]["code"] == "txcl_breakpoints_off"
    status, _, body = http_get(srv.url + "/")
    assert status == 200 and "flag_breakpoint" not in body.decode()


def test_a_resumed_segment_never_stops(serve, workspace, worker):
    ws = workspace(barrier_tree(worker.url()))
    srv = serve(ws, "--debug-breakpoints")
    status, headers, _ = http_get(srv.url + "/go?_txc.break=200")
    assert status == 202  # scope 100 suspended before the breakpoint's scope
    job = worker.wait_job()
    assert worker.callback(job, {"enriched": ["x"]})[0] == 200
    status, _, body = http_get(srv.url + headers["location"] + "&format=json")
    assert status == 200 and json.loads(body)["result"]["after"] == ["x"]  # scope 200 ran on resume
