"""Itemized await units in the store: window, ordering, facts, fail-fast, collect."""

from __future__ import annotations

from testtools import RawDb

import random

import pytest
from contstore_util import complete, itemized, park_barrier, unit_spec


def in_flight(store, unit_id):
    return sum(i.status in ("dispatching", "dispatched") for i in store.list_interactions(unit_id))


def test_window_promotion_order_and_peak(store):
    """24 items, window 3 — never more than 3 in flight, exactly 3 at peak, promotion in item order."""
    park = park_barrier(store, units=[itemized(n=24, window=3)])
    unit_id = park.unit_ids[0]
    assert [d.item_index for d in park.dispatches] == [0, 1, 2]
    assert len(store.list_interactions(unit_id)) == 24
    queued = store.list_interactions(unit_id)[3]
    assert queued.status == "queued" and queued.deadline_ms is None  # no deadline until promoted
    pending = list(park.dispatches)
    promoted_order, peak = [], 0
    rng = random.Random(6)
    while pending:
        d = pending.pop(rng.randrange(len(pending)))
        peak = max(peak, in_flight(store, unit_id))
        admit, _ = complete(store, d)
        promoted_order += [p.item_index for p in admit.dispatches]
        pending += admit.dispatches
        assert in_flight(store, unit_id) <= 3
    assert peak == 3
    assert promoted_order == list(range(3, 24))
    assert in_flight(store, unit_id) == 0


def test_reverse_order_completions_join_in_item_order_t5(store):
    """Completions N-1 … 0; output in item order; one release (run version +1)."""
    park = park_barrier(store, units=[itemized(n=8, window=8)])
    v0 = store.get_run(park.run.run_id).version
    results = [complete(store, d, {"r": d.item_index})[1] for d in reversed(park.dispatches)]
    assert [r.outcome for r in results] == ["recorded"] * 7 + ["resumed"]
    assert store.get_unit(park.unit_ids[0]).output == [{"r": i} for i in range(8)]
    assert store.get_run(park.run.run_id).version == v0 + 1


def test_items_may_be_any_json_value(store):
    park = park_barrier(store, units=[itemized(n=3, window=3)])
    for d, value in zip(park.dispatches, [1, "two", [3]]):
        store.admit_terminal(d.opc, "completed", value, source="callback", token=d.token)
        store.continue_release(d.opc)
    assert store.get_unit(park.unit_ids[0]).output == [1, "two", [3]]


def test_two_progress_boundaries_per_item(store):
    """The admitted completion alone is not progress toward release."""
    park = park_barrier(store, units=[itemized(n=2, window=2)])
    unit_id = park.unit_ids[0]
    for d in park.dispatches:
        store.admit_terminal(d.opc, "completed", {"x": 1}, source="callback", token=d.token)
    unit = store.get_unit(unit_id)
    assert unit.provider_done == 2 and unit.continuation_done == 0 and unit.status == "waiting"
    assert [c.status for c in store.list_children(unit_id)] == ["queued", "queued"]
    assert store.get_run(park.run.run_id).status == "waiting"
    store.continue_release(park.dispatches[0].opc)
    assert store.get_run(park.run.run_id).status == "waiting"
    assert store.continue_release(park.dispatches[1].opc).won


def test_partial_children_keep_parent_waiting(store):
    park = park_barrier(store, units=[itemized(n=5, window=5)])
    for d in park.dispatches[:3]:
        assert complete(store, d)[1].outcome == "recorded"
    unit = store.get_unit(park.unit_ids[0])
    assert unit.status == "waiting" and unit.output is None
    assert store.get_run(park.run.run_id).status == "waiting"
    assert store.try_release(park.run.run_id).outcome == "recorded"


def test_fail_fast_item_failure(store):
    """Fail: unit failed with the item error, queued items never promoted, in-flight ones cancelled."""
    park = park_barrier(store, units=[itemized(n=10, window=3)])
    unit_id = park.unit_ids[0]
    d0, d1, d2 = park.dispatches
    complete(store, d0)
    admit, rel = complete(store, d1, {"message": "card declined"}, status="failed")
    assert rel.won  # fail-fast release
    assert admit.dispatches == ()  # a failing item promotes nothing under fail-fast
    unit = store.get_unit(unit_id)
    assert unit.status == "failed"
    assert unit.error == {"message": "item 1 failed: card declined", "item_index": 1,
                          "detail": {"message": "card declined"}}
    statuses = {i.item_index: i.status for i in store.list_interactions(unit_id)}
    assert statuses[2] == "cancelled" and all(statuses[i] == "cancelled" for i in range(4, 10))
    assert store.admit_terminal(d2.opc, "completed", {}, source="callback", token=d2.token).outcome == "cancelled"
    assert all(i.dispatch_ms is None for i in store.list_interactions(unit_id) if i.item_index >= 4)


def test_collect_policy_errors_at_their_index(store, clock):
    park = park_barrier(store, units=[itemized(n=4, window=4, policy="collect", budget_ms=1_000)])
    d = park.dispatches
    complete(store, d[0], {"ok": 0})
    complete(store, d[1], {"message": "bad"}, status="failed")
    complete(store, d[3], {"ok": 3})
    clock.advance(1_001)
    timeout = store.time_out_interaction(d[2].opc)  # collect: item 2 becomes an error
    assert timeout.outcome == "timed_out" and not timeout.expired
    assert timeout.claim is not None  # the timeout completed the unit and released the run
    unit = store.get_unit(park.unit_ids[0])
    assert unit.status == "completed"
    assert unit.output[0] == {"ok": 0} and unit.output[1] == {"error": {"message": "bad"}}
    assert unit.output[2]["error"]["message"] == "item 2 timed out" and unit.output[3] == {"ok": 3}
    run = store.get_run(park.run.run_id)
    assert run.status == "resuming"  # released, not expired


def test_missing_continuation_fact_repaired_only_for_succeeded_t22(store, tmp_path):
    """Delete a succeeded child's fact; the next completion repairs it and releases once."""
    park = park_barrier(store, units=[itemized(n=3, window=3)])
    unit_id = park.unit_ids[0]
    d0, d1, d2 = park.dispatches
    complete(store, d0)
    complete(store, d1)
    conn = RawDb(store)
    conn.execute("DELETE FROM continuation_facts WHERE unit_id = ? AND kind = 'continuation' AND item_index = 0",
                 (unit_id,))
    conn.execute("UPDATE await_units SET continuation_done = continuation_done - 1 WHERE unit_id = ?", (unit_id,))
    # a queued child (admitted, never materialised) must not be repaired
    store.admit_terminal(d2.opc, "completed", {"ok": 2}, source="callback", token=d2.token)
    assert store.get_unit(unit_id).continuation_done == 1
    rel = store.continue_release(d2.opc)
    assert rel.won
    facts = store.list_facts(unit_id)
    assert [i for k, i in facts if k == "continuation"] == [0, 1, 2]
    assert store.get_unit(unit_id).output == [{"ok": 0}, {"ok": 1}, {"ok": 2}]
    events = [e.kind for e in store.list_run_events(park.run.run_id)]
    assert events.count("reconcile.facts") == 1 and events.count("run.released") == 1


def test_missing_fact_never_repaired_for_unsucceeded_child(store):
    park = park_barrier(store, units=[itemized(n=2, window=2)])
    unit_id = park.unit_ids[0]
    for d in park.dispatches:
        store.admit_terminal(d.opc, "completed", {"ok": 1}, source="callback", token=d.token)
    # provider_done == expected but children not succeeded: settle must not invent facts for them
    conn = RawDb(store)
    conn.execute("UPDATE item_children SET status = 'running', version = version + 1 WHERE unit_id = ?", (unit_id,))
    # a drain materialises only queued/running children that have a terminal; set them failed to prove the rule
    conn.execute("UPDATE item_children SET status = 'failed', error_json = '{}' WHERE unit_id = ? AND item_index = 1",
                 (unit_id,))
    store.continue_release(park.dispatches[0].opc)
    facts = [i for k, i in store.list_facts(unit_id) if k == "continuation"]
    assert facts == [0]
    assert store.get_unit(unit_id).status == "failed"  # fail-fast: the failed child fails the unit


def test_concurrent_child_version_mutation_retries_t21(store):
    """A reconcile claim between `admit_terminal` and `continue_release` bumps the version; the live `continue_release` retries."""
    park = park_barrier(store, units=[itemized(n=2, window=2)])
    unit_id = park.unit_ids[0]
    d0, d1 = park.dispatches
    admit = store.admit_terminal(d0.opc, "completed", {"ok": 0}, source="callback", token=d0.token)
    claimed = store.claim_child(unit_id, 0, older_than_ms=0, lease_ms=10_000, owner="sweeper")
    assert claimed == admit.child_version + 1
    rel = store.continue_release(d0.opc, child_version=admit.child_version)  # stale version
    child = store.list_children(unit_id)[0]
    assert child.status == "succeeded" and child.output == {"ok": 0}
    assert rel.unit_status == "waiting" and store.get_run(park.run.run_id).status == "waiting"
    assert complete(store, d1)[1].won


def test_failed_child_never_overwritten_by_stale_actor_t21(store):
    park = park_barrier(store, units=[itemized(n=2, window=2, policy="collect")])
    unit_id = park.unit_ids[0]
    d0 = park.dispatches[0]
    admit = store.admit_terminal(d0.opc, "completed", {"ok": 0}, source="callback", token=d0.token)
    conn = RawDb(store)
    conn.execute("UPDATE item_children SET status = 'failed', error_json = '{\"message\": \"x\"}', "
                 "version = version + 1 WHERE unit_id = ? AND item_index = 0", (unit_id,))
    store.continue_release(d0.opc, child_version=admit.child_version)
    child = store.list_children(unit_id)[0]
    assert child.status == "failed" and child.output is None  # the terminal outcome stands
    assert store.get_run(park.run.run_id).status == "waiting"  # not parent-fatal


def test_failed_dispatch_validation_unit_fails_without_interactions(store):

    bad = unit_spec(kind="itemized", op_name="pay", items=[1, 2], failed_error={"message": "each is not an array"})
    park = park_barrier(store, units=[bad])
    assert store.list_interactions(park.unit_ids[0]) == []
    assert store.get_unit(park.unit_ids[0]).status == "failed"
    rel = store.try_release(park.run.run_id)
    assert rel.won  # the drain releases at once (barrier → the stage fails on resume)


@pytest.mark.parametrize("n", [200, pytest.param(1000, marks=pytest.mark.slow)])
def test_burst(store, n):
    """N items, window 25, random bursts, 5 % redelivered; peak ≤ 25, 0 in flight, one release."""
    window = 25
    park = park_barrier(store, units=[itemized(n=n, window=window)])
    unit_id = park.unit_ids[0]
    rng = random.Random(7)
    pending = list(park.dispatches)
    done = []
    releases = 0
    while pending:
        rng.shuffle(pending)
        k = rng.randint(1, 10)
        burst, pending = pending[:k], pending[k:]
        for d in burst:
            assert in_flight(store, unit_id) <= window
            admit, rel = complete(store, d, {"i": d.item_index})
            assert admit.outcome == "admitted"
            releases += rel.won
            pending += admit.dispatches
            done.append(d)
            if rng.random() < 0.05:
                dup, _ = complete(store, d, {"i": d.item_index})
                assert dup.outcome == "duplicate"
    assert len(done) == n and releases == 1
    assert len(store.list_interactions(unit_id)) == n
    assert in_flight(store, unit_id) == 0
    assert store.get_unit(unit_id).output == [{"i": i} for i in range(n)]
    assert sum(e.kind.startswith("reconcile.") for e in store.list_run_events(park.run.run_id)) == 0


def test_late_callback_on_last_collect_item_releases_and_reports_claim(store, clock):
    """Under collect: the overdue callback times the item out; if that completes the unit
    the release claim comes back with the 410 answer so the receiver can drive the resume."""
    park = park_barrier(store, units=[itemized(n=2, window=2, policy="collect", budget_ms=1_000)])
    d0, d1 = park.dispatches
    complete(store, d0, {"ok": 0})
    clock.advance(1_001)
    res = store.admit_terminal(d1.opc, "completed", {"ok": 1}, source="callback", token=d1.token)
    assert res.outcome == "expired" and res.claim is not None
    assert store.get_run(park.run.run_id).claim_token == res.claim.claim_token
    assert store.get_unit(park.unit_ids[0]).output[1]["error"]["message"] == "item 1 timed out"
