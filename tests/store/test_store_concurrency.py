"""Genuinely concurrent attempts on one SQLite file, from threads and from processes.

Exactly one release wins, exactly one joined marker, duplicate
completions are idempotent, conflicting ones rejected with the first kept.
"""

from __future__ import annotations

import multiprocessing
import random
import threading
import time

import pytest
from contstore_util import (join_at, complete, itemized, open_store, park_barrier, proc_admit, proc_callbacks,
                            proc_complete_items, proc_continue, proc_join_checks, proc_try_release, run_spec, unary, unit_spec)

from txcl.store.records import Fence

N_THREADS = 8
N_PROCS = 4


def run_threads(n, fn):
    barrier = threading.Barrier(n)
    results = [None] * n
    errors = []

    def body(i):
        try:
            barrier.wait()
            results[i] = fn(i)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


@pytest.fixture
def store(db_url):
    s = open_store(db_url)
    yield s
    s.close()


def _admitted_barrier(store, rid="rid-1", n_units=2):
    park = park_barrier(store, rid, units=[unary(f"op{i}") for i in range(n_units)])
    for d in park.dispatches:
        assert store.admit_terminal(d.opc, "completed", {"n": d.op_name}, source="callback",
                                    token=d.token).outcome == "admitted"
    return park


def test_release_race_threads_one_winner_t23(store):
    park = _admitted_barrier(store)
    opcs = [d.opc for d in park.dispatches]
    wins = run_threads(N_THREADS, lambda i: [store.continue_release(o).won for o in opcs[i % 2:] + opcs[:i % 2]])
    assert sum(sum(w) for w in wins) == 1
    assert sum(e.kind == "run.released" for e in store.list_run_events(park.run.run_id)) == 1
    assert store.get_claim(park.run.run_id).attempt == 1


def test_try_release_race_threads_one_winner(store):
    """A suspend that is releasable as parked (a member failed at dispatch): N drains, one winner."""

    bad = unit_spec(kind="itemized", op_name="pay", items=[1], failed_error={"message": "each is not an array"})
    park = park_barrier(store, units=[unary("a"), bad])
    wins = run_threads(N_THREADS, lambda i: store.try_release(park.run.run_id).won)
    assert wins.count(True) == 1
    assert store.get_interaction(park.dispatches[0].opc).status == "cancelled"  # fail-fast


def test_duplicate_completions_concurrent_threads(store):
    park = park_barrier(store)
    d = park.dispatches[0]
    outcomes = run_threads(N_THREADS, lambda i: complete(store, d, {"same": 1}))
    kinds = sorted(a.outcome for a, _ in outcomes)
    assert kinds == ["admitted"] + ["duplicate"] * (N_THREADS - 1)
    assert sum(r.won for _, r in outcomes if r is not None) == 1
    assert store.get_unit(park.unit_ids[0]).provider_done == 1


def test_conflicting_completions_concurrent_threads(store):
    park = park_barrier(store)
    d = park.dispatches[0]
    outcomes = run_threads(N_THREADS, lambda i: (complete(store, d, {"writer": i})[0].outcome, i))
    winners = [i for outcome, i in outcomes if outcome == "admitted"]
    assert len(winners) == 1
    assert sorted(o for o, _ in outcomes).count("conflict") == N_THREADS - 1
    assert store.get_terminal(d.opc).payload == {"writer": winners[0]}
    assert store.get_unit(park.unit_ids[0]).output == {"writer": winners[0]}


def _join_race_trial(store, rid, rng):
    disp = store.dispatch_deferred(run_spec(rid), Fence(rid), [unary("x", join_at=200)])
    d = disp.dispatches[0]
    run_id = disp.run.run_id
    outcome = {}

    def callback():
        time.sleep(rng.random() * 0.002)
        outcome["cb"] = complete(store, d, {"v": rid})

    def request():
        time.sleep(rng.random() * 0.002)
        outcome["join"] = join_at(store, run_id, Fence(rid), stage="shop/200", stack="shop", scope=200,
                                           park_envelope={"parked": True}, park_state={})

    threads = [threading.Thread(target=callback), threading.Thread(target=request)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    join = outcome["join"]
    admit, rel = outcome["cb"]
    marker = store.get_joined_marker(disp.unit_ids[0])
    merged_in_request = len(join.merged)
    merged_by_resume = int(bool(rel and rel.won))
    assert marker is not None
    assert merged_in_request + merged_by_resume == 1, (join, rel)
    if merged_in_request:
        assert marker.segment_id == rid and join.outcome == "proceed"
    else:
        assert join.outcome == "parked" and marker.segment_id == rel.claim.segment_id
    return "request" if merged_in_request else "resume"


@pytest.mark.parametrize("trials", [150, pytest.param(1000, marks=pytest.mark.slow)])
def test_callback_racing_join_check_merges_exactly_once_t4(store, trials):
    """(store level): randomised races; every trial has one marker and one merge."""
    rng = random.Random(4)
    seen = [_join_race_trial(store, f"rid-{i}", rng) for i in range(trials)]
    assert len(seen) == trials  # each trial asserted exactly-once inside _join_race_trial


def test_join_race_forced_interleavings(store):
    """The join race: callback `continue_release` first; `join_check` first; `admit_terminal` then `join_check` then `continue_release`."""
    # callback first
    disp = store.dispatch_deferred(run_spec("a"), Fence("a"), [unary("x", join_at=200)])
    _, rel = complete(store, disp.dispatches[0])
    assert rel.outcome == "recorded"
    j = join_at(store, disp.run.run_id, Fence("a"), stage="s/200", stack="shop", scope=200)
    assert len(j.merged) == 1
    # `join_check` first
    disp = store.dispatch_deferred(run_spec("b"), Fence("b"), [unary("x", join_at=200)])
    j = join_at(store, disp.run.run_id, Fence("b"), stage="s/200", stack="shop", scope=200,
                         park_envelope={}, park_state={})
    assert j.outcome == "parked" and j.merged == ()
    _, rel = complete(store, disp.dispatches[0])
    assert rel.won and store.get_joined_marker(disp.unit_ids[0]).segment_id == rel.claim.segment_id
    # in between
    disp = store.dispatch_deferred(run_spec("c"), Fence("c"), [unary("x", join_at=200)])
    d = disp.dispatches[0]
    admit = store.admit_terminal(d.opc, "completed", {"v": 1}, source="callback", token=d.token)
    j = join_at(store, disp.run.run_id, Fence("c"), stage="s/200", stack="shop", scope=200)
    assert len(j.merged) == 1
    assert store.continue_release(d.opc, child_version=admit.child_version).outcome == "recorded"


def test_itemized_completions_from_many_threads_one_release(store):
    park = park_barrier(store, units=[itemized(n=64, window=64)])
    results = run_threads(N_THREADS, lambda i: [complete(store, d)[1].won for d in park.dispatches[i::N_THREADS]])
    assert sum(sum(r) for r in results) == 1
    assert store.get_unit(park.unit_ids[0]).output == [{"ok": i} for i in range(64)]


# ---------------------------------------------------------------- processes


def _spawn(target, args_list):
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(len(args_list))
    out = ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args, barrier, out)) for args in args_list]
    for p in procs:
        p.start()
    results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return results


def test_release_race_processes_one_winner_t23(db_url):
    path = db_url
    store = open_store(path)
    park = _admitted_barrier(store)
    opcs = [d.opc for d in park.dispatches]
    wins = _spawn(proc_continue, [(str(path), opcs if i % 2 else opcs[::-1]) for i in range(N_PROCS)])
    assert sum(wins) == 1
    assert sum(e.kind == "run.released" for e in store.list_run_events(park.run.run_id)) == 1
    run = store.get_run(park.run.run_id)
    assert run.status == "resuming" and store.get_claim(run.run_id).claim_token == run.claim_token
    # and a second wave of processes running the drain finds nothing to release
    assert sum(_spawn(proc_try_release, [(str(path), run.run_id)] * N_PROCS)) == 0
    store.close()


def test_duplicate_and_conflicting_completions_processes_ec1(db_url):
    path = db_url
    store = open_store(path)
    park = park_barrier(store, units=[unary("a"), unary("b")])
    da, db = park.dispatches
    same = _spawn(proc_admit, [(str(path), da.opc, da.token, {"same": True})] * N_PROCS)
    assert sorted(o for o, _ in same) == ["admitted"] + ["duplicate"] * (N_PROCS - 1)
    differing = _spawn(proc_admit, [(str(path), db.opc, db.token, {"w": i}) for i in range(N_PROCS)])
    winners = [p for o, p in differing if o == "admitted"]
    assert len(winners) == 1 and [o for o, _ in differing].count("conflict") == N_PROCS - 1
    assert store.get_terminal(db.opc).payload == winners[0]
    store.close()


def test_join_check_racing_callbacks_across_processes_t4(db_url):
    """The join race across processes: per run, exactly one joined marker and exactly one merge."""
    path = db_url
    store = open_store(path)
    runs = []
    for i in range(60):
        rid = f"rid-{i}"
        disp = store.dispatch_deferred(run_spec(rid), Fence(rid), [unary("x", join_at=200)])
        runs.append((disp.run.run_id, rid, disp.dispatches[0], disp.unit_ids[0]))
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    procs = [
        ctx.Process(target=proc_join_checks, args=(str(path), [r[0] for r in runs], [r[1] for r in runs], 1,
                                                   barrier, out)),
        ctx.Process(target=proc_callbacks, args=(str(path), [(r[0], r[2].opc, r[2].token) for r in runs], 2,
                                                 barrier, out)),
    ]
    for p in procs:
        p.start()
    results = dict(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    in_request, by_resume = set(results["request"]), set(results["callback"])
    assert not in_request & by_resume
    assert in_request | by_resume == {r[0] for r in runs}
    for run_id, rid, _, unit_id in runs:
        marker = store.get_joined_marker(unit_id)
        expected = rid if run_id in in_request else store.get_claim(run_id).segment_id
        assert marker.segment_id == expected
    store.close()


def test_itemized_completions_from_several_processes_one_release(db_url):
    """Across processes: 4 processes complete 48 items in parallel; one release, item order."""
    path = db_url
    store = open_store(path)
    park = park_barrier(store, units=[itemized(n=48, window=48)])
    jobs = [(d.opc, d.token, d.item_index) for d in park.dispatches]
    won = _spawn(proc_complete_items, [(str(path), jobs[i::N_PROCS]) for i in range(N_PROCS)])
    assert sum(won) == 1
    unit = store.get_unit(park.unit_ids[0])
    assert unit.status == "completed" and unit.output == [{"i": i} for i in range(48)]
    assert unit.provider_done == unit.continuation_done == 48
    store.close()
