"""Group commit (`run_batch`): several independent procedures in one write transaction, a
savepoint each, one COMMIT; a call that fails is rolled back alone; fault points are marked
only after the common commit; a broken transaction falls back to one transaction per call."""

from __future__ import annotations

import functools

import pytest
from contstore_util import FakeClock, itemized, open_store, park_barrier

from txcl.store.errors import RunLost
from txcl.store.records import Fence
from txcl.testing import faults


@pytest.fixture
def store(db_url):
    s = open_store(db_url, FakeClock())
    yield s
    s.close()


def _admit(store, d, output):
    return functools.partial(store.admit_terminal, d.opc, "completed", output, source="callback", token=d.token)


def test_batch_admits_share_one_commit_and_a_failing_call_is_rolled_back_alone(store):
    park = park_barrier(store, units=[itemized(n=6, window=3)])
    a, b, _ = park.dispatches
    before = store.commit_count()
    outcomes = store.run_batch([
        _admit(store, a, {"a": 1}),
        functools.partial(store.finish_segment, park.run.run_id, Fence("not-the-owner"), status="completed"),
        _admit(store, b, {"b": 2}),
    ])
    assert store.commit_count() == before + 1
    (ok_a, res_a), (ok_bad, err), (ok_b, res_b) = outcomes
    assert ok_a and ok_b and res_a.outcome == res_b.outcome == "admitted"
    assert not ok_bad and isinstance(err, RunLost)
    assert store.get_terminal(a.opc).payload == {"a": 1} and store.get_terminal(b.opc).payload == {"b": 2}
    assert store.get_run(park.run.run_id).status == "waiting"  # the failed finish left nothing behind
    # each admission promoted its own next item, in order, within the one transaction
    assert [d.item_index for d in res_a.dispatches] == [3] and [d.item_index for d in res_b.dispatches] == [4]
    statuses = {i.item_index: i.status for i in store.list_interactions(park.unit_ids[0])}
    assert statuses[3] == statuses[4] == "dispatching" and statuses[5] == "queued"


def test_batch_continue_after_admit_releases_once(store):
    park = park_barrier(store, units=[itemized(n=3, window=3)])
    admits = store.run_batch([_admit(store, d, {"i": d.item_index}) for d in park.dispatches])
    results = store.run_batch([
        functools.partial(store.continue_release, r.opc, child_version=r.child_version) for _, r in admits])
    wins = [r.won for ok, r in results if ok]
    assert len(wins) == 3 and wins.count(True) == 1 and wins[-1]
    assert store.get_unit(park.unit_ids[0]).output == [{"i": 0}, {"i": 1}, {"i": 2}]


def test_fault_points_are_marked_after_the_common_commit(store, monkeypatch):
    park = park_barrier(store, units=[itemized(n=4, window=3)])
    a, b, c = park.dispatches
    monkeypatch.setenv("TXCL_TESTING", "1")
    monkeypatch.setenv("TXCL_FAULT", "admit:2:raise")
    faults.reset()
    try:
        outcomes = store.run_batch([_admit(store, d, {"i": d.item_index}) for d in (a, b, c)])
    finally:
        monkeypatch.delenv("TXCL_FAULT")
        faults.reset()
    assert [ok for ok, _ in outcomes] == [True, False, True]
    assert isinstance(outcomes[1][1], faults.FaultInjected)
    assert all(store.get_terminal(d.opc) is not None for d in (a, b, c))  # the commit happened first


def test_a_broken_batch_transaction_is_redone_call_by_call(store):
    park = park_barrier(store, units=[itemized(n=4, window=3)])
    a, b, _ = park.dispatches

    def abandon(t):
        # what a database does on e.g. a full disk: the whole transaction is gone
        t.backend.execute(t.conn, "ROLLBACK")
        raise RuntimeError("database or disk is full")

    def abandon_transaction():
        return store.backend.transact(abandon)

    before = store.commit_count()
    outcomes = store.run_batch([_admit(store, a, {"a": 1}), abandon_transaction, _admit(store, b, {"b": 2})])
    assert [ok for ok, _ in outcomes] == [True, False, True]
    assert store.commit_count() == before + 2  # the two admissions, each in its own transaction
    assert store.get_terminal(a.opc).payload == {"a": 1} and store.get_terminal(b.opc).payload == {"b": 2}
