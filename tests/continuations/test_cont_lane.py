"""The store lane: calls in order on one thread of their own, and a write's follow-up read in
the same hand-off once the write is durable (`call_batched_then`)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from txcl.continuations.lane import StoreLane
from txcl.store import open_store


@pytest.fixture
def store(tmp_path):
    s = open_store(tmp_path / "txcl.db")
    yield s
    s.close()


@pytest.mark.parametrize("inline", [False, True], ids=["thread", "inline"])
def test_the_follow_up_read_sees_the_committed_write(store, inline):
    lane = StoreLane(store, inline=inline)
    threads: list[str] = []

    def read(version: int) -> tuple:
        threads.append(threading.current_thread().name)
        entry = store.kv_get("ns", "k", 0)
        return version, entry.value, store.commit_count()

    async def main() -> tuple:
        before = store.commit_count()
        got = await lane.call_batched_then(read, store.kv_set, "ns", "k", {"v": 1}, 0)
        return before, got

    before, (version, value, commits) = asyncio.run(main())
    lane.close()
    assert version == 1 and value == {"v": 1} and commits == before + 1  # read after the commit
    assert threads == ["MainThread" if inline else "txcl-store"]


def test_a_failing_read_hands_back_the_committed_result(store):
    lane = StoreLane(store)

    def read(version: int) -> int:
        raise RuntimeError("the read went wrong")

    assert asyncio.run(lane.call_batched_then(read, store.kv_set, "ns", "k", 1, 0)) == 1
    lane.close()
    assert store.kv_get("ns", "k", 0).value == 1


def test_a_failing_write_is_raised_and_not_read_after(store):
    lane = StoreLane(store)
    reads: list = []

    def write() -> None:
        raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        asyncio.run(lane.call_batched_then(reads.append, write))
    lane.close()
    assert reads == []


def test_calls_queued_together_share_a_commit_and_each_gets_its_own_read(store):
    """Writes queued while the lane is busy run in one transaction; each follow-up read runs
    after that commit, with its own call's result."""
    lane = StoreLane(store)
    gate = threading.Event()

    async def main() -> list:
        blocker = asyncio.ensure_future(lane.call(gate.wait, 5))
        await asyncio.sleep(0.05)  # the lane is busy: the writes below queue up
        writes = [asyncio.ensure_future(lane.call_batched_then(
            lambda version, k=k: (k, version, store.kv_get("ns", f"k{k}", 0).value), store.kv_set, "ns", f"k{k}", k, 0))
            for k in range(3)]
        await asyncio.sleep(0.05)
        before = store.commit_count()
        gate.set()
        await blocker
        got = await asyncio.gather(*writes)
        return [before, store.commit_count(), got]

    before, after, got = asyncio.run(main())
    lane.close()
    assert got == [(0, 1, 0), (1, 1, 1), (2, 1, 2)] and after == before + 1


class _ParallelStore:
    """A store whose writers run in parallel (as PostgreSQL's): calls may overlap."""

    serialises_writers = False

    def batching_paused(self) -> bool:
        return True  # one call per transaction: each call its own job

    def run_batch(self, calls):
        return [(True, call()) for call in calls]


def test_on_a_store_whose_writers_run_in_parallel_calls_overlap_on_several_threads():
    """Three calls that each wait for the other two finish only if they run at once."""
    lane = StoreLane(_ParallelStore())
    assert lane.max_threads == StoreLane.PARALLEL_THREADS >= 3
    barrier = threading.Barrier(3, timeout=10)
    names: list[str] = []

    def call(n: int) -> int:
        barrier.wait()  # raises BrokenBarrierError after 10 s if the calls ran one after another
        names.append(threading.current_thread().name)
        return n * 10

    async def main() -> list:
        return await asyncio.gather(*(lane.call(call, n) for n in range(3)))

    assert asyncio.run(main()) == [0, 10, 20]
    lane.close()
    assert len(names) == 3 and set(names) == {"txcl-store"}


def _meet_on_threads(lane: StoreLane, runs: list[str]) -> dict[str, set[int]]:
    """Each run's first call waits at a barrier until every run's first call is there (they
    must run at once, on as many threads), and goes on only once five more calls per run are
    queued behind it (a run whose calls are all done may go to another thread): the threads
    each run's calls ran on."""
    barrier = threading.Barrier(len(runs), timeout=10)
    queued = threading.Event()
    threads_of: dict[str, set[int]] = {run: set() for run in runs}

    def call(run: str, meet: bool) -> str:
        threads_of[run].add(threading.get_ident())
        if meet:
            barrier.wait()
            assert queued.wait(10)
        return run

    async def main() -> list:
        meeting = [asyncio.ensure_future(lane.call_batched_on((run,), call, run, True)) for run in runs]
        alone = [asyncio.ensure_future(lane.call_batched_on((run,), call, run, False))
                 for run in runs for _ in range(5)]
        await asyncio.sleep(0)  # every call above is submitted by now
        assert lane.trips == len(meeting) + len(alone)
        queued.set()
        return await asyncio.gather(*meeting, *alone)

    got = asyncio.run(main())
    lane.close()
    assert got[:len(runs)] == runs
    return threads_of


def test_runs_whose_ids_would_hash_to_one_thread_spread_by_load():
    """A run without calls in flight goes to the least busy thread, not to a thread its id
    hashes to: three runs whose ids pick one thread still run at once on three (they meet at
    a barrier that needs all three), each keeping to its thread while it has calls there, and
    a run is free to go anywhere once its calls are done."""
    lane = StoreLane(_ParallelStore())
    first = "run_0"
    same = [r for r in (f"run_{n}" for n in range(1, 500)) if lane.slot_of(r) == lane.slot_of(first)]
    threads_of = _meet_on_threads(lane, [first, *same[:2]])
    assert all(len(idents) == 1 for idents in threads_of.values()), threads_of
    assert len(set().union(*threads_of.values())) == 3
    assert lane._homes == {}  # every call done: no run is held to a thread


class _BatchingParallelStore(_ParallelStore):
    """Writers in parallel, and calls queued together share a batch (which records what it
    was asked to lock first)."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, list[str]]] = []

    def batching_paused(self) -> bool:
        return False

    def run_batch(self, calls, *, lock_first=()):
        self.batches.append((len(calls), list(lock_first)))
        return [(True, call()) for call in calls]


def _runs_on_distinct_threads(lane: StoreLane, count: int) -> list[str]:
    """`count` run ids whose calls go to `count` different threads of the lane."""
    picked: dict[int, str] = {}
    n = 0
    while len(picked) < count:
        run_id = f"run_{n}"
        picked.setdefault(lane.slot_of(run_id), run_id)
        n += 1
    return list(picked.values())


def test_calls_on_one_run_keep_to_its_thread_and_other_runs_overlap():
    """Calls that name their run go to that run's thread: two calls on one run never wait for
    each other's row locks on two threads. Calls on runs of different threads run at once
    (they meet at a barrier that needs all three)."""
    lane = StoreLane(_ParallelStore())
    threads_of = _meet_on_threads(lane, _runs_on_distinct_threads(lane, 3))
    assert all(len(idents) == 1 for idents in threads_of.values()), threads_of
    assert len(set().union(*threads_of.values())) == 3


def test_a_batch_locks_the_runs_its_calls_name_first_in_run_id_order():
    store = _BatchingParallelStore()
    lane = StoreLane(store, threads=1)
    gate = threading.Event()

    async def main() -> None:
        held = asyncio.ensure_future(lane.call(gate.wait, 5))
        await asyncio.sleep(0.05)  # the lane's thread is busy: the calls below queue up
        calls = [lane.call_batched_on(("run_c",), int, "1"), lane.call_batched(int, "2"),
                 lane.call_batched_on(("run_a", "run_b"), int, "3")]
        queued = [asyncio.ensure_future(c) for c in calls]
        await asyncio.sleep(0.05)
        gate.set()
        assert await asyncio.gather(held, *queued) == [True, 1, 2, 3]

    asyncio.run(main())
    lane.close()
    assert store.batches == [(3, ["run_a", "run_b", "run_c"])]


def test_on_sqlite_the_calls_keep_to_one_thread(store):
    lane = StoreLane(store)
    assert lane.max_threads == 1
    seen: list[int] = []

    def call(n: int) -> int:
        seen.append(threading.get_ident())
        return n

    async def main() -> list:
        return await asyncio.gather(*(lane.call(call, n) for n in range(20)))

    assert asyncio.run(main()) == list(range(20))
    lane.close()
    assert len(set(seen)) == 1


def test_the_store_threads_setting_chooses_the_threads_where_writers_run_in_parallel(store):
    from txcl.runtime.config import ConfigError, Settings

    assert StoreLane(_ParallelStore(), threads=2).max_threads == 2
    assert StoreLane(_ParallelStore()).max_threads == StoreLane.PARALLEL_THREADS  # 0: automatic
    assert StoreLane(store, threads=4).max_threads == 1  # SQLite: its writers take turns
    with pytest.raises(ConfigError, match="store-threads"):
        Settings(store_threads=9).validate()
