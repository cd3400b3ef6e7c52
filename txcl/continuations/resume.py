"""Resuming a released run (CONTINUATIONS.md §2.2 step 6, §5.4 P5/P11; RUNTIME.md §8.2).

After the release (one compare-and-swap, P5) the winner holds the resume claim. `resume_run`
loads the suspend (envelope, budgets, position) and its member units, rebuilds the walk over
the run's frozen ops snapshot and drives it as a new segment whose trace id is
`resume-<run>-<stage>-v<visit>` (`-a<n>` after a takeover). Every frame entry of a resumed
segment heartbeats its claim (P11); a failed fence ends the segment with `txcl_run_lost`.

Suspend kinds map to resumers: `barrier` and `promotion` merge their members' stored
outcomes into the scope (its ops already ran) and finish the scope; `join` is registered by
the deferred plug-in (`RESUMERS["join"]`): it merges the joined outputs and then runs the join
scope's own ops.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable

import attrs

from txcl.continuations.engine import run_lost, set_claim
from txcl.store.errors import RunLost
from txcl.store.records import UNIT_BAD, ClaimRecord, ResumeBundle, UnitRecord
from txcl.testing.faults import fault_point

if TYPE_CHECKING:
    from txcl.continuations.service import ContinuationService
    from txcl.runtime.state import Frame, PreparedOp, Run
    from txcl.runtime.walker import Walker
    from txcl.trace.recorder import TraceRecorder

log = logging.getLogger("txcl.continuations")

Resumer = Callable[["ContinuationService", "Walker", "Run", "Frame", ResumeBundle, "TraceRecorder"], Awaitable[None]]
RESUMERS: dict[str, Resumer] = {}


def register_resumer(kind: str, resumer: Resumer) -> None:
    """Plug in the resume of one suspend kind (deferred.py registers `join`)."""
    RESUMERS[kind] = resumer


# ---------------------------------------------------------------------------------------------
# merging stored member outcomes into a scope


def rebuild_op(walker: "Walker", run: "Run", unit: UnitRecord) -> "PreparedOp | None":
    """The member's PreparedOp from the snapshot rule plus its stored input view and directives."""
    from txcl.evaluate.rule import prepare
    from txcl.runtime.state import PreparedOp
    from txcl.values.merge import deep_copy

    op = walker.tree.find(unit.op_stack, unit.op_scope, unit.op_name) if unit.op_stack is not None else None
    if op is None:
        return None
    prepared = prepare(op.rule, deep_copy(run.envelope))
    changes: dict[str, Any] = {}
    if isinstance(unit.input_view, dict):
        changes["input"] = unit.input_view
    if isinstance(unit.directives, dict):
        changes["directives"] = unit.directives
    if changes:
        prepared = attrs.evolve(prepared, **changes)
    mode = unit.directives.get("mode") if isinstance(unit.directives, dict) else None
    return PreparedOp(op, prepared, mode if mode in ("async", "continuable") else "sync")


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        message = error.get("message")
        if isinstance(message, str):
            return message
    if isinstance(error, str):
        return error
    from txcl.values.jsonio import dumps

    return dumps(error)


def apply_members(walker: "Walker", run: "Run", frame: "Frame", members: tuple[UnitRecord, ...] | list[UnitRecord],
                  rec: "TraceRecorder", pops: dict[str, "PreparedOp"] | None = None) -> None:
    """§2.2 step 6: each member's outcome goes through the rest of its tail into
    `frame.outcomes` (merged later by `complete_scope` in op-name order); a failed async
    member fails the run with `txcl_op_failed`."""
    from txcl.runtime.state import OpOutcome

    failure: tuple[UnitRecord, Any] | None = None
    now_wall, now = time.time(), time.perf_counter()
    for unit in sorted(members, key=lambda u: (u.op_name, u.created_seq)):
        pop = (pops or {}).get(unit.op_name) or rebuild_op(walker, run, unit)
        if pop is None:
            if unit.status in UNIT_BAD and failure is None:
                failure = (unit, unit.error)
            continue
        op = pop.op
        name = unit.op_name
        if unit.kind == "sync":  # already through its tail when it ran; best effort
            if unit.status == "completed" and unit.error is None and isinstance(unit.output, dict):
                frame.outcomes[name] = OpOutcome(name, unit.output, "ok")
            else:
                frame.outcomes[name] = OpOutcome(name, None, "error", _error_text(unit.error))
            frame.ran.append(op)
            continue
        transport = "continuable" if unit.kind == "local" else "async"
        extra = {"unit_id": unit.unit_id}
        if unit.kind == "itemized":
            extra["items"] = unit.expected
        if unit.status == "completed":
            trusted = bool(op.target is not None and op.target.trusted) if unit.kind == "local" else False
            output, error, dropped = walker.tail(run, frame, pop, unit.output, trusted)
            walker._note_drops(rec, pop, dropped)
            if output is None:
                frame.outcomes[name] = OpOutcome(name, None, "error", error)
                walker._record(run, frame, pop, "error", transport, now_wall, now, rec, error=error, extra=extra)
            else:
                frame.outcomes[name] = OpOutcome(name, output, "completed")
                walker._record(run, frame, pop, "completed", transport, now_wall, now, rec, output_value=output,
                               extra=extra)
            frame.ran.append(op)
            continue
        message = _error_text(unit.error) if unit.error is not None else unit.status.replace("_", " ")
        walker._record(run, frame, pop, "timeout" if unit.status == "timed_out" else "error", transport, now_wall,
                       now, rec, error=message, extra=extra)
        if unit.status in ("failed", "timed_out") and (failure is None or failure[0].status == "cancelled"):
            failure = (unit, unit.error)
        elif failure is None:
            failure = (unit, unit.error)
    if failure is not None:
        unit, error = failure
        detail = error if error is not None else {"message": unit.status.replace("_", " ")}
        code = "txcl_op_failed"
        run.fail({"error": {"code": code, "message": f"op {unit.op_name} {unit.status.replace('_', ' ')}: "
                                                     f"{_error_text(detail)}", "op": unit.op_name, "detail": detail}},
                 502, reason=code)


async def resume_members(service: "ContinuationService", walker: "Walker", run: "Run", frame: "Frame",
                         bundle: ResumeBundle, rec: "TraceRecorder") -> None:
    """Barrier and promotion resumes: merge, SET POST, deletes, control; then walk on."""
    apply_members(walker, run, frame, bundle.members, rec)
    if not run.finished:
        walker.complete_scope(run, frame, rec)


register_resumer("barrier", resume_members)
register_resumer("promotion", resume_members)


# ---------------------------------------------------------------------------------------------
# driving a resume


async def heartbeat_at_frame(service: "ContinuationService", run: "Run") -> bool:
    """P11 at a frame entry of a resumed segment; False (run lost) when the fence failed."""
    token = run.__dict__.get("claim_token")
    if token is None or run.run_id is None:
        return True
    try:
        await service.run_store(service.store.heartbeat, run.run_id, token)
    except RunLost as exc:
        run_lost(run, exc)
        return False
    fault_point("resume-frame")
    return True


def run_from_suspend(bundle: ResumeBundle) -> tuple["Run", dict]:
    from txcl.runtime.state import Run
    from txcl.values.merge import deep_copy

    state = dict(bundle.suspend.budgets or {})
    frame_info = state.pop("frame", None) or {}
    state["envelope"] = deep_copy(bundle.suspend.envelope)
    run = Run.from_json(state)
    run.status = "running"
    run.error = None
    run.http_status = None
    run.reason = None
    record = bundle.run
    run.run_id, run.rcid, run.origin_rid, run.snapshot_id = (record.run_id, record.rcid, record.origin_rid,
                                                           record.snapshot_id)
    return run, frame_info


async def resume_run(service: "ContinuationService", claim: ClaimRecord) -> Any:
    """Drive one released (or taken-over) suspend to its next park or the run's end."""
    from txcl.runtime.state import Frame
    from txcl.trace.recorder import TraceRecorder

    store = service.store
    try:
        bundle = store.claim_resume(claim.run_id, claim.claim_token)  # a short read
    except RunLost as exc:
        log.info("txcl: resume of %s abandoned: %s", claim.run_id, exc)
        return None
    fault_point("resume-frame")
    tree = service.tree_for_snapshot(bundle.run.snapshot_id)
    interp = service.interpreter(tree)
    walker = interp.walker
    run, info = run_from_suspend(bundle)
    set_claim(run, claim.segment_id, claim.claim_token)
    settings = service.settings
    rec = TraceRecorder(settings.trace_mode, claim.segment_id, "continuation", run.entry_stack,
                        body_cap=settings.trace_body_cap_bytes, origin_rid=run.origin_rid, run_id=run.run_id)
    rec.event("continuation.resume", {"run_id": run.run_id, "origin_rid": run.origin_rid, "stage": claim.stage,
                                      "visit": claim.visit, "snapshot_id": run.snapshot_id, "attempt": claim.attempt})
    stack = info.get("stack", run.stack)
    scope = int(info.get("scope", run.requested_scope))
    frame = Frame(stack, scope, info.get("stage", claim.stage), int(info.get("visit", 1)))
    frame.rec = rec
    for name in run.stacks_seen:
        omit, redact = walker._redaction_paths(name)
        if omit or redact:
            rec.add_redactions(omit, redact)
    resumer = RESUMERS.get(bundle.suspend.kind)
    if resumer is None:
        run.fail({"error": {"code": "txcl_run_lost",
                            "message": f"no resumer for suspend kind {bundle.suspend.kind!r}"}}, 503,
                 reason="unsupported_suspend")
    else:
        await resumer(service, walker, run, frame, bundle, rec)
    beat = asyncio.get_running_loop().create_task(_heartbeat_loop(service, run.run_id, claim.claim_token))
    try:
        return await interp.drive(run, rec)
    finally:
        beat.cancel()


async def _heartbeat_loop(service: "ContinuationService", run_id: str | None, token: str) -> None:
    """P11 at least every quarter of the stale period while the segment runs (frame entries
    heartbeat too), so a long op inside a resume never looks stale."""
    period = service.settings.continuation_stale_resume_after / 4000.0
    if not run_id or period <= 0:
        return
    while True:
        await asyncio.sleep(period)
        try:
            await asyncio.to_thread(service.store.heartbeat, run_id, token)
        except RunLost:
            return
        except Exception:  # noqa: BLE001 - the next fenced write decides
            log.warning("txcl: heartbeat of %s failed", run_id)


__all__ = ["resume_run", "apply_members", "rebuild_op", "register_resumer", "RESUMERS", "heartbeat_at_frame",
           "run_from_suspend", "resume_members"]
