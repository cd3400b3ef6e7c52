"""Several `txcl serve` nodes on one PostgreSQL database.

Two real nodes share one database and one callback base URL (node B's address stands for the
shared front address). Requests go to node A; callbacks and polls go to the other node; a
node is killed with SIGKILL at several cut points; both nodes run the sweeper. Every run
completes on the surviving node with each result merged once, and the sweepers never
double-process (each repair's event is unique)."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter

import pytest
from cont_support import barrier_tree, http_get, wait_until
from contworker import post_json
from itemworker import ItemWorker

pytestmark = pytest.mark.parametrize("backend", ["postgresql"])

FLAGS = ["--async-ack-timeout", "1s", "--reconcile-after", "2s", "--continuation-sweep-period", "300ms",
         "--continuation-stale-resume-after", "2s", "--continuation-longpoll-ms", "10000"]


@pytest.fixture
def two_nodes(serve):
    """`two_nodes(ws, *flags, env_a=None, front="b")` -> (node A, node B): both on the
    workspace's database, both telling workers to call back to the `front` node. The front
    node starts first, on a port the system picks as it binds (so no other process can take
    it in between), and tells workers its own address; the other is then told that one."""

    def start(ws, *flags, env_a=None, env_b=None, front="b"):
        def node(name, env, *own):
            return serve(ws, *FLAGS, "--node-id", f"node-{name}", *own, *flags, env=env)

        if front == "b":
            b = node("b", env_b)
            return node("a", env_a, "--callback-base-url", b.url), b
        a = node("a", env_a)
        return a, node("b", env_b, "--callback-base-url", a.url)

    return start


def _at(url: str, base: str) -> str:
    return base + url[url.index("/_txc/"):]


def _finished(store, run_id: str, timeout: float = 25.0):
    return wait_until(lambda: (r := store.get_run(run_id)) and r.status in ("completed", "failed", "expired") and r,
                      timeout=timeout)


def _events_unique(store, run_id: str) -> Counter:
    kinds = Counter(e.kind for e in store.list_run_events(run_id))
    assert kinds["run.released"] <= kinds["stage.suspended"], kinds
    assert kinds["run.completed"] + kinds["run.failed"] + kinds["run.expired"] == 1, kinds
    return kinds


def test_callback_and_poll_on_the_other_node(two_nodes, workspace, worker, store_at):
    """The run starts on A; the worker calls back to B, which resumes it; a long poll waiting
    on A answers as soon as B commits the end (woken by B's notice, not by a timer)."""
    ws = workspace(barrier_tree(worker.url()))
    a, b = two_nodes(ws)
    status, headers, _ = http_get(a.url + "/go")
    assert status == 202
    job = worker.wait_job()
    assert job.callback_url.startswith(b.url)  # the shared front address
    answer: dict = {}

    def long_poll() -> None:
        started = time.monotonic()
        answer["poll"] = http_get(a.url + headers["location"] + "&format=json")
        answer["waited"] = time.monotonic() - started

    poller = threading.Thread(target=long_poll)
    poller.start()
    time.sleep(0.5)  # the poll is waiting on A
    sent = time.monotonic()
    assert worker.callback(job, {"enriched": ["from B"]}) == (200, {"status": "resumed"})
    poller.join(15)
    status, _, body = answer["poll"]
    assert status == 200 and json.loads(body)["result"]["after"] == ["from B"]
    # the safety re-read of a waiting poll is 5 s; the answer came long before it
    assert time.monotonic() - sent < 3.0 and answer["waited"] < 4.0
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run = store.get_run(job.body["_txc"]["run_id"])
    assert run.status == "completed" and run.result["after"] == ["from B"]
    claim = store.get_claim(run.run_id)
    assert claim is None or claim.owner == "node-b"
    kinds = _events_unique(store, run.run_id)
    assert kinds["run.released"] == 1
    # a poll to either node now answers the same
    for node in (a, b):
        status, _, body = http_get(node.url + headers["location"])
        assert status == 200 and json.loads(body)["after"] == ["from B"]


def test_itemized_completions_spread_over_both_nodes(two_nodes, workspace, store_at):
    with ItemWorker() as worker:
        _itemized_over_both_nodes(two_nodes, workspace, worker, store_at)


def _itemized_over_both_nodes(two_nodes, workspace, worker, store_at) -> None:
    ws = workspace({
        "OPS/pay/50/items.txcl": "EMIT .items = [0, 1, 2, 3, 4, 5, 6, 7]",
        "OPS/pay/100/charge.txcl": f'WITH mode = "async", each = .items, window = 3, into = "out", timeout = "1m"\n'
                                   f'EXEC "{worker.url()}"',
        "OPS/pay/200/after.txcl": "EMIT .count = &len(.out)",
    })
    a, b = two_nodes(ws)
    status, headers, _ = http_get(a.url + "/go")
    assert status == 202
    done = 0
    while done < 8:
        job = worker.wait_job(timeout=20)
        node = (a, b)[job.body["_txc"]["item_index"] % 2]
        code, _ = worker.callback(job, {"i": job.body["_txc"]["item_index"]}, url=_at(job.callback_url, node.url))
        assert code == 200
        done += 1
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run = _finished(store, job.body["_txc"]["run_id"])
    assert run.status == "completed", (run, a.log, b.log)
    assert run.result["out"] == [{"i": i} for i in range(8)] and run.result["count"] == 8
    assert worker.peak == 3 and worker.in_flight == 0 and len(worker.jobs) == 8  # the window held across nodes
    assert _events_unique(store, run.run_id)["run.released"] == 1


def test_deferred_join_resumes_on_the_node_that_receives_the_callback(two_nodes, workspace, worker,
                                                                          store_at):
    ws = workspace({
        "OPS/site/100/research.txcl": f'WITH mode = "async", join_at_scope = 200, timeout = "1m"\n'
                                      f'EXEC "{worker.url()}"',
        "OPS/site/150/audit.txcl": "EMIT .audited = true",
        "OPS/site/200/render.txcl": "EMIT .answer = .research",
    })
    a, b = two_nodes(ws)
    status, headers, _ = http_get(a.url + "/go")
    assert status == 202  # suspended at the join on A
    job = worker.wait_job()
    assert worker.callback(job, {"research": {"found": 3}}) == (200, {"status": "resumed"})
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run = _finished(store, job.body["_txc"]["run_id"])
    assert run.status == "completed" and run.result["answer"] == {"found": 3} and run.result["audited"] is True
    assert _events_unique(store, run.run_id)["run.released"] == 1


# where A dies; the slow run adds the other commits a barrier passes through
CUTS = ["park", "resume-frame"]
SLOW_CUTS = ["ack", "release", "finish"]
A_IS_FRONT = ("resume-frame", "release", "finish")  # A receives the callback too


@pytest.mark.parametrize("point", [*CUTS, *[pytest.param(p, marks=pytest.mark.slow) for p in SLOW_CUTS]])
def test_a_killed_node_s_runs_complete_on_the_other(point, two_nodes, workspace, worker, store_at):
    """A dies right after the commit at `point`; B (its sweeper, or the callback sent to it)
    finishes every run: `park` — B resends the half-sent dispatch; `resume-frame`/`release`
    — B takes the stale claim over; `ack` — the callback goes to B; `finish` — nothing left."""
    ws = workspace(barrier_tree(worker.url()))
    fault = {"TXCL_TESTING": "1", "TXCL_FAULT": point}
    a, b = two_nodes(ws, env_a=fault, front="a" if point in A_IS_FRONT else "b")
    front = a.url if point in A_IS_FRONT else b.url
    status, _, _ = http_get(a.url + "/go", dead_ok=True)
    if point == "park":
        assert status == 0 and a.wait_dead() is not None  # killed before it sent anything
        job = worker.wait_job(timeout=25)  # resent by a sweeper after --reconcile-after
    else:
        job = worker.wait_job()
    assert job.callback_url.startswith(front)
    try:
        worker.callback(job, {"enriched": ["after the kill"]})
    except OSError:  # A died inside the callback (release)
        pass
    if point != "park":
        assert a.wait_dead() is not None
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run = _finished(store, job.body["_txc"]["run_id"])
    assert run.status == "completed", (run, b.log)
    assert run.result["enriched"] == ["after the kill"] and run.result["after"] == ["after the kill"]
    kinds = _events_unique(store, run.run_id)
    calls = Counter(j.opc for j in worker.jobs)
    assert calls[job.opc] <= 2
    if point == "park":
        assert kinds["reconcile.resend"] == 1 and calls[job.opc] == 1  # both sweepers ran; one resent
    if point in ("resume-frame", "release"):
        assert kinds["claim.takeover"] == 1
        assert store.get_claim(run.run_id) is None or store.get_claim(run.run_id).owner == "node-b"


def test_database_outage_answers_503_and_loses_nothing(serve, workspace, worker, store_at):
    """PostgreSQL stops while a run is parked: the worker's callback and the client's poll get
    503 with Retry-After and nothing changes; once the server is back, the same callback
    completes the run, merged once."""
    from cont_support import _use_database

    from txcl.testing.postgres import TempPostgres

    own = TempPostgres.start()  # a server of this test's own, to stop and start
    try:
        ws = workspace(barrier_tree(worker.url()))
        _use_database(ws, own.create_database("outage"))
        srv = serve(ws, *FLAGS)
        status, headers, _ = http_get(srv.url + "/go")
        assert status == 202
        job = worker.wait_job()
        own.pause()
        # (the server waits up to its pool timeout for a connection before it answers 503)
        code, body = post_json(job.callback_url, {"status": "completed", "output": {"enriched": ["once"]}},
                               job.token, timeout=60)
        assert code == 503 and body["error"]["code"] == "txcl_store_unavailable"
        status, poll_headers, body = http_get(srv.url + headers["location"] + "&format=json", timeout=60)
        assert status == 503 and poll_headers["retry-after"] == "2"
        assert json.loads(body)["error"]["code"] == "txcl_store_unavailable"
        own.resume()
        code, body = wait_until(lambda: (r := worker.callback(job, {"enriched": ["once"]}))[0] != 503 and r,
                                timeout=30, interval=0.5)
        assert code == 200 and body["status"] == "resumed"
        store = store_at(ws / ".txcl-data" / "txcl.db")
        run = _finished(store, job.body["_txc"]["run_id"])
        assert run.status == "completed" and run.result["after"] == ["once"]
        assert _events_unique(store, run.run_id)["run.released"] == 1
        assert "Traceback" not in srv.log
        srv.stop()
        store.close()
    finally:
        own.stop()
