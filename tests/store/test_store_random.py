"""Randomised interleavings of store procedures on itemized units, checked against invariants.

Each trial parks one itemized unit and then applies a random sequence of: callbacks (`admit_terminal`, sometimes
without the `continue_release` that should follow — a crash), duplicate and conflicting redeliveries, `continue_release` with stale
versions, reconcile claims on children, failures, sweeper passes and clock jumps. After every
step: in-flight ≤ window, facts never exceed children, a continuation fact exists only for a
succeeded child (or a failed one under collect), at most one release, and a completed unit's
output is the per-item outputs in item order.
"""

from __future__ import annotations

import random

import pytest
from contstore_util import FakeClock, itemized, open_store, park_barrier, unit_spec

from txcl.continuations.sweeper import SweepConfig, sweep

CFG = SweepConfig(reconcile_after_ms=1_000, stale_after_ms=10**9, lease_ms=500)


def check_invariants(store, unit_id, window, policy):
    its = store.list_interactions(unit_id)
    assert sum(i.status in ("dispatching", "dispatched") for i in its) <= window
    children = {c.item_index: c for c in store.list_children(unit_id)}
    facts = store.list_facts(unit_id)
    unit = store.get_unit(unit_id)
    cont = [i for k, i in facts if k == "continuation"]
    prov = [i for k, i in facts if k == "provider"]
    assert unit.continuation_done == len(cont) and unit.provider_done == len(prov)
    for i in cont:
        ok = ("succeeded", "failed") if policy == "collect" else ("succeeded",)
        assert children[i].status in ok
    for i in prov:
        assert store.get_terminal(its[i].opc) is not None
    if unit.status == "completed":
        assert len(unit.output) == len(its)
        for i, value in enumerate(unit.output):
            if children[i].status == "succeeded":
                assert value == children[i].output
            else:
                assert policy == "collect" and "error" in value
    return unit


def one_trial(db, seed):
    rng = random.Random(seed)
    clock = FakeClock()
    store = open_store(db, clock)
    n, window = rng.randint(1, 12), rng.randint(1, 4)
    policy = rng.choice(["fail", "collect"])
    budget = rng.choice([3_000, 50_000])  # short budgets make items time out (`time_out_interaction`) now and then
    park = park_barrier(store, f"rid-{seed}", units=[itemized(n=n, window=window, policy=policy, budget_ms=budget)])
    unit_id = park.unit_ids[0]
    tokens = {d.opc: d.token for d in park.dispatches}
    first_payload: dict[str, object] = {}
    releases = 0
    for _ in range(rng.randint(10, 60)):
        run = store.get_run(park.run.run_id)
        if run.status != "waiting":
            break
        live = [i for i in store.list_interactions(unit_id) if i.status in ("dispatching", "dispatched")]
        action = rng.random()
        if live and action < 0.55:
            it = rng.choice(live)
            failed = rng.random() < 0.08
            status, payload = ("failed", {"message": "no"}) if failed else ("completed", {"v": it.item_index})
            admit = store.admit_terminal(it.opc, status, payload, source="callback", token=tokens[it.opc])
            if admit.outcome == "expired":  # past its deadline: timed out by the callback itself (row 6)
                releases += admit.claim is not None
                tokens.update({d.opc: d.token for d in admit.dispatches})
                check_invariants(store, unit_id, window, policy)
                continue
            assert admit.outcome == "admitted"
            first_payload[it.opc] = (status, payload)
            tokens.update({d.opc: d.token for d in admit.dispatches})
            if rng.random() < 0.85:  # else: the process "died" before `continue_release`
                if rng.random() < 0.2:  # a reconcile claim slips in between
                    store.claim_child(unit_id, it.item_index, older_than_ms=0, lease_ms=500)
                releases += store.continue_release(it.opc, child_version=admit.child_version).won
        elif first_payload and action < 0.7:  # redelivery: duplicate or conflict, never changes anything
            opc = rng.choice(list(first_payload))
            status, payload = first_payload[opc]
            if rng.random() < 0.5:
                res = store.admit_terminal(opc, status, payload, source="callback", token=tokens[opc])
                assert res.outcome == "duplicate"  # the terminal exists: rows 7/8 whatever happened since
            else:
                res = store.admit_terminal(opc, "completed", {"other": 1}, source="callback", token=tokens[opc])
                assert res.outcome == "conflict"
        elif action < 0.9:
            clock.advance(rng.choice([10, 600, 1_500]))
            report = sweep(store, CFG)
            releases += len(report.released)
            tokens.update({d.opc: d.token for d in [*report.resent, *report.promoted]})
        else:
            releases += store.try_release(park.run.run_id).won
        check_invariants(store, unit_id, window, policy)
        assert releases <= 1
    # drain everything that is left, then the run must be released exactly once
    for _ in range(200):
        run = store.get_run(park.run.run_id)
        if run.status != "waiting":
            break
        live = [i for i in store.list_interactions(unit_id) if i.status in ("dispatching", "dispatched")]
        for it in live:
            admit = store.admit_terminal(it.opc, "completed", {"v": it.item_index}, source="callback",
                                         token=tokens[it.opc])
            tokens.update({d.opc: d.token for d in admit.dispatches})
            releases += admit.claim is not None
            if admit.outcome == "admitted":
                releases += store.continue_release(it.opc, child_version=admit.child_version).won
        clock.advance(500)
        report = sweep(store, CFG)
        releases += len(report.released)
        tokens.update({d.opc: d.token for d in [*report.resent, *report.promoted]})
    unit = check_invariants(store, unit_id, window, policy)
    run = store.get_run(park.run.run_id)
    if run.status == "expired":  # an item timed out under fail-fast (`time_out_interaction`): nothing left open
        assert policy == "fail" and releases == 0 and unit.status == "timed_out"
        assert not [i for i in store.list_interactions(unit_id) if i.status in ("queued", "dispatching",
                                                                                "dispatched")]
    else:
        assert run.status == "resuming" and releases == 1
        assert unit.status in ("completed", "failed")
        if unit.status == "completed" and policy == "fail":
            assert unit.output == [{"v": i} for i in range(n)]
    OUTCOMES[(policy, run.status, unit.status)] = OUTCOMES.get((policy, run.status, unit.status), 0) + 1
    store.close()


OUTCOMES: dict = {}


@pytest.mark.parametrize("seed", range(25))
def test_random_interleavings_keep_invariants(db_url, seed):
    one_trial(db_url, seed)


@pytest.mark.slow
def test_random_interleavings_many(db_url):
    OUTCOMES.clear()
    for seed in range(100, 600):
        one_trial(db_url, seed)
    # the trials reach every ending: fail-fast failures, collect errors, expiry, clean completion
    assert {k[1:] for k in OUTCOMES} >= {("resuming", "completed"), ("resuming", "failed"), ("expired", "timed_out")}


def multi_unit_trial(db, seed):
    """A barrier with several members (unary, itemized, sync): fail-fast and one release."""
    from contstore_util import unary


    rng = random.Random(seed)
    clock = FakeClock()
    store = open_store(db, clock)
    units = [unary("a", budget_ms=rng.choice([2_000, 50_000])),
             itemized("b", n=rng.randint(1, 6), window=rng.randint(1, 3), policy=rng.choice(["fail", "collect"]),
                      budget_ms=rng.choice([2_000, 50_000])),
             unit_spec(kind="sync", op_name="c", items=[{}], budget_ms=50_000)]
    park = park_barrier(store, f"m-{seed}", units=units)
    tokens = {d.opc: d.token for d in park.dispatches}
    releases = 0
    for _ in range(80):
        run = store.get_run(park.run.run_id)
        if run.status != "waiting":
            break
        live = [i for u in park.unit_ids for i in store.list_interactions(u)
                if i.status in ("dispatching", "dispatched")]
        if live and rng.random() < 0.7:
            it = rng.choice(live)
            kind = store.get_unit(it.unit_id).kind
            failed = rng.random() < 0.1
            status, payload = ("failed", {"message": "x"}) if failed else ("completed", {"v": it.item_index})
            source = "sync" if kind == "sync" else "callback"
            admit = store.admit_terminal(it.opc, status, payload, source=source, token=tokens.get(it.opc),
                                         best_effort=(kind == "sync"))
            tokens.update({d.opc: d.token for d in admit.dispatches})
            releases += admit.claim is not None
            if admit.outcome == "admitted" and rng.random() < 0.9:
                releases += store.continue_release(it.opc, child_version=admit.child_version).won
        else:
            clock.advance(rng.choice([100, 1_500]))
            report = sweep(store, CFG)
            releases += len(report.released)
            tokens.update({d.opc: d.token for d in [*report.resent, *report.promoted]})
        assert releases <= 1
    run = store.get_run(park.run.run_id)
    statuses = {u: store.get_unit(u).status for u in park.unit_ids}
    if run.status == "resuming":
        assert releases == 1
        bad = [s for s in statuses.values() if s in ("failed", "timed_out", "cancelled")]
        # released: everything terminal, or fail-fast with the rest cancelled
        assert all(s != "waiting" for s in statuses.values()), statuses
        if not bad:
            assert all(s == "completed" for s in statuses.values())
        open_left = [i for u in park.unit_ids for i in store.list_interactions(u)
                     if i.status in ("queued", "dispatching", "dispatched")]
        assert not open_left  # for the released members
        assert statuses[park.unit_ids[2]] in ("completed", "cancelled")  # sync: best effort, never fails
    elif run.status == "expired":
        assert releases == 0
    store.close()


@pytest.mark.parametrize("seed", range(15))
def test_random_multi_unit_barriers(db_url, seed):
    multi_unit_trial(db_url, seed)


@pytest.mark.slow
def test_random_multi_unit_barriers_many(db_url):
    for seed in range(1000, 1400):
        multi_unit_trial(db_url, seed)
