"""Worker acks held back to share a commit (--ack-write-delay), on each backend.

A 202 is written after the delay, every ack that came in meanwhile in one commit; a callback
reaching this process first writes its interaction's ack in the admitting transaction; an ack
naming a cancel URL is written at once; closing the service writes what is held back; a
callback turned away takes nothing and writes nothing.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from cont_support import write_tree
from txcl.continuations.worker_client import AckResult
from txcl.runtime.interpreter import Suspended

FILES = {
    "OPS/shop/100/enrich.txcl": 'WITH mode = "async", timeout = "10m", into = "enriched"\nEXEC "http://127.0.0.1:9/jobs"',
    "OPS/shop/200/total.txcl": "EMIT .total = &add(.order.amount, .enriched.bonus)",
}


@pytest.fixture
def harness(tmp_path, db_url, monkeypatch):
    """(service, interpreter, sent dispatches, the ack each worker answers with)."""
    import txcl.continuations.service as service_mod
    from txcl.continuations.service import ContinuationService, open_run_store
    from txcl.ops.tree import load_ops
    from txcl.runtime.config import Settings

    sent: list = []
    answer: dict = {"job_id": "j"}

    async def post(client, d, **kwargs):
        sent.append(d)
        return AckResult(d.opc, True, dict(answer))

    monkeypatch.setattr(service_mod, "post_dispatch", post)
    ws = write_tree(tmp_path / "ws", FILES)
    store = open_run_store(db_url, node_id="acks")
    service = ContinuationService(store, Settings(trace_mode="off", ack_write_delay=400), workspace=ws)
    interp = service.interpreter(load_ops(ws))
    yield service, interp, sent, answer
    asyncio.run(service.aclose())
    interp.close()
    store.close()


async def _park(interp, n: int = 1) -> list:
    outcomes = await asyncio.gather(*(interp.run({"order": {"id": i, "amount": 10}}, "shop") for i in range(n)))
    assert all(isinstance(o, Suspended) for o in outcomes)
    return outcomes


async def _settled(service, timeout: float = 5.0) -> None:
    """Until nothing is held back and no ack write is under way."""
    for _ in range(int(timeout / 0.01)):
        if len(service.pending_acks) == 0 and not service.pending_acks._writes:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("acks still held back")


def test_acks_of_concurrent_runs_are_written_after_the_delay_in_one_commit(harness):
    service, interp, sent, _ = harness
    store = service.store

    async def main() -> None:
        await _park(interp, 5)
        assert len(sent) == 5 and len(service.pending_acks) == 5
        assert {store.get_interaction(d.opc).status for d in sent} == {"dispatching"}
        before = store.commit_count()
        await _settled(service)
        # five acks, one commit (one per store thread their runs belong to, on PostgreSQL)
        assert store.commit_count() - before == len({service.lane.slot_of(d.run_id) for d in sent})
        for d in sent:
            row = store.get_interaction(d.opc)
            assert row.status == "dispatched" and row.ack == {"job_id": "j"}

    asyncio.run(main())


def test_a_callback_and_the_acks_name_the_runs_of_the_calls_this_process_sent(harness):
    """The runs of the calls it sent are remembered, so a callback's admission and an ack
    write go to their runs' store thread and lock those runs first; a call another process
    sent names none (any thread takes it)."""
    service, interp, sent, _ = harness
    lane_runs: list[tuple] = []
    real = service.lane.submit

    def submit(fn, args, kwargs, batchable, then=None, *, runs=()):
        lane_runs.append((getattr(fn, "__name__", ""), runs))
        return real(fn, args, kwargs, batchable, then, runs=runs)

    service.lane.submit = submit

    async def main() -> None:
        await _park(interp, 3)
        assert {service.run_of(d.opc) for d in sent} == {(d.run_id,) for d in sent}
        assert service.run_of("opc_sent_elsewhere") == ()
        await _settled(service)
        acked = sorted(run for name, runs in lane_runs if name == "mark_ack" for run in runs)
        assert acked == sorted(d.run_id for d in sent)
        assert all(len({service.lane.slot_of(run) for run in runs}) == 1 for name, runs in lane_runs
                   if name == "mark_ack")  # each write on the thread of all its runs
        lane_runs.clear()
        d = sent[0]
        await service.complete(d.opc, "completed", {"bonus": 1}, source="callback", token=d.token)
        assert lane_runs[0] == ("mark_then", (d.run_id,))
        assert service.run_of(d.opc) == ()  # answered: forgotten

    asyncio.run(main())


def test_closing_the_service_writes_the_acks_held_back(harness):
    service, interp, sent, _ = harness
    store = service.store
    asyncio.run(_park(interp, 2))  # the loop ends before the delay is over
    assert len(service.pending_acks) == 2
    asyncio.run(service.aclose())
    assert [store.get_interaction(d.opc).status for d in sent] == ["dispatched", "dispatched"]


def test_an_ack_naming_a_cancel_url_is_written_at_once(harness):
    service, interp, sent, answer = harness
    store = service.store
    answer["cancel_url"] = "http://127.0.0.1:9/cancel"
    asyncio.run(_park(interp))
    row = store.get_interaction(sent[0].opc)
    assert row.status == "dispatched" and row.ack["cancel_url"] == "http://127.0.0.1:9/cancel"
    assert len(service.pending_acks) == 0


def test_a_callback_writes_its_held_back_ack_in_the_admitting_transaction(harness):
    from txcl.serve.callbacks import check_and_admit

    service, interp, sent, _ = harness
    store = service.store

    async def main() -> None:
        await _park(interp, 2)
        first, second = sent
        before = store.commit_count()
        body = json.dumps({"status": "completed", "output": {"bonus": 5}}).encode()
        admit, release = await service.call_batched(
            check_and_admit, store, first.opc, first.token, body, 1 << 20, service.pending_acks)
        assert admit.outcome == "admitted" and release.won
        assert store.commit_count() - before == 1
        row = store.get_interaction(first.opc)
        assert row.status == "completed" and row.ack == {"job_id": "j"}
        assert len(service.pending_acks) == 1  # the other run's ack is still held back
        assert store.get_interaction(second.opc).status == "dispatching"
        await _settled(service)
        assert store.get_interaction(second.opc).status == "dispatched"

    asyncio.run(main())


def test_a_callback_turned_away_takes_no_ack_and_writes_nothing(harness):
    from txcl.serve.callbacks import check_and_admit
    from txcl.serve.shaping import Answer

    service, interp, sent, _ = harness
    store = service.store

    async def main() -> None:
        await _park(interp)
        d = sent[0]
        before = store.commit_count()
        for token, body in ((d.token, b"not json"), ("wrong-token", b'{"status": "completed"}')):
            answer = await service.call_batched(
                check_and_admit, store, d.opc, token, body, 1 << 20, service.pending_acks)
            assert isinstance(answer, Answer) and answer.status in (400, 401)
        assert store.commit_count() == before
        assert len(service.pending_acks) == 1 and store.get_interaction(d.opc).status == "dispatching"

    asyncio.run(main())


def test_the_delay_is_bounded():
    from txcl.runtime.config import ConfigError, Settings

    assert Settings().ack_write_delay == 20
    Settings(ack_write_delay=0).validate()
    with pytest.raises(ConfigError, match="ack-write-delay"):
        Settings(ack_write_delay=5_000).validate()


def test_a_callback_admitted_while_its_ack_is_being_written_still_records_the_ack(harness):
    """The held-back write has started (taken from the queue) but not committed when the
    callback is admitted: the admission writes the ack again, so its body is kept."""
    service, interp, sent, _ = harness
    store = service.store

    async def main() -> None:
        await _park(interp)
        d = sent[0]
        rows = service.pending_acks.take_all()  # as the timer does, just before its write
        assert [r[0] for r in rows] == [d.opc]
        admit, release = await service.complete(d.opc, "completed", {"bonus": 5}, source="callback", token=d.token)
        assert admit.outcome == "admitted" and release.won
        row = store.get_interaction(d.opc)
        assert row.status == "completed" and row.ack == {"job_id": "j"}
        await service.pending_acks._write_logged(rows)  # the late write finds the row moved on
        assert store.get_interaction(d.opc).status == "completed"
        assert service.pending_acks.take(d.opc) is None  # nothing left behind

    asyncio.run(main())
