"""`WITH heartbeat`: a worker posts `{"status": "running", "progress": {…}}` to its callback URL;
a call whose worker falls silent times out one period later with its own error, long before
its budget; progress shows in `txcl runs show`, the JSON poll answer and the wait page.
Against a real `txcl serve` and worker, on every store backend."""

from __future__ import annotations

import json
import subprocess
import time

from cont_support import TXCL, db_of, http_get, wait_until
from contworker import post_json

FLAGS = ["--continuation-sweep-period", "300ms", "--continuation-stale-resume-after", "2s",
         "--continuation-longpoll-ms", "0"]  # a poll answers at once (a long poll would outlast the beats)


def tree(url: str, every: str = "1s") -> dict[str, str]:
    return {
        "OPS/shop/100/slow.txcl": f'WITH mode = "async", timeout = "1h", heartbeat = "{every}", into = "r"\nEXEC "{url}"',
        "OPS/shop/200/after.txcl": "EMIT .after = .r.ok",
    }


def beat(job, progress=None, token="<job>"):
    body = {"status": "running"}
    if progress is not None:
        body["progress"] = progress
    return post_json(job.callback_url, body, job.token if token == "<job>" else token)


def test_heartbeats_keep_a_call_alive_and_carry_progress(serve, workspace, worker, store_at):
    # (a period of 3 s: each check below, a `txcl runs show` process included, must fit in
    # one period after the beat before it, also on a loaded machine)
    ws = workspace(tree(worker.url(), "3s"))
    srv = serve(ws, *FLAGS)
    status, headers, _ = http_get(srv.url + "/go")
    assert status == 202
    job = worker.wait_job()
    assert job.body["_txc"]["heartbeat_ms"] == 3000  # the worker is told how often
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = job.body["_txc"]["run_id"]
    for done in (10, 20, 30, 35, 40, 42):  # 6 x 0.6 s: longer than one period, kept alive by the beats
        assert beat(job, {"done": done, "total": 100}) == (200, {"status": "running", "cancelled": False})
        time.sleep(0.6)
    assert store.get_run(run_id).status == "waiting"  # a heartbeat is never a completion
    assert beat(job, {"done": 42, "total": 100})[0] == 200  # a repeat is harmless
    status, _, body = http_get(srv.url + headers["location"])
    data = json.loads(body)
    assert status == 202 and data["progress"][0]["progress"] == {"done": 42, "total": 100}
    assert data["progress"][0]["op"] == "shop/slow"
    status, _, page = http_get(srv.url + headers["location"], accept="text/html")
    assert status == 202 and b"shop/slow: 42 of 100 done" in page
    assert beat(job, {"done": 42, "total": 100})[0] == 200
    shown = subprocess.run([TXCL, "runs", "show", run_id, "--db", db_of(ws / ".txcl-data" / "txcl.db"),
                            "--workspace", str(ws)], capture_output=True, text=True, timeout=60)
    assert "progress: 42 of 100 done" in shown.stdout, shown.stdout + shown.stderr
    assert beat(job, {"done": 42, "total": 100})[0] == 200
    assert worker.callback(job, {"ok": 7}) == (200, {"status": "resumed"})
    run = wait_until(lambda: (r := store.get_run(run_id)) and r.status == "completed" and r)
    assert run.result["after"] == 7


def test_a_silent_worker_times_out_after_one_period(serve, workspace, worker, store_at):
    ws = workspace(tree(worker.url(), "1s"))
    srv = serve(ws, *FLAGS)
    started = time.monotonic()
    status, headers, _ = http_get(srv.url + "/go")
    assert status == 202
    job = worker.wait_job()
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = job.body["_txc"]["run_id"]
    run = wait_until(lambda: (r := store.get_run(run_id)) and r.status != "waiting" and r, timeout=15)
    assert time.monotonic() - started < 10  # not the hour of its timeout
    assert run.fail_reason == "heartbeat_missed"
    assert run.error["code"] == "txcl_heartbeat_missed"
    assert "no heartbeat for 1s" in run.error["message"]
    status, _, body = http_get(srv.url + headers["location"])
    assert status == 502 and json.loads(body)["error"]["code"] == "txcl_heartbeat_missed"
    assert beat(job)[0] == 410  # too late
    assert worker.callback(job, {"ok": 1})[0] == 410


def test_heartbeat_answers(serve, workspace, worker, store_at):
    ws = workspace(tree(worker.url(), "30s"))
    srv = serve(ws, *FLAGS)
    status, _, _ = http_get(srv.url + "/go")
    assert status == 202
    job = worker.wait_job()
    run_id = job.body["_txc"]["run_id"]
    assert beat(job, token="not-the-token")[0] == 401
    assert beat(job, progress=[1, 2])[0] == 400  # progress is an object
    store = store_at(ws / ".txcl-data" / "txcl.db")
    assert store.cancel_run(run_id, reason="operator") == "cancelled"
    assert beat(job) == (200, {"status": "cancelled", "cancelled": True})  # the worker learns it may stop
