"""Traces of a suspended and resumed run: the
pending step, `continuation.suspend`, the resume trace `resume-<run>-<stage>-v<visit>` that
opens with `continuation.resume` and has a `completed` step, and no token anywhere in the
traces, the database or the server log."""

from __future__ import annotations

from testtools import RawDb

import json

from cont_support import barrier_tree, http_get, wait_until


def _events(trace) -> list[tuple[str, dict]]:
    out = []
    for e in trace.events:
        data = e.get("data")
        if data is None and e.get("data_json"):
            data = json.loads(e["data_json"])
        out.append((e["kind"], data or {}))
    return out


def test_pending_suspend_resume_and_no_tokens(serve, workspace, worker, store_at):
    ws = workspace(barrier_tree(worker.url()))
    srv = serve(ws, "--trace-mode", "full")
    status, headers, _ = http_get(srv.url + "/go")
    assert status == 202
    rid = headers["x-request-id"]
    job = worker.wait_job()
    assert worker.callback(job, {"enriched": {"k": 1}}) == (200, {"status": "resumed"})
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = job.body["_txc"]["run_id"]
    wait_until(lambda: store.get_run(run_id).status == "completed")
    resume_rid = f"resume-{run_id}-shop_100-v1"
    resume = wait_until(lambda: store.get_trace(resume_rid), timeout=10)
    origin = wait_until(lambda: store.get_trace(rid), timeout=10)

    # origin: pending async step with the ack's job id, then the suspend event
    assert origin.request["status"] == "suspended" and origin.request["run_id"] == run_id
    pending = [s for s in origin.steps if s["name"] == "enrich"]
    assert len(pending) == 1 and pending[0]["status"] == "pending" and pending[0]["transport"] == "async"
    assert pending[0]["ack"] and pending[0]["unit_id"]
    suspend = [d for k, d in _events(origin) if k == "continuation.suspend"]
    assert suspend == [{"run_id": run_id, "stage": "shop/100", "visit": 1, "kind": "barrier"}]

    # resume: its own trace, src continuation, origin rid, opens with continuation.resume
    assert resume.request["src"] == "continuation" and resume.request["origin_rid"] == rid
    kinds = [k for k, _ in _events(resume)]
    assert kinds[:2] == ["request.start", "continuation.resume"]
    # the segment starts before the outcomes it resumes with are merged
    every = [e["kind"] for e in resume.events]
    assert every.index("request.start") < every.index("stage.merge")
    data = _events(resume)[1][1]
    assert data["run_id"] == run_id and data["origin_rid"] == rid and data["stage"] == "shop/100"
    assert data["visit"] == 1 and data["attempt"] == 1 and data["snapshot_id"]
    completed = [s for s in resume.steps if s["name"] == "enrich"]
    assert completed[0]["status"] == "completed" and completed[0]["transport"] == "async"
    assert [s["name"] for s in resume.steps if s["stage"] == "shop/200"] == ["after"]
    assert store.trace_rids_for_run(run_id) == [rid, resume_rid]

    # the token is nowhere: not in traces, not in the database files, not in the log
    token = job.token
    assert token and token not in json.dumps([origin.request, origin.steps, origin.events, resume.request,
                                              resume.steps, resume.events], default=str)
    assert token.encode() not in RawDb(store).everything()
    srv.stop()
    assert token not in srv.log
