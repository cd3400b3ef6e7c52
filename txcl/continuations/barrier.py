"""`mode = "async"`: a barrier at the op's own scope.

1. every op still in the scope's set is a member (async → unary/itemized unit, sync sibling
   → sync unit), ordered by op name;
2. park first: one transaction writes the suspend, units, interactions (first window
   `dispatching`) and moves the run to `waiting` — before anything is sent;
3. dispatch after the commit: POST every worker interaction and wait for its 202 (the ack
   is recorded; a failed ack is the interaction's failed outcome); run the sync siblings
   and admit their outcomes;
4. drain: the release check; a won release (here, or handed over by a callback of this
   process) continues inline in the same request; otherwise the segment ends suspended.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

import attrs

from txcl.continuations.apply import apply_members, rebuild_op
from txcl.continuations.model import OpClass, build_unit
from txcl.continuations.segment import (adopt_run, claimed_bundle, fence_of, recorder_of, run_lost, run_spec, run_state,
                                        set_claim)
from txcl.runtime.state import Frame, Run
from txcl.store.errors import RunLost
from txcl.store.records import UNIT_BAD, ClaimRecord, Dispatch
from txcl.trace.recorder import TraceRecorder
from txcl.values.merge import deep_copy

if TYPE_CHECKING:
    from txcl.continuations.ports import OpRunner, ContinuationServices
    from txcl.runtime.state import PreparedOp


async def park_barrier(service: "ContinuationServices", walker: "OpRunner", run: Run, frame: Frame,
                       classes: list[tuple["PreparedOp", OpClass]]) -> None:
    """Every op still in the scope's set becomes a member: park, dispatch, drain."""
    store = service.store
    rec = recorder_of(frame)
    members = sorted(classes, key=lambda pc: pc[0].name)
    specs = [build_unit(service.settings, frame, pop, c) for pop, c in members]
    try:
        park = await service.call_batched_on(
            run.run_id, store.park_suspend, run_spec(run, service.snapshot_of(walker.tree)), fence_of(run), stage=frame.stage,
            kind="barrier", envelope=run.envelope, budgets=run_state(run, frame), units=specs)
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

        def drain() -> Any:  # the barrier's release check, in the ack marking's thread hop
            # When every open member still lacks terminals (and none failed), draining can change
            # nothing and each missing outcome's own completion will settle and release: skip the write
            # transaction (a read decides). A member that could settle now — all terminals in,
            # or zero items — is drained.
            units = [store.get_unit(u) for u in member_ids]
            open_units = [u for u in units if u is not None and u.status == "waiting"]
            if open_units and not any(u is not None and u.status in UNIT_BAD for u in units) and all(
                    u.provider_done < u.expected for u in open_units):
                return None
            return store.try_release(run_id)

        if syncs:
            results = await asyncio.gather(
                service.send_then(workers, origin),
                *(_run_sync_member(service, walker, frame, by_unit[d.unit_id][0], d, run) for d in syncs))
            acks, claims, _ = results[0]
            for extra in results[1:]:
                claims.extend(extra)
            drained = None
        else:
            # A member with a call out settles when that call's outcome is admitted, and the
            # admission tries the release itself; only a member that can settle with no outcome
            # (zero items, or failed at dispatch) needs the drain now.
            called = {d.unit_id for d in park.dispatches}
            needs_drain = any(unit_id not in called for unit_id in member_ids)
            acks, claims, drained = await service.send_then(workers, origin, after=drain if needs_drain else None)
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
                    walker.record_step(run, frame, pop, "pending", "async", started_wall, started, rec, extra=extra,
                                   input_value=d.input)
                else:
                    walker.record_step(run, frame, pop, "error", "async", started_wall, started, rec, extra=extra,
                                   error=ack.error if ack is not None else "dispatch failed", input_value=d.input)
        # one release per suspend: at most one claim can have been won (units that failed at
        # dispatch, with no interactions, are released by the drain below)
        claim = claims[0] if claims else None
        if claim is None:
            release = drained if (drained is not None or not syncs) else await service.call(drain)
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
    await continue_inline(service, walker, run, frame, claim, {p.name: p for p, _ in members})


async def continue_inline(service: "ContinuationServices", walker: "OpRunner", run: Run, frame: Frame,
                          claim: ClaimRecord, pops: dict[str, "PreparedOp"] | None = None) -> None:
    """The request drained its own suspend: go on as a new segment in the same request."""
    rec = recorder_of(frame)
    rec.event("continuation.resume", {"run_id": run.run_id, "origin_rid": run.origin_rid, "stage": claim.stage,
                                      "visit": claim.visit, "snapshot_id": run.snapshot_id,
                                      "attempt": claim.attempt, "inline": True})
    set_claim(run, claim.segment_id, claim.claim_token, claim.heartbeat_ms)
    try:
        bundle = await claimed_bundle(service, claim)
    except RunLost as exc:
        run_lost(run, exc)
        return
    apply_members(walker, run, frame, bundle.members, rec, pops)


async def _run_sync_member(service: "ContinuationServices", walker: "OpRunner", frame: Frame, pop: "PreparedOp",
                           dispatch: Dispatch, run: Run) -> list[ClaimRecord]:
    """Run a sync sibling under its normal timeout (its tail included) and admit the outcome
    as its terminal (source `sync`; an error stays best effort)."""
    scratch = Frame(frame.stack, frame.scope, frame.stage, frame.visit)
    scratch.rec = recorder_of(frame)
    if pop.op.target is None:
        walker.finish_op(run, scratch, pop, {}, True, "noop", time.time(), time.perf_counter(), scratch.rec)
    else:
        await walker.run_op(run, scratch, pop, scratch.rec)
    outcome = scratch.outcomes.get(pop.name)
    target = pop.op.target
    transport = target.transport if target is not None else "noop"
    if outcome is not None and outcome.output is not None:
        status, payload = "completed", outcome.output
    else:
        status, payload = "failed", {"message": outcome.error if outcome is not None else "op did not run"}
    _, release = await service.complete(dispatch.opc, status, payload, source="sync",
                                        best_effort=status == "failed", transport=transport)
    if release is not None and release.won and release.claim is not None:
        return [release.claim]
    return []


async def rerun_sync_member(service: "ContinuationServices", opc: str) -> None:
    """A barrier's sync sibling whose outcome was never recorded (the parking process died)
    is re-run here from its stored input against the run's snapshot (at least once) and
    admitted like the original would have been."""
    store = service.store
    interaction = await service.call(store.get_interaction, opc)
    if interaction is None or await service.call(store.get_terminal, opc) is not None:
        return
    unit = await service.call(store.get_unit, interaction.unit_id)
    run_record = await service.call(store.get_run, interaction.run_id)
    if unit is None or run_record is None or unit.status != "waiting":
        return
    suspends = await service.call(store.list_suspends, run_record.run_id)
    suspend = next((s for s in suspends if any(m[0] == unit.unit_id for m in s.members)), None)
    if suspend is None:
        return
    walker = service.walker_for(run_record.snapshot_id)
    state = dict(suspend.budgets or {})
    info = state.pop("frame", None) or {}
    state["envelope"] = deep_copy(suspend.envelope)
    run = Run.from_json(state)
    run.status = "running"
    pop = rebuild_op(walker, run, unit)
    if pop is None:
        return
    if isinstance(interaction.input, dict):
        pop.prepared = attrs.evolve(pop.prepared, dispatched=interaction.input)
    frame = Frame(info.get("stack", run.stack), int(info.get("scope", unit.op_scope or 0)),
                  info.get("stage", suspend.stage), int(info.get("visit", 1)))
    frame.rec = TraceRecorder("off", "", "", "")
    dispatch = Dispatch(opc=opc, token=None, run_id=run_record.run_id, unit_id=unit.unit_id, op_name=unit.op_name,
                        op_stack=unit.op_stack, stage=suspend.stage, exec_target=unit.exec_target,
                        directives=unit.directives, item_index=0, item_count=1, kind="sync",
                        input=interaction.input, deadline_ms=None, attempts=interaction.attempts)
    for claim in await _run_sync_member(service, walker, frame, pop, dispatch, run):
        service.start_resume(claim)


__all__ = ["park_barrier", "continue_inline", "rerun_sync_member"]
