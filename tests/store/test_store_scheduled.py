"""Scheduled events in the store (both backends): rescheduling in place, a spent key, cancel,
claims that only one node wins, stale claims taken over, and the purge."""

from __future__ import annotations

from contstore_util import open_store


def test_schedule_reschedule_and_spend(store, clock):
    first = store.schedule_event("drip:1", clock.now + 60_000, {"n": 1}, origin_stack="shop")
    assert first.status == "scheduled" and first.event.status == "pending" and first.event.payload == {"n": 1}
    again = store.schedule_event("drip:1", clock.now + 120_000, {"n": 2})
    assert again.status == "rescheduled"
    assert again.event.event_id == first.event.event_id  # in place: the same event
    assert again.event.schedule_at_ms == clock.now + 120_000 and again.event.payload == {"n": 2}
    assert store.claim_due_events(limit=10, stale_after_ms=600_000) == []  # not due yet
    clock.advance(120_000)
    [claimed] = store.claim_due_events(limit=10, stale_after_ms=600_000)
    assert claimed.status == "claimed" and claimed.claimed_by == "node-a" and claimed.attempts == 1
    assert store.finish_event("drip:1", claimed.event_id, status="fired", rid="r1")
    spent = store.schedule_event("drip:1", clock.now + 5_000, {"n": 3})
    assert spent.status == "spent" and spent.event.status == "fired" and spent.event.payload == {"n": 2}
    assert store.get_event(claimed.event_id).rid == "r1"


def test_cancel_only_a_pending_event_and_a_cancelled_key_can_be_scheduled_again(store, clock):
    assert store.cancel_event("nope") == ("not_found", None)
    store.schedule_event("k", clock.now + 1_000, {})
    status, event = store.cancel_event("k")
    assert status == "cancelled" and event.status == "cancelled"
    clock.advance(5_000)
    assert store.claim_due_events(limit=10, stale_after_ms=600_000) == []  # a cancelled event never fires
    assert store.schedule_event("k", clock.now, {"again": True}).status == "rescheduled"
    [claimed] = store.claim_due_events(limit=10, stale_after_ms=600_000)
    assert store.cancel_event("k")[0] == "claimed"  # too late: it is being fired


def test_two_nodes_never_claim_the_same_event_and_a_stale_claim_is_taken_over(db_url, clock):
    a, b = open_store(db_url, clock, node="node-a"), open_store(db_url, clock, node="node-b")
    try:
        for i in range(20):
            a.schedule_event(f"e{i}", clock.now, {"i": i})
        got_a = a.claim_due_events(limit=12, stale_after_ms=60_000)
        got_b = b.claim_due_events(limit=12, stale_after_ms=60_000)
        keys_a = {e.idempotency_key for e in got_a}
        keys_b = {e.idempotency_key for e in got_b}
        assert not keys_a & keys_b and len(keys_a | keys_b) == 20
        for event in got_b:
            assert b.finish_event(event.idempotency_key, event.event_id, status="fired", rid="b")
        clock.advance(30_000)
        assert b.claim_due_events(limit=50, stale_after_ms=60_000) == []  # A's claims are fresh
        clock.advance(31_000)  # A stopped while firing: its claims go stale
        taken = b.claim_due_events(limit=50, stale_after_ms=60_000)
        assert {e.idempotency_key for e in taken} == keys_a and all(e.attempts == 2 for e in taken)
        victim = got_a[0]
        assert not a.finish_event(victim.idempotency_key, victim.event_id, status="fired", rid="late")
        assert b.finish_event(victim.idempotency_key, victim.event_id, status="fired", rid="b")
    finally:
        a.close()
        b.close()


def test_list_count_and_purge(store, clock):
    store.schedule_event("later", clock.now + 10_000, {})
    store.schedule_event("now", clock.now, {})
    [due] = store.claim_due_events(limit=10, stale_after_ms=600_000)
    store.finish_event(due.idempotency_key, due.event_id, status="failed", rid=None, error="boom")
    assert [e.idempotency_key for e in store.list_events()] == ["later", "now"]
    assert [e.idempotency_key for e in store.list_events(status="failed")] == ["now"]
    assert store.count_events() == {"pending": 1, "failed": 1}
    clock.advance(1_000)
    assert store.purge_events(clock.now) == 1
    assert store.get_event("now") is None and store.get_event("later") is not None
