"""A large request body on an async stack, through a real `txcl serve` and worker: the body is
stored once (not once per document of the run), the run completes with it, and a resume that
outlasts the stale-claim period is kept alive by its heartbeat (never taken over, never lost)."""

from __future__ import annotations

import base64
import json
import urllib.request

from cont_support import http_get, wait_until
from testtools import RawDb

BODY_MIB = 3


def _post(url: str, data: bytes) -> tuple[int, dict, bytes]:
    # not sent as application/json: a JSON body is also merged into the envelope's root (its
    # parsed copy then travels in every document); this test is about the raw body
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/octet-stream"},
                                 method="POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read()


def test_a_big_body_on_an_async_stack_is_stored_once(serve, workspace, worker, store_at) -> None:
    ws = workspace({
        "OPS/big/100/go.txcl": f'SELECT .id\nWITH mode = "async", timeout = "1m"\nEXEC "{worker.url()}"',
        "OPS/big/200/after.txcl": "EMIT .size = &len(._txc.web.req.body)",
    })
    srv = serve(ws, "--default-stack", "big", "--web-max-body-bytes", "16MiB")
    body = json.dumps({"id": 7, "rows": [f"row {i:07d} " * 8 for i in range(BODY_MIB * 10_000)]}).encode()
    status, headers, answer = _post(srv.url + "/", body)
    assert status == 202, answer[:300]
    job = worker.wait_job()
    assert worker.callback(job, {"ok": 1}) == (200, {"status": "resumed"})
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = job.body["_txc"]["run_id"]
    run = wait_until(lambda: (r := store.get_run(run_id)) and r.status == "completed" and r, timeout=30)
    stored = len(base64.b64encode(body))  # the envelope holds the body as base64
    assert run.result["size"] == stored
    raw = RawDb(store)
    blobs = raw.execute("SELECT body FROM blobs WHERE run_id = ?", (run_id,))
    assert [len(b[0]) for b in blobs] == [stored]
    # the suspend, its budgets, the unit's view and the result refer to it instead of copying it
    documents = [*raw.execute("SELECT envelope_json, budget_json FROM suspends WHERE run_id = ?", (run_id,))[0],
                 *raw.execute("SELECT input_view_json FROM await_units WHERE run_id = ?", (run_id,))[0],
                 *raw.execute("SELECT result_json FROM runs WHERE run_id = ?", (run_id,))[0]]
    assert all(len(d) < 10_000 for d in documents), [len(d) for d in documents]
    status, _, polled = http_get(srv.url + headers["location"])
    assert status == 200 and json.loads(polled)["size"] == stored


def test_a_resume_longer_than_the_stale_period_keeps_its_claim(serve, workspace, worker, store_at) -> None:
    """The stale period is 1 s; the resumed segment runs a 2.5 s op. Its heartbeat (a thread of
    its own) keeps the claim fresh, so the sweeper never takes the run over: one resume attempt,
    the run completes, no `txcl_run_lost`."""
    ws = workspace({
        "OPS/slow/100/go.txcl": f'WITH mode = "async", timeout = "1m"\nEXEC "{worker.url()}"',
        "OPS/slow/200/wait.txcl": 'WITH timeout = "10s"\nEXEC "py://slowop:wait"',
        "slowop.py": "import time\n\ndef wait(op_input, ctx):\n    time.sleep(2.5)\n    return {'waited': True}\n",
    })
    srv = serve(ws, "--default-stack", "slow", "--continuation-sweep-period", "200ms",
                "--continuation-stale-resume-after", "1s", fast=False)
    status, _, answer = http_get(srv.url + "/")
    assert status == 202, answer
    job = worker.wait_job()
    assert worker.callback(job, {"ok": 1}) == (200, {"status": "resumed"})
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = job.body["_txc"]["run_id"]
    run = wait_until(lambda: (r := store.get_run(run_id)) and r.status in ("completed", "failed") and r, timeout=30)
    assert run.status == "completed", (run.fail_reason, run.error)
    assert run.result["waited"] is True
    kinds = [e.kind for e in store.list_run_events(run_id)]
    assert not any("takeover" in k for k in kinds), kinds
    assert "txcl_run_lost" not in srv.log
