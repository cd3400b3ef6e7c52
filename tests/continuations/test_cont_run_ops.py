"""Cancelling a run: `txcl runs cancel`, the Python API and `POST /_txc/admin/runs/<id>/cancel`
(only with --admin-token), against a real `txcl serve` and worker, on every store backend."""

from __future__ import annotations

import json
import subprocess
import urllib.request

import pytest
from cont_support import TXCL, barrier_tree, db_of, http_get

TOKEN = "an-operator-token-long-enough"


def _park(srv, worker) -> tuple[str, dict, object]:
    status, headers, _ = http_get(srv.url + "/go")
    assert status == 202
    job = worker.wait_job()
    return job.body["_txc"]["run_id"], headers, job


def _admin(url: str, token: str | None, method: str = "POST", body: bytes | None = b"") -> tuple[int, dict]:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=body if method == "POST" else None, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        body = exc.read()
        try:
            return exc.code, json.loads(body or b"{}")
        except ValueError:  # serve's plain "not found"
            return exc.code, {"text": body.decode()}


def test_cancel_from_the_command_line(serve, workspace, worker, store_at):
    ws = workspace(barrier_tree(worker.url()))
    srv = serve(ws)
    run_id, headers, job = _park(srv, worker)
    db = db_of(ws / ".txcl-data" / "txcl.db")
    done = subprocess.run([TXCL, "runs", "cancel", run_id, "--reason", "duplicate order", "--db", db,
                           "--workspace", str(ws)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and f"cancelled {run_id}" in done.stdout, done.stderr
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run = store.get_run(run_id)
    assert run.status == "failed" and run.fail_reason == "cancelled"
    assert run.error == {"code": "txcl_run_cancelled", "message": "the run was cancelled: duplicate order",
                         "reason": "duplicate order"}
    assert store.get_interaction(job.opc).status == "cancelled"
    assert worker.callback(job, {"late": True})[0] == 410  # a late answer changes nothing
    assert [s.status for s in store.list_suspends(run_id)] == ["failed"]
    assert "run.cancelled" in [e.kind for e in store.list_run_events(run_id)]
    status, _, body = http_get(srv.url + headers["location"])
    assert status == 502 and json.loads(body)["error"]["code"] == "txcl_run_cancelled"
    again = subprocess.run([TXCL, "runs", "cancel", run_id, "--db", db, "--workspace", str(ws), "--json"],
                           capture_output=True, text=True, timeout=60)
    assert again.returncode == 1 and json.loads(again.stdout) == {"run_id": run_id, "status": "failed"}
    unknown = subprocess.run([TXCL, "runs", "cancel", "run_nope", "--db", db, "--workspace", str(ws)],
                             capture_output=True, text=True, timeout=60)
    assert unknown.returncode == 1 and "no run run_nope" in unknown.stderr


def test_cancel_from_python_by_continuation_id(serve, workspace, worker, store_at):
    from txcl.continuations.api import cancel

    ws = workspace(barrier_tree(worker.url()))
    srv = serve(ws)
    run_id, _, job = _park(srv, worker)
    store = store_at(ws / ".txcl-data" / "txcl.db")
    assert cancel(store, run_id) == "cancelled"
    assert store.get_run(run_id).error["message"] == "the run was cancelled"
    assert cancel(store, run_id) == "failed"
    assert cancel(store, "run_unknown") == "unknown"


def test_cancel_over_http_needs_the_admin_token(serve, workspace, worker, store_at):
    ws = workspace(barrier_tree(worker.url()))
    srv = serve(ws, "--admin-token", TOKEN)
    run_id, _, job = _park(srv, worker)
    store = store_at(ws / ".txcl-data" / "txcl.db")
    url = f"{srv.url}/_txc/admin/runs/{run_id}/cancel"
    assert _admin(url, None)[0] == 401
    assert _admin(url, "an-operator-token-long-enougX")[0] == 401
    assert store.get_run(run_id).status == "waiting"  # refused requests changed nothing
    assert _admin(url, TOKEN, method="GET")[0] == 405
    assert _admin(url, TOKEN, body=b"{not json")[0] == 400
    rcid = store.get_run(run_id).rcid
    status, answer = _admin(f"{srv.url}/_txc/admin/runs/{rcid}/cancel", TOKEN, body=b'{"reason": "stuck"}')
    assert status == 200 and answer == {"run_id": run_id, "status": "cancelled"}
    assert store.get_run(run_id).error["reason"] == "stuck"
    assert _admin(url, TOKEN) == (409, {"run_id": run_id, "status": "failed"})
    assert _admin(f"{srv.url}/_txc/admin/runs/run_unknown/cancel", TOKEN)[0] == 404


def test_without_an_admin_token_there_is_no_admin_endpoint(serve, workspace, worker):
    srv = serve(workspace(barrier_tree(worker.url())))
    run_id, _, _ = _park(srv, worker)
    assert _admin(f"{srv.url}/_txc/admin/runs/{run_id}/cancel", TOKEN)[0] == 404


def test_cancelling_an_itemized_run_cancels_every_open_item(serve, workspace, worker, store_at):
    files = {"OPS/pay/50/orders.txcl": 'EMIT .orders = [1, 2, 3, 4]',
             "OPS/pay/100/charge.txcl": f'WITH mode = "async", each = .orders, window = 2, into = "r"\n'
                                        f'EXEC "{worker.url()}"'}
    ws = workspace(files)
    srv = serve(ws)
    status, _, _ = http_get(srv.url + "/go")
    assert status == 202
    jobs = [worker.wait_job(), worker.wait_job()]
    run_id = jobs[0].body["_txc"]["run_id"]
    store = store_at(ws / ".txcl-data" / "txcl.db")
    assert store.cancel_run(run_id, reason="operator") == "cancelled"
    unit = store.list_units(run_id)[0]
    assert unit.status == "cancelled"
    assert {i.status for i in store.list_interactions(unit.unit_id)} == {"cancelled"}  # sent and queued alike
    assert [worker.callback(j, {"ok": 1})[0] for j in jobs] == [410, 410]
    with pytest.raises(Exception):
        worker.wait_job(timeout=1.5)  # the queued items are never sent
