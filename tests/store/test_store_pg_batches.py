"""Group commit on PostgreSQL: independent calls share one transaction, and a batch waits for
a lock only briefly — two nodes' batches lock runs in no agreed order, so a long wait may be
a wait for each other; a wait cut short runs the batch's calls one by one, each of which then
waits as long as it must."""

from __future__ import annotations

import asyncio
import threading
import time

import psycopg
import pytest

from txcl.continuations.lane import StoreLane
from txcl.store import open_store
from txcl.store.backends.postgres import PostgresBackend

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg_backend(new_pg_database):
    url = new_pg_database()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE counters (k TEXT PRIMARY KEY, v BIGINT NOT NULL)")
        conn.execute("INSERT INTO counters VALUES ('a', 0), ('b', 0)")
    made = PostgresBackend(url)
    yield made
    made.close()


def _bump(backend: PostgresBackend, key: str):
    """A store call: one write transaction (a savepoint inside a batch) on row `key`."""
    return lambda: backend.transact(
        lambda t: t.one("UPDATE counters SET v = v + 1 WHERE k = ? RETURNING v", (key,))["v"])


def _values(backend: PostgresBackend) -> dict[str, int]:
    return {r["k"]: r["v"] for r in backend.execute_for_tests("SELECT k, v FROM counters")}


def test_independent_calls_share_one_commit(pg_backend):
    backend = pg_backend
    assert not backend.batching_paused()
    commits = backend.commit_count()
    results = backend.run_batch([_bump(backend, "a"), _bump(backend, "b"), _bump(backend, "a")])
    assert results == [(True, 1), (True, 1), (True, 2)]
    assert backend.commit_count() - commits == 1
    assert _values(backend) == {"a": 2, "b": 1}


def test_a_batch_held_up_by_a_lock_runs_its_calls_one_by_one(pg_backend):
    """Another transaction holds row `a` for longer than a batch waits: the batch gives up
    (its work rolled back), and its calls run on their own, the one on `a` once the lock is
    free — three commits where the batch would have made one."""
    backend = pg_backend
    holder = psycopg.connect(backend.url)
    holder.execute("SELECT v FROM counters WHERE k = 'a' FOR UPDATE")  # a transaction is open
    waited = threading.Event()
    release = threading.Timer(4 * PostgresBackend.BATCH_LOCK_WAIT_MS / 1000, lambda: (waited.set(), holder.commit()))
    release.start()
    try:
        commits = backend.commit_count()
        results = backend.run_batch([_bump(backend, "b"), _bump(backend, "a"), _bump(backend, "b")])
    finally:
        release.join()
        holder.close()
    assert waited.is_set()
    assert results == [(True, 1), (True, 1), (True, 2)]
    assert backend.commit_count() - commits == 3  # the batch broke; each call committed alone
    assert _values(backend) == {"a": 1, "b": 2}  # nothing of the abandoned batch stayed
    assert backend.batching_paused()  # another writer works on these rows: no batches for a while


def test_two_batches_locking_in_opposite_orders_both_complete(pg_backend):
    """Two nodes' batches, one taking `a` then `b`, the other `b` then `a`: whichever waits
    gives up soon, its calls run alone, and every call is applied exactly once."""
    backend = pg_backend
    other = PostgresBackend(backend.url)
    start = threading.Barrier(2)
    outcomes: dict[str, list] = {}

    def hold_then(first_backend: PostgresBackend, first: str, second: str, name: str) -> None:
        attempts: list[int] = []

        def first_call():
            value = first_backend.transact(
                lambda t: t.one("UPDATE counters SET v = v + 1 WHERE k = ? RETURNING v", (first,))["v"])
            attempts.append(value)
            if len(attempts) == 1:  # in the batch: both batches now hold their first row
                start.wait(timeout=10)
            return value
        outcomes[name] = first_backend.run_batch([first_call, _bump(first_backend, second)])

    try:
        threads = [threading.Thread(target=hold_then, args=(backend, "a", "b", "one")),
                   threading.Thread(target=hold_then, args=(other, "b", "a", "two"))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert not any(thread.is_alive() for thread in threads)
    finally:
        other.close()
    assert all(ok for result in outcomes.values() for ok, _ in result), outcomes
    assert _values(backend) == {"a": 2, "b": 2}


def test_batches_naming_their_runs_lock_them_in_one_order_and_never_break(pg_backend):
    """Two nodes' batches whose calls lock two runs in opposite orders: named as the runs
    they lock, each batch locks both at its start, in run id order, so the second simply
    waits for the first (longer than a batch's lock wait) — neither breaks, one commit each,
    and batching goes on."""
    url = pg_backend.url
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY)")
        conn.execute("INSERT INTO runs VALUES ('run_a'), ('run_b')")
    other = PostgresBackend(url)
    holding = threading.Event()
    outcomes: dict[str, list] = {}

    def bump(backend: PostgresBackend, run: str, hold: bool = False):
        def call() -> int:
            def work(t) -> int:
                t.lock_run(run)
                if hold:  # the other batch starts now, and waits well past a batch's lock wait
                    holding.set()
                    time.sleep(6 * PostgresBackend.BATCH_LOCK_WAIT_MS / 1000)
                return t.one("UPDATE counters SET v = v + 1 WHERE k = ? RETURNING v", (run[-1],))["v"]
            return backend.transact(work)
        return call

    def first() -> None:
        outcomes["first"] = pg_backend.run_batch([bump(pg_backend, "run_a", hold=True), bump(pg_backend, "run_b")],
                                                 lock_first=["run_a", "run_b"])

    def second() -> None:
        holding.wait(10)
        outcomes["second"] = other.run_batch([bump(other, "run_b"), bump(other, "run_a")],
                                             lock_first=["run_b", "run_a"])

    commits = pg_backend.commit_count() + other.commit_count()
    try:
        threads = [threading.Thread(target=first), threading.Thread(target=second)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert not any(thread.is_alive() for thread in threads)
        assert pg_backend.commit_count() + other.commit_count() - commits == 2  # one per batch: none broke
        assert not pg_backend.batching_paused() and not other.batching_paused()
    finally:
        other.close()
    assert outcomes == {"first": [(True, 1), (True, 1)], "second": [(True, 2), (True, 2)]}
    assert _values(pg_backend) == {"a": 2, "b": 2}


@pytest.mark.parametrize("paused", [False, True], ids=["batching", "paused"])
def test_the_store_lane_batches_on_postgresql_unless_batches_are_paused(new_pg_database, paused):
    store = open_store(new_pg_database())
    if paused:  # as after a batch broke on a lock another node held
        store.backend._batch_broken_at = time.monotonic()
    lane = StoreLane(store, threads=1)  # one thread, held busy below so the writes queue behind it
    gate = threading.Event()

    async def main() -> int:
        blocker = asyncio.ensure_future(lane.call(gate.wait, 5))
        await asyncio.sleep(0.05)  # the lane is busy: the writes below queue up
        writes = [asyncio.ensure_future(lane.call_batched(store.kv_set, "ns", f"k{k}", k, 0)) for k in range(4)]
        await asyncio.sleep(0.05)
        before = store.commit_count()
        gate.set()
        await asyncio.gather(blocker, *writes)
        return store.commit_count() - before

    try:
        commits = asyncio.run(main())
        lane.close()
        assert [store.kv_get("ns", f"k{k}", 0).value for k in range(4)] == [0, 1, 2, 3]
    finally:
        store.close()
    assert commits == (4 if paused else 1)
