"""The seed-000 edge-case rows that need a hand inside the store, in-process with the real
engine, a real SQLite file and the test worker:.
(The cases needing a server run against `txcl serve` in test_cont_itemized.py.)"""

from __future__ import annotations

from testtools import RawDb

import asyncio
import threading

import pytest
from cont_support import write_tree
from itemworker import ItemWorker


@pytest.fixture
def flow(tmp_path, fresh_db):
    """(worker, store, service, run()) over `each = [0, 1, 2]`, window 3, into `out`."""
    from txcl.continuations.service import ContinuationService, open_run_store
    from txcl.ops.tree import load_ops
    from txcl.runtime.config import Settings

    with ItemWorker() as worker:
        def build(policy: str = "fail") -> tuple:
            ws = write_tree(tmp_path / f"ws-{policy}", {
                "OPS/pay/50/items.txcl": "EMIT .items = [0, 1, 2]",
                "OPS/pay/100/charge.txcl": f'WITH mode = "async", each = .items, window = 3, into = "out", '
                                           f'on_item_error = "{policy}"\nEXEC "{worker.url()}"',
                "OPS/pay/200/after.txcl": "EMIT .count = &len(.out)",
            })
            store = open_run_store(fresh_db())
            service = ContinuationService(store, Settings().evolve(trace_mode="off"), workspace=ws)
            interp = service.interpreter(load_ops(ws))
            stores.append(store)
            return store, service, interp

        stores: list = []
        yield worker, build
        for s in stores:
            s.close()


def _jobs(worker, n: int = 3) -> list:
    return sorted((worker.wait_job() for _ in range(n)), key=lambda j: j.body["_txc"]["item_index"])


async def _drive(service, release):
    from txcl.runtime.interpreter import Completed

    assert release is not None and release.won, release
    final = await service.drive_resume(release.claim)
    assert isinstance(final, Completed), final
    return final.envelope


def test_reconcile_claim_between_p4_and_p5_retries_at_the_fresh_version(flow):
    """The sweeper's reconcile claim bumps a queued child's version between
    `admit_terminal` and `continue_release`: the live `continue_release` misses its CAS, reloads, retries once and succeeds; the parent is
    not failed by the race."""
    worker, build = flow
    store, service, interp = build()

    async def main():
        outcome = await interp.run({}, "pay")
        jobs = _jobs(worker)
        unit_id = store.get_interaction(jobs[0].opc).unit_id
        admit = store.admit_terminal(jobs[0].opc, "completed", {"v": 0}, source="cli")
        assert admit.outcome == "admitted" and admit.child_version == 0
        claimed = store.claim_child(unit_id, 0, older_than_ms=0, lease_ms=60_000, owner="sweeper-node")
        assert claimed is not None and claimed > admit.child_version  # the child moved under the flow
        release = store.continue_release(jobs[0].opc, child_version=admit.child_version)
        assert release.outcome == "recorded" and release.unit_status == "waiting"
        child = next(c for c in store.list_children(unit_id) if c.item_index == 0)
        assert child.status == "succeeded" and child.output == {"v": 0}
        assert ("continuation", 0) in store.list_facts(unit_id)
        for k in (1, 2):
            _, release = await service.complete(jobs[k].opc, "completed", {"v": k}, source="cli")
        envelope = await _drive(service, release)
        assert envelope["out"] == [{"v": 0}, {"v": 1}, {"v": 2}]
        assert store.get_run(outcome.run_id).status == "completed"
        await service.aclose()

    asyncio.run(main())


def test_failed_child_is_never_overwritten(flow, monkeypatch):
    """A child that materialised `failed` is a real outcome: a stale actor's `continue_release` (an old
    version, a success it believes in) never rewrites it; under `collect` it stays an error at
    its index."""
    from txcl.store.procedures.continuations import settle
    from txcl.store.records import Materialized

    worker, build = flow
    store, service, interp = build("collect")

    async def main():
        await interp.run({}, "pay")
        jobs = _jobs(worker)
        unit_id = store.get_interaction(jobs[1].opc).unit_id
        admit = store.admit_terminal(jobs[1].opc, "failed", {"message": "declined"}, source="cli")
        first = store.continue_release(jobs[1].opc, child_version=admit.child_version)
        assert first.outcome == "recorded"
        monkeypatch.setattr(settle, "child_outcome", lambda *a: Materialized("succeeded", output={"forged": True}))
        stale = store.continue_release(jobs[1].opc, child_version=admit.child_version)
        monkeypatch.undo()
        assert stale.outcome == "recorded"
        child = next(c for c in store.list_children(unit_id) if c.item_index == 1)
        assert child.status == "failed" and child.output is None
        for k in (0, 2):
            _, release = await service.complete(jobs[k].opc, "completed", {"v": k}, source="cli")
        envelope = await _drive(service, release)
        assert envelope["out"] == [{"v": 0}, {"error": {"message": "declined"}}, {"v": 2}]
        await service.aclose()

    asyncio.run(main())


def _drop_fact(store, unit_id: str, index: int) -> None:
    """Simulate a crash between the child write and its fact (or data from an older version)."""
    conn = RawDb(store)
    with conn:
        conn.execute("DELETE FROM continuation_facts WHERE unit_id = ? AND kind = 'continuation' AND item_index = ?",
                     (unit_id, index))
        conn.execute("UPDATE await_units SET continuation_done = continuation_done - 1 WHERE unit_id = ?", (unit_id,))


def test_missing_fact_repaired_by_the_next_completion(flow):
    """The `continuation` fact of a succeeded child is missing; the final
    completion reads the children in item order, repairs the fact (succeeded children only)
    and releases the parent once."""
    worker, build = flow
    store, service, interp = build()

    async def main():
        outcome = await interp.run({}, "pay")
        jobs = _jobs(worker)
        unit_id = store.get_interaction(jobs[0].opc).unit_id
        for k in (0, 1):
            await service.complete(jobs[k].opc, "completed", {"v": k}, source="cli")
        _drop_fact(store, unit_id, 0)
        assert ("continuation", 0) not in store.list_facts(unit_id)
        _, release = await service.complete(jobs[2].opc, "completed", {"v": 2}, source="cli")
        assert ("continuation", 0) in store.list_facts(unit_id)
        envelope = await _drive(service, release)
        assert envelope["out"] == [{"v": 0}, {"v": 1}, {"v": 2}]
        kinds = [e.kind for e in store.list_run_events(outcome.run_id)]
        assert kinds.count("run.released") == 1 and kinds.count("reconcile.facts") == 1
        await service.aclose()

    asyncio.run(main())


def test_missing_fact_repaired_by_a_sweep_never_for_unsucceeded_children(flow):
    """Via the sweeper: with item 2 still outstanding the sweep repairs item 0's fact but
    the parent stays held (item 2's child does not exist); the last completion releases."""
    from txcl.continuations.sweeper import SweepConfig, sweep

    worker, build = flow
    store, service, interp = build()

    async def main():
        outcome = await interp.run({}, "pay")
        jobs = _jobs(worker)
        unit_id = store.get_interaction(jobs[0].opc).unit_id
        for k in (0, 1):
            await service.complete(jobs[k].opc, "completed", {"v": k}, source="cli")
        _drop_fact(store, unit_id, 0)
        report = await asyncio.to_thread(sweep, store, SweepConfig(reconcile_after_ms=0))
        assert not report.released
        facts = store.list_facts(unit_id)
        assert ("continuation", 0) in facts and ("continuation", 2) not in facts
        assert store.get_run(outcome.run_id).status == "waiting"
        _, release = await service.complete(jobs[2].opc, "completed", {"v": 2}, source="cli")
        envelope = await _drive(service, release)
        assert envelope["count"] == 3
        assert [e.kind for e in store.list_run_events(outcome.run_id)].count("run.released") == 1
        await service.aclose()

    asyncio.run(main())


def test_duplicate_parent_release_one_winner(flow):
    """Two threads run `continue_release` for the final item at once: one release, one resume."""
    worker, build = flow
    store, service, interp = build()

    async def main():
        outcome = await interp.run({}, "pay")
        jobs = _jobs(worker)
        for k in (0, 1):
            await service.complete(jobs[k].opc, "completed", {"v": k}, source="cli")
        admit = store.admit_terminal(jobs[2].opc, "completed", {"v": 2}, source="cli")
        gate = threading.Barrier(2)
        results: list = []

        def release() -> None:
            gate.wait()
            results.append(store.continue_release(jobs[2].opc, child_version=admit.child_version))

        threads = [threading.Thread(target=release) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(r.outcome for r in results) == ["recorded", "resumed"]
        envelope = await _drive(service, next(r for r in results if r.won))
        assert envelope["count"] == 3
        kinds = [e.kind for e in store.list_run_events(outcome.run_id)]
        assert kinds.count("run.released") == 1 and kinds.count("run.completed") == 1
        await service.aclose()

    asyncio.run(main())


def test_restart_rebuilds_from_the_store_and_nothing_stays_pending(flow, tmp_path):
    """After some completions the process's objects are thrown away; a fresh store and
    service on the same file finish the run from stored records alone.: once the run is
    terminal, no interaction, child, unit or claim is left pending."""
    from txcl.continuations.service import ContinuationService, open_run_store
    from txcl.ops.tree import load_ops
    from txcl.runtime.config import Settings

    worker, build = flow
    store, service, interp = build()
    box: dict = {}

    async def first():
        outcome = await interp.run({}, "pay")
        box["run_id"] = outcome.run_id
        box["jobs"] = _jobs(worker)
        await service.complete(box["jobs"][1].opc, "completed", {"v": 1}, source="cli")
        await service.aclose()

    asyncio.run(first())
    db = box["db"] = store.backend.describe() if store.kind == "sqlite" else store.backend.url
    store.close()
    fresh = open_run_store(db)
    service2 = ContinuationService(fresh, Settings().evolve(trace_mode="off"), workspace=tmp_path / "ws-fail")
    load_ops(tmp_path / "ws-fail")

    async def second():
        for k in (2, 0):
            _, release = await service2.complete(box["jobs"][k].opc, "completed", {"v": k}, source="cli")
        envelope = await _drive(service2, release)
        assert envelope["out"] == [{"v": 0}, {"v": 1}, {"v": 2}]
        await service2.aclose()

    try:
        asyncio.run(second())
        run_id = box["run_id"]
        assert fresh.get_run(run_id).status == "completed"
        for unit in fresh.list_units(run_id):
            assert unit.status == "completed"
            assert all(i.status in ("completed", "failed") for i in fresh.list_interactions(unit.unit_id))
            assert all(c.status == "succeeded" for c in fresh.list_children(unit.unit_id))
        assert fresh.get_claim(run_id) is None
    finally:
        fresh.close()


def test_an_items_callback_waits_for_the_database_in_few_round_trips(flow):
    """An item's callback as `txcl serve` takes it — the check (the call and its unit read
    together), then the admission with the item's continuation in one transaction — waits
    for PostgreSQL five times: the check, the run lock with what is read under it, the
    window's promotion, the continuation's lock and reads, the COMMIT. Everything else (the
    terminal, the close, the facts, the child, the expiry) goes without waiting, since what it
    depends on was read with the run locked. On SQLite (no round trips) the same callback
    runs the same statements; the test counts them there."""
    from txcl.serve.callbacks import check_and_admit

    worker, build = flow
    store, service, interp = build()
    backend = store.backend
    trips: list[int] = []
    executed: list[str] = []
    if backend.kind == "postgresql":
        from txcl.store.backends import pq_exec

        real_execute, real_pipelined = pq_exec.execute, pq_exec._pipelined
    else:
        real = backend._execute

        def recording(conn, sql, params):
            executed.append(sql)
            return real(conn, sql, params)

    async def main():
        await interp.run({}, "pay")
        jobs = _jobs(worker)
        if backend.kind == "postgresql":
            pq_exec.execute = lambda *args: (trips.append(1), real_execute(*args))[1]
            pq_exec._pipelined = lambda pgconn, statements, *rest, **kw: (
                trips.append(len(statements)), real_pipelined(pgconn, statements, *rest, **kw))[1]
        else:
            backend._execute = recording
        try:
            admit, release = check_and_admit(store, jobs[0].opc, jobs[0].token,
                                             b'{"status": "completed", "output": {"v": 0}}', 1 << 20)
        finally:
            if backend.kind == "postgresql":
                pq_exec.execute, pq_exec._pipelined = real_execute, real_pipelined
            else:
                backend._execute = real
        assert admit.outcome == "admitted" and release.outcome == "recorded" and release.unit_status == "waiting"
        unit_id = store.get_interaction(jobs[0].opc).unit_id
        child = next(c for c in store.list_children(unit_id) if c.item_index == 0)
        assert child.status == "succeeded" and child.output == {"v": 0}
        assert sorted(store.list_facts(unit_id)) == [("continuation", 0), ("provider", 0)]
        for k in (1, 2):
            _, release = await service.complete(jobs[k].opc, "completed", {"v": k}, source="cli")
        envelope = await _drive(service, release)
        assert envelope["out"] == [{"v": 0}, {"v": 1}, {"v": 2}]
        await service.aclose()

    asyncio.run(main())
    if backend.kind == "postgresql":
        assert len(trips) <= 5, trips
    else:
        assert 0 < len(executed) <= 19, executed
