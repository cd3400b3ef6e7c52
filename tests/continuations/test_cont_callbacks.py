"""The callback endpoint against a real `txcl serve` and a real worker: duplicates, conflicts, every rejected callback leaves the store unchanged."""

from __future__ import annotations

import json

import pytest
from cont_support import barrier_tree, http_get, wait_until
from contworker import post_json


def _suspend(shared):
    ws, srv, worker = shared
    status, headers, body = http_get(srv.url + "/go")
    assert status == 202, body
    job = worker.wait_job()
    return ws, srv, headers, job


def _snapshot(store, run_id):
    """Everything a callback could change, for 'no state change' checks."""
    run = store.get_run(run_id)
    units = store.list_units(run_id)
    rows = [(run.status, run.version)]
    for u in units:
        rows.append((u.unit_id, u.status, u.version, u.provider_done, u.continuation_done))
        for i in store.list_interactions(u.unit_id):
            rows.append((i.opc, i.status, i.version, store.get_terminal(i.opc) is not None))
        rows.append(tuple(store.list_facts(u.unit_id)))
        rows.append(tuple((c.item_index, c.status, c.version) for c in store.list_children(u.unit_id)))
    rows.append(len(store.list_run_events(run_id)))
    return rows


def test_duplicate_callback_ten_times(shared, store_at):
    """First 200 resumed, then 200 duplicate; one terminal, one fact, one release."""
    worker = shared[2]
    ws, srv, headers, job = _suspend(shared)
    answers = [worker.callback(job, {"enriched": {"n": 1}}) for _ in range(10)]
    assert answers[0] == (200, {"status": "resumed"})
    assert all(a == (200, {"status": "recorded", "duplicate": True}) for a in answers[1:])
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = job.body["_txc"]["run_id"]
    run = wait_until(lambda: (r := store.get_run(run_id)) and r.status == "completed" and r)
    assert run.result["enriched"] == {"n": 1} and run.result["after"] == {"n": 1}  # merged once: no list growth
    unit = store.list_units(run_id)[0]
    facts = store.list_facts(unit.unit_id)
    assert facts.count(("provider", 0)) == 1 and facts.count(("continuation", 0)) == 1
    assert unit.provider_done == 1 and unit.continuation_done == 1
    kinds = [e.kind for e in store.list_run_events(run_id)]
    assert kinds.count("run.released") == 1 and kinds.count("run.completed") == 1
    status, _, body = http_get(srv.url + headers["location"])
    assert status == 200 and json.loads(body)["after"] == {"n": 1}


@pytest.mark.parametrize("second", ["other-output", "failed"])
def test_conflicting_callback_keeps_the_first(shared, store_at, second):
    """A different second outcome is 409 and the first is merged."""
    worker = shared[2]
    ws, srv, headers, job = _suspend(shared)
    assert worker.callback(job, {"enriched": "first"})[0] == 200
    if second == "failed":
        answer = worker.callback(job, status="failed", error="nope")
    else:
        answer = worker.callback(job, {"enriched": "second"})
    assert answer == (409, {"error": {"code": "txcl_conflicting_completion", "message": "conflicting completion: the first outcome is kept"}})
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = job.body["_txc"]["run_id"]
    run = wait_until(lambda: (r := store.get_run(run_id)) and r.status == "completed" and r)
    assert run.result["after"] == "first"


def test_callback_after_an_ack_failure_terminal_conflicts(serve, workspace, store_at):
    """The worker answered 500 to the dispatch (a failed `ack` terminal); its later
    completion conflicts (409) and the run stays failed with the ack error."""
    from contworker import TestWorker

    with TestWorker(mode="status:500") as bad:
        ws = workspace(barrier_tree(bad.url()))
        srv = serve(ws)
        status, _, body = http_get(srv.url + "/go")
        assert status == 502, body  # drained inline: every ack failed
        assert json.loads(body)["error"]["code"] == "txcl_op_failed"
        assert "expected 202, got 500" in body.decode()
        job = bad.wait_job()
        answer = bad.callback(job, {"enriched": 1})
        assert answer == (409, {"error": {"code": "txcl_conflicting_completion", "message": "conflicting completion: the first outcome is kept"}}) or answer[0] == 410
        store = store_at(ws / ".txcl-data" / "txcl.db")
        assert store.get_run(job.body["_txc"]["run_id"]).status == "failed"


def _post_slowly(url: str, token: str, size: int, declared: bool) -> bytes:
    """POST `size` bytes in pieces with pauses between them; the start of the answer."""
    import socket
    import time
    import urllib.parse

    parts = urllib.parse.urlsplit(url)
    framing = f"Content-Length: {size}" if declared else "Transfer-Encoding: chunked"
    head = (f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\n{framing}\r\nConnection: close\r\n\r\n").encode()
    piece = b"y" * (256 * 1024)
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
        sock.sendall(head)
        for _ in range(size // len(piece)):
            time.sleep(0.02)  # the server has long seen the headers (and the declared size)
            sock.sendall(piece if declared else f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        if not declared:
            sock.sendall(b"0\r\n\r\n")
        return sock.recv(4096)


def test_bad_callbacks_change_nothing(shared, store_at):
    """401 / 401 / 404 / 413 / 400 / 400 / 400, each leaving the store as it was."""
    ws, srv, headers, job = _suspend(shared)
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = job.body["_txc"]["run_id"]
    # the worker's 202 is written a moment later (--ack-write-delay); compare from then on
    wait_until(lambda: store.get_interaction(job.opc).status == "dispatched")
    before = _snapshot(store, run_id)
    url = job.callback_url
    ok_body = {"status": "completed", "output": {"x": 1}}
    assert post_json(url, ok_body, "wrong-token") == (401, {"error": {"code": "txcl_bad_token", "message": "bad token"}})
    assert post_json(url, ok_body, None) == (401, {"error": {"code": "txcl_bad_token", "message": "bad token"}})
    unknown = url.replace(job.opc, "opc_" + "1" * 22)
    assert post_json(unknown, ok_body, job.token) == (404, {"error": {"code": "txcl_unknown_op_continuation", "message": "unknown op continuation"}})
    big = {"status": "completed", "output": {"x": "y" * (1024 * 1024 + 10)}}
    status, body = post_json(url, big, job.token)
    assert status == 413 and body["error"]["code"] == "txcl_body_too_large" and body["error"]["limit"] == 1024 * 1024
    # a worker still sending a body over the limit reads the 413 (the body is drained), not
    # a connection closed under it — with or without a Content-Length
    for declared in (True, False):
        assert _post_slowly(url, job.token, 2 * 1024 * 1024, declared)[:12] == b"HTTP/1.1 413"
    assert post_json(url, None, job.token, raw=b"{not json")[0] == 400
    status, body = post_json(url, {"status": "done", "output": {}}, job.token)
    assert status == 400 and body["error"]["code"] == "txcl_bad_callback" and "unknown status" in body["error"]["message"]
    assert '"completed", "failed" or "running"' in body["error"]["message"]
    status, body = post_json(url, {"status": "completed", "output": [1, 2]}, job.token)
    assert status == 400 and "object" in body["error"]["message"]
    # the token travels as X-Txco-Continuation-Token too
    assert post_json(url, ok_body, None, headers={"X-Txco-Continuation-Token": "nope"})[0] == 401
    assert _snapshot(store, run_id) == before
    # and the good callback still works afterwards
    assert post_json(url, {"status": "completed", "output": {"enriched": 2}},
                     None, headers={"X-Txco-Continuation-Token": job.token}) == (200, {"status": "resumed"})


def test_cancelled_and_expired_interactions_are_gone(serve, workspace, store_at):
    """A cancelled interaction (fail-fast sibling) and an expired one answer 410."""
    from contworker import TestWorker

    with TestWorker() as w:
        files = barrier_tree(w.url(), with_='mode = "async", timeout = "1s"')
        files["OPS/shop/100/second.txcl"] = f'WITH mode = "async", timeout = "1m"\nEXEC "{w.url("/two")}"'
        ws = workspace(files)
        srv = serve(ws)
        status, _, _ = http_get(srv.url + "/go")
        assert status == 202
        jobs = {j.path: j for j in (w.wait_job(), w.wait_job())}
        fast, slow = jobs["/jobs"], jobs["/two"]
        # the 1 s budget passes: the callback is past its deadline -> timed out now, 410 expired
        import time

        time.sleep(1.3)
        assert w.callback(fast, {"enriched": 1}) == (410, {"error": {"code": "txcl_gone", "message": "the op continuation is gone", "reason": "expired"}})
        # the run expired with it: the sibling's interaction is gone too
        answer = w.callback(slow, {"x": 1})
        assert answer[0] == 410
        store = store_at(ws / ".txcl-data" / "txcl.db")
        assert store.get_run(fast.body["_txc"]["run_id"]).status == "expired"


def test_fail_fast_sibling_is_cancelled(serve, workspace, worker, store_at):
    """One member fails -> released at once (fail-fast), the other's callback is 410
    cancelled, and polling shows the run failed with the worker's error (txcl_op_failed)."""
    files = barrier_tree(worker.url())
    files["OPS/shop/100/second.txcl"] = f'WITH mode = "async", timeout = "1m"\nEXEC "{worker.url("/two")}"'
    ws = workspace(files)
    srv = serve(ws)
    status, headers, _ = http_get(srv.url + "/go")
    assert status == 202
    jobs = {j.path: j for j in (worker.wait_job(), worker.wait_job())}
    assert worker.callback(jobs["/jobs"], status="failed", error="boom") == (200, {"status": "failed"})
    assert worker.callback(jobs["/two"], {"x": 1}) == (410, {"error": {"code": "txcl_gone", "message": "the op continuation is gone", "reason": "cancelled"}})
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = jobs["/jobs"].body["_txc"]["run_id"]
    wait_until(lambda: store.get_run(run_id).status == "failed")
    status, _, body = http_get(srv.url + headers["location"])
    data = json.loads(body)
    assert status == 502 and data["status"] == "failed"
    assert data["error"]["code"] == "txcl_op_failed" and data["error"]["detail"] == {"message": "boom"}


def test_a_callback_nested_too_deep_is_400_and_changes_nothing(serve, workspace, worker, store_at):
    """A worker output nested deeper than the JSON depth limit is refused at admission with
    the reason; the run stays parked and a proper callback completes it."""
    ws = workspace(barrier_tree(worker.url()))
    srv = serve(ws)
    status, headers, _ = http_get(srv.url + "/go")
    assert status == 202
    job = worker.wait_job()
    deep = '{"status": "completed", "output": {"enriched": ' + "[" * 600 + "]" * 600 + "}}"
    code, body = post_json(job.callback_url, None, job.token, raw=deep.encode())
    assert code == 400 and body["error"]["code"] == "txcl_bad_callback"
    assert "deeper than 256 levels" in body["error"]["message"]
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = job.body["_txc"]["run_id"]
    assert store.get_run(run_id).status == "waiting" and store.get_terminal(job.opc) is None
    assert worker.callback(job, {"enriched": [[1]]}) == (200, {"status": "resumed"})
    run = wait_until(lambda: (r := store.get_run(run_id)) and r.status == "completed" and r)
    assert run.result["after"] == [[1]]
