"""Happy paths and guards of every store procedure on a real SQLite file."""

from __future__ import annotations

import functools

from testtools import RawDb

import pytest
from contstore_util import join_at, complete, itemized, park_barrier, run_spec, statements_sent, unary, unit_spec

from txcl import ids
from txcl.store.errors import RunLost
from txcl.store.records import Fence, resume_segment_id


# ---------------------------------------------------------------- `create_or_reuse_run`


def test_create_then_reuse_by_origin_rid(store):
    """A request never has a second run; origin_rid is unique."""
    first = store.create_or_reuse_run(run_spec("rid-9"))
    again = store.create_or_reuse_run(run_spec("rid-9"))
    assert first.created and not again.created
    assert again.run.run_id == first.run.run_id
    assert ids.is_run_id(first.run.run_id) and ids.is_rcid(first.run.rcid)
    assert first.run.status == "active" and first.run.segment_id == "rid-9"
    assert [e.kind for e in store.list_run_events(first.run.run_id)] == ["run.created"]


def test_snapshot_is_content_addressed_and_stored_once(store):
    a = store.create_or_reuse_run(run_spec("r1"))
    assert store.get_snapshot(a.run.snapshot_id) == b'{"rules": []}'
    assert store.put_snapshot(a.run.snapshot_id, b'{"rules": []}') is False  # already there
    assert store.put_snapshot("other", b"x" * 1000) is True
    assert store.get_snapshot("other") == b"x" * 1000


# ---------------------------------------------------------------- `park_suspend`


def test_park_writes_records_before_dispatch(store, clock):
    park = park_barrier(store, units=[unary("b"), unary("a"), unit_spec(kind="sync", op_name="s", items=[{}],
                                                                        budget_ms=5_000)])
    run = park.run
    assert run.status == "waiting" and run.cur_stage == "shop/100" and run.cur_visit == 1
    assert run.claim_token is None
    susp = store.get_suspend(run.run_id, "shop/100", 1)
    assert susp.status == "open" and susp.dispatch_complete and susp.kind == "barrier"
    assert susp.envelope == {"e": 0} and susp.budgets == {"ttl": 10, "fuel": 0}
    assert [role for _, role in susp.members] == ["op", "op", "sync"]
    # every interaction exists and is dispatching; tokens only for worker calls, stored hashed
    tokened = [d for d in park.dispatches if d.token]
    assert len(park.dispatches) == 3 and len(tokened) == 2
    for d in park.dispatches:
        it = store.get_interaction(d.opc)
        assert it.status == "dispatching" and it.deadline_ms is not None
        assert ids.is_opc(d.opc)
    assert run.expires_ms == clock.now + 60_000
    assert [e.event_key for e in store.list_run_events(run.run_id)] == ["created", "suspend:shop/100:1"]


def _parked_state(store, park) -> dict:
    """What a park left in the store, without the ids and tokens that differ between runs."""
    import dataclasses

    run_id = park.run.run_id
    drop = {"run_id", "rcid", "origin_rid", "snapshot_id", "unit_id", "opc", "token_hash", "segment_id"}

    def plain(record):
        return {k: v for k, v in dataclasses.asdict(record).items() if k not in drop}

    units = store.list_units(run_id)
    suspend = plain(store.get_suspend(run_id, "shop/100", 1))
    suspend["members"] = [role for _, role in suspend["members"]]
    return {
        "run": plain(store.get_run(run_id)),
        "returned": plain(park.run),
        "suspend": suspend,
        "units": [plain(u) for u in units],
        "interactions": [plain(i) for u in units for i in store.list_interactions(u.unit_id)],
        "events": [(e.seq, e.kind, e.event_key, {k: v for k, v in (e.data or {}).items() if k not in ("origin_rid", "units")})
                   for e in store.list_run_events(run_id)],
        "park": (park.created, park.stage, park.visit, len(park.unit_ids), len(park.dispatches)),
    }


@pytest.mark.parametrize("units", [
    [unary("a"), unary("b", budget_ms=90_000)],
    [itemized(n=5, window=2)],
    [unit_spec(kind="sync", op_name="s", items=[{}], deadline_ms=1_800_000_123_456),
     unit_spec(kind="unary", op_name="bad", failed_error={"code": "E"}, budget_ms=999_999)],
    [unit_spec(kind="local", op_name="l", items=[{}])],  # no deadline at all
    [],
], ids=["unary", "itemized", "deadline-and-failed", "no-deadline", "no-units"])
def test_a_park_that_creates_its_run_writes_what_create_then_park_writes(store, units, monkeypatch):
    """The first park of a request inserts its run already parked (one statement fewer, its
    events numbered without reading them back): every row and event must be what creating
    the run and parking it in two steps writes."""
    sent = statements_sent(store, monkeypatch)
    direct = park_barrier(store, "rid-direct", units=units)
    assert not [s for s in sent if s.startswith("UPDATE runs") or s.endswith("MAX")]
    store.create_or_reuse_run(run_spec("rid-steps"))
    stepped = store.park_suspend(store.get_run_by_origin("rid-steps").run_id, Fence("rid-steps"),
                                 stage="shop/100", kind="barrier", envelope={"e": 0},
                                 budgets={"ttl": 10, "fuel": 0}, units=units)
    a, b = _parked_state(store, direct), _parked_state(store, stepped)
    assert a["park"] == (True, "shop/100", 1, len(units), b["park"][4])
    assert b["park"][0] is False  # (the two-step park found its run made already)
    a["park"], b["park"] = a["park"][1:], b["park"][1:]
    assert a == b
    assert [e[:3] for e in a["events"]] == [(1, "run.created", "created"), (2, "stage.suspended", "suspend:shop/100:1")]


def test_a_park_whose_run_another_request_made_parks_that_run(store):
    """The request's run exists already (made by an earlier attempt of the same request): the
    park finds it and parks it rather than making a second run."""
    made = store.create_or_reuse_run(run_spec("rid-1"))
    park = park_barrier(store, "rid-1")
    assert not park.created and park.run.run_id == made.run.run_id
    assert park.run.status == "waiting" and park.run.version == 1
    assert [e.seq for e in store.list_run_events(made.run.run_id)] == [1, 2]


def test_a_park_that_creates_its_run_under_a_claim_is_refused(store):
    """Only a segment holding no claim can create its run by parking."""
    with pytest.raises(RunLost):
        store.park_suspend(run_spec("rid-1"), Fence("rid-1", "clm_stranger"), stage="shop/100", kind="barrier",
                           envelope={}, budgets={}, units=[unary()])
    assert store.get_run_by_origin("rid-1") is None


def test_each_completion_counts_once_and_the_last_settles_the_unit(store, monkeypatch):
    """A completion's continuation raises the unit's count once (a repeat raises nothing) and
    settles the unit from the count it just raised, reading the unit's row once."""
    park = park_barrier(store, units=[itemized(n=3, window=3)])
    unit_id = park.unit_ids[0]
    for k, d in enumerate(park.dispatches, start=1):
        admit = store.admit_terminal(d.opc, "completed", {"n": k}, source="callback", token=d.token)
        sent = statements_sent(store, monkeypatch, whole=True)
        release = store.continue_release(d.opc, child_version=admit.child_version)
        monkeypatch.undo()
        unit_reads = [s for s in sent if s.startswith("SELECT") and "FROM await_units WHERE unit_id = ?" in s]
        assert len(unit_reads) == 0, unit_reads  # (read once, by the opening statement, through the opc)
        assert release.unit_status == ("completed" if k == 3 else "waiting")
        assert store.get_unit(unit_id).continuation_done == k
        assert store.continue_release(d.opc).unit_status == release.unit_status  # a repeat counts nothing
        assert store.get_unit(unit_id).continuation_done == k
    assert release.won and store.get_unit(unit_id).output == [{"n": 1}, {"n": 2}, {"n": 3}]


def test_visit_counts_suspends_at_one_stage(store):
    """/ R7: a run may park at one stage any number of times; each is its own visit."""
    park = park_barrier(store)
    rel = complete(store, park.dispatches[0])[1]
    assert rel.won
    again = store.park_suspend(park.run.run_id, Fence(rel.claim.segment_id, rel.claim.claim_token),
                               stage="shop/100", kind="barrier", envelope={"e": 1}, budgets={}, units=[unary()])
    assert again.visit == 2 and again.run.cur_visit == 2
    assert store.get_suspend(park.run.run_id, "shop/100", 1).status == "resumed"
    assert store.get_claim(park.run.run_id) is None  # the parking segment's claim is deleted
    rel2 = complete(store, again.dispatches[0])[1]
    assert rel2.won and rel2.claim.visit == 2
    assert rel2.claim.segment_id == resume_segment_id(park.run.run_id, "shop/100", 2)


def test_fence_rejects_a_stranger(store):
    store.create_or_reuse_run(run_spec("rid-1"))
    with pytest.raises(RunLost):
        store.park_suspend(store.get_run_by_origin("rid-1").run_id, Fence("someone-else"),
                           stage="shop/100", kind="barrier", envelope={}, budgets={}, units=[unary()])


def test_expiry_is_raised_never_lowered(store, clock):
    run = store.dispatch_deferred(run_spec(), Fence("rid-1"), [unary("long", budget_ms=600_000, join_at=200)]).run
    assert run.expires_ms == clock.now + 600_000
    run2 = store.dispatch_deferred(run.run_id, Fence("rid-1"), [unary("short", budget_ms=1_000, join_at=200)]).run
    assert run2.expires_ms == run.expires_ms


# ---------------------------------------------------------------- `mark_ack`


def test_ack_moves_dispatching_only(store):
    park = park_barrier(store)
    opc = park.dispatches[0].opc
    assert store.mark_ack([(opc, {"job_id": "j-1"})]) == 1
    it = store.get_interaction(opc)
    assert it.status == "dispatched" and it.ack == {"job_id": "j-1"}
    assert store.mark_ack([(opc, {"job_id": "j-2"})]) == 0  # already dispatched: left alone
    complete(store, park.dispatches[0])
    assert store.mark_ack([(opc, {"job_id": "late"})]) == 0  # a late ack changes nothing


_HELD_ACKS = {
    "admitted": {"job_id": "j-1"},
    "admitted-failure": {"job_id": "j-1"},
    "no-body": None,
    "already-acked": {"job_id": "j-2"},
    "bad-token": {"job_id": "j-1"},
    "expired": {"job_id": "j-1"},
    "duplicate": {"job_id": "j-1"},
    "cancel-url": {"job_id": "j-1", "cancel_url": "https://w.example/cancel/1"},
}


@pytest.mark.parametrize("case", list(_HELD_ACKS))
def test_a_held_ack_written_by_the_admission_leaves_what_ack_then_admission_leaves(store, clock, case,
                                                                                   monkeypatch):
    """A worker's ack held back until its call's callback is written by the admission itself
    — on an admitted outcome by the very statement that closes the call. Every outcome must
    leave the rows that writing the ack first (`mark_ack`) and then admitting leaves."""
    import dataclasses

    def scenario(rid: str, together: bool):
        park = park_barrier(store, rid)
        d = park.dispatches[0]
        if case == "already-acked":
            store.mark_ack([(d.opc, {"job_id": "j-1"})])
        if case == "duplicate":
            complete(store, d)
        if case == "expired":
            clock.advance(61_000)
        ack = (d.opc, _HELD_ACKS[case], "tok-1")
        status, payload = ("failed", {"error": "no"}) if case == "admitted-failure" else ("completed", {"ok": 1})
        token = "wrong" if case == "bad-token" else d.token
        admit = functools.partial(store.admit_and_continue, d.opc, status, payload, source="callback", token=token)
        sent = statements_sent(store, monkeypatch, whole=True)
        if together:
            admitted, release = admit(ack=ack)
        else:  # the ack first, on its own, then the admission: in one transaction as before
            admitted, release = store.run_together(lambda: (store.mark_ack([ack]), admit())[1])
        monkeypatch.undo()
        if case == "expired":
            clock.advance(-61_000)
        record = {k: v for k, v in dataclasses.asdict(store.get_interaction(d.opc)).items()
                  if k not in ("opc", "unit_id", "run_id")}
        unit = store.get_unit(park.unit_ids[0])
        owed = store.backend.read(lambda t: t.all("SELECT url, token FROM cancel_calls WHERE opc = ?", (d.opc,)))
        return (record, admitted.outcome, getattr(release, "outcome", None), unit.status, unit.continuation_done,
                [tuple(r) for r in owed]), sent

    before, _ = scenario("rid-ack-first", together=False)
    after, sent = scenario("rid-ack-held", together=True)
    assert after == before
    acked_alone = [s for s in sent if s.startswith("UPDATE interactions SET status = 'dispatched'")]
    if case in ("admitted", "admitted-failure", "no-body"):
        assert not acked_alone  # (the ack and the close in one statement)
        assert before[0]["version"] == 3 and before[0]["ack"] == (_HELD_ACKS[case] or {})
    if case in ("bad-token", "expired", "cancel-url"):
        assert len(acked_alone) == 1
    if case == "bad-token":
        assert before[1] == "bad_token" and before[0]["status"] == "dispatched"


def test_an_ack_is_written_only_with_its_own_calls_outcome(store):
    park = park_barrier(store, units=[unary("a"), unary("b")])
    a, b = park.dispatches
    with pytest.raises(ValueError, match="cannot be written"):
        store.admit_and_continue(a.opc, "completed", {}, source="callback", token=a.token, ack=(b.opc, {}))
    assert store.get_interaction(a.opc).status == "dispatching"


# ---------------------------------------------------------------- `admit_terminal`


def test_unknown_and_bad_token(store):
    park = park_barrier(store)
    d = park.dispatches[0]
    assert store.admit_terminal("opc_unknown", "completed", {}, source="callback", token=d.token).outcome == "unknown"
    assert store.check_callback("opc_unknown", d.token).outcome == "unknown"
    assert store.admit_terminal(d.opc, "completed", {}, source="callback", token="wrong").outcome == "bad_token"
    assert store.admit_terminal(d.opc, "completed", {}, source="callback", token=None).outcome == "bad_token"
    assert store.check_callback(d.opc, "wrong").outcome == "bad_token"
    target = store.check_callback(d.opc, d.token)
    assert target.outcome == "ok" and target.unit.kind == "unary" and target.unit.into is None
    assert target.unit.input_view is None and target.unit.directives is None  # not read per callback
    assert store.get_terminal(d.opc) is None  # nothing written by rejected callbacks


def test_token_never_stored_in_clear(store):
    park = park_barrier(store)
    raw = RawDb(store).everything()
    assert park.dispatches[0].token.encode() not in raw
    assert ids.hash_token(park.dispatches[0].token).encode() in raw


def test_duplicate_completion_is_idempotent(store):
    """One terminal, one provider fact, one release; repeats answer duplicate."""
    park = park_barrier(store)
    d = park.dispatches[0]
    first, rel = complete(store, d, {"v": 1})
    assert first.outcome == "admitted" and rel.outcome == "resumed"
    version_after = store.get_run(park.run.run_id).version
    for _ in range(10):
        again, rel2 = complete(store, d, {"v": 1})
        assert again.outcome == "duplicate" and rel2 is None
        assert store.continue_release(d.opc).outcome == "recorded"
    assert store.list_facts(park.unit_ids[0]) == [("continuation", 0), ("provider", 0)]
    assert store.get_unit(park.unit_ids[0]).provider_done == 1
    assert store.get_run(park.run.run_id).version == version_after
    assert sum(e.kind == "run.released" for e in store.list_run_events(park.run.run_id)) == 1


@pytest.mark.parametrize("second", [("completed", {"v": 2}), ("failed", {"message": "no"})])
def test_conflicting_completion_rejected_first_kept(store, second):
    """A different output or status is a conflict; the first outcome stays."""
    park = park_barrier(store)
    d = park.dispatches[0]
    complete(store, d, {"v": 1})
    res = store.admit_terminal(d.opc, second[0], second[1], source="callback", token=d.token)
    assert res.outcome == "conflict"
    term = store.get_terminal(d.opc)
    assert term.status == "completed" and term.payload == {"v": 1}
    assert store.get_unit(park.unit_ids[0]).output == {"v": 1}


def test_callback_after_ack_failure_terminal_conflicts(store):
    park = park_barrier(store)
    d = park.dispatches[0]
    ack_fail = store.admit_terminal(d.opc, "failed", {"message": "async worker x: expected 202, got 500"},
                                    source="ack")
    assert ack_fail.outcome == "admitted"
    assert store.admit_terminal(d.opc, "completed", {"v": 1}, source="callback", token=d.token).outcome == "conflict"
    assert store.get_terminal(d.opc).source == "ack"


def test_cancelled_and_expired_interactions_are_gone(store, clock):
    park = park_barrier(store, units=[unary("a"), unary("b", budget_ms=1_000)])
    da, db = park.dispatches
    # b fails → fail-fast release cancels a
    complete(store, db, {"message": "boom"}, status="failed")
    assert store.get_interaction(da.opc).status == "cancelled"
    assert store.admit_terminal(da.opc, "completed", {}, source="callback", token=da.token).outcome == "cancelled"
    # a still-open interaction past its deadline is timed out by the callback itself (row 6)
    park2 = park_barrier(store, "rid-2", units=[unary("c", budget_ms=1_000)])
    clock.advance(1_001)
    d = park2.dispatches[0]
    assert store.admit_terminal(d.opc, "completed", {}, source="callback", token=d.token).outcome == "expired"
    assert store.get_interaction(d.opc).status == "timed_out"
    assert store.get_run(park2.run.run_id).status == "expired"
    assert store.admit_terminal(d.opc, "completed", {}, source="callback", token=d.token).outcome == "expired"


def test_cli_and_local_sources_need_no_token(store):
    park = park_barrier(store)
    res = store.admit_terminal(park.dispatches[0].opc, "completed", {"by": "human"}, source="cli")
    assert res.outcome == "admitted"


# ---------------------------------------------------------------- `continue_release`


def test_release_is_one_cas_version_plus_one(store):
    park = park_barrier(store, units=[unary("a"), unary("b")])
    v0 = store.get_run(park.run.run_id).version
    _, rel_a = complete(store, park.dispatches[0])
    assert rel_a.outcome == "recorded" and store.get_run(park.run.run_id).status == "waiting"
    _, rel_b = complete(store, park.dispatches[1])
    assert rel_b.outcome == "resumed"
    run = store.get_run(park.run.run_id)
    assert run.status == "resuming" and run.version == v0 + 1 and run.claim_token == rel_b.claim.claim_token
    assert store.get_suspend(run.run_id, "shop/100", 1).status == "resuming"
    assert store.get_claim(run.run_id).attempt == 1


def test_sync_sibling_failure_is_best_effort(store):
    """A failed sync sibling settles its unit completed with the error noted."""
    park = park_barrier(store, units=[unary("a"), unit_spec(kind="sync", op_name="s", items=[{}], budget_ms=5_000)])
    sync_opc = [d for d in park.dispatches if d.kind == "sync"][0].opc
    store.admit_terminal(sync_opc, "failed", {"message": "db down"}, source="sync", best_effort=True)
    assert store.continue_release(sync_opc).outcome == "recorded"
    unit = [u for u in store.list_units(park.run.run_id) if u.kind == "sync"][0]
    assert unit.status == "completed" and unit.error == {"message": "db down"}
    _, rel = complete(store, [d for d in park.dispatches if d.kind == "unary"][0])
    assert rel.won


def test_item_outputs_are_sanitised_as_the_unit_options_say(store):
    """An itemized unit's options mark its item outputs untrusted: the reserved keys a worker
    sent are dropped from the child's output; the terminal is kept as received. A unary
    unit's output is left as is (its op's tail sanitises it after `into`)."""
    park = park_barrier(store, units=[itemized(n=1, window=1), unary()])
    item = next(d for d in park.dispatches if d.kind == "itemized")
    op = next(d for d in park.dispatches if d.kind == "unary")
    for d in (item, op):
        store.admit_terminal(d.opc, "completed", {"ok": 1, "_txc": {"x": 1}}, source="callback", token=d.token)
        store.continue_release(d.opc)
    assert store.get_unit(park.unit_ids[0]).output == [{"ok": 1}]
    assert store.get_unit(park.unit_ids[1]).output == {"ok": 1, "_txc": {"x": 1}}
    assert store.get_terminal(item.opc).payload == {"ok": 1, "_txc": {"x": 1}}  # terminal kept as received


def test_completion_before_suspension_waits_for_park(store):
    """A deferred unit completed while the run is active is recorded, not released."""
    disp = store.dispatch_deferred(run_spec(), Fence("rid-1"), [unary("enrich", join_at=200)])
    d = disp.dispatches[0]
    admit, rel = complete(store, d)
    assert admit.outcome == "admitted" and rel.outcome == "recorded"
    assert store.get_run(disp.run.run_id).status == "active" and store.get_claim(disp.run.run_id) is None
    # not due before the floor
    early = join_at(store, disp.run.run_id, Fence("rid-1"), stage="shop/150", stack="shop", scope=150)
    assert early.outcome == "proceed" and early.merged == ()
    # merged in-request at the first scope >= floor (250: no scope 200 needed)
    at = join_at(store, disp.run.run_id, Fence("rid-1"), stage="shop/250", stack="shop", scope=250)
    assert at.outcome == "proceed" and [u.output for u in at.merged] == [{"ok": 0}]
    assert store.get_joined_marker(disp.unit_ids[0]).segment_id == "rid-1"
    again = join_at(store, disp.run.run_id, Fence("rid-1"), stage="shop/300", stack="shop", scope=300)
    assert again.merged == ()  # merged at most once


# ---------------------------------------------------------------- `join_check`


def test_join_parks_when_not_ready_then_callback_releases_with_marker(store):
    disp = store.dispatch_deferred(run_spec(), Fence("rid-1"), [unary("b", join_at=200), unary("a", join_at=200)])
    run_id = disp.run.run_id
    res = join_at(store, run_id, Fence("rid-1"), stage="shop/200", stack="shop", scope=200,
                           park_envelope={"env": []}, park_state={"ttl": 5})
    assert res.outcome == "parked" and res.park.visit == 1
    susp = store.get_suspend(run_id, "shop/200", 1)
    assert susp.kind == "join" and {r for _, r in susp.members} == {"join"} and len(susp.members) == 2
    # completions in reverse order; release only after both
    by_name = {d.op_name: d for d in disp.dispatches}
    assert complete(store, by_name["b"])[1].outcome == "recorded"
    rel = complete(store, by_name["a"])[1]
    assert rel.won
    for uid in disp.unit_ids:
        assert store.get_joined_marker(uid).segment_id == rel.claim.segment_id
    bundle = store.claim_resume(run_id, rel.claim.claim_token)
    assert [u.op_name for u in bundle.members] == ["a", "b"]  # op-name order


def test_cross_stack_resolves_at_first_frame(store):
    disp = store.dispatch_deferred(run_spec(), Fence("rid-1"), [unary("x", join_at=900)])
    complete(store, disp.dispatches[0])
    res = join_at(store, disp.run.run_id, Fence("rid-1"), stage="other/10", stack="other", scope=10)
    assert [u.op_name for u in res.merged] == ["x"]


def test_failed_unit_fails_the_run_at_the_join(store):
    """In the request: the request stops with the error at the join."""
    disp = store.dispatch_deferred(run_spec(), Fence("rid-1"), [unary("x", join_at=200)])
    d = disp.dispatches[0]
    store.admit_terminal(d.opc, "failed", {"message": "no 202"}, source="ack")
    store.continue_release(d.opc)
    res = join_at(store, disp.run.run_id, Fence("rid-1"), stage="shop/200", stack="shop", scope=200)
    assert res.outcome == "failed" and res.failed.op_name == "x"
    run = store.get_run(disp.run.run_id)
    assert run.status == "failed" and run.fail_reason == "join_failed"
    assert run.error["code"] == "txcl_join_failed" and run.error["detail"] == {"message": "no 202"}


def test_drains_terminals_not_yet_continued_in_between_case(store):
    """`admit_terminal` committed, `continue_release` not yet — the join check materialises and merges."""
    disp = store.dispatch_deferred(run_spec(), Fence("rid-1"), [unary("x", join_at=200)])
    d = disp.dispatches[0]
    admit = store.admit_terminal(d.opc, "completed", {"v": 7}, source="callback", token=d.token)
    res = join_at(store, disp.run.run_id, Fence("rid-1"), stage="shop/200", stack="shop", scope=200)
    assert [u.output for u in res.merged] == [{"v": 7}]
    late = store.continue_release(d.opc, child_version=admit.child_version)  # already succeeded
    assert late.outcome == "recorded" and late.unit_status == "completed"
    assert store.list_children(disp.unit_ids[0])[0].status == "succeeded"


# ---------------------------------------------------------------- resume, `finish_segment`, `claim_resume`


def test_claim_resume_and_finish_with_terminal_parent_path(store):
    park = park_barrier(store)
    rel = complete(store, park.dispatches[0])[1]
    fence = Fence(rel.claim.segment_id, rel.claim.claim_token)
    bundle = store.claim_resume(park.run.run_id, rel.claim.claim_token)
    assert bundle.suspend.visit == 1 and bundle.claim.attempt == 1
    # the resumed segment dispatches a deferred op that it then never joins, and an async it abandons
    extra = store.dispatch_deferred(park.run.run_id, fence, [unary("later", join_at=900)])
    run = store.finish_segment(park.run.run_id, fence, status="completed", result={"final": True})
    assert run.status == "completed" and run.result == {"final": True} and run.finished_ms
    assert store.get_claim(run.run_id) is None
    assert store.get_suspend(run.run_id, "shop/100", 1).status == "resumed"
    # an unjoined deferred unit stays open until its deadline; its callback is recorded
    assert store.get_interaction(extra.dispatches[0].opc).status == "dispatching"
    admit, rel2 = complete(store, extra.dispatches[0])
    assert admit.outcome == "admitted" and rel2.outcome == "recorded"
    with pytest.raises(RunLost):
        store.heartbeat(run.run_id, rel.claim.claim_token)


def test_a_runs_events_are_numbered_in_order_and_a_repeat_takes_no_number(store, monkeypatch):
    """Events are numbered 1, 2, … per run as they are written; one whose key is in already
    (a repeated repair) writes nothing and takes no number. The number is read as a value's
    subquery, never by `INSERT … SELECT` from run_events itself (SQLite copies such a
    selection to a temporary table first)."""
    park = park_barrier(store)
    sent = statements_sent(store, monkeypatch, whole=True)
    rel = complete(store, park.dispatches[0])[1]
    fence = Fence(rel.claim.segment_id, rel.claim.claim_token)
    store.claim_resume(park.run.run_id, rel.claim.claim_token)
    store.finish_segment(park.run.run_id, fence, status="completed", result={"ok": 1})
    written = [s for s in sent if s.startswith("INSERT INTO run_events")]
    assert len(written) == 2 and all(" VALUES (?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM run_events" in s
                                     for s in written)
    events = store.list_run_events(park.run.run_id)
    assert [e.seq for e in events] == [1, 2, 3, 4]
    assert [e.kind for e in events][:2] == ["run.created", "stage.suspended"]
    store.settle_and_release(park.unit_ids[0])  # nothing to repair: no new event
    from txcl.store.procedures.continuations import ContinuationProcedures

    def two_events(t):
        ContinuationProcedures._event(t, park.run.run_id, "run.created", "created", {"again": True})  # a repeat
        ContinuationProcedures._event(t, park.run.run_id, "note", "note:1", None)

    store.backend.transact(two_events)
    assert [(e.seq, e.event_key) for e in store.list_run_events(park.run.run_id)][-2:] == [
        (events[-1].seq, events[-1].event_key), (5, "note:1")]


def test_finish_failed_cancels_everything_open(store):
    park = park_barrier(store)
    rel = complete(store, park.dispatches[0])[1]
    fence = Fence(rel.claim.segment_id, rel.claim.claim_token)
    extra = store.dispatch_deferred(park.run.run_id, fence, [itemized("later", n=5, window=2, join_at=900)])
    store.finish_segment(park.run.run_id, fence, status="failed", error={"code": "txcl_op_failed"},
                         fail_reason="op_failed")
    statuses = {i.status for i in store.list_interactions(extra.unit_ids[0])}
    assert statuses == {"cancelled"}
    assert store.get_unit(extra.unit_ids[0]).status == "cancelled"
    assert store.get_suspend(park.run.run_id, "shop/100", 1).status == "failed"


def test_finish_fence_rejects_old_claim(store):
    park = park_barrier(store)
    rel = complete(store, park.dispatches[0])[1]
    with pytest.raises(RunLost):
        store.finish_segment(park.run.run_id, Fence(rel.claim.segment_id, "clm_wrong"), status="completed")
    with pytest.raises(RunLost):
        store.claim_resume(park.run.run_id, "clm_wrong")
    store.heartbeat(park.run.run_id, rel.claim.claim_token)  # the holder's heartbeat works


# ---------------------------------------------------------------- `time_out_interaction`, `expire_run`


def test_timeout_of_member_expires_parked_run(store, clock):
    park = park_barrier(store, units=[unary("a", budget_ms=1_000)])
    clock.advance(1_001)
    result = store.time_out_interaction(park.dispatches[0].opc)
    assert result.outcome == "timed_out" and result.expired and result.claim is None
    run = store.get_run(park.run.run_id)
    assert run.status == "expired" and run.error["code"] == "txcl_run_expired"
    assert store.get_unit(park.unit_ids[0]).status == "timed_out"
    assert store.get_suspend(run.run_id, "shop/100", 1).status == "expired"
    assert store.time_out_interaction(park.dispatches[0].opc).outcome == "timed_out"  # closed: reports it


def test_timeout_of_unjoined_deferred_unit_only_records(store, clock):
    disp = store.dispatch_deferred(run_spec(), Fence("rid-1"), [unary("x", join_at=200, budget_ms=1_000)])
    clock.advance(1_001)
    result = store.time_out_interaction(disp.dispatches[0].opc)
    assert result.outcome == "timed_out" and not result.expired
    assert store.get_unit(disp.unit_ids[0]).status == "timed_out"
    assert store.get_run(disp.run.run_id).status == "active"  # the flow meets it at its join
    res = join_at(store, disp.run.run_id, Fence("rid-1"), stage="shop/200", stack="shop", scope=200)
    assert res.outcome == "failed"


def test_not_due_does_nothing(store):
    park = park_barrier(store)
    assert store.time_out_interaction(park.dispatches[0].opc).outcome == "not_due"
    assert store.get_interaction(park.dispatches[0].opc).status == "dispatching"


def test_expire_run_marks_interactions_timed_out(store, clock):
    park = park_barrier(store, units=[itemized(n=6, window=2, budget_ms=1_000)])
    assert not store.expire_run(park.run.run_id)  # not yet
    clock.advance(1_001)
    assert store.expire_run(park.run.run_id).expired
    assert not store.expire_run(park.run.run_id)  # idempotent
    its = store.list_interactions(park.unit_ids[0])
    assert {i.status for i in its if i.item_index < 2} == {"timed_out"}
    assert {i.status for i in its if i.item_index >= 2} == {"timed_out"}
    d = park.dispatches[0]
    assert store.admit_terminal(d.opc, "completed", {}, source="callback", token=d.token).outcome == "expired"


# ---------------------------------------------------------------- `take_over_claim`


def test_takeover_after_stale_then_attempt_limit(store, clock):
    park = park_barrier(store)
    rel = complete(store, park.dispatches[0])[1]
    run_id = park.run.run_id
    assert store.take_over_claim(run_id, stale_after_ms=1_000, max_attempts=3).outcome == "not_stale"
    clock.advance(1_001)
    t2 = store.take_over_claim(run_id, stale_after_ms=1_000, max_attempts=3, owner="node-b")
    assert t2.outcome == "taken" and t2.claim.attempt == 2 and t2.claim.owner == "node-b"
    assert t2.claim.segment_id.endswith("-a2")
    with pytest.raises(RunLost):
        store.heartbeat(run_id, rel.claim.claim_token)  # the dead segment is fenced off
    clock.advance(1_001)
    t3 = store.take_over_claim(run_id, stale_after_ms=1_000, max_attempts=3)
    assert t3.outcome == "taken" and t3.claim.attempt == 3
    clock.advance(1_001)
    assert store.take_over_claim(run_id, stale_after_ms=1_000, max_attempts=3).outcome == "failed"
    run = store.get_run(run_id)
    assert run.status == "failed" and run.fail_reason == "resumer-stale"
    assert store.get_claim(run_id) is None


def test_takeover_moves_join_markers_and_cancels_dead_units(store, clock):
    disp = store.dispatch_deferred(run_spec(), Fence("rid-1"), [unary("x", join_at=200)])
    join_at(store, disp.run.run_id, Fence("rid-1"), stage="shop/200", stack="shop", scope=200,
                     park_envelope={}, park_state={})
    rel = complete(store, disp.dispatches[0])[1]
    old = Fence(rel.claim.segment_id, rel.claim.claim_token)
    dead = store.dispatch_deferred(disp.run.run_id, old, [unary("y", join_at=500)])
    clock.advance(10_000)
    t = store.take_over_claim(disp.run.run_id, stale_after_ms=1_000, max_attempts=3)
    assert store.get_joined_marker(disp.unit_ids[0]).segment_id == t.claim.segment_id
    assert store.get_unit(dead.unit_ids[0]).status == "cancelled"
    assert store.get_interaction(dead.dispatches[0].opc).status == "cancelled"


# ---------------------------------------------------------------- `purge_finished`


def test_purge_after_retention_deletes_every_row(store, clock):
    park = park_barrier(store)
    rel = complete(store, park.dispatches[0])[1]
    store.finish_segment(park.run.run_id, Fence(rel.claim.segment_id, rel.claim.claim_token), status="completed")
    assert store.purge_finished(retention_ms=10_000) == []
    clock.advance(10_001)  # retention counts from when the run finished (not from its last deadline)
    assert store.purge_finished(retention_ms=10_000) == [park.run.run_id]
    assert store.get_run(park.run.run_id) is None and store.get_run_by_rcid(park.run.rcid) is None
    assert store.get_interaction(park.dispatches[0].opc) is None
    assert store.list_units(park.run.run_id) == [] and store.list_run_events(park.run.run_id) == []
    assert store.purge_snapshots() == 1


def test_purge_takes_runs_in_batches_oldest_first(store, clock):
    ids = []
    for i in range(5):
        park = park_barrier(store, f"rid-p{i}")
        rel = complete(store, park.dispatches[0])[1]
        store.finish_segment(park.run.run_id, Fence(rel.claim.segment_id, rel.claim.claim_token), status="completed")
        ids.append(park.run.run_id)
        clock.advance(10)
    clock.advance(1_000)
    assert store.purge_finished(retention_ms=500, limit=2) == ids[:2]
    assert store.purge_finished(retention_ms=500, limit=10) == ids[2:]
    assert store.list_runs() == []


def test_unjoined_deferred_itemized_after_completion_sends_nothing_more(store):
    """After the run completes, sent items stay open to their deadline; queued ones never go."""
    disp = store.dispatch_deferred(run_spec(), Fence("rid-1"), [itemized("late", n=6, window=2, join_at=900)])
    run = store.finish_segment(disp.run.run_id, Fence("rid-1"), status="completed", result={})
    its = store.list_interactions(disp.unit_ids[0])
    assert [i.status for i in its] == ["dispatching"] * 2 + ["cancelled"] * 4
    admit, rel = complete(store, disp.dispatches[0])
    assert admit.outcome == "admitted" and admit.dispatches == () and rel.outcome == "recorded"
    assert store.get_run(run.run_id).status == "completed"


def test_drain_wins_release_inline_when_callbacks_beat_the_ack(store):
    """(store side): every callback arrives before the park's drain; the request wins inline."""
    from txcl.store.records import inline_segment_id

    park = park_barrier(store, units=[unary("a"), unary("b")])
    for d in park.dispatches:  # admitted and continued while the request still waits for its acks
        admit, rel = complete(store, d)
        assert admit.outcome == "admitted"
    # the live `continue_release` of the last callback already released; a second drain changes nothing
    assert store.get_run(park.run.run_id).status == "resuming"
    assert store.try_release(park.run.run_id).outcome == "recorded"
    # when only `admit_terminal` ran before the drain, the member is not terminal yet: the callback's own `continue_release`
    # keeps the release (runs `continue_release` steps 4–5 only)
    park2 = park_barrier(store, "rid-2", units=[unary("a")])
    d = park2.dispatches[0]
    admit = store.admit_terminal(d.opc, "completed", {"v": 1}, source="callback", token=d.token)
    seg = inline_segment_id("rid-2", park2.visit)
    assert store.try_release(park2.run.run_id, segment_id=seg).outcome == "recorded"
    assert store.continue_release(d.opc, child_version=admit.child_version).won
    # the drain with a segment id: every member already terminal before the drain
    park4 = park_barrier(store, "rid-4", units=[unit_spec(kind="sync", op_name="s", items=[{}], budget_ms=5_000)])
    s4 = park4.dispatches[0].opc
    store.admit_terminal(s4, "completed", {"v": 4}, source="sync")
    conn = RawDb(store)  # `continue_release` materialised the child but "crashed" before releasing: emulate
    conn.execute("UPDATE item_children SET status = 'succeeded', output_json = '{\"v\": 4}', version = 1 "
                 "WHERE opc = ?", (s4,))
    conn.execute("INSERT INTO continuation_facts VALUES (?, 'continuation', 0, 0)", (park4.unit_ids[0],))
    conn.execute("UPDATE await_units SET continuation_done = continuation_done + 1 WHERE unit_id = ?",
                 (park4.unit_ids[0],))  # (the procedures count the facts they write)
    seg = inline_segment_id("rid-4", park4.visit)
    rel = store.try_release(park4.run.run_id, segment_id=seg)
    assert rel.won and rel.claim.segment_id == seg == "rid-4/v1"
    assert store.get_run(park4.run.run_id).segment_id == seg
    assert store.claim_resume(park4.run.run_id, rel.claim.claim_token).members[0].output == {"v": 4}


def test_reads_for_cli_and_polls(store):
    """`txcl runs`, `txcl complete RUN_ID --op --item`, polls by rcid."""
    park = park_barrier(store, units=[unary("a"), itemized("pay", n=4, window=2)])
    other = park_barrier(store, "rid-2")
    run = park.run
    assert store.get_run_by_rcid(run.rcid).run_id == run.run_id
    assert store.get_run_by_origin("rid-1").run_id == run.run_id
    assert {r.run_id for r in store.list_runs(status="waiting")} == {run.run_id, other.run.run_id}
    assert store.list_runs(status="completed") == []
    it = store.find_interaction(run.run_id, "pay", 3)
    assert it.item_index == 3 and it.status == "queued"
    assert store.find_interaction(run.run_id, "a").opc == park.dispatches[0].opc
    assert store.find_interaction(run.run_id, "nope") is None
    susp = store.list_suspends(run.run_id)
    assert [(s.stage, s.visit) for s in susp] == [("shop/100", 1)]
    assert [u.op_name for u in store.list_units(run.run_id)] == ["a", "pay"]


def test_record_join_is_fenced_and_first_wins(store):
    disp = store.dispatch_deferred(run_spec(), Fence("rid-1"), [unary("x", join_at=200)])
    uid = disp.unit_ids[0]
    with pytest.raises(RunLost):
        store.record_join(uid, Fence("intruder"))
    assert store.record_join(uid, Fence("rid-1")) is True
    assert store.record_join(uid, Fence("rid-1")) is False
    assert store.get_joined_marker(uid).segment_id == "rid-1"


def test_backward_loop_units_join_in_op_name_then_dispatch_order_djf5(store):
    fence = Fence("rid-1")
    first = store.dispatch_deferred(run_spec(), fence, [unary("b", join_at=200)])
    run_id = first.run.run_id
    second = store.dispatch_deferred(run_id, fence, [unary("a", join_at=200)])
    third = store.dispatch_deferred(run_id, fence, [unary("a", join_at=200)])  # the loop re-dispatches "a"
    for disp in (third, first, second):  # completions in another order
        complete(store, disp.dispatches[0], {"from": disp.unit_ids[0]})
    res = join_at(store, run_id, fence, stage="shop/200", stack="shop", scope=200)
    assert [u.unit_id for u in res.merged] == [second.unit_ids[0], third.unit_ids[0], first.unit_ids[0]]
    assert [u.created_seq for u in res.merged] == [2, 3, 1]


def test_claim_resume_reads_the_bundle_of_the_runs_current_suspend_together(store, monkeypatch):
    """The resume's four reads go out together (one round trip on PostgreSQL) and give the
    suspend and members of the stage and visit the run names; a suspend of another visit (the
    run moved on between the reads) means the claim is not current."""
    park = park_barrier(store)
    rel = complete(store, park.dispatches[0])[1]
    backend = store.backend
    batches: list[int] = []
    real = backend.execute_all

    def counting(conn, statements):
        batches.append(len(statements))
        return real(conn, statements)

    monkeypatch.setattr(backend, "execute_all", counting)
    bundle = store.claim_resume(park.run.run_id, rel.claim.claim_token)
    assert batches == [4]
    assert (bundle.suspend.stage, bundle.suspend.visit) == ("shop/100", 1) == (bundle.run.cur_stage, bundle.run.cur_visit)
    assert [u.unit_id for u in bundle.members] == list(park.unit_ids)
    assert [unit_id for unit_id, _role in bundle.suspend.members] == list(park.unit_ids)

    def moved(conn, statements):
        runs, claims, members, suspends = real(conn, statements)
        row = dict(zip(suspends[0].keys(), suspends[0]))
        row["visit"] = 2
        return [runs, claims, members, [_RowLike(row)]]

    monkeypatch.setattr(backend, "execute_all", moved)
    with pytest.raises(RunLost, match="not current"):
        store.claim_resume(park.run.run_id, rel.claim.claim_token)


class _RowLike:
    """A row read by name, as the backends' rows are."""

    def __init__(self, values: dict) -> None:
        self.values = values

    def __getitem__(self, key):
        return self.values[key]

    def keys(self):
        return list(self.values)


def test_read_many_gives_each_reads_rows_in_order(store):
    rows = store.backend.read(lambda t: t.read_many(
        ("SELECT ? AS a", ("x",)),
        ("SELECT 1 AS n WHERE 1 = 0", ()),
        ("SELECT ? AS b UNION ALL SELECT ? AS b", ("y", "z")),
    ))
    assert [[r["a"] for r in rows[0]], rows[1], [r["b"] for r in rows[2]]] == [["x"], [], ["y", "z"]]


def test_a_units_options_are_decoded_once_per_stored_text(monkeypatch):
    """Every item's callback reads its unit's options: the same stored text is decoded once
    and the record shared; another text gets its own."""
    import json

    from txcl.runoptions import UnitOptions
    from txcl.store.procedures.continuations import base

    decoded: list = []
    real = UnitOptions.from_json.__func__
    monkeypatch.setattr(UnitOptions, "from_json", classmethod(lambda cls, v: decoded.append(v) or real(cls, v)))
    monkeypatch.setattr(base, "_OPTIONS_BY_TEXT", {})
    tolerant = json.dumps(UnitOptions(fails_fast=False, tolerated_failures=2).to_json())
    strict = json.dumps(UnitOptions(retry_delays_ms=(1000,)).to_json())
    first = base.ProcedureBase._options({"options_json": tolerant})
    assert base.ProcedureBase._options({"options_json": tolerant}) is first and len(decoded) == 1
    other = base.ProcedureBase._options({"options_json": strict})
    assert other.retry_delays_ms == (1000,) and not first.fails_fast and first.tolerated_failures == 2
    assert len(decoded) == 2
    assert base.ProcedureBase._options({"options_json": None}) == UnitOptions()  # (backfilled units)


@pytest.mark.parametrize("snapshot_stored_in_between", [False, True])
def test_a_first_park_creates_its_run_when_another_request_stores_the_snapshot_meanwhile(
        store, monkeypatch, snapshot_stored_in_between):
    """A park that creates its run checks the rules' snapshot and inserts the run (where the
    snapshot exists) together. Each statement sees what was committed when it started: when
    another request stores the snapshot between the two, the check misses it but the insert
    finds it — the run is created once, parked, not taken for another request's run."""
    real = store.backend.execute_all

    def snapshot_committed_between(conn, statements):
        if statements[0][0].startswith("SELECT 1 FROM snapshots") and snapshot_stored_in_between:
            store.backend.send(conn, "INSERT INTO snapshots (snapshot_id, created_ms, body, bytes) "
                                     "VALUES (?, 0, ?, 0) ON CONFLICT DO NOTHING", (statements[0][1][0], b""))
            rows = real(conn, statements)
            return [[], *rows[1:]]  # the check ran before the other request's commit
        return real(conn, statements)

    monkeypatch.setattr(store.backend, "execute_all", snapshot_committed_between)
    park = store.park_suspend(run_spec("rid-race"), Fence("rid-race"), stage="shop/100", kind="barrier",
                              envelope={"a": 1}, budgets={}, units=[unary()])
    assert park.created and park.visit == 1 and park.run.status == "waiting"
    assert [r.origin_rid for r in store.list_runs(limit=10)] == ["rid-race"]
    assert RawDb(store).execute("SELECT COUNT(*) FROM snapshots")[0][0] == 1
