"""Deferred join (``WITH mode = "async", join_at_scope = N``): the wait is relocated, not removed.

- **dispatch**: the op leaves its scope's set; one transaction creates or reuses the run (its
  ops snapshot frozen) and inserts the units and their interactions (the first window
  ``dispatching``); after the commit the worker calls go out and only their acks are awaited.
  The unit is remembered on ``Run.joins``, so frames where no join is due never touch the
  store;
- **join check**, at the entry of every frame before WHEN: at the first frame whose scope
  reaches the floor — or the first frame of another stack — the store decides under the run
  lock: merge what has arrived (before WHEN), park the flow here as a ``join`` suspend, or end
  the request with the failed op's error. Exactly one joined marker per unit decides who
  merges when a callback races the check;
- **resume**: the release marked the members joined for the resuming segment, which merges
  them, applies their SET POST and then runs the join scope's own ops — they never ran before
  the suspend.

Beyond the wait itself (``WITH`` keys of the deferred op):

- ``join_deadline``: at the join, an op still running that long after its dispatch fails the
  run (``txcl_join_deadline``) instead of parking it; a flow parked at the join fails when the
  deadline passes (the store's join-deadline pass). With ``on_join_deadline = "continue"`` the
  op is passed over instead: the join scope runs without it, its late answer is recorded and
  never merged;
- ``join_wait``: at the join, wait in the request up to that long for an op that is nearly
  done before parking.

Several joins at one scope merge in the merge order (op name, then dispatch order), whatever
order they finished in. Suspends are keyed by visit, so a join scope may hold its own async
op (it parks again as the next visit) and a ``@goto`` loop may park at one stage repeatedly.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from txcl.continuations.apply import merge_joined, rebuild_op
from txcl.continuations.model import OpClass, build_unit, join_due
from txcl.continuations.segment import (
    adopt_run,
    fence_of,
    recorder_of,
    run_lost,
    run_spec,
    run_state,
    segment_of,
)
from txcl.runtime_codes import JOIN_DEADLINE, JOIN_FAILED, join_failed_error
from txcl.store.errors import RunLost
from txcl.store.records import ResumeBundle, UnitRecord, UnitSpec
from txcl.values.coerce import duration_to_ms

if TYPE_CHECKING:
    from txcl.continuations.ports import OpRunner, ContinuationServices
    from txcl.runtime.state import Frame, PreparedOp, Run
    from txcl.trace.recorder import TraceRecorder



def join_error(unit: UnitRecord) -> dict:
    """The run's error when the deferred op of ``unit`` failed (its worker's error attached)."""
    return join_failed_error(unit.op_name, unit.unit_id, unit.status, unit.error)


# ---------------------------------------------------------------------------------------------
# Run.joins: the in-memory list of outstanding joins (it travels with the run's state, so a
# resume has it too; the store re-checks each unit under the run lock)


def _join_entry(unit_id: str, pop: "PreparedOp", floor: int, stack: str) -> dict:
    entry: dict[str, Any] = {"unit_id": unit_id, "op": pop.name, "floor": floor, "stack": stack}
    raw = (pop.directives or {}).get("join_wait")
    wait_ms = duration_to_ms(raw) if raw is not None else None
    if wait_ms:
        entry["wait_ms"] = wait_ms
    return entry


def due_joins(run: "Run", frame: "Frame") -> list[dict]:
    """The outstanding joins this frame reaches (see :func:`txcl.continuations.model.join_due`)."""
    return [j for j in run.joins if join_due(j.get("stack"), int(j.get("floor", 0)), frame.stack, frame.scope)]


def _forget(run: "Run", unit_ids: set[str]) -> None:
    run.joins = [j for j in run.joins if j.get("unit_id") not in unit_ids]


def _fail_join(run: "Run", unit: UnitRecord, error: Any = None) -> None:
    error = error if error is not None else join_error(unit)
    if isinstance(error, dict) and error.get("code") == JOIN_DEADLINE.code:
        run.fail({"error": error}, 504, reason=JOIN_DEADLINE.code)
    else:
        run.fail({"error": error}, 502, reason=JOIN_FAILED.code)


async def _wait_for_nearly_done(service: "ContinuationServices", run: "Run", due: list[dict]) -> None:
    """``WITH join_wait``: before parking at the join, wait in the request up to the longest
    ``join_wait`` of the due ops for all of them to finish (checked every 50 ms, sooner when
    the store reports a change of the run)."""
    wait_ms = max(int(j.get("wait_ms") or 0) for j in due)
    if wait_ms <= 0:
        return
    until = time.monotonic() + wait_ms / 1000.0
    ids = [j["unit_id"] for j in due]
    while True:
        units = [await service.call(service.store.get_unit, unit_id) for unit_id in ids]
        if all(u is None or u.status != "waiting" for u in units):
            return
        left = until - time.monotonic()
        if left <= 0:
            return
        await service.wait_for_run(run.run_id, min(left, 0.05))


# ---------------------------------------------------------------------------------------------
# dispatch: the deferred ops leave their scope's set


async def dispatch(service: "ContinuationServices", walker: "OpRunner", run: "Run", frame: "Frame",
                   ops: list[tuple["PreparedOp", OpClass]]) -> None:
    """One transaction creates or reuses the run and inserts the units; after it commits the
    worker calls go out and only their acks are awaited."""
    rec = recorder_of(frame)
    ordered = sorted(ops, key=lambda pc: pc[0].name)
    specs: list[UnitSpec] = [build_unit(service.settings, frame, pop, opclass) for pop, opclass in ordered]
    try:
        result = await service.call(service.store.dispatch_deferred, run_spec(run, service.snapshot_of(walker.tree)),
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
            walker.record_step(run, frame, pop, "error", "async", started_wall, started, rec,
                               error=str(spec.failed_error.get("message", "dispatch failed")), extra=extra)
            data["error"] = spec.failed_error
        elif ack is not None and ack.ok or (d is None and not spec.items):
            if ack is not None:
                extra["ack"] = ack.job_id
            walker.record_step(run, frame, pop, "pending", "async", started_wall, started, rec, extra=extra,
                               input_value=d.input if d is not None else None)
        else:
            error = ack.error if ack is not None else "dispatch failed"
            walker.record_step(run, frame, pop, "error", "async", started_wall, started, rec, extra=extra,
                               error=error, input_value=d.input if d is not None else None)
            data["error"] = {"message": error}
        rec.event("continuation.dispatch", data)


# ---------------------------------------------------------------------------------------------
# the join check, at every frame entry before WHEN


async def join_check(service: "ContinuationServices", walker: "OpRunner", run: "Run", frame: "Frame") -> None:
    """Merge what has arrived of the joins due here, park the flow as a `join` suspend, or end
    the request with the failed op's error — decided by the store under the run lock, where
    exactly one joined marker per unit decides who merges."""
    due = due_joins(run, frame)
    if not due:
        return
    rec = recorder_of(frame)
    due_ids = {j["unit_id"] for j in due}
    await _wait_for_nearly_done(service, run, due)

    # the state to park with, should a due op still be waiting: the flow as it stands, these
    # joins settled by the park (the resume merges every one of them, in merge order)
    joins = run.joins
    _forget(run, due_ids)
    state = run_state(run, frame)
    run.joins = joins
    try:
        result = await service.call(
            service.store.join_check, run.run_id, fence_of(run), unit_ids=sorted(due_ids), stage=frame.stage,
            park_envelope=run.envelope, park_state=state)
    except RunLost as exc:
        run_lost(run, exc)
        return
    if result.passed_over:
        rec.event("continuation.join_deadline", {"stage": frame.stage, "action": "continue",
                                                 "ops": [u.op_name for u in result.passed_over]})
    if result.outcome == "failed":
        unit = result.failed
        assert unit is not None
        error = result.error if result.error is not None else join_error(unit)
        missed = isinstance(error, dict) and error.get("code") == JOIN_DEADLINE.code
        pop = rebuild_op(walker, run, unit)
        if pop is not None:
            now_wall, now = time.time(), time.perf_counter()
            walker.record_step(run, frame, pop, "timeout" if missed or unit.status == "timed_out" else "error",
                               "async", now_wall, now, rec, error=error.get("message") if isinstance(error, dict)
                               else str(error), extra={"unit_id": unit.unit_id, "joined": True})
        rec.event("continuation.join", {"where": "request", "stage": frame.stage, "failed": unit.op_name,
                                        **({"join_deadline": True} if missed else {})})
        _fail_join(run, unit, error)
        segment_of(run).finished_in_store = True  # the join check failed the run in its own transaction
        return
    if result.outcome == "parked":
        park = result.park
        assert park is not None
        adopt_run(run, park.run, rec)
        _forget(run, due_ids)
        rec.event("stage.suspend", {"stage": frame.stage, "visit": park.visit})
        rec.event("continuation.suspend", {"run_id": run.run_id, "stage": frame.stage, "visit": park.visit,
                                           "kind": "join"})
        run.status = "suspended"
        return
    # proceed: merge what the join check marked joined for this segment, before WHEN
    if result.merged:
        merge_joined(walker, run, frame, result.merged, rec, steps=False, join_error=join_error)
        rec.event("continuation.join", {"where": "request", "stage": frame.stage,
                                        "ops": [u.op_name for u in result.merged]})
    _forget(run, due_ids)


# ---------------------------------------------------------------------------------------------
# the join resume


async def resume_join(service: "ContinuationServices", walker: "OpRunner", run: "Run", frame: "Frame",
                      bundle: ResumeBundle, rec: "TraceRecorder") -> None:
    """Merge the joined members, apply their SET POST, then run the join scope's own ops (its
    join check is not repeated: the release marked the members joined)."""
    members = bundle.members
    bad = merge_joined(walker, run, frame, members, rec, steps=True, join_error=join_error)
    # every join due here is settled now: merged, or passed over at its join deadline
    _forget(run, {u.unit_id for u in members} | {j["unit_id"] for j in due_joins(run, frame)})
    if bad is not None:  # the worker failed after the flow suspended at the join: the run fails
        _fail_join(run, bad)
        return
    await walker.run_frame(run, frame, rec)


__all__ = ["dispatch", "join_check", "resume_join", "due_joins", "join_error"]
