"""How many durable commits a suspend → callback → resume cycle takes, on each backend.

The cycle commits three times: the park, the callback's admission together with the worker's
held-back ack and the admission's continuation (materialise, settle, release), and the
resumed segment's finish. A resumed frame entered while the claim is fresh writes no
heartbeat. The admission never depends on its continuation: when continuing fails, the
admission alone commits. With ``--ack-write-delay 0`` the ack commits on its own (four).
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from cont_support import write_tree
from txcl.continuations.worker_client import AckResult
from txcl.runtime.interpreter import Completed, Suspended

FILES = {
    "OPS/shop/100/enrich.txcl": 'WITH mode = "async", timeout = "10m", into = "enriched"\nEXEC "http://127.0.0.1:9/jobs"',
    "OPS/shop/200/total.txcl": "EMIT .total = &add(.order.amount, .enriched.bonus)",
    "OPS/shop/300/done.txcl": "EMIT .done = true",
}


@pytest.fixture(params=[1_000, 0], ids=["acks-held", "acks-at-once"])  # held longer than a slow cycle
def ack_delay(request):
    return request.param


@pytest.fixture
def cycle(tmp_path, db_url, monkeypatch, ack_delay):
    """(service, interpreter, sent dispatches): the worker's 202 is answered in-process."""
    import txcl.continuations.service as service_mod
    from txcl.continuations.service import ContinuationService, open_run_store
    from txcl.ops.tree import load_ops
    from txcl.runtime.config import Settings

    sent: list = []

    async def post(client, d, **kwargs):
        sent.append(d)
        return AckResult(d.opc, True, {"job_id": "j"})

    monkeypatch.setattr(service_mod, "post_dispatch", post)
    ws = write_tree(tmp_path / "ws", FILES)
    store = open_run_store(db_url, node_id="commits")
    # one store thread: the tests hold it busy so that calls queue behind it and share a commit
    service = ContinuationService(store, Settings(trace_mode="off", ack_write_delay=ack_delay, store_threads=1),
                                  workspace=ws)
    interp = service.interpreter(load_ops(ws))
    yield service, interp, sent
    asyncio.run(service.aclose())
    interp.close()
    store.close()


def test_a_cycle_commits_three_times(cycle, ack_delay):
    service, interp, sent = cycle
    store = service.store

    async def one(i: int) -> tuple[int, int, int]:
        start = store.commit_count()
        outcome = await interp.run({"order": {"id": i, "amount": 10}}, "shop")
        assert isinstance(outcome, Suspended)
        parked = store.commit_count()
        d = sent.pop()
        assert store.get_interaction(d.opc).status == ("dispatching" if ack_delay else "dispatched")
        admit, release = await service.complete(d.opc, "completed", {"bonus": 5}, source="callback", token=d.token)
        assert admit.outcome == "admitted" and release is not None and release.won
        admitted = store.commit_count()
        assert store.get_interaction(d.opc).ack == {"job_id": "j"}  # the ack was written all the same
        final = await service.drive_resume(release.claim)
        assert isinstance(final, Completed) and final.envelope["total"] == 15 and final.envelope["done"] is True
        return parked - start, admitted - parked, store.commit_count() - admitted

    async def main() -> list:
        return [await one(i) for i in range(3)]

    # the park (+ the ack when written at once); admission, ack and release together; the
    # resume's finish (its two frames write no heartbeat while the claim is fresh)
    parks = 1 if ack_delay else 2
    assert asyncio.run(main())[1:] == [(parks, 1, 1), (parks, 1, 1)]


def test_an_admission_commits_even_when_its_continuation_fails(cycle, monkeypatch):
    """Continuing raises inside the shared transaction: only what it wrote is rolled back
    (the transaction runs again with a savepoint per call, and continuing fails again), the
    admission is durable, and a repeat of the callback continues the run."""
    service, interp, sent = cycle
    store = service.store
    broken = {"yes": True}
    from txcl.store.procedures.continuations import settle

    real = settle.child_outcome

    def failing(*args, **kwargs):
        if broken["yes"]:
            raise RuntimeError("materialise went wrong")
        return real(*args, **kwargs)

    monkeypatch.setattr(settle, "child_outcome", failing)

    async def main() -> None:
        outcome = await interp.run({"order": {"id": 1, "amount": 10}}, "shop")
        assert isinstance(outcome, Suspended)
        d = sent.pop()
        with pytest.raises(RuntimeError, match="materialise went wrong"):
            await service.complete(d.opc, "completed", {"bonus": 5}, source="callback", token=d.token)
        terminal = store.get_terminal(d.opc)
        assert terminal is not None and terminal.payload == {"bonus": 5}  # the admission committed
        assert store.get_run(outcome.run_id).status == "waiting"  # nothing was released
        broken["yes"] = False
        admit, release = await service.complete(d.opc, "completed", {"bonus": 5}, source="callback", token=d.token)
        assert admit.outcome == "duplicate" and release is not None and release.won
        final = await service.drive_resume(release.claim)
        assert isinstance(final, Completed) and final.envelope["total"] == 15

    asyncio.run(main())


def test_a_resumed_frame_beats_when_the_claim_was_last_seen_long_ago(cycle, monkeypatch):
    """The frame heartbeat is skipped only while the claim is fresh; a claim last seen a
    stale period ago is beaten (and checked) at the next frame."""
    service, interp, sent = cycle
    store = service.store
    beats: list[str] = []
    real = store.heartbeat

    def counting(run_id, token):
        beats.append(run_id)
        return real(run_id, token)

    monkeypatch.setattr(store, "heartbeat", counting)

    async def cycle_once(old_claim: bool) -> None:
        assert isinstance(await interp.run({"order": {"id": 1, "amount": 10}}, "shop"), Suspended)
        d = sent.pop()
        _, release = await service.complete(d.opc, "completed", {"bonus": 5}, source="callback", token=d.token)
        claim = release.claim
        if old_claim:  # as if the claim's heartbeat were written long before the resume starts
            claim = dataclasses.replace(claim, heartbeat_ms=claim.heartbeat_ms - 10 * 60_000)
        final = await service.drive_resume(claim)
        assert isinstance(final, Completed) and final.envelope["done"] is True

    asyncio.run(cycle_once(False))
    assert beats == []
    asyncio.run(cycle_once(True))
    assert len(beats) == 1  # the first resumed frame beats; the next is fresh again


async def _won_release(service, interp, sent) -> tuple:
    """A request parks; its worker's callback wins the release: (the suspended outcome, the claim)."""
    outcome = await interp.run({"order": {"id": 1, "amount": 10}}, "shop")
    assert isinstance(outcome, Suspended)
    d = sent.pop()
    _, release = await service.complete(d.opc, "completed", {"bonus": 5}, source="callback", token=d.token)
    assert release is not None and release.won
    return outcome, release.claim


def test_a_won_release_comes_back_with_its_resume_read(cycle):
    """The release builds the resume's bundle from the rows it read under the run's lock —
    exactly what reading it after the commit gives —, so the resume starts from it without
    another read. A claim without one (another process's release, the sweeper's) or with
    another claim's bundle is read at the resume, as before."""
    service, interp, sent = cycle
    lane_calls: list[str] = []

    def counted(real):
        async def counting(fn, *args, **kwargs):
            lane_calls.append(getattr(fn, "__name__", repr(fn)))
            return await real(fn, *args, **kwargs)
        return counting

    def counted_on(real):
        async def counting(run_id, fn, *args, **kwargs):
            lane_calls.append(getattr(fn, "__name__", repr(fn)))
            return await real(run_id, fn, *args, **kwargs)
        return counting

    service.call, service.call_batched = counted(service.call), counted(service.call_batched)
    service.call_batched_on = counted_on(service.call_batched_on)

    async def main() -> None:
        outcome, claim = await _won_release(service, interp, sent)
        bundle = claim.bundle
        assert bundle is not None and bundle.claim.claim_token == claim.claim_token
        assert bundle.run.run_id == outcome.run_id and bundle.suspend.status == "resuming"
        assert [m.status for m in bundle.members] == ["completed"]
        read = service.store.claim_resume(claim.run_id, claim.claim_token)  # as committed
        assert (bundle.run, bundle.suspend, bundle.claim) == (read.run, read.suspend, read.claim)
        assert [dataclasses.asdict(m) for m in bundle.members] == [dataclasses.asdict(m) for m in read.members]
        assert bundle.run.status == "resuming" and bundle.run.version == read.run.version
        lane_calls.clear()
        final = await service.drive_resume(claim)
        assert isinstance(final, Completed) and final.envelope["total"] == 15
        assert "claim_resume" not in lane_calls and "finish_segment" in lane_calls

        for stale in (None, dataclasses.replace(bundle, claim=dataclasses.replace(bundle.claim, claim_token="clm_x"))):
            _, claim = await _won_release(service, interp, sent)
            lane_calls.clear()
            final = await service.drive_resume(dataclasses.replace(claim, bundle=stale))
            assert isinstance(final, Completed) and final.envelope["total"] == 15
            assert "claim_resume" in lane_calls

    asyncio.run(main())


def test_a_cycle_waits_for_the_database_only_where_it_needs_an_answer(cycle, ack_delay):
    """Statements whose answer is not needed are sent without waiting (PostgreSQL pipelines
    them into the next round trip): a batch's SAVEPOINT and RELEASE, the run's
    notification. A run created by the park comes back from its INSERT whole (no second read
    to lock it) and parks at visit 1 without asking."""
    service, interp, sent = cycle
    backend = service.store.backend
    waited: list[str] = []
    real = backend._execute

    def recording(conn, sql, params):
        text = sql.decode() if isinstance(sql, bytes) else sql  # PostgreSQL's statements arrive as bytes
        waited.append(" ".join(text.split()))
        return real(conn, sql, params)

    backend._execute = recording
    trips: list[int] = []  # PostgreSQL: statements per round trip to the server, in the second cycle
    counting = []
    if backend.kind == "postgresql":
        from txcl.store.backends import pq_exec

        real_execute, real_pipelined = pq_exec.execute, pq_exec._pipelined
        pq_exec.execute = lambda *args: (counting and trips.append(1), real_execute(*args))[1]
        pq_exec._pipelined = lambda pgconn, statements, *rest, **kw: (
            counting and trips.append(len(statements)), real_pipelined(pgconn, statements, *rest, **kw))[1]

    async def main() -> None:
        for _ in range(2):  # the first stores the rules' snapshot; the second is every later one
            _, claim = await _won_release(service, interp, sent)
            final = await service.drive_resume(claim)
            assert isinstance(final, Completed) and final.envelope["total"] == 15
            await asyncio.sleep(0)
            counting.append(True)

    try:
        asyncio.run(main())
    finally:
        if backend.kind == "postgresql":
            pq_exec.execute, pq_exec._pipelined = real_execute, real_pipelined
    assert not [s for s in waited if "MAX(visit)" in s]
    inserted = next(i for i, s in enumerate(waited) if s.startswith("INSERT INTO runs"))
    assert "RETURNING *" in waited[inserted] and not waited[inserted + 1].startswith("SELECT * FROM runs")
    if backend.kind == "postgresql":  # each statement waited for is a round trip to the server
        assert not [s for s in waited if s.startswith(("SAVEPOINT", "RELEASE", "SELECT pg_notify"))]
        assert len(waited) <= 36, waited
        # reads that do not wait for one another go together (a lock and what the procedure
        # reads under it, a release's suspend and its members, the snapshot's check and the
        # run's insert); a row read under the run's lock is written without waiting for the
        # answer. The park: 3 round trips (+2 for an ack written at once); the callback: 5
        # (its admission, the continuation and the release, whose resume needs no read); the
        # finish: 3.
        assert len(trips) <= (11 if ack_delay else 13) and sum(trips) > 2 * len(trips), trips


def test_cycles_go_on_after_another_nodes_migration_widened_the_tables(cycle, db_url):
    """A rolling upgrade: while this node works, another adds columns to the tables its
    procedures read whole (on PostgreSQL this node's prepared statements for them are then
    refused once, and prepared again). Every cycle after it completes, with at most a retry
    per pooled connection's first use."""
    service, interp, sent = cycle
    store = service.store

    async def one(i: int) -> None:
        outcome = await interp.run({"order": {"id": i, "amount": 10}}, "shop")
        assert isinstance(outcome, Suspended)
        d = sent.pop()
        admit, release = await service.complete(d.opc, "completed", {"bonus": i}, source="callback", token=d.token)
        assert admit.outcome == "admitted" and release is not None and release.won
        final = await service.drive_resume(release.claim)
        assert isinstance(final, Completed) and final.envelope["total"] == 10 + i

    asyncio.run(one(1))  # every statement of a cycle prepared
    statements = [f"ALTER TABLE {table} ADD COLUMN added_later TEXT"
                  for table in ("runs", "interactions", "await_units", "terminals")]
    if db_url.startswith("postgresql"):
        import psycopg

        with psycopg.connect(db_url, autocommit=True) as other_node:
            for sql in statements:
                other_node.execute(sql)
    else:
        import sqlite3

        other_node = sqlite3.connect(db_url, isolation_level=None)
        for sql in statements:
            other_node.execute(sql)
        other_node.close()
    retries = store.backend.retry_count()
    for i in range(2, 5):
        asyncio.run(one(i))
    assert store.backend.retry_count() - retries <= 10  # the pool's size: one per connection at most


def test_parks_and_finishes_queued_together_share_one_commit(cycle, ack_delay):
    """Runs that park (or finish) while the store's thread is busy share its next commit: each
    park and each finish is one write transaction, so the lane runs those queued together as
    savepoints of one transaction. The store's thread is held busy here until all sixteen
    calls are queued, so the batch is the same on every run of the test."""
    import threading

    service, interp, sent = cycle
    store, lane = service.store, service.lane
    n = 16

    async def with_lane_held(make: list) -> list:
        """Start the coroutines while the lane's thread waits; let it go once `n` calls queue."""
        taken, gate = threading.Event(), threading.Event()

        def hold() -> None:
            taken.set()
            gate.wait(10)

        held = lane.submit(hold, (), {}, False)
        while not taken.is_set():
            await asyncio.sleep(0.001)
        tasks = [asyncio.ensure_future(c) for c in make]
        for _ in range(5000):
            if lane.queued() >= n or all(t.done() for t in tasks):
                break
            await asyncio.sleep(0.002)
        queued = lane.queued()
        gate.set()
        await held
        return [queued, *await asyncio.gather(*tasks)]

    async def main() -> None:
        start = store.commit_count()
        queued, *outcomes = await with_lane_held([interp.run({"order": {"id": i, "amount": 10}}, "shop")
                                                  for i in range(n)])
        assert queued == n and all(isinstance(o, Suspended) for o in outcomes), outcomes
        parked = store.commit_count()
        # the parks: one commit; each drain check after the dispatch only reads; acks sent
        # at once are marked in commits of their own (shared when they queue together too)
        assert parked - start == 1 if ack_delay else 2 <= parked - start <= 1 + n, (parked - start, store.backend.batching_paused())
        claims = []
        for d in list(sent):
            _, release = await service.complete(d.opc, "completed", {"bonus": 5}, source="callback", token=d.token)
            assert release is not None and release.won
            claims.append(release.claim)
        sent.clear()
        admitted = store.commit_count()
        queued, *finals = await with_lane_held([service.drive_resume(c) for c in claims])
        assert queued == n
        assert all(isinstance(f, Completed) and f.envelope["total"] == 15 for f in finals), finals
        assert store.commit_count() - admitted == 1  # sixteen finishes, one commit
        assert {store.get_run(o.run_id).status for o in outcomes} == {"completed"}

    asyncio.run(main())


def test_a_cycle_hands_work_to_the_store_thread_three_times(cycle, ack_delay):
    """The park, the callback's admission (with the resume's read), the finish — and the
    worker's ack when it is written at once. A member whose call is out settles when that
    call's outcome is admitted, so no drain check follows the dispatch."""
    service, interp, sent = cycle
    lane = service.lane
    read_units: list[str] = []
    real_get_unit = service.store.get_unit

    def get_unit(unit_id):
        read_units.append(unit_id)
        return real_get_unit(unit_id)

    service.store.get_unit = get_unit

    async def main() -> list[int]:
        trips = []
        for i in range(3):
            before = lane.trips
            outcome, claim = await _won_release(service, interp, sent)
            final = await service.drive_resume(claim)
            assert isinstance(final, Completed) and final.envelope["total"] == 15
            trips.append(lane.trips - before)
        return trips

    assert asyncio.run(main()) == [3 if ack_delay else 4] * 3
    assert read_units == []
