"""Cancellation of the worker: when the flow gives up on a call that was sent, txcl POSTs
`{"status": "cancelled", "reason": …, "op_continuation_id": …}` with the call's token to the
cancel URL the worker's ack gave (or the rule named), at least once with backoff; each outcome
is a run event and shows in `txcl runs show`. Against a real `txcl serve` and test worker,
on every store backend."""

from __future__ import annotations

import json
import subprocess

import pytest
from cont_support import TXCL, db_of, http_get, wait_until
from contworker import TestWorker


@pytest.fixture
def cancelling_worker():
    with TestWorker(cancel_urls=True) as w:
        yield w


def show(ws, run_id: str) -> str:
    out = subprocess.run([TXCL, "runs", "show", run_id, "--db", db_of(ws / ".txcl-data" / "txcl.db"),
                          "--workspace", str(ws)], capture_output=True, text=True, timeout=60)
    return out.stdout + out.stderr


def test_cancelling_a_run_tells_the_worker_at_its_cancel_url(serve, workspace, cancelling_worker, store_at):
    worker = cancelling_worker
    ws = workspace({"OPS/shop/100/slow.txcl": f'WITH mode = "async", timeout = "1h", into = "r"\nEXEC "{worker.url()}"'})
    srv = serve(ws)
    assert http_get(srv.url + "/go")[0] == 202
    job = worker.wait_job()
    run_id = job.body["_txc"]["run_id"]
    cancel = subprocess.run([TXCL, "runs", "cancel", run_id, "--reason", "operator", "--db",
                             db_of(ws / ".txcl-data" / "txcl.db"), "--workspace", str(ws)],
                            capture_output=True, text=True, timeout=60)
    assert cancel.returncode == 0, cancel.stderr
    call = wait_until(lambda: worker.cancels and worker.cancels[0], timeout=10)
    assert call.path == "/cancel/1"
    assert call.body == {"status": "cancelled", "reason": "cancelled", "op_continuation_id": job.opc}
    assert call.headers["x-txco-continuation-token"] == job.token  # the call's own token
    store = store_at(ws / ".txcl-data" / "txcl.db")
    wait_until(lambda: any(e.kind == "cancel.sent" for e in store.list_run_events(run_id)))
    text = show(ws, run_id)
    assert f"cancel {job.opc} -> {worker.url('/cancel/1')}  reason cancelled  delivered" in text, text
    assert len(worker.cancels) == 1  # delivered once: not sent again


def test_a_failed_cancel_post_is_tried_again_with_backoff(serve, workspace, store_at):
    with TestWorker(cancel_urls=True, cancel_statuses=(503,)) as worker:
        ws = workspace({"OPS/shop/100/slow.txcl":
                        f'WITH mode = "async", timeout = "1h", into = "r"\nEXEC "{worker.url()}"'})
        srv = serve(ws)
        assert http_get(srv.url + "/go")[0] == 202
        job = worker.wait_job()
        run_id = job.body["_txc"]["run_id"]
        store = store_at(ws / ".txcl-data" / "txcl.db")
        assert store.cancel_run(run_id, reason="stop") == "cancelled"
        wait_until(lambda: len(worker.cancels) >= 2, timeout=15)
        gap = worker.cancels[1].received - worker.cancels[0].received
        assert gap >= 0.9  # the first retry waits about a second
        calls = wait_until(lambda: (c := store.list_cancel_calls(run_id)) and c[0]["status"] == "delivered" and c)
        assert calls[0]["attempts"] == 2
        kinds = [e.kind for e in store.list_run_events(run_id)]
        assert kinds.count("cancel.failed") == 1 and kinds.count("cancel.sent") == 1


def test_a_sibling_failure_cancels_the_other_call_at_the_rules_cancel_url(serve, workspace, worker, store_at):
    ws = workspace({
        "OPS/shop/100/a.txcl": f'WITH mode = "async", into = "a"\nEXEC "{worker.url("/a")}"',
        "OPS/shop/100/b.txcl": f'WITH mode = "async", into = "b", cancel_url = "{worker.url("/cancel/rule")}"\n'
                               f'EXEC "{worker.url("/b")}"',
    })
    srv = serve(ws)
    assert http_get(srv.url + "/go")[0] == 202
    jobs = {j.path: j for j in (worker.wait_job(), worker.wait_job())}
    assert worker.callback(jobs["/a"], status="failed", error="boom")[0] == 200
    call = wait_until(lambda: worker.cancels and worker.cancels[0], timeout=10)
    assert call.path == "/cancel/rule"
    assert call.body["reason"] == "sibling_failed" and call.body["op_continuation_id"] == jobs["/b"].opc
    assert call.headers["x-txco-continuation-token"] == jobs["/b"].token
    assert worker.callback(jobs["/b"], {"ok": 1})[0] == 410


def test_the_end_of_the_stack_before_the_join_cancels_but_still_records(serve, workspace, cancelling_worker,
                                                                         store_at):
    worker = cancelling_worker
    ws = workspace({
        "OPS/shop/100/job.txcl": f'WITH mode = "async", join_at_scope = 900, into = "job"\nEXEC "{worker.url()}"',
        "OPS/shop/200/halt.txcl": "EMIT @halt = true, .done = true",
    })
    srv = serve(ws)
    status, _, body = http_get(srv.url + "/go")
    assert status == 200 and json.loads(body)["done"] is True
    job = worker.wait_job()
    call = wait_until(lambda: worker.cancels and worker.cancels[0], timeout=10)
    assert call.body["reason"] == "run_finished"
    assert worker.callback(job, {"late": True})[0] == 200  # still recorded, never merged
    store = store_at(ws / ".txcl-data" / "txcl.db")
    assert "job" not in store.get_run(job.body["_txc"]["run_id"]).result


def test_no_cancel_url_means_no_cancel_call(serve, workspace, worker, store_at):
    ws = workspace({"OPS/shop/100/slow.txcl": f'WITH mode = "async", timeout = "1h", into = "r"\nEXEC "{worker.url()}"'})
    srv = serve(ws)
    assert http_get(srv.url + "/go")[0] == 202
    job = worker.wait_job()
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = job.body["_txc"]["run_id"]
    assert store.cancel_run(run_id) == "cancelled"
    assert store.list_cancel_calls(run_id) == []
    assert worker.cancels == [] and len(worker.jobs) == 1


def test_a_missed_join_deadline_cancels_the_worker(serve, workspace, cancelling_worker, store_at):
    worker = cancelling_worker
    ws = workspace({
        "OPS/shop/100/job.txcl": f'WITH mode = "async", join_at_scope = 300, join_deadline = "0s", into = "job"\n'
                                 f'EXEC "{worker.url()}"',
        "OPS/shop/300/use.txcl": "EMIT .used = true",
    })
    srv = serve(ws)
    assert http_get(srv.url + "/go")[0] == 504
    job = worker.wait_job()
    call = wait_until(lambda: worker.cancels and worker.cancels[0], timeout=10)
    assert call.body == {"status": "cancelled", "reason": "join_deadline", "op_continuation_id": job.opc}


def test_a_call_past_its_timeout_cancels_the_worker(serve, workspace, cancelling_worker, store_at):
    worker = cancelling_worker
    ws = workspace({"OPS/shop/100/slow.txcl": f'WITH mode = "async", timeout = "1s", into = "r"\nEXEC "{worker.url()}"'})
    srv = serve(ws, "--continuation-sweep-period", "300ms", "--continuation-stale-resume-after", "2s")
    assert http_get(srv.url + "/go")[0] == 202
    job = worker.wait_job()
    call = wait_until(lambda: worker.cancels and worker.cancels[0], timeout=15)
    assert call.body == {"status": "cancelled", "reason": "timed_out", "op_continuation_id": job.opc}
    store = store_at(ws / ".txcl-data" / "txcl.db")
    assert store.get_run(job.body["_txc"]["run_id"]).status == "expired"
