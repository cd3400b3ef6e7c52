"""The deferred-after-suspend and itemized crash scenarios: SIGKILL `txcl serve` right after the
commit at each fault point the scenario passes through, restart it on the same database and
deliver the callbacks. Every run completes with each result merged exactly once (the
restarted process rebuilds progress from the store alone), no run is stuck past its expiry and
no interaction is sent more than twice. The kill before the join (`deferred-dispatch`,)
is the documented loss, tested as in test_cont_deferred.py.

The default run covers two points per scenario; the others are slow-marked."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from cont_support import http_get, wait_until
from contworker import post_json
from itemworker import ItemWorker

FLAGS = ["--async-ack-timeout", "1s", "--reconcile-after", "2s", "--continuation-sweep-period", "500ms",
         "--continuation-stale-resume-after", "2s"]


@pytest.fixture
def worker():
    with ItemWorker() as w:
        yield w


def _callback(job, base: str, output) -> int:
    url = base + job.callback_url[job.callback_url.index("/_txc/"):]
    try:
        return post_json(url, {"status": "completed", "output": output}, job.token, timeout=10)[0]
    except OSError:  # the server died inside the callback
        return 0


def _scenario(point: str, files: dict, n_jobs: int, in_request: tuple, output, check, serve, workspace, worker,
              store_at) -> None:
    ws = workspace(files)
    first = serve(ws, *FLAGS, env={"TXCL_TESTING": "1", "TXCL_FAULT": point})
    status, _, body = http_get(first.url + "/go", dead_ok=True)
    if point in in_request:
        assert status == 0, (body, first.log)  # killed before it could answer
    else:
        assert status == 202, (body, first.log)
    jobs: dict[str, object] = {}
    if point not in in_request:
        for _ in range(n_jobs):
            job = worker.wait_job()
            jobs[job.opc] = job
        for job in sorted(jobs.values(), key=lambda j: j.body["_txc"].get("item_index", 0)):
            if _callback(job, first.url, output(job)) == 0:
                break
    assert first.wait_dead() is not None, first.log
    second = serve(ws, *FLAGS)
    while len(jobs) < n_jobs:  # sent before the kill, or resent (same opc) after --reconcile-after
        job = worker.wait_job(timeout=20)
        jobs[job.opc] = job
    for job in jobs.values():  # already admitted → 200 duplicate; otherwise admitted now
        assert _callback(job, second.url, output(job)) == 200
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = next(iter(jobs.values())).body["_txc"]["run_id"]
    run = wait_until(lambda: (r := store.get_run(run_id)) and r.status in ("completed", "failed", "expired") and r,
                     timeout=25)
    assert run.status == "completed", (run, second.log)
    check(run.result)
    calls = Counter(j.opc for j in worker.jobs)
    assert max(calls.values()) <= 2
    kinds = [e.kind for e in store.list_run_events(run_id)]
    assert kinds.count("run.completed") == 1
    status, _, body = http_get(second.url + f"/go?_txc.continuation={run.rcid}")
    assert status == 200
    check(json.loads(body))


DEFERRED_POINTS = ["park", "release"]
DEFERRED_SLOW = ["admit", "materialize", "resume-frame", "finish"]


@pytest.mark.parametrize("point", [*DEFERRED_POINTS, *[pytest.param(p, marks=pytest.mark.slow)
                                                        for p in DEFERRED_SLOW]])
def test_deferred_after_the_join_suspend_survives_a_kill_at(point, serve, workspace, worker, store_at):
    files = {
        "OPS/site/100/research.txcl": f'WITH mode = "async", join_at_scope = 200\nEXEC "{worker.url()}"',
        "OPS/site/150/audit.txcl": "EMIT .audit = true",
        "OPS/site/200/render.txcl": "EMIT .rendered = &len(.research.pages)",
    }

    def check(result: dict) -> None:
        assert result["research"] == {"pages": ["p"]} and result["rendered"] == 1 and result["audit"] is True

    _scenario(point, files, 1, ("park",), lambda job: {"research": {"pages": ["p"]}}, check, serve, workspace,
              worker, store_at)


ITEM_POINTS = ["park", "admit:2"]
ITEM_SLOW = ["ack", "admit", "materialize", "materialize:3", "release", "resume-frame", "finish"]


@pytest.mark.parametrize("point", [*ITEM_POINTS, *[pytest.param(p, marks=pytest.mark.slow) for p in ITEM_SLOW]])
def test_itemized_survives_a_kill_at(point, serve, workspace, worker, store_at):
    files = {
        "OPS/pay/50/items.txcl": "EMIT .items = [1, 2, 3]",
        "OPS/pay/100/charge.txcl": f'WITH mode = "async", each = .items, window = 3, into = "out"\n'
                                   f'EXEC "{worker.url()}"',
        "OPS/pay/200/after.txcl": "EMIT .count = &len(.out)",
    }

    def check(result: dict) -> None:
        assert result["out"] == [{"v": 1}, {"v": 2}, {"v": 3}] and result["count"] == 3

    _scenario(point, files, 3, ("park",), lambda job: {"v": job.body["input"]}, check, serve, workspace,
              worker, store_at)
