"""The sweeper pass over the store: expiry, takeover, reconciliation, purge, idempotence."""

from __future__ import annotations

import pytest
from testtools import RawDb

from contstore_util import complete, itemized, park_barrier, run_spec, unary, unit_spec

from txcl.continuations.sweeper import SweepConfig, sweep
from txcl.store.records import Fence

CFG = SweepConfig(retention_ms=100_000, stale_after_ms=5_000, max_attempts=3, reconcile_after_ms=2_000,
                  lease_ms=1_000, owner="sweeper-node")


def test_worker_never_calls_back_barrier_expires_t10(store, clock):
    park = park_barrier(store, units=[unary("a", budget_ms=10_000)])
    assert park.run.expires_ms == clock.now + 10_000
    assert not sweep(store, CFG).expired
    clock.advance(10_001)
    report = sweep(store, CFG)
    run = store.get_run(park.run.run_id)
    assert run.status == "expired" and report.timed_out == [park.dispatches[0].opc]
    assert store.get_interaction(park.dispatches[0].opc).status == "timed_out"


def test_deferred_never_joined_run_expires_with_slack_djf1(store, clock):
    """Budget + slack is the unit budget; the active run expires; late callback → expired."""
    budget, slack = 20_000, 60_000
    disp = store.dispatch_deferred(run_spec(), Fence("rid-1"), [unary("x", join_at=200, budget_ms=budget + slack)])
    assert disp.run.expires_ms == clock.now + budget + slack
    clock.advance(budget + slack + 1)
    report = sweep(store, CFG)
    # the unit times out (the run is active, not parked on it: recorded only), then the run expires
    assert report.timed_out == [disp.dispatches[0].opc] and report.expired == [disp.run.run_id]
    assert store.get_unit(disp.unit_ids[0]).status == "timed_out"
    assert store.get_run(disp.run.run_id).status == "expired"
    d = disp.dispatches[0]
    assert store.admit_terminal(d.opc, "completed", {}, source="callback", token=d.token).outcome == "expired"


def test_sweeper_is_idempotent(store, clock):
    park = park_barrier(store, units=[unary("a", budget_ms=1_000)])
    park2 = park_barrier(store, "rid-2", units=[itemized(n=4, window=2, budget_ms=50_000)])
    complete(store, park2.dispatches[0])
    clock.advance(3_000)
    first = sweep(store, CFG)
    assert first.changed
    second = sweep(store, CFG)
    assert not second.changed, second
    assert store.get_run(park.run.run_id).status == "expired"


def test_retention_purge(store, clock):
    park = park_barrier(store, units=[unary("a", budget_ms=1_000)])
    rel = complete(store, park.dispatches[0])[1]
    store.finish_segment(park.run.run_id, Fence(rel.claim.segment_id, rel.claim.claim_token), status="completed")
    clock.advance(90_000)
    assert not sweep(store, CFG).purged_runs
    clock.advance(10_001)  # the retention (100 s) counts from the finish
    report = sweep(store, CFG)
    assert report.purged_runs == [park.run.run_id] and report.purged_snapshots == 1
    assert store.get_run_by_rcid(park.run.rcid) is None  # the poll now answers 404
    assert store.check_callback(park.dispatches[0].opc, park.dispatches[0].token).outcome == "unknown"
    assert not sweep(store, CFG).changed


def test_stale_claim_takeover_with_attempt_limit(store, clock):
    park = park_barrier(store)
    complete(store, park.dispatches[0])
    driven = []
    clock.advance(5_001)
    r1 = sweep(store, CFG, drive_resume=driven.append)
    assert [c.attempt for c in r1.taken_over] == [2] and driven == r1.taken_over
    assert driven[0].owner == "sweeper-node"
    clock.advance(5_001)
    assert [c.attempt for c in sweep(store, CFG).taken_over] == [3]
    clock.advance(5_001)
    r3 = sweep(store, CFG)
    assert r3.stale_failed == [park.run.run_id]
    assert store.get_run(park.run.run_id).fail_reason == "resumer-stale"


def test_heartbeat_keeps_claim_fresh(store, clock):
    park = park_barrier(store)
    rel = complete(store, park.dispatches[0])[1]
    for _ in range(5):
        clock.advance(4_000)
        store.heartbeat(park.run.run_id, rel.claim.claim_token)
        assert not sweep(store, CFG).taken_over


@pytest.mark.no_state_guard
def test_reconcile_missing_fact_from_succeeded_child_au9(store, clock):
    """A child succeeded but its continuation fact is missing; the sweeper repairs and releases."""
    park = park_barrier(store, units=[itemized(n=2, window=2)])
    unit_id = park.unit_ids[0]
    for d in park.dispatches:
        complete(store, d)
    store.get_run(park.run.run_id)
    # simulate a store that wrote child and fact separately and crashed in between, before the release
    conn = RawDb(store)
    conn.execute("UPDATE runs SET status = 'waiting', claim_token = NULL WHERE run_id = ?", (park.run.run_id,))
    conn.execute("UPDATE suspends SET status = 'open' WHERE run_id = ?", (park.run.run_id,))
    conn.execute("DELETE FROM resume_claims WHERE run_id = ?", (park.run.run_id,))
    conn.execute("UPDATE await_units SET status = 'waiting', output_json = NULL, continuation_done = 1 "
                 "WHERE unit_id = ?", (unit_id,))
    conn.execute("DELETE FROM continuation_facts WHERE unit_id = ? AND kind = 'continuation' AND item_index = 1",
                 (unit_id,))
    report = sweep(store, CFG)
    assert len(report.released) == 1 and unit_id in report.settled
    assert store.get_unit(unit_id).output == [{"ok": 0}, {"ok": 1}]
    kinds = [e.kind for e in store.list_run_events(park.run.run_id)]
    assert "reconcile.facts" in kinds and "reconcile.release" in kinds
    assert not sweep(store, CFG).changed


def test_reconcile_admitted_but_unmaterialised_child(store, clock):
    """A completion admitted, `continue_release` never ran (process died) — the sweeper claims, materialises, releases."""
    park = park_barrier(store)
    d = park.dispatches[0]
    store.admit_terminal(d.opc, "completed", {"late": True}, source="callback", token=d.token)
    assert not sweep(store, CFG).children_repaired  # younger than --reconcile-after
    clock.advance(2_001)
    report = sweep(store, CFG)
    assert report.children_repaired == [(park.unit_ids[0], 0)] and len(report.released) == 1
    assert store.get_unit(park.unit_ids[0]).output == {"late": True}
    assert store.get_run(park.run.run_id).status == "resuming"
    assert "reconcile.child" in [e.kind for e in store.list_run_events(park.run.run_id)]


def test_reconcile_resends_unacked_dispatch_with_same_opc(store, clock):
    """A dispatching interaction older than --reconcile-after is sent again (attempts+1); old token valid."""
    park = park_barrier(store)
    d = park.dispatches[0]
    clock.advance(2_001)
    sent = []
    report = sweep(store, CFG, send=sent.extend)
    assert [r.opc for r in report.resent] == [d.opc] and sent[0].attempts == 2
    assert sent[0].token != d.token
    assert store.check_callback(d.opc, d.token).outcome == "ok"
    assert store.check_callback(d.opc, sent[0].token).outcome == "ok"
    store.mark_ack([(d.opc, {"job_id": "j"})])
    clock.advance(2_001)
    assert not sweep(store, CFG).resent  # acked: no more resends


def test_reconcile_promotes_queued_items_when_promoter_died(store, clock):
    park = park_barrier(store, units=[itemized(n=5, window=2)])
    unit_id = park.unit_ids[0]
    # the window lost its slots without promotion (a crash after admit with the promote undone)
    conn = RawDb(store)
    conn.execute("UPDATE interactions SET status = 'cancelled' WHERE unit_id = ? AND item_index = 0", (unit_id,))
    sent = []
    report = sweep(store, CFG, send=sent.extend)
    assert [d.item_index for d in report.promoted] == [2]
    assert [d.item_index for d in sent] == [2]
    assert "reconcile.promote" in [e.kind for e in store.list_run_events(park.run.run_id)]


def test_unrecorded_sync_member_is_reported_for_rerun(store, clock):
    park = park_barrier(store, units=[unary("a"), unit_spec(kind="sync", op_name="s", items=[{"in": 1}],
                                                           budget_ms=60_000)])
    clock.advance(2_001)
    rerun = []
    report = sweep(store, CFG, rerun_sync=rerun.append)
    sync_opc = [d.opc for d in park.dispatches if d.kind == "sync"][0]
    assert report.sync_to_rerun == [sync_opc] == rerun


def test_healthy_itemized_run_has_no_reconcile_events_t32(store, clock):
    park = park_barrier(store, units=[itemized(n=30, window=5)])
    pending = list(park.dispatches)
    while pending:
        d = pending.pop(0)
        store.mark_ack([(d.opc, {})])
        admit, _ = complete(store, d)
        pending += admit.dispatches
        assert not sweep(store, CFG).changed
    assert store.get_run(park.run.run_id).status == "resuming"
    assert not [e for e in store.list_run_events(park.run.run_id) if e.kind.startswith("reconcile.")]


def test_extra_purges_hook_runs(store):
    assert sweep(store, CFG, extra_purges=[lambda: 3]).extra_purged == 3


def test_local_and_sync_dispatches_are_never_resent(store, clock):
    park = store.park_suspend(run_spec(), Fence("rid-1"), stage="shop/100", kind="promotion", envelope={},
                              budgets={}, units=[unit_spec(kind="local", op_name="slow", items=[{}],
                                                          deadline_ms=clock.now + 60_000)])
    assert park.dispatches[0].token is None
    clock.advance(5_000)
    assert not sweep(store, CFG).resent
    # the local task finishes: admitted without a token, released
    store.admit_terminal(park.dispatches[0].opc, "completed", {"r": 1}, source="local")
    assert store.continue_release(park.dispatches[0].opc).won


@pytest.mark.no_state_guard
def test_parked_run_nobody_released_is_released_by_sweeper(store, clock):
    park = park_barrier(store)
    d = park.dispatches[0]
    admit = store.admit_terminal(d.opc, "completed", {"x": 1}, source="callback", token=d.token)
    store.continue_release(d.opc, child_version=admit.child_version)
    # undo only the release (a crash test's view of a lost release)
    conn = RawDb(store)
    conn.execute("UPDATE runs SET status = 'waiting', claim_token = NULL WHERE run_id = ?", (park.run.run_id,))
    conn.execute("UPDATE suspends SET status = 'open' WHERE run_id = ?", (park.run.run_id,))
    conn.execute("DELETE FROM resume_claims WHERE run_id = ?", (park.run.run_id,))
    conn.execute("DELETE FROM run_events WHERE run_id = ? AND kind = 'run.released'", (park.run.run_id,))
    assert sweep(store, CFG).released == []  # a fresh park belongs to its request's drain
    clock.advance(CFG.reconcile_after_ms)
    report = sweep(store, CFG)
    assert len(report.released) == 1
    assert "reconcile.release" in [e.kind for e in store.list_run_events(park.run.run_id)]


def test_collect_timeout_release_is_handed_to_drive_resume(store, clock):
    park = park_barrier(store, units=[itemized(n=2, window=2, policy="collect", budget_ms=1_000)])
    complete(store, park.dispatches[0])
    clock.advance(1_001)
    driven = []
    report = sweep(store, CFG, drive_resume=driven.append)
    assert report.timed_out == [park.dispatches[1].opc]
    assert [c.run_id for c in driven] == [park.run.run_id]
    assert store.get_run(park.run.run_id).status == "resuming"


def test_run_whose_outcomes_were_all_admitted_in_time_is_released_not_expired(store, clock):
    """`expire_run` drains first: a child left unmaterialised by a crash is not the worker's lateness."""
    park = park_barrier(store, units=[itemized(n=2, window=2, budget_ms=1_000)])
    for d in park.dispatches:
        store.admit_terminal(d.opc, "completed", {"i": d.item_index}, source="callback", token=d.token)
    store.continue_release(park.dispatches[0].opc)  # item 0 fully continued; item 1's `continue_release` "crashed"
    clock.advance(1_001)  # past the run's expiry, before --reconcile-after
    driven = []
    report = sweep(store, CFG, drive_resume=driven.append)
    assert report.expired == [] and [c.run_id for c in driven] == [park.run.run_id]
    assert store.get_unit(park.unit_ids[0]).output == [{"i": 0}, {"i": 1}]


def test_a_pass_purges_in_batches_until_nothing_is_left(store, clock):
    for i in range(7):
        park = park_barrier(store, f"rid-b{i}")
        rel = complete(store, park.dispatches[0])[1]
        store.finish_segment(park.run.run_id, Fence(rel.claim.segment_id, rel.claim.claim_token), status="completed")
    clock.advance(CFG.retention_ms + 1)
    small = SweepConfig(retention_ms=CFG.retention_ms, batch=3, purge_rounds=2)
    assert len(sweep(store, small).purged_runs) == 6  # two batches of three this pass
    assert len(sweep(store, small).purged_runs) == 1
    assert store.list_runs() == []
