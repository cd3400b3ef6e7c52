"""`WITH retries = N, retry_backoff = "…"`: a dispatch that fails (a 5xx ack, no connection, no
ack in time) or a worker's `{"status": "failed", "retryable": true}` is sent again after an
exponential backoff, each attempt with a fresh token (an earlier token then gets 410); per
item for itemized ops. Against a real `txcl serve` and test worker, on every store backend."""

from __future__ import annotations

import json
import subprocess

import pytest
from cont_support import TXCL, db_of, http_get, wait_until
from contworker import TestWorker


def async_tree(url: str, options: str) -> dict[str, str]:
    return {"OPS/shop/100/job.txcl": f'WITH mode = "async", into = "job", {options}\nEXEC "{url}"',
            "OPS/shop/200/after.txcl": "EMIT .after = true"}


def run_of(store, job):
    return store.get_run(job.body["_txc"]["run_id"])


def test_failed_acks_are_sent_again_with_backoff_and_fresh_tokens(serve, workspace, store_at):
    with TestWorker(ack_statuses=(503, 502)) as worker:
        ws = workspace(async_tree(worker.url(), 'retries = 2, retry_backoff = "300ms"'))
        srv = serve(ws)
        status, headers, _ = http_get(srv.url + "/go")
        assert status == 202
        first, second, third = worker.wait_job(), worker.wait_job(), worker.wait_job()
        assert first.opc == second.opc == third.opc  # one call, tried three times
        assert len({first.token, second.token, third.token}) == 3
        assert second.received - first.received >= 0.29  # backoff 300 ms …
        assert third.received - second.received >= 0.59  # … then doubled
        assert "retry" not in first.body["_txc"] and third.body["_txc"]["retry"] == 2
        assert third.headers["idempotency-key"] == f"{third.opc}.retry2"  # new work, not a duplicate
        status, answer = worker.callback(first, {"ok": 0})  # an earlier attempt's token
        assert status == 410 and answer["error"]["reason"] == "superseded"
        assert worker.callback(third, {"ok": 1})[0] == 200
        store = store_at(ws / ".txcl-data" / "txcl.db")
        run = wait_until(lambda: (r := run_of(store, third)) and r.status == "completed" and r)
        assert run.result["job"] == {"ok": 1} and run.result["after"] is True
        retries = [e.data for e in store.list_run_events(run.run_id) if e.kind == "interaction.retry"]
        assert [(e["retry"], e["of"]) for e in retries] == [(1, 2), (2, 2)]
        assert "503" in retries[0]["error"]["message"]
        shown = subprocess.run([TXCL, "runs", "show", run.run_id, "--db", db_of(ws / ".txcl-data" / "txcl.db"),
                                "--workspace", str(ws)], capture_output=True, text=True, timeout=60).stdout
        assert "(3 attempts, 2 retries)" in shown, shown


def test_a_retryable_worker_failure_is_retried_until_the_retries_run_out(serve, workspace, worker, store_at):
    ws = workspace(async_tree(worker.url(), 'retries = 1, retry_backoff = "100ms"'))
    srv = serve(ws)
    assert http_get(srv.url + "/go")[0] == 202
    job = worker.wait_job()
    assert worker.callback(job, status="failed", error="busy", retryable=True) == (200, {"status": "retrying"})
    again = worker.wait_job()
    assert again.opc == job.opc and again.token != job.token
    assert worker.callback(job, {"ok": 1})[0] == 410  # the first attempt's token is retired
    # no retry left: this failure stands
    assert worker.callback(again, status="failed", error="still busy", retryable=True)[0] == 200
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run = wait_until(lambda: (r := run_of(store, again)) and r.status == "failed" and r)
    assert "still busy" in json.dumps(run.error)
    assert len(worker.jobs) == 2


def test_failures_that_are_not_retryable_are_not_retried(serve, workspace, store_at):
    with TestWorker(ack_statuses=(400,)) as worker:  # a 4xx ack: sending again would not help
        ws = workspace(async_tree(worker.url(), 'retries = 3, retry_backoff = "100ms"'))
        srv = serve(ws)
        status, _, body = http_get(srv.url + "/go")
        assert status == 502 and "expected 202, got 400" in body.decode()
        assert len(worker.jobs) == 1
    with TestWorker() as worker:  # a failure without "retryable": true
        ws = workspace(async_tree(worker.url(), 'retries = 3, retry_backoff = "100ms"'))
        srv = serve(ws)
        assert http_get(srv.url + "/go")[0] == 202
        job = worker.wait_job()
        assert worker.callback(job, status="failed", error="bad input")[0] == 200
        store = store_at(ws / ".txcl-data" / "txcl.db")
        wait_until(lambda: run_of(store, job).status == "failed")
        with pytest.raises(Exception):
            worker.wait_job(timeout=1.0)


def test_itemized_ops_retry_per_item(serve, workspace, worker, store_at):
    ws = workspace({"OPS/shop/050/items.txcl": "EMIT .items = [0, 1, 2]",
                    "OPS/shop/100/each.txcl":
                    f'WITH mode = "async", each = .items, window = 3, into = "out", retries = 1, '
                    f'retry_backoff = "100ms"\nEXEC "{worker.url()}"'})
    srv = serve(ws)
    status, headers, _ = http_get(srv.url + "/go")
    assert status == 202
    jobs = sorted((worker.wait_job() for _ in range(3)), key=lambda j: j.body["_txc"]["item_index"])
    assert worker.callback(jobs[1], status="failed", error="flaky", retryable=True)[1] == {"status": "retrying"}
    again = worker.wait_job()
    assert again.body["_txc"]["item_index"] == 1 and again.body["_txc"]["retry"] == 1
    for job, n in ((jobs[0], 0), (again, 1), (jobs[2], 2)):
        assert worker.callback(job, {"n": n * 10})[0] == 200
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run = wait_until(lambda: (r := run_of(store, again)) and r.status == "completed" and r)
    assert run.result["out"] == [{"n": 0}, {"n": 10}, {"n": 20}]
    assert len(worker.jobs) == 4  # only the failed item was sent again


def test_a_refused_connection_is_retried_then_fails_with_every_attempt_counted(serve, workspace, store_at):
    import socket

    with socket.socket() as s:  # a port with nobody listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ws = workspace(async_tree(f"http://127.0.0.1:{port}/jobs", 'retries = 2, retry_backoff = "100ms"'))
    srv = serve(ws)
    assert http_get(srv.url + "/go")[0] == 202  # parked while the retries wait
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run = wait_until(lambda: (r := store.list_runs(limit=1)) and r[0].status == "failed" and r[0], timeout=15)
    (unit,) = store.list_units(run.run_id)
    (call,) = store.list_interactions(unit.unit_id)
    assert (call.attempts, call.retry_count) == (3, 2)  # the first try and two retries
    assert [e.data["retry"] for e in store.list_run_events(run.run_id) if e.kind == "interaction.retry"] == [1, 2]
