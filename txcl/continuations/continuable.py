"""``mode = "continuable"``: synchronous when quick, promoted to a continuation when slow.

1. preconditions (each ends the request with ``txcl_continuable_invalid``, HTTP 500): alone in
   its scope's set; no ``join_at_scope`` (that needs ``mode = "async"``); ``continue_after``
   greater than 0 and shorter than the op's timeout;
2. the op starts as a detached task with its own deadline (start + timeout);
3. it finishes first → tail, merge, step ``ok`` (transport ``continuable``); an op error ends
   the request with ``txcl_op_failed`` (502);
4. ``continue_after`` passes first → promotion: a ``promotion`` suspend with one ``local``
   unit (no token, deadline = start + timeout) and the client gets the suspend answer; when
   the task ends it admits its outcome (source ``local``), the release follows and this
   process resumes the run;
5. a process that dies loses the task: the run expires at its deadline.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from txcl import runtime_codes as rc
from txcl.continuations.model import OpClass, base_spec
from txcl.continuations.segment import adopt_run, fence_of, recorder_of, run_lost, run_spec, run_state
from txcl.runtime.budget import DISPATCH_FUEL
from txcl.runtime.dispatch import OpError
from txcl.runtime_codes import OP_FAILED
from txcl.store.errors import RunLost
from txcl.values.coerce import duration_to_ms

if TYPE_CHECKING:
    from txcl.continuations.ports import OpRunner, ContinuationServices
    from txcl.runtime.state import Frame, PreparedOp, Run

INVALID = rc.CONTINUABLE_INVALID.code


def _invalid(run: "Run", message: str) -> None:
    run.fail({"error": {"code": INVALID, "message": message}}, 500, reason=INVALID)


def _duration(directives: dict, key: str, default: int) -> int | None:
    raw = directives.get(key) if directives else None
    if raw is None:
        return default
    ms = duration_to_ms(raw)
    if ms is None or ms < 0:
        return default
    return ms


async def run_continuable(service: "ContinuationServices", walker: "OpRunner", run: "Run", frame: "Frame",
                          classes: list[tuple["PreparedOp", OpClass]]) -> list["PreparedOp"]:
    settings = service.settings
    pop, opclass = next((p, c) for p, c in classes if c.kind == "continuable")
    if len(classes) != 1:
        _invalid(run, f'mode = "continuable" requires a solo scope; scope {frame.scope} has {len(classes)} ops')
        return []
    if opclass.join_raw is not None:
        _invalid(run, f'join_at_scope (= {_show(opclass.join_raw)}) requires mode = "async"; '
                      f'it is not honored with mode = "continuable"')
        return []
    directives = pop.directives or {}
    continue_after = _duration(directives, "continue_after", settings.continue_after_default)
    timeout = _duration(directives, "timeout", settings.continuable_timeout_default)
    if not continue_after or continue_after <= 0:
        _invalid(run, "continue_after must be greater than 0")
        return []
    if continue_after >= timeout:
        _invalid(run, "continue_after must be shorter than timeout, or promotion never fires")
        return []
    rec = recorder_of(frame)
    target = pop.op.target
    started_wall, started = time.time(), time.perf_counter()
    start_ms = int(started_wall * 1000)
    op_input = walker.stamped_input(frame, pop, target, pop.prepared.dispatched)
    run.budget.charge(DISPATCH_FUEL)  # a continuable op is a normal EXEC until it is promoted

    async def call() -> Any:
        raw, _info = await walker.call_target(run, frame, pop, target, op_input, directives, timeout)
        return raw

    task = asyncio.get_running_loop().create_task(call())
    try:
        done, _ = await asyncio.wait({task}, timeout=continue_after / 1000.0)
    except asyncio.CancelledError:  # the client went away before promotion: cancel the op
        task.cancel()
        walker.record_step(run, frame, pop, "cancelled", "continuable", started_wall, started, rec,
                       error="cancelled", input_value=op_input)
        raise
    if task in done:
        try:
            raw = task.result()
        except OpError as exc:
            walker.record_step(run, frame, pop, exc.status, "continuable", started_wall, started, rec,
                           error=exc.message, input_value=op_input)
            run.fail({"error": {"code": OP_FAILED.code, "message": f"op {pop.name} failed: {exc.message}",
                                "op": pop.name}}, 502, reason=OP_FAILED.code)
            return []
        output, error, dropped = walker.tail(run, frame, pop, raw, bool(target.trusted))
        walker.note_dropped(rec, pop, dropped)
        from txcl.runtime.state import OpOutcome

        if output is None:
            walker.record_step(run, frame, pop, "error", "continuable", started_wall, started, rec, error=error,
                           input_value=op_input)
            run.fail({"error": {"code": OP_FAILED.code, "message": f"op {pop.name} failed: {error}",
                                "op": pop.name}}, 502, reason=OP_FAILED.code)
            return []
        frame.outcomes[pop.name] = OpOutcome(pop.name, output, "ok")
        frame.ran.append(pop.op)
        walker.record_step(run, frame, pop, "ok", "continuable", started_wall, started, rec, input_value=op_input,
                       output_value=output)
        return []
    # promotion: the op outlived `continue_after`, the run is parked
    spec = base_spec(frame, pop, "local", [op_input], deadline_ms=start_ms + timeout)
    try:
        park = await service.call_batched_on(
            run.run_id, service.store.park_suspend, run_spec(run, service.snapshot_of(walker.tree)), fence_of(run),
            stage=frame.stage, kind="promotion", envelope=run.envelope, budgets=run_state(run, frame), units=[spec])
    except RunLost as exc:
        task.cancel()
        run_lost(run, exc)
        return []
    adopt_run(run, park.run, rec)
    opc = park.dispatches[0].opc if park.dispatches else None
    rec.event("stage.promote-to-continuation", {"stage": frame.stage, "op": pop.name, "run_id": run.run_id,
                                                "continue_after_ms": continue_after})
    walker.record_step(run, frame, pop, "pending", "continuable", started_wall, started, rec, input_value=op_input,
                   extra={"unit_id": park.unit_ids[0] if park.unit_ids else None})
    rec.event("continuation.suspend", {"run_id": run.run_id, "stage": frame.stage, "visit": park.visit,
                                       "kind": "promotion"})
    run.status = "suspended"
    if opc is not None:
        service.spawn(_finish_promoted(service, task, opc, target.transport))
    return []


async def _finish_promoted(service: "ContinuationServices", task: asyncio.Task, opc: str, transport: str) -> None:
    """The detached op's end: admit its outcome (source `local`), release, resume here."""
    try:
        raw = await task
        status, payload = "completed", raw if raw is not None else {}
    except OpError as exc:
        status, payload = "failed", {"message": exc.message}
    except asyncio.CancelledError:
        return
    except Exception as exc:  # noqa: BLE001 - any failure of the op fails the run
        status, payload = "failed", {"message": f"{type(exc).__name__}: {exc}"}
    try:
        _, release = await service.complete(opc, status, payload, source="local", transport=transport)
    except Exception:  # noqa: BLE001 - the sweeper expires the run
        return
    if release is not None and release.won and release.claim is not None:
        service.start_resume(release.claim)


def _show(value: Any) -> str:
    if isinstance(value, str):
        return value
    from txcl.values.jsonio import dumps

    return dumps(value)


__all__ = ["run_continuable", "INVALID"]
