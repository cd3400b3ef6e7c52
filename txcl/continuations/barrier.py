"""`mode = "async"` barrier at its own scope (CONTINUATIONS.md §2.2).

1. every op still in the scope's set is a member (async → unary/itemized unit, sync sibling
   → sync unit), ordered by op name;
2. park first: one P2 transaction writes the suspend, units, interactions (first window
   `dispatching`) and moves the run to `waiting` — before anything is sent;
3. dispatch after the commit: POST every worker interaction and wait for its 202 (P3 / P4 on
   failure, each P4 followed by P5); run the sync siblings and admit their outcomes;
4. drain: the release check; a won release (here, or handed over by a callback of this
   process) continues inline in the same request; otherwise the segment ends suspended.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from txcl.continuations.engine import (
    UNIT_BUILDERS,
    OpClass,
    adopt_run,
    fence_of,
    recorder_of,
    run_lost,
    run_spec,
    run_state,
)
from txcl.store.errors import RunLost
from txcl.store.records import UNIT_BAD, ClaimRecord, Dispatch, UnitSpec

if TYPE_CHECKING:
    from txcl.continuations.engine import ContinuationEngine
    from txcl.runtime.state import Frame, PreparedOp, Run
    from txcl.runtime.walker import Walker


def member_spec(engine: "ContinuationEngine", run: "Run", frame: "Frame", pop: "PreparedOp",
                opclass: OpClass) -> UnitSpec:
    kind = opclass.unit_kind if opclass.kind == "barrier" and opclass.unit_kind else "sync"
    builder = UNIT_BUILDERS.get(kind)
    if builder is None:
        op = pop.op
        return UnitSpec(kind=kind, op_name=op.name, op_stack=op.stack, op_scope=op.scope,
                        dispatch_stage=frame.stage, dispatch_stack=frame.stack, exec_target=op.exec_text,
                        failed_error={"message": f"{kind} await units are not supported by this txcl"})
    return builder(engine, run, frame, pop, opclass)


async def park_barrier(engine: "ContinuationEngine", walker: "Walker", run: "Run", frame: "Frame",
                       classes: list[tuple["PreparedOp", OpClass]]) -> None:
    service = engine.service
    store = service.store
    rec = recorder_of(frame)
    members = sorted(classes, key=lambda pc: pc[0].name)
    specs = [member_spec(engine, run, frame, pop, c) for pop, c in members]
    try:
        park = await service.run_store(
            store.park_suspend, run_spec(engine, walker, run), fence_of(run), stage=frame.stage, kind="barrier",
            envelope=run.envelope, budgets=run_state(run, frame), units=specs)
    except RunLost as exc:
        run_lost(run, exc)
        return
    adopt_run(run, park.run, rec)
    by_unit = dict(zip(park.unit_ids, members))
    origin = run.origin_rid or run.rid
    loop = asyncio.get_running_loop()
    handoff: asyncio.Future = loop.create_future()
    service.inflight[run.run_id] = handoff
    claim: ClaimRecord | None = None
    try:
        workers = [d for d in park.dispatches if d.kind != "sync"]
        syncs = [d for d in park.dispatches if d.kind == "sync"]
        started_wall, started = time.time(), time.perf_counter()
        run_id = run.run_id

        member_ids = park.unit_ids

        def drain() -> Any:  # the release check of step 4, in the ack marking's thread hop
            # When every open member still lacks terminals (and none failed), draining can change
            # nothing and each missing terminal's own P5 will settle and release: skip the write
            # transaction (a read decides). A member that could settle now — all terminals in,
            # or zero items — is drained.
            units = [store.get_unit(u) for u in member_ids]
            open_units = [u for u in units if u is not None and u.status == "waiting"]
            if open_units and not any(u is not None and u.status in UNIT_BAD for u in units) and all(
                    u.provider_done < u.expected for u in open_units):
                return None
            return store.try_release(run_id, materialize=service.materialize)

        if syncs:
            results = await asyncio.gather(
                service.send_then(workers, origin),
                *(_run_sync_member(engine, walker, run, frame, by_unit[d.unit_id][0], d) for d in syncs))
            acks, claims, _ = results[0]
            for extra in results[1:]:
                claims.extend(extra)
            drained = None
        else:
            acks, claims, drained = await service.send_then(workers, origin, after=drain)
        ack_by_opc = {a.opc: a for a in acks}
        for d in workers:
            pop = by_unit[d.unit_id][0]
            ack = ack_by_opc.get(d.opc)
            if d.item_index == 0:
                extra: dict[str, Any] = {"unit_id": d.unit_id}
                if d.kind == "itemized":
                    extra["items"] = d.item_count
                if ack is not None and ack.ok:
                    extra["ack"] = ack.job_id
                    walker._record(run, frame, pop, "pending", "async", started_wall, started, rec, extra=extra,
                                   input_value=d.input)
                else:
                    walker._record(run, frame, pop, "error", "async", started_wall, started, rec, extra=extra,
                                   error=ack.error if ack is not None else "dispatch failed", input_value=d.input)
        # one release per suspend: at most one claim can have been won (units that failed at
        # dispatch, with no interactions, are released by the drain below)
        claim = claims[0] if claims else None
        if claim is None:
            release = drained if (drained is not None or not syncs) else await service.run_store(drain)
            if release is not None and release.won:
                claim = release.claim
        if claim is None and handoff.done():
            claim = handoff.result()
    except BaseException:
        # cancelled (client gone) or failed while a callback handed us its release: let a
        # background resume drive it instead of waiting for the claim to go stale
        if handoff.done() and not handoff.cancelled():
            service.start_resume(handoff.result())
        raise
    finally:
        service.inflight.pop(run.run_id, None)
    if claim is None:
        data = {"run_id": run.run_id, "stage": frame.stage, "visit": park.visit, "kind": "barrier"}
        rec.event("stage.suspend", {"stage": frame.stage, "visit": park.visit})
        rec.event("continuation.suspend", data)
        run.status = "suspended"
        return
    await continue_inline(engine, walker, run, frame, claim, {p.name: p for p, _ in members})


async def continue_inline(engine: "ContinuationEngine", walker: "Walker", run: "Run", frame: "Frame",
                          claim: ClaimRecord, pops: dict[str, "PreparedOp"] | None = None) -> None:
    """The request drained its own suspend: go on as a new segment in the same request."""
    from txcl.continuations.engine import set_claim
    from txcl.continuations.resume import apply_members

    store = engine.service.store
    rec = recorder_of(frame)
    rec.event("continuation.resume", {"run_id": run.run_id, "origin_rid": run.origin_rid, "stage": claim.stage,
                                      "visit": claim.visit, "snapshot_id": run.snapshot_id,
                                      "attempt": claim.attempt, "inline": True})
    set_claim(run, claim.segment_id, claim.claim_token)
    try:
        bundle = store.claim_resume(claim.run_id, claim.claim_token)  # a short read
    except RunLost as exc:
        run_lost(run, exc)
        return
    apply_members(walker, run, frame, bundle.members, rec, pops)


async def _run_sync_member(engine: "ContinuationEngine", walker: "Walker", run: "Run", frame: "Frame",
                           pop: "PreparedOp", dispatch: Dispatch) -> list[ClaimRecord]:
    """Run a sync sibling under its normal timeout (its tail included) and admit the outcome
    as its terminal (source `sync`; an error stays best effort)."""
    from txcl.runtime.state import Frame as _Frame

    scratch = _Frame(frame.stack, frame.scope, frame.stage, frame.visit)
    scratch.rec = recorder_of(frame)
    if pop.op.target is None:
        walker._finish_op(run, scratch, pop, {}, True, "noop", time.time(), time.perf_counter(), scratch.rec)
    else:
        await walker.run_op(run, scratch, pop, scratch.rec)
    outcome = scratch.outcomes.get(pop.name)
    target = pop.op.target
    transport = target.transport if target is not None else "noop"
    if outcome is not None and outcome.output is not None:
        status, payload = "completed", outcome.output
    else:
        status, payload = "failed", {"message": outcome.error if outcome is not None else "op did not run"}
    _, release = await engine.service.complete(dispatch.opc, status, payload, source="sync",
                                               best_effort=status == "failed", transport=transport)
    if release is not None and release.won and release.claim is not None:
        return [release.claim]
    return []


async def rerun_sync_member(service: Any, opc: str) -> None:
    """§5.9: a barrier's sync sibling whose outcome was never recorded (the parking process
    died) is re-run here from its stored input against the run's snapshot (at-least-once)
    and admitted like the original would have been."""
    from txcl.continuations.resume import rebuild_op
    from txcl.runtime.state import Frame, Run
    from txcl.values.merge import deep_copy

    store = service.store
    interaction = await asyncio.to_thread(store.get_interaction, opc)
    if interaction is None or store.get_terminal(opc) is not None:
        return
    unit = store.get_unit(interaction.unit_id)
    run_record = store.get_run(interaction.run_id)
    if unit is None or run_record is None or unit.status != "waiting":
        return
    suspend = next((s for s in store.list_suspends(run_record.run_id)
                    if any(m[0] == unit.unit_id for m in s.members)), None)
    if suspend is None:
        return
    tree = service.tree_for_snapshot(run_record.snapshot_id)
    walker = service.interpreter(tree).walker
    state = dict(suspend.budgets or {})
    info = state.pop("frame", None) or {}
    state["envelope"] = deep_copy(suspend.envelope)
    run = Run.from_json(state)
    run.status = "running"
    pop = rebuild_op(walker, run, unit)
    if pop is None:
        return
    if isinstance(interaction.input, dict):
        import attrs

        pop.prepared = attrs.evolve(pop.prepared, dispatched=interaction.input)
    frame = Frame(info.get("stack", run.stack), int(info.get("scope", unit.op_scope or 0)),
                  info.get("stage", suspend.stage), int(info.get("visit", 1)))
    from txcl.trace.recorder import TraceRecorder

    frame.rec = TraceRecorder("off", "", "", "")
    dispatch = Dispatch(opc=opc, token=None, run_id=run_record.run_id, unit_id=unit.unit_id, op_name=unit.op_name,
                        op_stack=unit.op_stack, stage=suspend.stage, exec_target=unit.exec_target,
                        directives=unit.directives, item_index=0, item_count=1, kind="sync",
                        input=interaction.input, deadline_ms=None, attempts=interaction.attempts)
    claims = await _run_sync_member(_EngineRef(service), walker, run, frame, pop, dispatch)
    for claim in claims:
        service.start_resume(claim)


class _EngineRef:
    """The little of an engine `_run_sync_member` needs."""

    def __init__(self, service: Any):
        self.service = service
