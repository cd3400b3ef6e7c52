"""Group commit (`run_batch`): several independent procedures in one write transaction, one
COMMIT; the calls run without savepoints until one raises, then the batch runs again with a
savepoint each, so a call that fails is rolled back alone; fault points are marked only after
the common commit; a broken transaction falls back to one transaction per call."""

from __future__ import annotations

import functools

import pytest
from contstore_util import FakeClock, itemized, open_store, park_barrier, statements_sent

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


def _kv_writer(store, key, *, fail: bool = False):
    """A store call writing one kv row, then raising when `fail` (what it wrote must go)."""
    def write(t):
        t.run("INSERT INTO kv (ns, key, value_json, version, updated_ms) VALUES ('t', ?, '1', 1, 0)", (key,))
        if fail:
            raise ValueError(f"{key} refused")
        return key

    return functools.partial(store.backend.transact, write)


def _kv_keys(store) -> list[str]:
    return [r[0] for r in store.backend.read(lambda t: t.all("SELECT key FROM kv WHERE ns = 't' ORDER BY key"))]


def test_a_batch_whose_calls_all_succeed_runs_without_savepoints(store, monkeypatch):
    """A savepoint makes the database keep a copy of every page the call changes: a batch
    takes them only once a call has raised."""
    seen = statements_sent(store, monkeypatch)
    outcomes = store.run_batch([_kv_writer(store, "a"), _kv_writer(store, "b"), _kv_writer(store, "c")])
    assert outcomes == [(True, "a"), (True, "b"), (True, "c")]
    assert not [s for s in seen if "SAVEPOINT" in s]
    assert _kv_keys(store) == ["a", "b", "c"]


def test_a_call_that_raises_sends_the_batch_round_again_with_a_savepoint_per_call(store, monkeypatch):
    seen = statements_sent(store, monkeypatch)
    before = store.commit_count()
    outcomes = store.run_batch([_kv_writer(store, "a"), _kv_writer(store, "b", fail=True), _kv_writer(store, "c")])
    assert outcomes[0] == (True, "a") and outcomes[2] == (True, "c")
    assert not outcomes[1][0] and str(outcomes[1][1]) == "b refused"
    assert store.commit_count() == before + 1  # the first attempt was rolled back, not committed
    assert seen.count("SAVEPOINT txcl_call") == 3 and seen.count("ROLLBACK TO") == 1
    assert _kv_keys(store) == ["a", "c"]  # what the failed call wrote is gone, the rest stands


def test_calls_after_a_caught_failure_never_see_what_it_half_wrote(store):
    """`run_together`: a call raises after writing and `fn` catches it; the next call must not
    find that row — in the attempt without savepoints it is refused at once, and the attempt
    with savepoints has rolled the failed call back before it runs."""
    def fn():
        _kv_writer(store, "a")()
        try:
            _kv_writer(store, "b", fail=True)()
        except ValueError:
            pass
        return store.backend.transact(lambda t: t.one("SELECT count(*) FROM kv WHERE ns = 't' AND key = 'b'")[0])

    assert store.run_together(fn) == 0
    assert _kv_keys(store) == ["a"]


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
