"""Pull queues in the store (queue:// ops), on both backends: a claim leases each job once, with
a fresh token that answers through the callback contract; a heartbeat moves the lease on; a
lease that runs out is a retryable failure (retried under WITH retries, else the op fails);
jobs of closed calls are never handed out; several claimers never share a job."""

from __future__ import annotations

import threading

import pytest
from contstore_util import FakeClock, complete, open_store, park_barrier, unit_spec

from txcl.runoptions import unit_options


def queued(name: str = "resize", *, n: int = 1, window: int = 32, directives: dict | None = None):
    kind = "itemized" if n > 1 else "unary"
    items = [{"i": i} for i in range(n)]
    return unit_spec(kind=kind, op_name=name, items=items, op_stack="shop", op_scope=100,
                     dispatch_stage="shop/100", dispatch_stack="shop", budget_ms=60_000, window=window,
                     exec_target="queue://" + name, into="r", directives=directives,
                     options=unit_options(kind, "fail", n, directives))


def park_queued(store, rid: str = "rid-1", **kw):
    park = park_barrier(store, rid, units=[queued(**kw)])
    store.enqueue_jobs([(d.opc, "resize") for d in park.dispatches])
    return park


def test_a_claim_leases_the_oldest_job_once_with_a_token_that_completes_it(store, clock):
    first = park_queued(store, "rid-1")
    clock.advance(10)
    later = park_queued(store, "rid-2")
    jobs = store.claim_jobs("resize", lease_ms=30_000, claimant="w1", limit=1)
    assert len(jobs) == 1
    dispatch, until = jobs[0]
    assert dispatch.opc == first.dispatches[0].opc and until == clock.now + 30_000
    assert dispatch.token and dispatch.input == {"i": 0} and dispatch.exec_target == "queue://resize"
    it = store.get_interaction(dispatch.opc)
    assert it.status == "dispatched" and it.ack["claimed_by"] == "w1"
    # the other job is the next claim's; then none is left
    second = store.claim_jobs("resize", lease_ms=30_000, claimant="w2", limit=5)
    assert [d.opc for d, _ in second] == [later.dispatches[0].opc]
    assert store.claim_jobs("resize", lease_ms=30_000, claimant="w3") == []
    assert store.claim_jobs("other", lease_ms=30_000, claimant="w3") == []
    admit, release = complete(store, dispatch, {"size": 1})
    assert admit.outcome == "admitted" and release.won
    assert store.queue_depths() == [{"queue": "resize", "ready": 0, "leased": 1, "oldest_ready_ms": None}]


def test_an_earlier_token_still_answers_and_a_stranger_does_not(store):
    park = park_queued(store)
    dispatch, _ = store.claim_jobs("resize", lease_ms=30_000, claimant="w")[0]
    assert store.check_callback(dispatch.opc, "not-the-token").outcome == "bad_token"
    assert store.check_callback(dispatch.opc, dispatch.token).outcome == "ok"
    assert store.check_callback(dispatch.opc, park.dispatches[0].token).outcome == "ok"


def test_depths_count_ready_and_leased_jobs_and_the_oldest_wait(store, clock):
    park_queued(store, "rid-1", n=3)
    oldest = clock.now
    clock.advance(50)
    store.claim_jobs("resize", lease_ms=30_000, claimant="w", limit=1)
    assert store.queue_depths() == [{"queue": "resize", "ready": 2, "leased": 1, "oldest_ready_ms": oldest}]


def test_a_heartbeat_moves_the_lease_on(store, clock):
    park_queued(store)
    dispatch, until = store.claim_jobs("resize", lease_ms=1_000, claimant="w")[0]
    clock.advance(900)
    assert store.record_heartbeat(dispatch.opc, dispatch.token, {"p": 0.5}) == "alive"
    clock.advance(900)  # past the first lease, within the one the heartbeat gave
    assert store.lapsed_leases() == []
    clock.advance(200)
    assert store.lapsed_leases() == [dispatch.opc]


def test_a_lapsed_lease_without_retries_fails_the_call(store, clock):
    park_queued(store)
    dispatch, _ = store.claim_jobs("resize", lease_ms=1_000, claimant="w")[0]
    assert store.lapse_and_continue(dispatch.opc) is None  # not out yet
    clock.advance(1_001)
    admit, release = store.lapse_and_continue(dispatch.opc)
    assert admit.outcome == "admitted" and admit.terminal.status == "failed"
    assert admit.terminal.payload["code"] == "txcl_lease_expired" and admit.terminal.source == "lease"
    assert release.won
    assert store.lapse_and_continue(dispatch.opc) is None  # once
    # the worker's late answer is refused: the call is closed
    assert complete(store, dispatch, {"late": True})[0].outcome == "conflict"


def test_a_lapsed_lease_with_retries_puts_the_job_back(store, clock):
    park_queued(store, directives={"retries": 1, "retry_backoff": "100ms"})
    dispatch, _ = store.claim_jobs("resize", lease_ms=1_000, claimant="w")[0]
    clock.advance(1_001)
    admit, release = store.lapse_and_continue(dispatch.opc)
    assert admit.outcome == "retrying" and release is None
    # the retry is due after its backoff; sent again it waits in the queue once more
    clock.advance(200)
    unit_id = store.due_retries()[0]
    again = store.promote_window(unit_id)
    assert [d.opc for d in again] == [dispatch.opc]
    store.enqueue_jobs([(dispatch.opc, "resize")])
    second, _ = store.claim_jobs("resize", lease_ms=1_000, claimant="w2")[0]
    assert second.opc == dispatch.opc and second.retry == 1 and second.token != dispatch.token
    # the first attempt's token is retired: its late answer is told so
    assert store.check_callback(dispatch.opc, dispatch.token).outcome == "superseded"
    assert complete(store, second, {"ok": True})[0].outcome == "admitted"


def test_a_job_whose_run_was_cancelled_is_never_handed_out(store):
    park = park_queued(store)
    assert store.cancel_run(park.run.run_id, reason="test") == "cancelled"
    assert store.claim_jobs("resize", lease_ms=1_000, claimant="w") == []
    assert store.queue_depths() == []


def test_a_claimed_job_of_a_cancelled_run_is_cancelled_for_its_heartbeat(store):
    park = park_queued(store)
    dispatch, _ = store.claim_jobs("resize", lease_ms=30_000, claimant="w")[0]
    store.cancel_run(park.run.run_id, reason="test")
    assert store.record_heartbeat(dispatch.opc, dispatch.token) == "cancelled"


def test_the_sweeper_does_not_resend_a_job_waiting_in_its_queue(store, clock):
    park_queued(store)
    clock.advance(60_000)
    assert store.stuck_dispatches(older_than_ms=30_000) == []


def test_a_call_whose_enqueue_was_lost_is_resent(store, clock):
    park = park_barrier(store, units=[queued()])  # parked, but the process died before enqueueing
    clock.advance(60_000)
    assert store.stuck_dispatches(older_than_ms=30_000) == [park.dispatches[0].opc]


@pytest.mark.parametrize("claimers", [4])
def test_claimers_on_several_connections_never_share_a_job(db_url, claimers):
    clock = FakeClock()
    setup = open_store(db_url, clock)
    for i in range(6):
        park_queued(setup, f"rid-{i}", n=5)
    stores = [open_store(db_url, clock, node=f"node-{i}") for i in range(claimers)]
    got: list[list[str]] = [[] for _ in stores]

    def claim(i: int) -> None:
        while True:
            jobs = stores[i].claim_jobs("resize", lease_ms=60_000, claimant=f"w{i}", limit=3)
            if not jobs:
                return
            got[i].extend(d.opc for d, _ in jobs)

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(claimers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    every = [opc for part in got for opc in part]
    assert len(every) == 30 and len(set(every)) == 30
    for s in (setup, *stores):
        s.close()


def test_jobs_enqueued_for_waiting_claims_are_leased_to_them_in_the_same_transaction(store, clock):
    first = park_barrier(store, "rid-1", units=[queued(n=3)])
    other = park_barrier(store, "rid-2", units=[queued("thumbs")])
    jobs = [(d.opc, "resize") for d in first.dispatches] + [(other.dispatches[0].opc, "thumbs")]
    got = store.hand_over_jobs(jobs, [("resize", 30_000, "w1", 2), ("resize", 30_000, "w2", 2),
                                      ("thumbs", 5_000, "w3", 1)])
    assert [[d.item_index for d, _ in taken] for taken in got] == [[0, 1], [2], [0]]
    assert got[2][0][1] == clock.now + 5_000 and got[0][0][0].token
    for taken, claimant in zip(got, ("w1", "w2", "w3")):
        for dispatch, _ in taken:
            assert store.get_interaction(dispatch.opc).ack["claimed_by"] == claimant
    assert store.claim_jobs("resize", lease_ms=1_000, claimant="w4", limit=5) == []  # nothing left over
    # more jobs than the waiting claims take: the rest stays ready for the next claim
    later = park_barrier(store, "rid-3", units=[queued(n=3)])
    got = store.hand_over_jobs([(d.opc, "resize") for d in later.dispatches], [("resize", 30_000, "w1", 1)])
    assert len(got[0]) == 1
    assert len(store.claim_jobs("resize", lease_ms=1_000, claimant="w4", limit=5)) == 2
