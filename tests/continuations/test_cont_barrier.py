"""The barrier: drain without a 202, duplicate release, the frozen ops snapshot across a restart, and the in-process API."""

from __future__ import annotations

import asyncio
import json
import threading

from cont_support import barrier_tree, http_get, wait_until
from contworker import TestWorker


def test_every_ack_fails_answers_the_failure_inline(serve, workspace):
    """No 202 — the request drains its own suspend and answers 502 at once."""
    with TestWorker(mode="status:503") as bad:
        files = barrier_tree(bad.url())
        files["OPS/shop/100/second.txcl"] = f'WITH mode = "async"\nEXEC "{bad.url("/two")}"'
        srv = serve(workspace(files))
        status, headers, body = http_get(srv.url + "/go")
    assert status == 502
    error = json.loads(body)["error"]
    assert error["code"] == "txcl_op_failed" and "expected 202, got 503" in error["message"]
    assert "location" not in headers


def test_callbacks_before_the_202_give_the_final_answer(serve, workspace):
    """The worker calls back before it acks; the parking request wins the drain and
    answers the final envelope synchronously (no 202)."""
    with TestWorker(mode="callback-first", callback_output={"enriched": {"early": True}}) as w:
        srv = serve(workspace(barrier_tree(w.url())))
        status, headers, body = http_get(srv.url + "/go")
        assert w.callbacks and w.callbacks[0][0] == 200
    assert status == 200, body
    assert json.loads(body) == {"enriched": {"early": True}, "side": 1, "after": {"early": True}}


def test_resume_runs_the_rules_frozen_at_the_suspend(serve, workspace, worker, store_at):
    """Change the rules and restart the server while the run waits: the resume runs the
    old rules (the snapshot); new requests run the new ones."""
    ws = workspace(barrier_tree(worker.url()))
    srv = serve(ws)
    status, headers, _ = http_get(srv.url + "/go")
    assert status == 202
    job = worker.wait_job()
    srv.stop()
    (ws / "OPS/shop/200/after.txcl").write_text('EMIT .after = "new rules"\n')
    srv2 = serve(ws)
    assert worker.callback(job, {"enriched": "old-path"}, url=job.callback_url.replace(srv.url, srv2.url)) \
        == (200, {"status": "resumed"})
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = job.body["_txc"]["run_id"]
    run = wait_until(lambda: (r := store.get_run(run_id)) and r.status == "completed" and r)
    assert run.result["after"] == "old-path"
    status, _, body = http_get(srv2.url + headers["location"])
    assert status == 200 and json.loads(body)["after"] == "old-path"


def test_two_threads_release_one_suspend(tmp_path, workspace, worker):
    """Two threads run `continue_release` on the same ready suspend: one winner, one resume."""
    from txcl.ops.tree import load_ops
    from txcl.runtime.interpreter import Completed, Suspended

    ws = workspace(barrier_tree(worker.url()))
    store, service = _in_process(ws)

    async def main():
        outcome = await service.interpreter(load_ops(ws)).run({"q": 1}, "shop")
        assert isinstance(outcome, Suspended)
        job = worker.wait_job()
        admit = store.admit_terminal(job.opc, "completed", {"enriched": 7}, source="cli")
        assert admit.outcome == "admitted"
        results = []
        gate = threading.Barrier(2)

        def release():
            gate.wait()
            results.append(store.continue_release(job.opc, child_version=admit.child_version))

        threads = [threading.Thread(target=release) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        winners = [r for r in results if r.won]
        assert len(winners) == 1 and sorted(r.outcome for r in results) == ["recorded", "resumed"]
        final = await service.drive_resume(winners[0].claim)
        assert isinstance(final, Completed) and final.envelope["after"] == 7
        kinds = [e.kind for e in store.list_run_events(outcome.run_id)]
        assert kinds.count("run.released") == 1 and kinds.count("run.completed") == 1
        await service.aclose()

    try:
        asyncio.run(main())
    finally:
        store.close()


def test_sync_sibling_error_is_best_effort(tmp_path, workspace, worker):
    """A failing sync sibling does not fail the stage; the async answer merges."""
    from txcl.ops.tree import load_ops

    files = barrier_tree(worker.url())
    files["OPS/shop/100/side.txcl"] = 'EXEC "py://cont_failing_op:fn"'
    files["cont_failing_op.py"] = "def fn(op_input, ctx):\n    raise ValueError('side failed')\n"
    ws = workspace(files)
    store, service = _in_process(ws)

    async def main():
        outcome = await service.interpreter(load_ops(ws)).run({}, "shop")
        job = worker.wait_job()
        _, release = await service.complete(job.opc, "completed", {"enriched": 1}, source="cli")
        final = await service.drive_resume(release.claim)
        assert final.status == "completed" and final.envelope["after"] == 1 and "side" not in final.envelope
        units = {u.op_name: u for u in store.list_units(outcome.run_id)}
        assert units["side"].kind == "sync" and units["side"].status == "completed"
        assert units["side"].error is not None
        await service.aclose()

    try:
        asyncio.run(main())
    finally:
        store.close()


def test_python_api_run_complete_wait(workspace, worker):
    """The Python API: Suspended from run, `complete` resumes, `wait` returns the record."""
    from txcl.continuations.api import complete, durable_interpreter, wait
    from txcl.runtime.interpreter import Suspended

    ws = workspace(barrier_tree(worker.url()))
    interp, service = durable_interpreter(ws)
    try:
        outcome = interp.run_sync({"q": 1}, "shop")
        assert isinstance(outcome, Suspended) and outcome.rcid.startswith("rc_")
        job = worker.wait_job()
        assert wait(service.store, outcome.run_id, timeout=0.1).status == "waiting"
        result = complete(service.store, job.opc, {"status": "completed", "output": {"enriched": "api"}},
                          workspace=ws)
        assert result == {"run_id": outcome.run_id, "status": "resumed", "run_status": "completed"}
        record = wait(service.store, outcome.run_id, timeout=5)
        assert record.status == "completed" and record.result["after"] == "api"
        assert complete(service.store, job.opc, {"status": "failed"})["status"] == "conflict"
    finally:
        interp.close()
        service.store.close()


def test_barrier_parks_twice_at_one_stage_with_visits(workspace, worker):
    """A @goto loop re-enters a barrier scope: suspends (run, stage, visit 1) and (…, visit 2)."""
    import asyncio

    from txcl.ops.tree import load_ops

    files = {
        "OPS/shop/100/ask.txcl": f'WITH mode = "async"\nEXEC "{worker.url()}"',
        "OPS/shop/200/loop.txcl": 'WHEN .finished != true\nEMIT @goto = "100"',
        "OPS/shop/300/done.txcl": "EMIT .n = &len(.answers)",
    }
    ws = workspace(files)
    store, service = _in_process(ws)

    async def main():
        outcome = await service.interpreter(load_ops(ws)).run({}, "shop")
        final = None
        for n in (1, 2):
            job = worker.wait_job()
            _, release = await service.complete(job.opc, "completed", {"answers": [f"a{n}"], "finished": n == 2},
                                                source="cli")
            final = await service.drive_resume(release.claim)
        assert final.status == "completed" and final.envelope["answers"] == ["a1", "a2"] and final.envelope["n"] == 2
        suspends = store.list_suspends(outcome.run_id)
        assert [(s.stage, s.visit, s.status) for s in suspends] == [("shop/100", 1, "resumed"),
                                                                  ("shop/100", 2, "resumed")]
        traces = store.trace_rids_for_run(outcome.run_id)
        assert traces[1:] == [f"resume-{outcome.run_id}-shop_100-v1", f"resume-{outcome.run_id}-shop_100-v2"]
        await service.aclose()

    try:
        asyncio.run(main())
    finally:
        store.close()


def test_a_resume_that_raises_fails_its_run_at_once(workspace, worker, monkeypatch):
    """A resume that cannot go on (a bug, a value nothing can handle) fails the run with the
    real error immediately — no takeover loop, no run left `resuming`."""

    from txcl.continuations import resume
    from txcl.ops.tree import load_ops
    from txcl.runtime.interpreter import Suspended

    async def broken(*args):
        raise ValueError("this member cannot be merged")

    monkeypatch.setitem(resume.RESUMERS, "barrier", broken)
    ws = workspace(barrier_tree(worker.url()))
    store, service = _in_process(ws)

    async def main():
        outcome = await service.interpreter(load_ops(ws)).run({"q": 1}, "shop")
        assert isinstance(outcome, Suspended)
        job = worker.wait_job()
        _, release = await service.complete(job.opc, "completed", {"enriched": 1}, source="cli")
        assert await service.drive_resume(release.claim) is None
        run = store.get_run(outcome.run_id)
        assert run.status == "failed" and run.fail_reason == "resume_failed"
        assert run.error["code"] == "txcl_resume_failed" and "this member cannot be merged" in run.error["message"]
        assert store.get_claim(outcome.run_id) is None
        await service.aclose()

    try:
        asyncio.run(main())
    finally:
        store.close()


def _in_process(ws):
    """The workspace's store and a continuation service over it, in this process."""
    from cont_support import db_of
    from txcl.continuations.service import ContinuationService, open_run_store
    from txcl.runtime.config import Settings

    store = open_run_store(db_of(ws / ".txcl-data" / "txcl.db"))
    return store, ContinuationService(store, Settings(), workspace=ws)
