"""Itemized await (seed 000) against a real `txcl serve`, a real
SQLite file and the test worker, deferred
itemized, dispatch-time validation. (The in-process cases are in test_cont_itemized_ec.py.)"""

from __future__ import annotations

import json
import random
from concurrent.futures import ThreadPoolExecutor

import pytest
from cont_support import http_get, wait_until
from contworker import TestWorker, post_json
from itemworker import ItemWorker


@pytest.fixture
def worker():
    with ItemWorker() as w:
        yield w

ORDERS_PY = '''
def make(op_input, ctx):
    query = op_input.get("_txc", {}).get("web", {}).get("req", {}).get("url", {}).get("query", {})
    n = int(query.get("n", ["6"])[0])
    return {"orders": [{"id": i, "amount": 10 * i} for i in range(n)]}
'''


def pay_tree(url: str, *, window: int = 3, extra_with: str = "", module: str = "it_orders",
             extra: dict[str, str] | None = None) -> dict[str, str]:
    files = {
        f"{module}.py": ORDERS_PY,
        "OPS/pay/50/orders.txcl": f'EXEC "py://{module}:make"',
        "OPS/pay/100/charge.txcl": f'WITH mode = "async", each = .orders, window = {window}, into = "receipts"'
                                   f'{extra_with}\nEXEC "{url}"',
        "OPS/pay/200/after.txcl": "EMIT .count = &len(.receipts)",
    }
    files.update(extra or {})
    return files


def _run_id(job) -> str:
    return job.body["_txc"]["run_id"]


def _receipt(job) -> dict:
    return {"id": job.body["input"]["id"], "ok": True}


def _kinds(store, run_id: str) -> list[str]:
    return [e.kind for e in store.list_run_events(run_id)]


# ---------------------------------------------------------------------------------------------


def test_reverse_order_completions_join_in_item_order(serve, workspace, worker, store_at):
    """Items completed N-1 … 0: output in item order; one release."""
    ws = workspace(pay_tree(worker.url(), window=6))
    srv = serve(ws)
    status, headers, _ = http_get(srv.url + "/go?n=6")
    assert status == 202
    jobs = sorted((worker.wait_job() for _ in range(6)), key=lambda j: j.body["_txc"]["item_index"])
    assert [j.body["_txc"]["item_index"] for j in jobs] == list(range(6))
    assert {j.body["_txc"]["item_count"] for j in jobs} == {6}
    assert [j.body["input"] for j in jobs] == [{"id": i, "amount": 10 * i} for i in range(6)]  # the element itself
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = _run_id(jobs[0])
    answers = [worker.callback(j, _receipt(j)) for j in reversed(jobs)]
    assert answers[:-1] == [(200, {"status": "recorded"})] * 5 and answers[-1] == (200, {"status": "resumed"})
    run = wait_until(lambda: (r := store.get_run(run_id)) and r.status == "completed" and r)
    assert run.result["receipts"] == [{"id": i, "ok": True} for i in range(6)] and run.result["count"] == 6
    assert _kinds(store, run_id).count("run.released") == 1
    status, _, body = http_get(srv.url + headers["location"])
    assert status == 200 and json.loads(body)["receipts"][0] == {"id": 0, "ok": True}


def test_window_peak_24_items_window_3(serve, workspace, worker, store_at):
    ws = workspace(pay_tree(worker.url(), window=3))
    srv = serve(ws)
    status, _, _ = http_get(srv.url + "/go?n=24")
    assert status == 202
    first = [worker.wait_job() for _ in range(3)]
    wait_until(lambda: worker.in_flight == 3)
    pending = list(first)
    done = 0
    while done < 24:
        job = pending.pop(0)
        worker.callback(job, _receipt(job))
        done += 1
        assert worker.in_flight <= 3
        if done <= 21:
            pending.append(worker.wait_job())
    assert worker.peak == 3 and worker.in_flight == 0 and len(worker.jobs) == 24
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = _run_id(first[0])
    unit = store.list_units(run_id)[0]
    assert len(store.list_interactions(unit.unit_id)) == 24 and unit.window == 3
    run = wait_until(lambda: (r := store.get_run(run_id)) and r.status == "completed" and r)
    assert [r["id"] for r in run.result["receipts"]] == list(range(24))


def _burst(serve, workspace, worker, store_at, n: int, window: int = 25) -> None:
    """Completions in random bursts (concurrent callbacks), 5 % redelivered."""
    ws = workspace(pay_tree(worker.url(), window=window))
    srv = serve(ws)
    status, _, body = http_get(srv.url + f"/go?n={n}")
    assert status == 202, body
    rng = random.Random(7)
    received: list = []
    done = 0
    duplicates = []
    with ThreadPoolExecutor(16) as pool:
        while done < n:
            if not received:
                received.append(worker.wait_job(timeout=20))
            while True:  # take whatever else has arrived
                try:
                    received.append(worker.queue.get_nowait())
                except Exception:  # noqa: BLE001 - queue.Empty
                    break
            rng.shuffle(received)
            take = rng.randint(1, len(received))
            burst, received = received[:take], received[take:]
            results = list(pool.map(lambda j: worker.callback(j, _receipt(j)), burst))
            assert all(r[0] == 200 for r in results), results
            redelivered = [j for j in burst if rng.random() < 0.05]  # the same completion again
            for job in redelivered:
                status, body = post_json(job.callback_url, {"status": "completed", "output": _receipt(job)},
                                         job.token)
                assert (status, body) == (200, {"status": "recorded", "duplicate": True})
            duplicates.extend(redelivered)
            done += take
            assert worker.peak <= window
    assert duplicates
    assert worker.peak <= window and worker.in_flight == 0
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = store.list_runs()[0].run_id
    run = wait_until(lambda: (r := store.get_run(run_id)) and r.status == "completed" and r, timeout=60)
    assert [r["id"] for r in run.result["receipts"]] == list(range(n))
    unit = store.list_units(run_id)[0]
    assert len(store.list_interactions(unit.unit_id)) == n and len(worker.jobs) == n
    assert _kinds(store, run_id).count("run.released") == 1
    assert not [k for k in _kinds(store, run_id) if k.startswith("reconcile.")]


def test_burst_short(serve, workspace, worker, store_at):
    _burst(serve, workspace, worker, store_at, 120)


@pytest.mark.slow
def test_burst_1000_items_window_25(serve, workspace, worker, store_at):
    _burst(serve, workspace, worker, store_at, 1000)


def test_partial_children_keep_the_parent_waiting(serve, workspace, worker, store_at):
    ws = workspace(pay_tree(worker.url(), window=4))
    srv = serve(ws)
    status, _, _ = http_get(srv.url + "/go?n=4")
    assert status == 202
    jobs = [worker.wait_job() for _ in range(4)]
    for job in jobs[:2]:
        assert worker.callback(job, _receipt(job)) == (200, {"status": "recorded"})
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = _run_id(jobs[0])
    run = store.get_run(run_id)
    assert run.status == "waiting" and run.result is None
    unit = store.list_units(run_id)[0]
    assert unit.status == "waiting" and unit.output is None
    assert unit.provider_done == 2 and unit.continuation_done == 2
    assert [s.status for s in store.list_suspends(run_id)] == ["open"]
    assert "run.released" not in _kinds(store, run_id)


def test_fail_fast_item_failure(serve, workspace, worker, store_at):
    """Item 1 fails: the unit fails, queued items are never sent, the in-flight
    item's callback gets 410, the run fails with the item's error; nothing stays pending."""
    ws = workspace(pay_tree(worker.url(), window=2))
    srv = serve(ws)
    status, headers, _ = http_get(srv.url + "/go?n=5")
    assert status == 202
    jobs = sorted((worker.wait_job() for _ in range(2)), key=lambda j: j.body["_txc"]["item_index"])
    assert worker.callback(jobs[1], status="failed", error="card declined") == (200, {"status": "failed"})
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = _run_id(jobs[0])
    run = wait_until(lambda: (r := store.get_run(run_id)) and r.status == "failed" and r)
    assert run.error["code"] == "txcl_op_failed"
    detail = run.error["detail"]
    assert detail["item_index"] == 1 and detail["message"] == "item 1 failed: card declined"
    assert worker.callback(jobs[0], _receipt(jobs[0]))[0] == 410
    assert len(worker.jobs) == 2  # items 2..4 were never sent
    unit = store.list_units(run_id)[0]
    assert unit.status == "failed"
    statuses = [i.status for i in store.list_interactions(unit.unit_id)]
    assert statuses == ["cancelled", "failed", "cancelled", "cancelled", "cancelled"]
    # nothing left pending: no open interaction, no pending child, no claim
    assert not [c for c in store.list_children(unit.unit_id) if c.status in ("queued", "running")]
    assert store.get_claim(run_id) is None
    status, _, body = http_get(srv.url + headers["location"])
    assert status == 502 and "item 1 failed" in body.decode()


def test_collect_policy_puts_errors_at_their_index(serve, workspace, worker, store_at):
    ws = workspace(pay_tree(worker.url(), window=4, extra_with=', on_item_error = "collect"'))
    srv = serve(ws)
    status, _, _ = http_get(srv.url + "/go?n=4")
    assert status == 202
    jobs = sorted((worker.wait_job() for _ in range(4)), key=lambda j: j.body["_txc"]["item_index"])
    worker.callback(jobs[2], status="failed", error={"message": "declined", "code": 51})
    for job in (jobs[3], jobs[0]):
        assert worker.callback(job, _receipt(job)) == (200, {"status": "recorded"})
    assert worker.callback(jobs[1], _receipt(jobs[1])) == (200, {"status": "resumed"})
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run = wait_until(lambda: (r := store.get_run(_run_id(jobs[0]))) and r.status == "completed" and r)
    assert run.result["receipts"] == [{"id": 0, "ok": True}, {"id": 1, "ok": True},
                                      {"error": {"message": "declined", "code": 51}}, {"id": 3, "ok": True}]


def test_empty_each_is_synchronous_with_no_run(serve, workspace, worker, store_at):
    """Barrier and deferred: no unit, interaction, run or suspend; `{into: []}` at once."""
    files = pay_tree(worker.url())
    files["OPS/pay/100/later.txcl"] = ('WITH mode = "async", each = .orders, into = "later", join_at_scope = 150\n'
                                       f'EXEC "{worker.url()}"')
    ws = workspace(files)
    srv = serve(ws, "--trace-mode", "full")
    status, headers, body = http_get(srv.url + "/go?n=0")
    assert status == 200, body
    answer = json.loads(body)
    assert answer["receipts"] == [] and answer["later"] == [] and answer["count"] == 0
    store = store_at(ws / ".txcl-data" / "txcl.db")
    assert store.list_runs() == [] and worker.jobs == []
    trace = wait_until(lambda: store.get_trace(headers["x-request-id"]))
    steps = {s["name"]: s for s in trace.steps if s["stage"] == "pay/100"}
    assert steps["charge"]["status"] == "ok" and steps["charge"]["transport"] == "async"
    assert steps["charge"]["items"] == 0


def test_empty_each_beside_another_async_op_is_merged_by_the_resume(serve, workspace, worker, store_at):
    files = pay_tree(worker.url())
    files["OPS/pay/100/other.txcl"] = f'WITH mode = "async"\nEXEC "{worker.url("/other")}"'
    ws = workspace(files)
    srv = serve(ws)
    status, headers, _ = http_get(srv.url + "/go?n=0")
    assert status == 202
    job = worker.wait_job()
    assert worker.callback(job, {"other": 1}) == (200, {"status": "resumed"})
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run = wait_until(lambda: (r := store.get_run(_run_id(job))) and r.status == "completed" and r)
    assert run.result["receipts"] == [] and run.result["other"] == 1 and run.result["count"] == 0


def test_dispatch_validation_each_not_an_array_fails_the_stage(serve, workspace, worker, store_at):
    """`each` not an array → the unit is recorded failed with no interactions (barrier:
    the stage fails, deferred: the request ends at the join); too many elements likewise."""
    files = {
        "OPS/pay/100/charge.txcl": f'WITH mode = "async", each = .orders, into = "receipts"\nEXEC "{worker.url()}"',
        "OPS/pay/50/orders.txcl": 'EMIT .orders = "not a list"',
        "OPS/deferred/50/orders.txcl": "EMIT .orders = [1, 2, 3]",
        "OPS/deferred/100/charge.txcl": 'WITH mode = "async", each = .orders, into = "receipts", join_at_scope = 200\n'
                                        f'EXEC "{worker.url()}"',
        "OPS/deferred/150/mid.txcl": "EMIT .mid = true",
        "OPS/deferred/200/after.txcl": "EMIT .after = true",
        "txcl.toml": '[serve]\ndefault_stack = "pay"\n\n[[serve.routes]]\npath = "/deferred"\nstack = "deferred"\n',
    }
    ws = workspace(files)
    srv = serve(ws, "--await-items-max", "2")
    status, _, body = http_get(srv.url + "/go")
    assert status == 502, body
    error = json.loads(body)["error"]
    assert error["code"] == "txcl_op_failed" and "each must resolve to an array (got string)" in error["message"]
    status, _, body = http_get(srv.url + "/deferred/go")
    assert status == 502, body
    error = json.loads(body)["error"]
    assert error["code"] == "txcl_join_failed" and "more than --await-items-max 2" in error["message"]
    assert worker.jobs == []
    store = store_at(ws / ".txcl-data" / "txcl.db")
    for run in store.list_runs():
        for unit in store.list_units(run.run_id):
            assert unit.status == "failed" and store.list_interactions(unit.unit_id) == []


def test_healthy_itemized_run_has_no_reconcile_events(serve, workspace, worker, store_at):
    """The live path does everything; the sweeper (running every 100ms) repairs nothing."""
    ws = workspace(pay_tree(worker.url(), window=3))
    srv = serve(ws, "--continuation-sweep-period", "100ms")
    status, _, _ = http_get(srv.url + "/go?n=9")
    assert status == 202
    for _ in range(9):
        job = worker.wait_job()
        worker.callback(job, _receipt(job))
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = _run_id(job)
    run = wait_until(lambda: (r := store.get_run(run_id)) and r.status == "completed" and r)
    assert run.result["count"] == 9
    kinds = _kinds(store, run_id)
    assert not [k for k in kinds if k.startswith("reconcile.")], kinds
    unit = store.list_units(run_id)[0]
    facts = store.list_facts(unit.unit_id)
    assert sorted(facts) == sorted([("provider", i) for i in range(9)] + [("continuation", i) for i in range(9)])


def test_duplicate_and_conflicting_item_completions(serve, workspace, worker, store_at):
    ws = workspace(pay_tree(worker.url(), window=2))
    srv = serve(ws)
    status, _, _ = http_get(srv.url + "/go?n=2")
    assert status == 202
    jobs = sorted((worker.wait_job() for _ in range(2)), key=lambda j: j.body["_txc"]["item_index"])
    assert worker.callback(jobs[0], {"id": 0, "first": True}) == (200, {"status": "recorded"})
    body = {"status": "completed", "output": {"id": 0, "first": True}}
    for _ in range(3):  # duplicates make no further progress
        assert post_json(jobs[0].callback_url, body, jobs[0].token) == (200, {"status": "recorded", "duplicate": True})
    other = {"status": "completed", "output": {"id": 0, "second": True}}
    assert post_json(jobs[0].callback_url, other, jobs[0].token)[0] == 409  #
    failed = {"status": "failed", "error": "no"}
    assert post_json(jobs[0].callback_url, failed, jobs[0].token)[0] == 409
    store = store_at(ws / ".txcl-data" / "txcl.db")
    unit = store.list_units(_run_id(jobs[0]))[0]
    assert store.get_unit(unit.unit_id).provider_done == 1
    assert worker.callback(jobs[1], {"id": 1}) == (200, {"status": "resumed"})
    run = wait_until(lambda: (r := store.get_run(unit.run_id)) and r.status == "completed" and r)
    assert run.result["receipts"] == [{"id": 0, "first": True}, {"id": 1}]
    assert _kinds(store, unit.run_id).count("run.released") == 1


def test_completions_before_the_parent_suspends(serve, workspace, store_at):
    """Every item calls back before it acks (before the park is even answered): the
    completions persist, nothing continues before the parent is parked, and the parking request
    drains its own suspend: a synchronous answer with the ordered array."""
    with TestWorker(mode="callback-first", callback_output={"ok": True}) as w:
        ws = workspace(pay_tree(w.url(), window=3))
        srv = serve(ws)
        status, headers, body = http_get(srv.url + "/go?n=3")
        assert [c[0] for c in w.callbacks] == [200, 200, 200]
    assert status == 200, body
    answer = json.loads(body)
    assert answer["receipts"] == [{"ok": True}] * 3 and answer["count"] == 3
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run = store.list_runs()[0]
    assert run.status == "completed" and _kinds(store, run.run_id).count("run.released") == 1


def test_deferred_itemized_joins_in_request_and_after_a_suspend(serve, workspace, store_at):
    """With join_at_scope: dispatched at 100, joined at 200 in item order (in the
    request when every item is back, else after the join suspend)."""
    with ItemWorker(mode="callback-first", callback_output={"ok": 1}) as fast, ItemWorker() as slow:
        files = pay_tree(fast.url(), window=5, extra_with=", join_at_scope = 200",
                         extra={"OPS/pay/150/mid.txcl": "EMIT .mid = &len(.receipts)"})
        files["OPS/slow/50/orders.txcl"] = "EMIT .orders = [10, 20, 30]"
        files["OPS/slow/100/charge.txcl"] = ('WITH mode = "async", each = .orders, window = 3, into = "receipts", '
                                             f'join_at_scope = 200\nEXEC "{slow.url()}"')
        files["OPS/slow/200/after.txcl"] = "EMIT .count = &len(.receipts)"
        files["txcl.toml"] = '[serve]\ndefault_stack = "pay"\n\n[[serve.routes]]\npath = "/slow"\nstack = "slow"\n'
        ws = workspace(files)
        srv = serve(ws)
        status, _, body = http_get(srv.url + "/go?n=5")
        assert status == 200, body
        answer = json.loads(body)
        assert answer["receipts"] == [{"ok": 1}] * 5 and answer["count"] == 5 and answer["mid"] == 0
        status, headers, _ = http_get(srv.url + "/slow/go")
        assert status == 202
        jobs = sorted((slow.wait_job() for _ in range(3)), key=lambda j: j.body["_txc"]["item_index"])
        assert [j.body["input"] for j in jobs] == [10, 20, 30]
        for job in reversed(jobs):
            slow.callback(job, job.body["input"] * 2)  # items may be any JSON value
        store = store_at(ws / ".txcl-data" / "txcl.db")
        run = wait_until(lambda: (r := store.get_run(_run_id(jobs[0]))) and r.status == "completed" and r)
        assert run.result["receipts"] == [20, 40, 60] and run.result["count"] == 3
        assert [(s.stage, s.kind) for s in store.list_suspends(run.run_id)] == [("slow/200", "join")]


def test_item_outputs_are_sanitised(serve, workspace, worker, store_at):
    """Object item outputs are sanitised as untrusted (no reserved writes reach the flow)."""
    ws = workspace(pay_tree(worker.url(), window=1))
    srv = serve(ws)
    status, _, _ = http_get(srv.url + "/go?n=1")
    assert status == 202
    job = worker.wait_job()
    worker.callback(job, {"id": 0, "_txc": {"rid": "forged", "src": "forged"}})
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run = wait_until(lambda: (r := store.get_run(_run_id(job))) and r.status == "completed" and r)
    receipt = run.result["receipts"][0]
    assert receipt["id"] == 0 and "rid" not in receipt.get("_txc", {}) and "src" not in receipt.get("_txc", {})



def test_await_in_the_last_scope_resumes_through_the_full_path(serve, workspace, worker, store_at):
    """The await sits in the last scope: the resume still runs the tail (EMIT),
    the merge, SET POST and control fields before the result is published by the finishing
    transaction (no extra op or worker call)."""
    files = {
        "OPS/pay/50/items.txcl": "EMIT .items = [1, 2]",
        "OPS/pay/100/charge.txcl": 'WITH mode = "async", each = .items, window = 2, into = "out"\n'
                                   'SELECT *\nSET .post_ran = true\n'
                                   f'EXEC "{worker.url()}"\nEMIT .n_out = &len(.out)',
    }
    ws = workspace(files)
    srv = serve(ws)
    status, headers, _ = http_get(srv.url + "/go")
    assert status == 202
    for _ in range(2):
        job = worker.wait_job()
        worker.callback(job, {"v": job.body["input"]})
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run = wait_until(lambda: (r := store.get_run(_run_id(job))) and r.status == "completed" and r)
    assert run.result["out"] == [{"v": 1}, {"v": 2}] and run.result["n_out"] == 2 and run.result["post_ran"] is True
    assert len(worker.jobs) == 2
    status, _, body = http_get(srv.url + headers["location"])
    assert status == 200 and json.loads(body)["n_out"] == 2


def test_unary_await_over_a_collection_is_one_aggregate_unit(serve, workspace, worker, store_at):
    """A unary async op whose input is a list is one indivisible unit: one interaction
    storing the whole input, one terminal with the whole output."""
    files = {
        "OPS/pay/50/items.txcl": "EMIT .batch = [1, 2, 3]",
        "OPS/pay/100/bulk.txcl": f'WITH mode = "async"\nSELECT .batch\nEXEC "{worker.url()}"',
    }
    ws = workspace(files)
    srv = serve(ws)
    status, _, _ = http_get(srv.url + "/go")
    assert status == 202
    job = worker.wait_job()
    assert job.body["input"]["batch"] == [1, 2, 3] and "item_index" not in job.body["_txc"]
    store = store_at(ws / ".txcl-data" / "txcl.db")
    unit = store.list_units(_run_id(job))[0]
    interactions = store.list_interactions(unit.unit_id)
    assert unit.kind == "unary" and len(interactions) == 1 and interactions[0].input["batch"] == [1, 2, 3]
    assert worker.callback(job, {"done": [10, 20, 30]}) == (200, {"status": "resumed"})
    run = wait_until(lambda: (r := store.get_run(_run_id(job))) and r.status == "completed" and r)
    assert run.result["done"] == [10, 20, 30]


def test_tolerate_policy_completes_within_the_bound(serve, workspace, worker, store_at):
    ws = workspace(pay_tree(worker.url(), window=5,
                            extra_with=', on_item_error = "tolerate", tolerated_failures = 2'))
    srv = serve(ws)
    status, _, _ = http_get(srv.url + "/go?n=5")
    assert status == 202
    jobs = sorted((worker.wait_job() for _ in range(5)), key=lambda j: j.body["_txc"]["item_index"])
    for i in (1, 3):  # two failures: still within the bound
        worker.callback(jobs[i], status="failed", error={"message": f"bad {i}"})
    for i in (0, 2, 4):
        worker.callback(jobs[i], _receipt(jobs[i]))
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run = wait_until(lambda: (r := store.get_run(_run_id(jobs[0]))) and r.status == "completed" and r)
    assert run.result["receipts"] == [{"id": 0, "ok": True}, {"error": {"message": "bad 1"}},
                                      {"id": 2, "ok": True}, {"error": {"message": "bad 3"}},
                                      {"id": 4, "ok": True}]
    assert run.result["count"] == 5


def test_tolerate_policy_fails_fast_past_the_bound(serve, workspace, worker, store_at):
    """A share of the items: 40% of 5 is 2; the third failure fails the op at once, the items
    still out are cancelled (their callbacks get 410) and the queued ones are never sent."""
    ws = workspace(pay_tree(worker.url(), window=4,
                            extra_with=', on_item_error = "tolerate", tolerated_failures = "40%"'))
    srv = serve(ws)
    status, headers, _ = http_get(srv.url + "/go?n=5")
    assert status == 202
    jobs = sorted((worker.wait_job() for _ in range(4)), key=lambda j: j.body["_txc"]["item_index"])
    for i in (0, 1):
        assert worker.callback(jobs[i], status="failed", error={"message": f"bad {i}"})[0] == 200
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run_id = _run_id(jobs[0])
    assert store.get_run(run_id).status == "waiting"  # two failures are tolerated
    fifth = worker.wait_job()  # a freed slot sent the fifth item
    assert worker.callback(jobs[2], status="failed", error={"message": "bad 2"})[0] == 200
    run = wait_until(lambda: (r := store.get_run(run_id)) and r.status == "failed" and r)
    error = run.error
    assert error["code"] == "txcl_op_failed"
    assert "3 of 5 items failed, more than tolerated_failures = 40% allows (item 0: bad 0)" in error["message"]
    assert error["detail"]["failed_items"] == 3 and error["detail"]["item_index"] == 0
    assert worker.callback(jobs[3], _receipt(jobs[3]))[0] == 410  # cancelled when the op failed
    assert worker.callback(fifth, _receipt(fifth))[0] == 410
    status, _, body = http_get(srv.url + headers["location"])
    assert status == 502 and "more than tolerated_failures" in body.decode()
