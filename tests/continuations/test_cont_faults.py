"""(barrier and continuable): SIGKILL `txcl serve` right after the commit at each fault
point the scenario passes through, restart it on the same database, deliver the callbacks.
Every run ends as it must: completed with the result merged once (the
`promote` loss expires instead, tested in test_cont_continuable.py), no run stuck past its
expiry, at most two worker calls per interaction.

The default run covers park (the sweeper resends and re-runs the sync sibling); the other points are slow-marked."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from cont_support import barrier_tree, http_get, wait_until
from contworker import post_json

FLAGS = ["--async-ack-timeout", "1s", "--reconcile-after", "2s", "--continuation-sweep-period", "500ms",
         "--continuation-stale-resume-after", "2s"]
# `admit`/`materialize` without a count hit the sync sibling's outcome inside the request;
# `:2` is the worker's callback
FAST = ["park"]
SLOW = ["ack", "admit", "admit:2", "materialize", "materialize:2", "release", "resume-frame", "finish"]
IN_REQUEST = ("park", "admit", "materialize")
# the worker's 202 is written after the dispatch (held back by --ack-write-delay): the kill comes
# after the answer, before or inside the first callback, which is then delivered again — or,
# when the held-back write shares a commit with the request's own last write (calls queued
# together share one), inside the request, before the answer
REDELIVERED = ("ack",)


def _callback(job, base: str, output) -> tuple[int, object]:
    url = base + job.callback_url[job.callback_url.index("/_txc/"):]
    try:
        return post_json(url, {"status": "completed", "output": output}, job.token, timeout=10)
    except OSError:  # the server died inside the callback (admit/materialize/release)
        return 0, None


@pytest.mark.parametrize("point", [*FAST, *[pytest.param(p, marks=pytest.mark.slow) for p in SLOW]])
def test_barrier_survives_a_kill_at(point, serve, workspace, worker, store_at):
    ws = workspace(barrier_tree(worker.url()))
    first = serve(ws, *FLAGS, env={"TXCL_TESTING": "1", "TXCL_FAULT": point})
    status, headers, _ = http_get(first.url + "/go", dead_ok=True)
    if point in IN_REQUEST:
        assert status == 0  # killed before it could answer
    elif point in REDELIVERED:
        assert status in (0, 202)
    else:
        assert status == 202
    job = None
    if point not in IN_REQUEST:
        job = worker.wait_job()
        _callback(job, first.url, {"enriched": ["x"]})
    assert first.wait_dead() is not None, first.log
    second = serve(ws, *FLAGS)
    if job is None:  # sent before the kill, or resent (same opc) by the sweeper after --reconcile-after
        job = worker.wait_job(timeout=20)
    if point in IN_REQUEST or point in REDELIVERED:  # admitted now, or (a repeat) already
        assert _callback(job, second.url, {"enriched": ["x"]})[0] == 200
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = job.body["_txc"]["run_id"]
    run = wait_until(lambda: (r := store.get_run(run_id)) and r.status in ("completed", "failed", "expired") and r,
                     timeout=25)
    assert run.status == "completed", (run, second.log)
    assert run.result["enriched"] == ["x"] and run.result["after"] == ["x"]  # merged exactly once
    calls = Counter(j.opc for j in worker.jobs)
    assert calls and max(calls.values()) <= 2
    assert [e.kind for e in store.list_run_events(run_id)].count("run.completed") == 1
    rcid = run.rcid
    status, _, body = http_get(second.url + f"/go?_txc.continuation={rcid}")
    assert status == 200 and json.loads(body)["after"] == ["x"]


CONT_PY = '''
import time

def slow(op_input, ctx):
    time.sleep(0.6)
    return {"v": "slow"}
'''


@pytest.mark.slow
@pytest.mark.parametrize("point", ["admit", "release"])
def test_continuable_after_promotion_survives_a_kill_at(point, serve, workspace, store_at):
    """The promoted task admitted its terminal (or won the release) and the process died: the
    restarted server's sweeper finishes the same steps; the result is merged once."""
    module = f"cont_fault_{point}"
    ws = workspace({f"{module}.py": CONT_PY,
                    "OPS/site/100/work.txcl": 'WITH mode = "continuable", continue_after = "150ms", timeout = "30s"\n'
                                              f'EXEC "py://{module}:slow"',
                    "OPS/site/200/after.txcl": "EMIT .after = .v, .count = &len(.v)"})
    first = serve(ws, *FLAGS, env={"TXCL_TESTING": "1", "TXCL_FAULT": point})
    status, headers, _ = http_get(first.url + "/", dead_ok=True)
    assert status == 202
    assert first.wait_dead() is not None
    second = serve(ws, *FLAGS)
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = store.list_runs()[0].run_id
    run = wait_until(lambda: (r := store.get_run(run_id)) and r.status != "waiting" and r.status != "resuming"
                     and r, timeout=25)
    assert run.status == "completed" and run.result["after"] == "slow" and run.result["count"] == 4
    status, _, body = http_get(second.url + headers["location"])
    assert status == 200 and json.loads(body)["after"] == "slow"
