"""`WITH join_deadline`, `on_join_deadline = "continue"` and `join_wait` on a deferred op,
against a real `txcl serve` and test worker, on every store backend: a join reached after the
deadline fails at once; a flow parked at the join fails when the deadline passes; "continue"
runs the join scope without the result (a late answer is recorded, never merged); `join_wait`
answers in the request when the result comes within it."""

from __future__ import annotations

import json
import subprocess
import threading
import time

from cont_support import TXCL, db_of, http_get, wait_until


def tree(url: str, options: str) -> dict[str, str]:
    return {
        "OPS/shop/100/job.txcl": f'WITH mode = "async", join_at_scope = 300, into = "job", {options}\nEXEC "{url}"',
        "OPS/shop/200/mid.txcl": "EMIT .mid = true",
        "OPS/shop/300/use.txcl": "EMIT .joined = true",
    }


def start(serve, workspace, worker, options: str):
    ws = workspace(tree(worker.url(), options))
    return ws, serve(ws)


def test_a_join_reached_after_the_deadline_fails_at_once(serve, workspace, worker, store_at):
    ws, srv = start(serve, workspace, worker, 'join_deadline = "0s"')
    status, _, body = http_get(srv.url + "/go")
    data = json.loads(body)
    assert status == 504, body
    assert data["error"]["code"] == "txcl_join_deadline"
    assert "deferred op job was not ready by its join_deadline (0s after its dispatch)" in data["error"]["message"]
    job = worker.wait_job()
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run = store.get_run(job.body["_txc"]["run_id"])
    assert (run.status, run.fail_reason) == ("failed", "join_deadline")
    assert worker.callback(job, {"ok": 1})[0] == 410  # the flow gave up on it


def test_a_flow_parked_at_the_join_fails_when_the_deadline_passes(serve, workspace, worker, store_at):
    ws, srv = start(serve, workspace, worker, 'join_deadline = "1500ms", timeout = "1h"')
    started = time.monotonic()
    status, headers, _ = http_get(srv.url + "/go")
    assert status == 202  # parked at the join (scope 300) before the deadline
    job = worker.wait_job()
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = job.body["_txc"]["run_id"]
    assert store.get_run(run_id).status == "waiting"
    run = wait_until(lambda: (r := store.get_run(run_id)) and r.status != "waiting" and r, timeout=15)
    assert time.monotonic() - started < 10  # not the hour of its timeout
    assert (run.status, run.fail_reason) == ("failed", "join_deadline")
    assert run.error["code"] == "txcl_join_deadline"
    status, _, body = http_get(srv.url + headers["location"])
    assert status >= 500 and json.loads(body)["error"]["code"] == "txcl_join_deadline"
    assert worker.callback(job, {"ok": 1})[0] == 410


def test_continue_runs_the_join_scope_without_the_result(serve, workspace, worker, store_at):
    ws, srv = start(serve, workspace, worker, 'join_deadline = "0s", on_join_deadline = "continue"')
    status, _, body = http_get(srv.url + "/go")
    assert status == 200, body
    data = json.loads(body)
    assert data["joined"] is True and data["mid"] is True and "job" not in data
    job = worker.wait_job()
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = job.body["_txc"]["run_id"]
    run = store.get_run(run_id)
    assert run.status == "completed" and "job" not in run.result
    # the late answer is recorded, never merged
    assert worker.callback(job, {"ok": 9})[0] == 200
    assert store.get_terminal(job.opc).payload == {"ok": 9}
    assert "job" not in store.get_run(run_id).result
    shown = subprocess.run([TXCL, "runs", "show", run_id, "--db", db_of(ws / ".txcl-data" / "txcl.db"),
                            "--workspace", str(ws)], capture_output=True, text=True, timeout=60)
    assert "passed over at its join deadline" in shown.stdout, shown.stdout + shown.stderr


def test_continue_resumes_a_parked_flow_without_the_result(serve, workspace, worker, store_at):
    ws, srv = start(serve, workspace, worker, 'join_deadline = "1200ms", on_join_deadline = "continue"')
    status, headers, _ = http_get(srv.url + "/go")
    assert status == 202
    job = worker.wait_job()
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = job.body["_txc"]["run_id"]
    run = wait_until(lambda: (r := store.get_run(run_id)) and r.status == "completed" and r, timeout=15)
    assert run.result["joined"] is True and "job" not in run.result
    status, _, body = http_get(srv.url + headers["location"])
    assert status == 200 and json.loads(body)["joined"] is True
    assert worker.callback(job, {"ok": 3})[0] == 200  # recorded …
    assert "job" not in store.get_run(run_id).result  # … never merged
    events = [e.kind for e in store.list_run_events(run_id)]
    assert "join.passed_over" in events


def test_join_wait_answers_in_the_request_when_the_result_comes_in_time(serve, workspace, worker, store_at):
    ws, srv = start(serve, workspace, worker, 'join_wait = "5s"')

    def answer_soon() -> None:
        job = worker.wait_job()
        time.sleep(0.4)
        worker.callback(job, {"ok": 5})

    helper = threading.Thread(target=answer_soon)
    helper.start()
    started = time.monotonic()
    status, _, body = http_get(srv.url + "/go")
    helper.join(10)
    assert status == 200, body  # not a 202: the join waited for the nearly-done result
    assert json.loads(body)["job"] == {"ok": 5} and json.loads(body)["joined"] is True
    assert time.monotonic() - started < 4.5  # it stopped waiting as soon as the result was in


def test_join_wait_still_parks_when_the_result_does_not_come(serve, workspace, worker, store_at):
    ws, srv = start(serve, workspace, worker, 'join_wait = "600ms"')
    started = time.monotonic()
    status, headers, _ = http_get(srv.url + "/go")
    assert status == 202 and time.monotonic() - started >= 0.55
    job = worker.wait_job()
    assert worker.callback(job, {"ok": 2})[0] == 200
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run = wait_until(lambda: (r := store.get_run(job.body["_txc"]["run_id"])) and r.status == "completed" and r)
    assert run.result["job"] == {"ok": 2}
