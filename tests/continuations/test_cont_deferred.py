"""Deferred join (seed 003) against a real `txcl serve`, a real SQLite
file and the test worker: every failure case (one test each), and every rule of deferred joins."""

from __future__ import annotations

import json
import threading
import time

from cont_support import http_get, wait_until
from contworker import TestWorker, post_json

SLOW_PY = '''
import time

def nap(op_input, ctx):
    query = op_input.get("_txc", {}).get("web", {}).get("req", {}).get("url", {}).get("query", {})
    time.sleep(float(query.get("nap", ["0.4"])[0]))
    return {"napped": True}
'''


def seed_tree(url: str, *, floor: int = 200, timeout: str = "20m", render_scope: int = 200,
              extra: dict[str, str] | None = None, stack: str = "site") -> dict[str, str]:
    """The seed's shape: dispatch at 100, an audit at 150 (runs while the worker is busy, and
    would notice a premature merge), the consumer at the join."""
    files = {
        f"OPS/{stack}/100/research.txcl": f'WITH mode = "async", join_at_scope = {floor}, timeout = "{timeout}"\n'
                                          f'EXEC "{url}"',
        f"OPS/{stack}/150/audit.txcl": "EMIT .audit.started = true",
        f"OPS/{stack}/150/peek.txcl": "WHEN .research.done == true\nEMIT .audit.saw_result = true",
        f"OPS/{stack}/{render_scope}/render.txcl": "WHEN .research.done == true\nEMIT .rendered = .research.page",
    }
    files.update(extra or {})
    return files


def _run_id(job) -> str:
    return job.body["_txc"]["run_id"]


def _callback_later(worker: TestWorker, output=None, *, status: str = "completed", error=None, delay: float = 0.0,
                    count: int = 1) -> threading.Thread:
    """A worker that acks, then calls back `delay` s after each dispatch (in a thread)."""

    def go() -> None:
        for _ in range(count):
            job = worker.wait_job(timeout=20)
            time.sleep(delay)
            worker.callback(job, output, status=status, error=error)

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    return thread


def _events(trace) -> list[tuple[str, dict]]:
    out = []
    for e in trace.events:
        data = e.get("data")
        if data is None and e.get("data_json"):
            data = json.loads(e["data_json"])
        out.append((e["kind"], data or {}))
    return out


RESULT = {"research": {"done": True, "page": "P"}}


# ---------------------------------------------------------------------------------------------
# the result is in before the flow reaches the join


def test_callback_before_the_join_merges_in_request_no_202(serve, workspace, store_at):
    """The worker calls back while the in-between scope runs: the callback is
    recorded (200, not released: the run is active), the join merges it before WHEN and the
    client gets a synchronous answer."""
    with TestWorker() as w:
        files = seed_tree(w.url(), extra={"dj_t3_nap.py": SLOW_PY,
                                          "OPS/site/120/nap.txcl": 'EXEC "py://dj_t3_nap:nap"'})
        ws = workspace(files)
        srv = serve(ws, "--trace-mode", "full")
        cb = _callback_later(w, RESULT)
        status, headers, body = http_get(srv.url + "/go")
        cb.join(10)
        assert w.callbacks == [(200, {"status": "recorded"})]
    assert status == 200, body
    answer = json.loads(body)
    assert answer["rendered"] == "P" and answer["research"] == {"done": True, "page": "P"}
    assert answer["audit"] == {"started": True}  # the in-between scope saw nothing
    assert "location" not in headers
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run = store.list_runs()[0]
    assert run.status == "completed" and run.result["rendered"] == "P"
    unit = store.list_units(run.run_id)[0]
    marker = store.get_joined_marker(unit.unit_id)
    assert marker is not None and marker.segment_id == headers["x-request-id"]
    trace = wait_until(lambda: store.get_trace(headers["x-request-id"]))
    kinds = _events(trace)
    assert ("continuation.join", {"where": "request", "stage": "site/200", "ops": ["research"]}) in kinds
    dispatch = [d for k, d in kinds if k == "continuation.dispatch"]
    assert len(dispatch) == 1 and dispatch[0]["op"] == "research" and dispatch[0]["join_at_scope"] == 200
    assert dispatch[0]["stage"] == "site/100" and dispatch[0]["run_id"] == run.run_id
    assert not [k for k, _ in kinds if k == "continuation.suspend"]
    pending = [s for s in trace.steps if s["name"] == "research"]
    assert len(pending) == 1 and pending[0]["status"] == "pending" and pending[0]["transport"] == "async"
    assert pending[0]["ack"] and pending[0]["stage"] == "site/100"
    # the merged fields show up in the join scope's input: no step of its own for the merge
    assert [s["name"] for s in trace.steps if s["stage"] == "site/200"] == ["render"]


def test_callback_before_the_ack_is_merged_at_the_floor(serve, workspace):
    """A completion that arrives before the ack (before the dispatch even finished) is
    persisted and merged once at the join."""
    with TestWorker(mode="callback-first", callback_output=RESULT) as w:
        srv = serve(workspace(seed_tree(w.url())))
        status, _, body = http_get(srv.url + "/go")
        assert w.callbacks[0] == (200, {"status": "recorded"})
    assert status == 200 and json.loads(body)["rendered"] == "P"


def test_floor_scope_need_not_exist_and_dj4_resume_runs_the_join_scope(serve, workspace, worker, store_at):
    """Floor 200, scopes 100/150/250: the join happens at 250. The worker is still busy,
    so the flow suspends there (202): the resume merges and only then runs scope 250's
    own ops (`render` never ran before the suspend)."""
    ws = workspace(seed_tree(worker.url(), render_scope=250))
    srv = serve(ws, "--trace-mode", "full")
    status, headers, body = http_get(srv.url + "/go")
    assert status == 202, body
    assert json.loads(body)["audit"] == {"started": True}
    job = worker.wait_job()
    assert worker.callback(job, RESULT) == (200, {"status": "resumed"})
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = _run_id(job)
    run = wait_until(lambda: (r := store.get_run(run_id)) and r.status == "completed" and r)
    assert run.result["rendered"] == "P" and "saw_result" not in run.result["audit"]
    suspend = store.list_suspends(run_id)
    assert [(s.stage, s.visit, s.kind) for s in suspend] == [("site/250", 1, "join")]
    status, _, body = http_get(srv.url + headers["location"])
    assert status == 200 and json.loads(body)["rendered"] == "P"
    origin = wait_until(lambda: store.get_trace(headers["x-request-id"]))
    assert ("continuation.suspend", {"run_id": run_id, "stage": "site/250", "visit": 1, "kind": "join"}) \
        in _events(origin)
    assert not [s for s in origin.steps if s["name"] == "render"]
    resume = wait_until(lambda: store.get_trace(f"resume-{run_id}-site_250-v1"))
    kinds = [k for k, _ in _events(resume)]
    assert kinds[:2] == ["request.start", "continuation.resume"]
    assert _events(resume)[1][1]["origin_rid"] == headers["x-request-id"]
    names = [(s["name"], s["status"]) for s in resume.steps]
    assert names[:2] == [("research", "completed"), ("render", "ok")]  # one step per joined op, then the scope
    joined = resume.steps[0]
    assert joined["joined"] is True and joined["stage"] == "site/250" and joined["dispatched_at"] == "site/100"
    from txcl.ui.views import trace_view
    view = trace_view(store, f"resume-{run_id}-site_250-v1")
    rows = [row for stage in view["stages"] for row in stage["steps"]]
    assert [r["joined"] for r in rows if r["name"] == "research"] == ["site/100"]
    assert [r["joined"] for r in rows if r["name"] == "render"] == [None]


# ---------------------------------------------------------------------------------------------
# every failure row


def test_no_callback_expires_at_dispatch_plus_timeout_plus_slack(serve, workspace, worker, store_at):
    ws = workspace(seed_tree(worker.url(), timeout="1s"))
    srv = serve(ws, "--deferred-join-slack", "1s", "--continuation-sweep-period", "200ms")
    status, headers, _ = http_get(srv.url + "/go")
    assert status == 202  # the flow waits at the join
    job = worker.wait_job()
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = _run_id(job)
    it = store.get_interaction(job.opc)
    assert it.deadline_ms - it.dispatch_ms == 2000  # timeout 1s + slack 1s
    assert store.get_run(run_id).expires_ms == it.deadline_ms
    run = wait_until(lambda: (r := store.get_run(run_id)) and r.status == "expired" and r, timeout=15)
    assert run.status == "expired"
    status, _, body = http_get(srv.url + headers["location"])
    assert status == 502 and json.loads(body)["status"] == "failed"
    assert store.get_interaction(job.opc).status == "timed_out"
    assert worker.callback(job, RESULT)[0] == 410


def test_no_ack_fails_at_the_join_after_the_in_between_scopes(serve, workspace, store_at):
    with TestWorker(mode="status:503") as bad:
        ws = workspace(seed_tree(bad.url()))
        srv = serve(ws, "--trace-mode", "full")
        status, headers, body = http_get(srv.url + "/go")
    assert status == 502
    error = json.loads(body)["error"]
    assert error["code"] == "txcl_join_failed" and "expected 202, got 503" in error["message"]
    store = store_at(ws / ".txcl-data" / "txcl.db")
    trace = wait_until(lambda: store.get_trace(headers["x-request-id"]))
    steps = [(s["stage"], s["name"], s["status"]) for s in trace.steps]
    assert ("site/100", "research", "error") in steps  # a failed dispatch is an error step
    assert ("site/150", "audit", "ok") in steps  # the in-between scope still ran
    assert not [s for s in steps if s[1] == "render"]  # the join scope did not
    run = store.list_runs()[0]
    assert run.status == "failed" and run.fail_reason == "join_failed"


def test_ack_timeout_fails_at_the_join(serve, workspace):
    with TestWorker(mode="hang") as slow:
        srv = serve(workspace(seed_tree(slow.url())), "--async-ack-timeout", "300ms")
        status, _, body = http_get(srv.url + "/go")
    assert status == 502
    assert "no answer within 300ms" in json.loads(body)["error"]["message"]


def test_worker_failure_in_request_and_after_suspend(serve, workspace, store_at):
    with TestWorker() as w:
        files = seed_tree(w.url(), extra={"dj_f3_nap.py": SLOW_PY, "OPS/site/120/nap.txcl": 'EXEC "py://dj_f3_nap:nap"'})
        ws = workspace(files)
        srv = serve(ws, "--trace-mode", "full")
        # met in the request: the worker failed while scope 120 ran
        cb = _callback_later(w, status="failed", error="model exploded")
        status, _, body = http_get(srv.url + "/go")
        cb.join(10)
        assert status == 502
        error = json.loads(body)["error"]
        assert error["code"] == "txcl_join_failed" and "model exploded" in error["message"]
        assert error["detail"] == {"message": "model exploded"}
        # met after a suspend: the resume records the failed stage and the run fails
        status, headers, _ = http_get(srv.url + "/go?nap=0")
        assert status == 202
        job = w.wait_job()
        assert w.callback(job, status="failed", error={"message": "late failure"}) == (200, {"status": "failed"})
        store = store_at(ws / ".txcl-data" / "txcl.db")
        run = wait_until(lambda: (r := store.get_run(_run_id(job))) and r.status == "failed" and r)
        assert run.error["code"] == "txcl_join_failed"
        status, _, body = http_get(srv.url + headers["location"])
        assert status == 502 and "late failure" in json.dumps(json.loads(body))
        resume = wait_until(lambda: store.get_trace(f"resume-{run.run_id}-site_200-v1"))
        assert [(s["name"], s["status"]) for s in resume.steps] == [("research", "error")]


def test_halt_or_end_of_stack_before_the_floor(serve, workspace, worker, store_at):
    """The answer goes out without the result; the run completes with it; the callback is
    accepted (200) and stored but never merged; the interaction stays open only until its deadline."""
    files = seed_tree(worker.url(), extra={"OPS/site/150/stop.txcl": 'WHEN ._txc.web.req.url.path == "/stop"\nEMIT @halt = true'})
    files.update(seed_tree(worker.url(), floor=900, stack="short"))
    files["txcl.toml"] = '[serve]\ndefault_stack = "site"\n\n[[serve.routes]]\npath = "/short"\nstack = "short"\n'
    ws = workspace(files)
    srv = serve(ws)
    store = store_at(ws / ".txcl-data" / "txcl.db")
    for path in ("/stop", "/short/go"):
        status, _, body = http_get(srv.url + path)
        assert status == 200, body
        answer = json.loads(body)
        assert "research" not in answer and answer["audit"] == {"started": True}
        job = worker.wait_job()
        run = store.get_run(_run_id(job))
        assert run.status == "completed" and "research" not in run.result
        # open until its deadline (its 202 written within --ack-write-delay)
        wait_until(lambda: store.get_interaction(job.opc).status == "dispatched")
        assert worker.callback(job, RESULT) == (200, {"status": "recorded"})
        assert store.get_terminal(job.opc).status == "completed"
        run = store.get_run(run.run_id)
        assert run.status == "completed" and "research" not in run.result  # never merged
        assert store.get_joined_marker(store.list_units(run.run_id)[0].unit_id) is None


LOOP_PY = '''
def again(op_input, ctx):
    n = int(op_input.get("loops", 0)) + 1
    out = {"loops": n}
    if n < 3:
        out["_txc"] = {"goto": "site/100"}
    return out
'''


def test_backward_goto_redispatches_and_all_join_at_the_floor(serve, workspace, worker, store_at):
    """A @goto back below the floor re-dispatches the op each time (a new unit
    each); the join stays outstanding until the floor; all units join there in op-name then
    dispatch order, whatever order they completed in."""
    files = {
        "OPS/site/100/research.txcl": f'WITH mode = "async", join_at_scope = 300\nEXEC "{worker.url()}"',
        "OPS/site/200/loop.txcl": 'EXEC "py://dj_f5_loop:again"',
        "OPS/site/300/render.txcl": "EMIT .count = &len(.seen)",
        "dj_f5_loop.py": LOOP_PY,
    }
    ws = workspace(files)
    srv = serve(ws)
    status, headers, _ = http_get(srv.url + "/go")
    assert status == 202
    jobs = [worker.wait_job() for _ in range(3)]
    assert len({j.opc for j in jobs}) == 3
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = _run_id(jobs[0])
    assert len(store.list_units(run_id)) == 3
    suspend = store.list_suspends(run_id)
    assert [(s.stage, s.kind, len(s.members)) for s in suspend] == [("site/300", "join", 3)]
    answers = [worker.callback(j, {"seen": [k]}) for k, j in reversed(list(enumerate(jobs)))]
    assert answers[-1] == (200, {"status": "resumed"}) and all(a[0] == 200 for a in answers)
    run = wait_until(lambda: (r := store.get_run(run_id)) and r.status == "completed" and r)
    assert run.result["seen"] == [0, 1, 2] and run.result["count"] == 3 and run.result["loops"] == 3


def test_kill_before_the_join_expires_the_run(serve, workspace, worker, store_at):
    """SIGKILL right after the deferred dispatch commit: nobody drives the active
    run again; it expires at its expires_ms; a later callback gets 410."""
    ws = workspace(seed_tree(worker.url(), timeout="1s"))
    flags = ["--deferred-join-slack", "1s", "--continuation-sweep-period", "200ms"]
    first = serve(ws, *flags, env={"TXCL_TESTING": "1", "TXCL_FAULT": "deferred-dispatch"})
    status, _, _ = http_get(first.url + "/go", dead_ok=True)
    assert status == 0 and first.wait_dead() is not None
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run = store.list_runs()[0]
    assert run.status == "active" and run.expires_ms is not None
    unit = store.list_units(run.run_id)[0]
    it = store.list_interactions(unit.unit_id)[0]
    assert run.expires_ms == it.deadline_ms == it.dispatch_ms + 2000
    second = serve(ws, *flags)
    run = wait_until(lambda: (r := store.get_run(run.run_id)) and r.status == "expired" and r, timeout=15)
    assert run.finished_ms >= run.expires_ms
    # the dispatch never went out (killed right after the commit): the worker has no job, and
    # a completion at the callback URL is gone
    url = f"{second.url}/_txc/continuations/op/{it.opc}/complete"
    status, body = post_json(url, {"status": "completed", "output": RESULT}, "whatever-token")
    assert status in (401, 410)
    assert store.get_terminal(it.opc) is None


def test_restart_after_the_join_suspend_is_safe(serve, workspace, worker, store_at):
    """A kill after the flow parked at the join: once the flow has parked at the join, a
    killed server loses nothing: the callback to the restarted server resumes the run."""
    ws = workspace(seed_tree(worker.url()))
    first = serve(ws)
    status, headers, _ = http_get(first.url + "/go")
    assert status == 202
    job = worker.wait_job()
    first.proc.kill()
    first.wait_dead()
    second = serve(ws)
    url = second.url + job.callback_url[job.callback_url.index("/_txc/"):]
    assert worker.callback(job, RESULT, url=url) == (200, {"status": "resumed"})
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run = wait_until(lambda: (r := store.get_run(_run_id(job))) and r.status == "completed" and r)
    assert run.result["rendered"] == "P"
    status, _, body = http_get(second.url + headers["location"])
    assert status == 200 and json.loads(body)["rendered"] == "P"


# ---------------------------------------------------------------------------------------------
# floors, goto and the join scope


def test_floor_at_or_below_own_scope_is_plain_async(serve, workspace, worker, store_at):
    files = seed_tree(worker.url(), floor=100)
    ws = workspace(files)
    srv = serve(ws)
    status, _, body = http_get(srv.url + "/go")
    assert status == 202
    assert "audit" not in json.loads(body)  # suspended at its own scope, before 150
    job = worker.wait_job()
    store = store_at(ws / ".txcl-data" / "txcl.db")
    assert [(s.stage, s.kind) for s in store.list_suspends(_run_id(job))] == [("site/100", "barrier")]
    assert store.list_units(_run_id(job))[0].join_at_scope is None
    assert worker.callback(job, RESULT) == (200, {"status": "resumed"})
    run = wait_until(lambda: (r := store.get_run(_run_id(job))) and r.status == "completed" and r)
    assert run.result["rendered"] == "P" and run.result["audit"]["saw_result"] is True


def test_continuable_with_join_at_scope_fails_with_the_exact_message(serve, workspace):
    files = {
        "OPS/site/50/floor.txcl": "EMIT .floor = 300",
        "OPS/site/100/work.txcl": 'WITH mode = "continuable", join_at_scope = .floor\nEXEC "txco://echo"',
        "OPS/site/200/after.txcl": "EMIT .after = true",
    }
    srv = serve(workspace(files))
    status, _, body = http_get(srv.url + "/go")
    assert status == 500
    error = json.loads(body)["error"]
    assert error["code"] == "txcl_continuable_invalid"
    assert error["message"] == 'join_at_scope (= 300) requires mode = "async"; it is not honored with mode = "continuable"'


def test_cross_stack_goto_resolves_at_the_first_scope_of_the_new_stack(serve, workspace, store_at):
    """The flow jumps to another stack before the floor: every outstanding join is
    resolved at the first frame there — merged when ready, else the flow parks there."""
    with TestWorker() as w:
        files = seed_tree(w.url(), floor=500, extra={
            "dj_t16_nap.py": SLOW_PY,
            "OPS/site/120/nap.txcl": 'EXEC "py://dj_t16_nap:nap"',
            "OPS/site/200/jump.txcl": 'EMIT @goto = "other/10"',
            "OPS/other/10/use.txcl": "EMIT .used = .research.page",
            "OPS/other/20/more.txcl": "EMIT .more = true",
        })
        ws = workspace(files)
        srv = serve(ws, "--default-stack", "site")
        cb = _callback_later(w, RESULT)  # ready: completed during scope 120
        status, _, body = http_get(srv.url + "/go")
        cb.join(10)
        assert status == 200, body
        answer = json.loads(body)
        assert answer["used"] == "P" and answer["more"] is True and "rendered" not in answer
        # not ready: the flow parks at other/10
        status, headers, _ = http_get(srv.url + "/go?nap=0")
        assert status == 202
        job = w.wait_job()
        store = store_at(ws / ".txcl-data" / "txcl.db")
        assert [(s.stage, s.kind) for s in store.list_suspends(_run_id(job))] == [("other/10", "join")]
        assert w.callback(job, RESULT) == (200, {"status": "resumed"})
        status, _, body = wait_until(lambda: (r := http_get(srv.url + headers["location"]))[0] == 200 and r)
        assert json.loads(body)["used"] == "P"


def test_join_scope_with_its_own_async_op_suspends_twice(serve, workspace, store_at):
    """The join scope holds its own async op: the join parks as visit 1, the
    resume runs the scope, whose async op parks again as visit 2; both resume."""
    with TestWorker() as w, TestWorker() as w2:
        files = seed_tree(w.url(), extra={
            "OPS/site/200/second.txcl": f'WITH mode = "async"\nEXEC "{w2.url()}"',
            "OPS/site/300/final.txcl": "EMIT .final = .second.v",
        })
        ws = workspace(files)
        srv = serve(ws)
        status, headers, _ = http_get(srv.url + "/go")
        assert status == 202
        job = w.wait_job()
        assert w.callback(job, RESULT) == (200, {"status": "resumed"})
        job2 = w2.wait_job()
        assert job2.body["_txc"]["run_id"] == _run_id(job)  # one run
        # the second async op saw the merged deferred result in its input
        assert job2.body["input"]["research"] == {"done": True, "page": "P"}
        assert w2.callback(job2, {"second": {"v": 2}}) == (200, {"status": "resumed"})
        store = store_at(ws / ".txcl-data" / "txcl.db")
        run = wait_until(lambda: (r := store.get_run(_run_id(job))) and r.status == "completed" and r)
        assert run.result["final"] == 2 and run.result["rendered"] == "P"
        assert [(s.stage, s.visit, s.kind) for s in store.list_suspends(run.run_id)] == \
            [("site/200", 1, "join"), ("site/200", 2, "barrier")]


GOTO_TWICE_PY = '''
def again(op_input, ctx):
    n = int(op_input.get("rounds", 0)) + 1
    out = {"rounds": n}
    if n < 2:
        out["_txc"] = {"goto": "site/100"}
    return out
'''


def test_goto_loop_suspends_twice_at_one_stage(serve, workspace, worker, store_at):
    files = {
        "OPS/site/100/ask.txcl": f'WITH mode = "async"\nEXEC "{worker.url()}"',
        "OPS/site/200/loop.txcl": 'EXEC "py://dj_t17_loop:again"',
        "dj_t17_loop.py": GOTO_TWICE_PY,
    }
    ws = workspace(files)
    srv = serve(ws)
    status, headers, _ = http_get(srv.url + "/go")
    assert status == 202
    for k in range(2):
        job = worker.wait_job()
        assert worker.callback(job, {"answers": [k]}) == (200, {"status": "resumed"})
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run = wait_until(lambda: (r := store.get_run(_run_id(job))) and r.status == "completed" and r)
    assert run.result["answers"] == [0, 1] and run.result["rounds"] == 2
    assert [(s.stage, s.visit) for s in store.list_suspends(run.run_id)] == [("site/100", 1), ("site/100", 2)]


def _two_joins(url_a: str, url_b: str) -> dict[str, str]:
    return {
        "OPS/site/100/beta.txcl": f'WITH mode = "async", join_at_scope = 200\nEXEC "{url_b}"',
        "OPS/site/100/alpha.txcl": f'WITH mode = "async", join_at_scope = 200\nEXEC "{url_a}"',
        "OPS/site/100/sync.txcl": "EMIT .log = [\"sync\"]",
        "OPS/site/200/read.txcl": "EMIT .joined = &len(.log)",
    }


def test_two_joins_at_one_floor_merge_by_op_name(serve, workspace, store_at):
    """Two deferred ops with one floor complete in reverse order (beta first): merged by
    op name (alpha then beta) — after a suspend, and in the request."""
    with TestWorker() as wa, TestWorker() as wb:
        ws = workspace(_two_joins(wa.url(), wb.url()))
        srv = serve(ws)
        status, headers, _ = http_get(srv.url + "/go")
        assert status == 202
        ja, jb = wa.wait_job(), wb.wait_job()
        assert wb.callback(jb, {"log": ["beta"]}) == (200, {"status": "recorded"})
        assert wa.callback(ja, {"log": ["alpha"]}) == (200, {"status": "resumed"})
        store = store_at(ws / ".txcl-data" / "txcl.db")
        run = wait_until(lambda: (r := store.get_run(_run_id(ja))) and r.status == "completed" and r)
        assert run.result["log"] == ["sync", "alpha", "beta"] and run.result["joined"] == 3
        # in the request: both completions arrive (beta first) before the floor
        with TestWorker(mode="callback-first", callback_output={"log": ["alpha"]}) as fa, \
                TestWorker(mode="callback-first", callback_output={"log": ["beta"]}) as fb:
            ws2 = workspace(_two_joins(fa.url(), fb.url()))
            srv2 = serve(ws2)
            status, _, body = http_get(srv2.url + "/go")
        assert status == 200 and json.loads(body)["log"] == ["sync", "alpha", "beta"]


def test_a_result_in_before_the_park_is_merged_with_the_rest_in_merge_order(serve, workspace, store_at):
    """beta answers before the flow reaches the join, alpha only after it parked there: the
    resume merges both in merge order (alpha, then beta), as when both came first or both
    came last — the joined envelope never depends on which worker answered first."""
    with TestWorker() as wa, \
            TestWorker(mode="callback-first", callback_output={"log": ["beta"]}) as fb:
        ws = workspace(_two_joins(wa.url(), fb.url()))
        srv = serve(ws)
        status, _, _ = http_get(srv.url + "/go")
        assert status == 202  # alpha is still out: the flow parked at the join
        ja = wa.wait_job()
        store = store_at(ws / ".txcl-data" / "txcl.db")
        parked = store.get_run(_run_id(ja))
        members = store.get_suspend(parked.run_id, parked.cur_stage, parked.cur_visit).members
        assert len(members) == 2  # beta, already in, waits at the join with alpha
        assert wa.callback(ja, {"log": ["alpha"]}) == (200, {"status": "resumed"})
        run = wait_until(lambda: (r := store.get_run(_run_id(ja))) and r.status == "completed" and r)
        assert run.result["log"] == ["sync", "alpha", "beta"] and run.result["joined"] == 3


def test_same_scope_async_and_later_continuable_reuse_the_run(serve, workspace, store_at):
    """A plain async op at the deferred op's scope and a continuable op further on attach
    to the run the deferred op created; the request never has a second run."""
    with TestWorker() as w, TestWorker() as w2:
        files = seed_tree(w.url(), extra={
            "OPS/site/100/plain.txcl": f'WITH mode = "async"\nEXEC "{w2.url()}"',
            "OPS/site/300/slow.txcl": 'WITH mode = "continuable", continue_after = "100ms", timeout = "10s"\n'
                                      'EXEC "py://dj_dj9_nap:nap"',
            "dj_dj9_nap.py": SLOW_PY,
        })
        ws = workspace(files)
        srv = serve(ws)
        status, headers, _ = http_get(srv.url + "/go?nap=0.5")
        assert status == 202
        job, job2 = w.wait_job(), w2.wait_job()
        assert _run_id(job) == _run_id(job2)
        assert w.callback(job, RESULT) == (200, {"status": "recorded"})  # run parked on the barrier
        assert w2.callback(job2, {"plain": 1}) == (200, {"status": "resumed"})
        store = store_at(ws / ".txcl-data" / "txcl.db")
        run = wait_until(lambda: (r := store.get_run(_run_id(job))) and r.status == "completed" and r, timeout=15)
        assert run.result["rendered"] == "P" and run.result["plain"] == 1 and run.result["napped"] is True
        assert len(store.list_runs()) == 1
        kinds = [s.kind for s in store.list_suspends(run.run_id)]
        assert kinds == ["barrier", "promotion"]  # the join was merged inside the barrier's resume


def test_resumed_flow_runs_the_rules_frozen_at_dispatch(serve, workspace, worker, store_at):
    """The first deferred op freezes the ops snapshot: rules changed (and the server
    restarted) while the run waits at the join do not affect it."""
    ws = workspace(seed_tree(worker.url()))
    first = serve(ws)
    status, headers, _ = http_get(first.url + "/go")
    assert status == 202
    job = worker.wait_job()
    first.stop()
    (ws / "OPS/site/200/render.txcl").write_text('EMIT .rendered = "new rules"\n')
    second = serve(ws)
    url = second.url + job.callback_url[job.callback_url.index("/_txc/"):]
    assert worker.callback(job, RESULT, url=url) == (200, {"status": "resumed"})
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run = wait_until(lambda: (r := store.get_run(_run_id(job))) and r.status == "completed" and r)
    assert run.result["rendered"] == "P"


def test_deadline_passed_before_the_join_fails_the_request_there(serve, workspace, worker, store_at):
    """The deferred unit times out while the flow is still before its floor (the
    run is not parked on it: the timeout is only recorded); the flow meets the timed-out unit at
    the join and the request ends with txcl_join_failed."""
    files = seed_tree(worker.url(), timeout="300ms", extra={
        "dj_au14_nap.py": SLOW_PY, "OPS/site/120/nap.txcl": 'EXEC "py://dj_au14_nap:nap"',
        # a second join with a longer budget keeps the run's expiry ahead of the first deadline
        "OPS/site/100/zlong.txcl": f'WITH mode = "async", join_at_scope = 200, timeout = "1m"\nEXEC "{worker.url()}"'})
    ws = workspace(files)
    srv = serve(ws, "--deferred-join-slack", "0s", "--continuation-sweep-period", "100ms")
    status, _, body = http_get(srv.url + "/go?nap=1.5")
    assert status == 502, body
    error = json.loads(body)["error"]
    assert error["code"] == "txcl_join_failed" and "timed out" in error["message"]
    jobs = {j.body["_txc"]["op"]: j for j in (worker.wait_job(), worker.wait_job())}
    job = jobs["site/research"]
    store = store_at(ws / ".txcl-data" / "txcl.db")
    assert store.get_interaction(job.opc).status == "timed_out"
    run = store.get_run(_run_id(job))
    assert run.status == "failed" and run.fail_reason == "join_failed"
    assert worker.callback(job, RESULT)[0] == 410
