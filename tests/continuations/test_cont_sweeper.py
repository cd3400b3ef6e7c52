"""The sweeper against `txcl serve`: expiry of a barrier whose
worker never calls back, stale resume claims taken over (and the attempt limit),
idempotence and purge after retention."""

from __future__ import annotations

import json
import subprocess

import pytest

from cont_support import TXCL, barrier_tree, http_get, wait_until

CRASH_FLAGS = ["--async-ack-timeout", "1s", "--reconcile-after", "2s", "--continuation-sweep-period", "500ms",
               "--continuation-stale-resume-after", "2s"]


def _rewrite(url: str, base: str) -> str:
    return base + url[url.index("/_txc/"):]


def test_barrier_expires_when_the_worker_never_calls_back(serve, workspace, worker, store_at):
    ws = workspace(barrier_tree(worker.url(), with_='mode = "async", timeout = "1s"'))
    srv = serve(ws, "--continuation-sweep-period", "300ms", "--continuation-stale-resume-after", "2s")
    status, headers, _ = http_get(srv.url + "/go")
    assert status == 202
    job = worker.wait_job()
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = job.body["_txc"]["run_id"]
    unit = next(u for u in store.list_units(run_id) if u.op_name == "enrich")
    interaction = store.list_interactions(unit.unit_id)[0]
    assert interaction.deadline_ms == interaction.dispatch_ms + 1000  # dispatch + budget
    assert store.get_run(run_id).expires_ms == interaction.deadline_ms
    run = wait_until(lambda: (r := store.get_run(run_id)) and r.status == "expired" and r, timeout=15)
    assert run.error["code"] == "txcl_run_expired"
    assert store.get_interaction(interaction.opc).status == "timed_out"
    status, _, body = http_get(srv.url + headers["location"])
    assert status == 502 and json.loads(body)["error"]["code"] == "txcl_run_expired"
    assert worker.callback(job, {"late": 1}) == (410, {"error": {"code": "txcl_gone", "message": "the op continuation is gone", "reason": "expired"}})


def test_stale_claim_is_taken_over_on_another_process(serve, workspace, worker, store_at):
    """Kill the resuming process at `resume-frame`; another serve takes the claim over after
    the stale period (resume trace `-a2`) and the result is merged once."""
    ws = workspace(barrier_tree(worker.url()))
    first = serve(ws, *CRASH_FLAGS, env={"TXCL_TESTING": "1", "TXCL_FAULT": "resume-frame"})
    status, headers, _ = http_get(first.url + "/go")
    job = worker.wait_job()
    assert worker.callback(job, {"enriched": ["once"]}) == (200, {"status": "resumed"})
    assert first.wait_dead() is not None
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = job.body["_txc"]["run_id"]
    assert store.get_run(run_id).status == "resuming"
    second = serve(ws, *CRASH_FLAGS)
    run = wait_until(lambda: (r := store.get_run(run_id)) and r.status == "completed" and r, timeout=20)
    assert run.result["enriched"] == ["once"] and run.result["after"] == ["once"]
    kinds = [e.kind for e in store.list_run_events(run_id)]
    assert kinds.count("claim.takeover") == 1 and kinds.count("run.completed") == 1
    rid = f"resume-{run_id}-shop_100-v1-a2"
    trace = wait_until(lambda: store.get_trace(rid), timeout=10)
    assert trace.request["origin_rid"] == job.headers["x-request-id"]
    status, _, body = http_get(second.url + headers["location"])
    assert status == 200 and json.loads(body)["after"] == ["once"]


@pytest.mark.slow
def test_resume_max_attempts_fails_the_run(serve, workspace, worker, store_at):
    ws = workspace(barrier_tree(worker.url()))
    flags = [*CRASH_FLAGS, "--resume-max-attempts", "2"]
    fault = {"TXCL_TESTING": "1", "TXCL_FAULT": "resume-frame"}
    first = serve(ws, *flags, env=fault)
    http_get(first.url + "/go")
    job = worker.wait_job()
    worker.callback(job, {"enriched": 1})
    assert first.wait_dead() is not None
    second = serve(ws, *flags, env=fault)  # takes over as attempt 2 and dies again
    assert second.wait_dead() is not None
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = job.body["_txc"]["run_id"]
    assert store.get_claim(run_id).attempt == 2
    serve(ws, *flags)
    run = wait_until(lambda: (r := store.get_run(run_id)) and r.status == "failed" and r, timeout=20)
    assert run.fail_reason == "resumer-stale"


def test_sweeper_is_idempotent_and_purges_after_retention(serve, workspace, worker, store_at):
    ws = workspace(barrier_tree(worker.url(), with_='mode = "async", timeout = "1s"'))
    srv = serve(ws)
    _, headers, _ = http_get(srv.url + "/go")
    job = worker.wait_job()
    worker.callback(job, {"enriched": 1})
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = job.body["_txc"]["run_id"]
    wait_until(lambda: store.get_run(run_id).status == "completed")
    keep = subprocess.run([TXCL, "sweep", "--workspace", str(ws), "--json"], capture_output=True, text=True)
    assert json.loads(keep.stdout)["purged_runs"] == 0 and store.get_run(run_id) is not None

    def sweep() -> dict:
        done = subprocess.run([TXCL, "sweep", "--workspace", str(ws), "--json", "--continuation-retention", "1ms"],
                              capture_output=True, text=True)
        return json.loads(done.stdout)

    # purgeable once the retention has passed since the run finished
    wait_until(lambda: sweep()["purged_runs"] == 1, timeout=15, interval=0.2)
    second = subprocess.run([TXCL, "sweep", "--workspace", str(ws), "--json", "--continuation-retention", "1ms"],
                            capture_output=True, text=True)
    assert all(v == 0 for v in json.loads(second.stdout).values()), second.stdout
    assert store.get_run(run_id) is None and store.get_interaction(job.opc) is None
    status, _, body = http_get(srv.url + headers["location"])
    assert status == 404 and json.loads(body)["error"]["reason"] == "unknown_or_expired"
    assert worker.callback(job, {"enriched": 2})[0] == 404
