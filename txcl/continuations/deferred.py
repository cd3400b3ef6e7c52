"""Deferred join (`WITH mode = "async", join_at_scope = N`, CONTINUATIONS.md §2.3).

The wait is relocated, not removed:

- **dispatch** (RUNTIME.md §3.2 step 9): the op leaves its scope's set; one transaction
  creates or reuses the run (P1, status `active`, ops snapshot frozen) and inserts the units
  and their interactions (first window `dispatching`); after the commit the worker calls go
  out and only their acks are awaited (DJ-1). The unit is remembered on `Run.joins`, a cache
  of the outstanding joins that lets frames without a due join skip the store entirely;
- **join check** (step 3): at the first frame whose scope is ≥ the floor — or the first frame
  of another stack (DJ-7) — P6 decides under the run lock: merge what has arrived (the merge
  happens before WHEN, DJ-3), park the flow here as a `join` suspend, or end the request with
  the failed op's error. Exactly one joined marker per unit decides who merges (DJ-5, §5.6);
- **resume** (`RESUMERS["join"]`): the release inserted the markers for the resuming segment,
  which merges the members in (op name, dispatch order), applies their SET POST and then runs
  the join scope's own ops — they never ran before the suspend (DJ-4).

Several joins at one scope merge by op name, then dispatch order, whatever order they
finished in. Suspends are keyed by visit in the store, so a join scope may hold its own async
op (it parks again as visit v+1, DJ-8) and a `@goto` loop may park at one stage repeatedly.
"""

from __future__ import annotations

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
from txcl.store.records import UnitRecord, UnitSpec

if TYPE_CHECKING:
    from txcl.continuations.engine import ContinuationEngine
    from txcl.continuations.service import ContinuationService
    from txcl.runtime.state import Frame, PreparedOp, Run
    from txcl.runtime.walker import Walker
    from txcl.store.records import ResumeBundle
    from txcl.trace.recorder import TraceRecorder

JOIN_FAILED = "txcl_join_failed"


# ---------------------------------------------------------------------------------------------
# Run.joins: the in-memory cache of outstanding joins (the store decides; this only avoids a
# transaction at frames where nothing can be due)


def _join_entry(unit_id: str, pop: "PreparedOp", floor: int, stack: str) -> dict:
    return {"unit_id": unit_id, "op": pop.name, "floor": floor, "stack": stack}


def due_joins(run: "Run", frame: "Frame") -> list[dict]:
    """Joins whose floor this frame reaches: same stack and scope ≥ floor, or another stack."""
    return [j for j in run.joins if j.get("stack") != frame.stack or int(j.get("floor", 0)) <= frame.scope]


def _forget(run: "Run", unit_ids: set[str]) -> None:
    run.joins = [j for j in run.joins if j.get("unit_id") not in unit_ids]


# ---------------------------------------------------------------------------------------------
# merging joined units (shared by the in-request merge and the join resume)


def join_error(unit: UnitRecord) -> dict:
    """The run's error when a deferred unit failed (`txcl_join_failed`, the worker's error attached)."""
    from txcl.continuations.resume import _error_text

    status = unit.status.replace("_", " ")
    detail = unit.error if unit.error is not None else {"message": status}
    return {"code": JOIN_FAILED, "message": f"deferred op {unit.op_name} {status}: {_error_text(detail)}",
            "op": unit.op_name, "unit_id": unit.unit_id, "detail": detail}


def merge_joined(walker: "Walker", run: "Run", frame: "Frame", units: tuple[UnitRecord, ...] | list[UnitRecord],
                 rec: "TraceRecorder", *, steps: bool) -> UnitRecord | None:
    """Each completed unit's tail (`into`, object check, sanitising, EMIT) then its merge, in
    (op name, dispatch order); then the SET POST of those rules in op-name order (DJ-5).

    Returns the first failed unit instead of merging when one is bad (the caller fails the
    run). `steps=True` (a resume) records one `completed` step per joined op; an in-request
    merge records none (the merged fields show up in the join scope's inputs)."""
    from txcl.continuations.resume import rebuild_op
    from txcl.evaluate.rule import apply_set_post
    from txcl.store.records import UNIT_BAD
    from txcl.values.merge import merge_into

    ordered = sorted(units, key=lambda u: (u.op_name, u.created_seq))
    bad = next((u for u in ordered if u.status in UNIT_BAD), None)
    now_wall, now = time.time(), time.perf_counter()
    if bad is not None:
        pop = rebuild_op(walker, run, bad)
        if steps and pop is not None:
            status = "timeout" if bad.status == "timed_out" else "error"
            walker._record(run, frame, pop, status, "async", now_wall, now, rec, error=join_error(bad)["message"],
                           extra={"unit_id": bad.unit_id, "joined": True})
        return bad
    rules = []
    for unit in ordered:
        pop = rebuild_op(walker, run, unit)
        if pop is None:  # the snapshot always holds the rule; guard a hand-edited store anyway
            continue
        extra: dict[str, Any] = {"unit_id": unit.unit_id, "joined": True}
        if unit.kind == "itemized":
            extra["items"] = unit.expected
        output, error, dropped = walker.tail(run, frame, pop, unit.output, False)
        walker._note_drops(rec, pop, dropped)
        if output is None:  # an op error (R3): output dropped, EMIT not run, SET POST still applies
            walker._record(run, frame, pop, "error", "async", now_wall, now, rec, error=error, extra=extra)
        else:
            if output:
                merge_into(run.envelope, output)
            if steps:
                walker._record(run, frame, pop, "completed", "async", now_wall, now, rec, output_value=output,
                               extra=extra)
        rules.append(pop.op)
    if any(walker.facts(op).has_set_post for op in rules):
        result = apply_set_post([op.rule for op in sorted(rules, key=lambda o: o.name)], run.envelope)
        run.envelope = result.envelope
        if result.error is not None:
            rec.event("envelope.set_post_failed", {"stage": frame.stage, "error": result.error})
    return None


def _fail_join(run: "Run", unit: UnitRecord) -> None:
    run.fail({"error": join_error(unit)}, 502, reason=JOIN_FAILED)


# ---------------------------------------------------------------------------------------------
# the plug-in


class DeferredJoin:
    """`engine.deferred`: dispatch at step 9, the join check at step 3."""

    # step 9 ---------------------------------------------------------------------------------
    async def dispatch(self, engine: "ContinuationEngine", walker: "Walker", run: "Run", frame: "Frame",
                       ops: list[tuple["PreparedOp", OpClass]]) -> None:
        service = engine.service
        rec = recorder_of(frame)
        ordered = sorted(ops, key=lambda pc: pc[0].name)
        specs: list[UnitSpec] = []
        for pop, opclass in ordered:
            builder = UNIT_BUILDERS.get(opclass.unit_kind or "unary")
            if builder is None:
                specs.append(UnitSpec(kind=opclass.unit_kind or "unary", op_name=pop.name, op_stack=pop.op.stack,
                                      op_scope=pop.op.scope, dispatch_stage=frame.stage, dispatch_stack=frame.stack,
                                      join_at_scope=opclass.join_at_scope, exec_target=pop.op.exec_text,
                                      failed_error={"message": f"{opclass.unit_kind} await units are not supported"}))
            else:
                specs.append(builder(engine, run, frame, pop, opclass))
        try:
            result = await service.run_store(service.store.dispatch_deferred, run_spec(engine, walker, run),
                                             fence_of(run), specs)
        except RunLost as exc:
            run_lost(run, exc)
            return
        adopt_run(run, result.run, rec)
        if result.created:
            rec.event("continuation.run", {"run_id": run.run_id, "created_by": "deferred-dispatch"})
        started_wall, started = time.time(), time.perf_counter()
        acks, claims = await service.send(result.dispatches, run.origin_rid or run.rid)
        for claim in claims:  # cannot happen while this segment drives the run; never lose one
            service.start_resume(claim)
        ack_by_opc = {a.opc: a for a in acks}
        first_dispatch = {}
        for d in result.dispatches:
            first_dispatch.setdefault(d.unit_id, d)
        for (pop, opclass), unit_id, spec in zip(ordered, result.unit_ids, specs):
            run.joins.append(_join_entry(unit_id, pop, int(opclass.join_at_scope or 0), frame.stack))
            extra: dict[str, Any] = {"unit_id": unit_id, "join_at_scope": opclass.join_at_scope}
            if spec.kind == "itemized":
                extra["items"] = len(spec.items)
            d = first_dispatch.get(unit_id)
            ack = ack_by_opc.get(d.opc) if d is not None else None
            data = {"run_id": run.run_id, "op": pop.name, "unit_id": unit_id, "stage": frame.stage,
                    "join_at_scope": opclass.join_at_scope}
            if spec.failed_error is not None:
                walker._record(run, frame, pop, "error", "async", started_wall, started, rec,
                               error=str(spec.failed_error.get("message", "dispatch failed")), extra=extra)
                data["error"] = spec.failed_error
            elif ack is not None and ack.ok or (d is None and not spec.items):
                if ack is not None:
                    extra["ack"] = ack.job_id
                walker._record(run, frame, pop, "pending", "async", started_wall, started, rec, extra=extra,
                               input_value=d.input if d is not None else None)
            else:
                error = ack.error if ack is not None else "dispatch failed"
                walker._record(run, frame, pop, "error", "async", started_wall, started, rec, extra=extra,
                               error=error, input_value=d.input if d is not None else None)
                data["error"] = {"message": error}
            rec.event("continuation.dispatch", data)

    # step 3 ---------------------------------------------------------------------------------
    async def join_check(self, engine: "ContinuationEngine", walker: "Walker", run: "Run", frame: "Frame") -> None:
        due = due_joins(run, frame)
        if not due:
            return
        service = engine.service
        rec = recorder_of(frame)
        due_ids = {j["unit_id"] for j in due}
        parked_envelope: dict = {}

        def build_park(merged: tuple[UnitRecord, ...]) -> tuple[Any, Any]:
            # runs inside P6 (the run is locked); the event loop is awaiting this thread
            bad = merge_joined(walker, run, frame, merged, rec, steps=False)
            assert bad is None  # P6 hands over completed units only
            _forget(run, due_ids)
            parked_envelope["envelope"] = run.envelope
            return run.envelope, run_state(run, frame)

        try:
            result = await service.run_store(
                service.store.join_check, run.run_id, fence_of(run), stage=frame.stage, stack=frame.stack,
                scope=frame.scope, build_park=build_park, materialize=service.materialize, join_error=join_error)
        except RunLost as exc:
            run_lost(run, exc)
            return
        if result.outcome == "failed":
            unit = result.failed
            assert unit is not None
            pop = _rebuilt(walker, run, unit)
            if pop is not None:
                now_wall, now = time.time(), time.perf_counter()
                walker._record(run, frame, pop, "timeout" if unit.status == "timed_out" else "error", "async",
                               now_wall, now, rec, error=join_error(unit)["message"],
                               extra={"unit_id": unit.unit_id, "joined": True})
            rec.event("continuation.join", {"where": "request", "stage": frame.stage, "failed": unit.op_name})
            _fail_join(run, unit)
            run.__dict__["finished_in_store"] = True  # P6 already wrote P7 (run failed) in its transaction
            service.notify_run(run.run_id)
            return
        if result.outcome == "parked":
            park = result.park
            assert park is not None
            adopt_run(run, park.run, rec)
            if result.merged:
                rec.event("continuation.join", {"where": "request", "stage": frame.stage,
                                                "ops": [u.op_name for u in result.merged]})
            rec.event("stage.suspend", {"stage": frame.stage, "visit": park.visit})
            rec.event("continuation.suspend", {"run_id": run.run_id, "stage": frame.stage, "visit": park.visit,
                                               "kind": "join"})
            run.status = "suspended"
            return
        # proceed: merge what P6 marked for this segment, before WHEN (DJ-3)
        if result.merged:
            merge_joined(walker, run, frame, result.merged, rec, steps=False)
            rec.event("continuation.join", {"where": "request", "stage": frame.stage,
                                            "ops": [u.op_name for u in result.merged]})
        _forget(run, due_ids)


def _rebuilt(walker: "Walker", run: "Run", unit: UnitRecord) -> "PreparedOp | None":
    from txcl.continuations.resume import rebuild_op

    return rebuild_op(walker, run, unit)


# ---------------------------------------------------------------------------------------------
# the join resume (DJ-4)


async def resume_join(service: "ContinuationService", walker: "Walker", run: "Run", frame: "Frame",
                      bundle: "ResumeBundle", rec: "TraceRecorder") -> None:
    """Merge the joined members, apply their SET POST, then run the join scope's own ops from
    RUNTIME.md §3.2 step 4 (its join check is not repeated: the release marked the members)."""
    members = bundle.members
    bad = merge_joined(walker, run, frame, members, rec, steps=True)
    _forget(run, {u.unit_id for u in members})
    if bad is not None:  # DJ-F3 after a suspend: the stage fails, the run fails
        _fail_join(run, bad)
        return
    await walker.run_frame(run, frame, rec)


def install(engine: "ContinuationEngine") -> None:
    """Called by `ContinuationEngine.__init__`: deferred dispatch, join check and join resume."""
    from txcl.continuations.resume import register_resumer

    engine.deferred = DeferredJoin()
    register_resumer("join", resume_join)


__all__ = ["DeferredJoin", "install", "merge_joined", "resume_join", "due_joins", "join_error", "JOIN_FAILED"]
