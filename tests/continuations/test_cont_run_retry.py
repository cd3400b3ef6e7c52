"""`txcl runs retry`, `txcl.continuations.api.retry` and `POST /_txc/admin/runs/<id>/retry`: a
run that failed because of its async ops waits again at its last suspend; only the calls
without a completed answer go out again (fresh tokens), and the run resumes from the saved
envelope. Runs that cannot be retried are refused with the reason. Against a real
`txcl serve` and test worker, on every store backend."""

from __future__ import annotations

import json
import subprocess

from cont_support import TXCL, db_of, http_get, wait_until
from contworker import post_json

from txcl.continuations.api import retry

TOKEN = "admin-token-0123456789abcdef"


def runs(ws, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([TXCL, "runs", *args, "--db", db_of(ws / ".txcl-data" / "txcl.db"), "--workspace",
                           str(ws)], capture_output=True, text=True, timeout=60)


def barrier(url: str) -> dict[str, str]:
    return {"OPS/shop/100/job.txcl": f'WITH mode = "async", into = "job"\nEXEC "{url}"',
            "OPS/shop/200/after.txcl": "EMIT .after = .job.ok"}


def test_a_failed_call_is_sent_again_and_the_run_resumes(serve, workspace, worker, store_at):
    ws = workspace(barrier(worker.url()))
    srv = serve(ws)
    status, headers, _ = http_get(srv.url + "/go")
    assert status == 202
    job = worker.wait_job()
    assert worker.callback(job, status="failed", error="printer jammed")[0] == 200
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = job.body["_txc"]["run_id"]
    wait_until(lambda: store.get_run(run_id).status == "failed")
    done = runs(ws, "retry", run_id)
    assert done.returncode == 0, done.stderr
    assert f"retried {run_id}: 1 call(s) of 1 op(s) go out again" in done.stdout
    again = worker.wait_job()  # sent by the server's short pass
    assert again.opc == job.opc and again.token != job.token and again.body["_txc"]["retry"] == 1
    assert again.body["input"] == job.body["input"]
    assert worker.callback(job, {"ok": 0})[0] == 410  # the first attempt's token is retired
    assert worker.callback(again, {"ok": 7})[0] == 200
    run = wait_until(lambda: (r := store.get_run(run_id)) and r.status == "completed" and r)
    assert run.result["after"] == 7 and run.fail_reason is None
    status, _, body = http_get(srv.url + headers["location"])  # the client's poll URL still works
    assert status == 200 and json.loads(body)["after"] == 7
    assert "run.retried" in [e.kind for e in store.list_run_events(run_id)]
    assert runs(ws, "retry", run_id).returncode == 1  # completed now: nothing to retry


def test_itemized_retry_sends_only_the_items_without_an_answer(serve, workspace, worker, store_at):
    ws = workspace({"OPS/shop/050/items.txcl": "EMIT .items = [0, 1, 2]",
                    "OPS/shop/100/each.txcl":
                    f'WITH mode = "async", each = .items, window = 3, into = "out"\nEXEC "{worker.url()}"'})
    srv = serve(ws, "--admin-token", TOKEN)
    assert http_get(srv.url + "/go")[0] == 202
    jobs = sorted((worker.wait_job() for _ in range(3)), key=lambda j: j.body["_txc"]["item_index"])
    assert worker.callback(jobs[0], {"n": 0})[0] == 200
    assert worker.callback(jobs[1], status="failed", error="bad row")[0] == 200  # fail-fast: item 2 cancelled
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = jobs[0].body["_txc"]["run_id"]
    wait_until(lambda: store.get_run(run_id).status == "failed")
    assert post_json(srv.url + f"/_txc/admin/runs/{run_id}/retry", {}, "wrong-token")[0] == 401
    status, answer = post_json(srv.url + f"/_txc/admin/runs/{run_id}/retry", {}, TOKEN)
    assert status == 200 and answer["status"] == "retried" and answer["calls"] == 2
    again = sorted((worker.wait_job() for _ in range(2)), key=lambda j: j.body["_txc"]["item_index"])
    assert [j.body["_txc"]["item_index"] for j in again] == [1, 2]  # item 0 had its answer
    for job, n in zip(again, (10, 20)):
        assert worker.callback(job, {"n": n})[0] == 200
    run = wait_until(lambda: (r := store.get_run(run_id)) and r.status == "completed" and r)
    assert run.result["out"] == [{"n": 0}, {"n": 10}, {"n": 20}]
    assert len(worker.jobs) == 5


def test_an_expired_run_is_retried_through_the_python_api(serve, workspace, worker, store_at):
    ws = workspace({"OPS/shop/100/job.txcl": f'WITH mode = "async", timeout = "1s", into = "job"\nEXEC "{worker.url()}"',
                    "OPS/shop/200/after.txcl": "EMIT .after = .job.ok"})
    srv = serve(ws, "--continuation-sweep-period", "300ms", "--continuation-stale-resume-after", "2s")
    assert http_get(srv.url + "/go")[0] == 202
    job = worker.wait_job()
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = job.body["_txc"]["run_id"]
    wait_until(lambda: store.get_run(run_id).status == "expired", timeout=15)
    result = retry(store, run_id)
    assert (result.outcome, result.calls) == ("retried", 1)
    assert store.get_run(run_id).status == "waiting"
    again = worker.wait_job()
    assert worker.callback(again, {"ok": 3})[0] == 200
    run = wait_until(lambda: (r := store.get_run(run_id)) and r.status == "completed" and r)
    assert run.result["after"] == 3


def test_runs_that_cannot_be_retried_say_why(serve, workspace, worker, store_at):
    ws = workspace({"OPS/shop/100/job.txcl": f'WITH mode = "async", join_at_scope = 300, join_deadline = "0s", '
                                             f'into = "job"\nEXEC "{worker.url()}"',
                    "OPS/shop/300/use.txcl": "EMIT .x = 1"})
    srv = serve(ws, "--admin-token", TOKEN)
    assert http_get(srv.url + "/go")[0] == 504  # failed in its request: never waited
    run_id = worker.wait_job().body["_txc"]["run_id"]
    shown = runs(ws, "retry", run_id)
    assert shown.returncode == 1 and "no saved point to go on from" in shown.stderr
    status, answer = post_json(srv.url + f"/_txc/admin/runs/{run_id}/retry", {}, TOKEN)
    assert status == 409 and answer["status"] == "not_retryable" and "send the request again" in answer["reason"]
    assert post_json(srv.url + "/_txc/admin/runs/run_nope/retry", {}, TOKEN)[0] == 404
    unknown = runs(ws, "retry", "run_nope")
    assert unknown.returncode == 1 and "no run run_nope" in unknown.stderr
    # a cancelled run stays cancelled
    ws2 = workspace(barrier(worker.url()))
    srv2 = serve(ws2)
    assert http_get(srv2.url + "/go")[0] == 202
    run2 = worker.wait_job().body["_txc"]["run_id"]
    assert runs(ws2, "cancel", run2).returncode == 0
    refused = runs(ws2, "retry", run2, "--json")
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["reason"] == "it was cancelled by an operator"


def test_a_run_failed_at_its_join_deadline_gets_the_deadline_anew(serve, workspace, worker, store_at):
    ws = workspace({"OPS/shop/100/job.txcl": f'WITH mode = "async", join_at_scope = 300, join_deadline = "1500ms", '
                                             f'into = "job"\nEXEC "{worker.url()}"',
                    "OPS/shop/300/use.txcl": "EMIT .used = .job.ok"})
    srv = serve(ws)
    assert http_get(srv.url + "/go")[0] == 202  # parked at the join
    job = worker.wait_job()
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = job.body["_txc"]["run_id"]
    wait_until(lambda: store.get_run(run_id).fail_reason == "join_deadline", timeout=15)
    assert runs(ws, "retry", run_id).returncode == 0
    again = worker.wait_job()
    assert store.get_run(run_id).status == "waiting"  # not failed again at once: 1.5 s from now
    assert worker.callback(again, {"ok": 5})[0] == 200
    run = wait_until(lambda: (r := store.get_run(run_id)) and r.status == "completed" and r)
    assert run.result["used"] == 5
