"""Stored outcomes back into the walk: rebuild a member's op, and merge what arrived.

- :func:`rebuild_op`: a unit's ``PreparedOp`` from the run's snapshot rule plus its stored
  input view and directives;
- :func:`apply_members`: a barrier's (or a promoted op's) member outcomes into the scope's
  ``frame.outcomes``, through the rest of each op's tail — the walker's end of scope then
  merges them as it merges every scope;
- :func:`merge_joined`: deferred results at their join, merged (and their SET POST applied)
  through the walker's one merge.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Sequence

import attrs

from txcl.continuations.model import merge_order
from txcl.evaluate.rule import prepare
from txcl.runtime.state import OpOutcome, PreparedOp
from txcl.runtime_codes import OP_FAILED, error_text
from txcl.store.records import UNIT_BAD, UnitRecord
from txcl.values.merge import deep_copy

if TYPE_CHECKING:
    from txcl.continuations.ports import OpRunner
    from txcl.runtime.state import Frame, Run
    from txcl.trace.recorder import TraceRecorder


def rebuild_op(walker: "OpRunner", run: "Run", unit: UnitRecord) -> PreparedOp | None:
    """The member's PreparedOp from the snapshot rule plus its stored input view and directives
    (None when the snapshot lacks the rule: a hand-edited store)."""
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


def charge_own_fuel(run: "Run", unit: UnitRecord) -> None:
    """A unit that ran inside txcl (an ``mcp+`` op) spent fuel of its own; the flow pays it
    when the unit is merged."""
    if unit.fuel_used:
        run.budget.charge(unit.fuel_used)


def _status_text(unit: UnitRecord) -> str:
    return unit.status.replace("_", " ")


def apply_members(walker: "OpRunner", run: "Run", frame: "Frame", members: Sequence[UnitRecord],
                  rec: "TraceRecorder", pops: dict[str, PreparedOp] | None = None) -> None:
    """Each member's outcome goes through the rest of its tail into ``frame.outcomes``; a
    failed awaited member fails the run with ``txcl_op_failed``."""
    failure: UnitRecord | None = None
    now_wall, now = time.time(), time.perf_counter()
    for unit in sorted(members, key=merge_order):
        pop = (pops or {}).get(unit.op_name) or rebuild_op(walker, run, unit)
        if pop is None:
            if unit.status in UNIT_BAD and failure is None:
                failure = unit
            continue
        op = pop.op
        name = unit.op_name
        if unit.kind == "sync":  # already through its tail when it ran; best effort
            if unit.status == "completed" and unit.error is None and isinstance(unit.output, dict):
                frame.outcomes[name] = OpOutcome(name, unit.output, "ok")
            else:
                frame.outcomes[name] = OpOutcome(name, None, "error", error_text(unit.error))
            frame.ran.append(op)
            continue
        transport = "continuable" if unit.kind == "local" else "async"
        charge_own_fuel(run, unit)
        extra: dict[str, Any] = {"unit_id": unit.unit_id}
        if unit.kind == "itemized":
            extra["items"] = unit.expected
        if unit.status == "completed":
            trusted = bool(op.target is not None and op.target.trusted) if unit.kind == "local" else False
            output, error, dropped = walker.tail(run, frame, pop, unit.output, trusted)
            walker.note_dropped(rec, pop, dropped)
            if output is None:
                frame.outcomes[name] = OpOutcome(name, None, "error", error)
                walker.record_step(run, frame, pop, "error", transport, now_wall, now, rec, error=error, extra=extra)
            else:
                frame.outcomes[name] = OpOutcome(name, output, "completed")
                walker.record_step(run, frame, pop, "completed", transport, now_wall, now, rec, output_value=output,
                                   extra=extra)
            frame.ran.append(op)
            continue
        message = error_text(unit.error) if unit.error is not None else _status_text(unit)
        walker.record_step(run, frame, pop, "timeout" if unit.status == "timed_out" else "error", transport,
                           now_wall, now, rec, error=message, extra=extra)
        # the member that failed, not one cancelled because of it, names the failure
        if failure is None or (unit.status in ("failed", "timed_out") and failure.status == "cancelled"):
            failure = unit
    if failure is not None:
        detail = failure.error if failure.error is not None else {"message": _status_text(failure)}
        run.fail({"error": {"code": OP_FAILED.code, "message": f"op {failure.op_name} {_status_text(failure)}: "
                                                          f"{error_text(detail)}",
                            "op": failure.op_name, "detail": detail}}, 502, reason=OP_FAILED.code)


def merge_joined(walker: "OpRunner", run: "Run", frame: "Frame", units: Sequence[UnitRecord],
                 rec: "TraceRecorder", *, steps: bool, join_error: Any) -> UnitRecord | None:
    """Deferred results at their join: each completed unit's tail (``into``, object check,
    sanitising, EMIT), then the walker's one merge (outputs in merge order, then the SET POST
    of those rules in op-name order).

    Returns the first failed unit instead of merging when one is bad (the caller fails the
    run). ``steps=True`` (a resume) records one ``completed`` step per joined op; an
    in-request merge records none (the merged fields show up in the join scope's inputs)."""
    ordered = sorted(units, key=merge_order)
    bad = next((u for u in ordered if u.status in UNIT_BAD), None)
    now_wall, now = time.time(), time.perf_counter()
    if bad is not None:
        pop = rebuild_op(walker, run, bad)
        if steps and pop is not None:
            status = "timeout" if bad.status == "timed_out" else "error"
            walker.record_step(run, frame, pop, status, "async", now_wall, now, rec,
                               error=join_error(bad)["message"], extra={"unit_id": bad.unit_id, "joined": True})
        return bad
    outputs: list[tuple[str, dict | None]] = []
    rules = []
    for unit in ordered:
        charge_own_fuel(run, unit)
        pop = rebuild_op(walker, run, unit)
        if pop is None:
            continue
        # the op was dispatched at its own stage: the step says so, so a trace shows whose answer
        # merged at the join scope
        extra: dict[str, Any] = {"unit_id": unit.unit_id, "joined": True,
                                 "dispatched_at": f"{pop.op.stack}/{pop.op.scope}"}
        if unit.kind == "itemized":
            extra["items"] = unit.expected
        output, error, dropped = walker.tail(run, frame, pop, unit.output, False)
        walker.note_dropped(rec, pop, dropped)
        if output is None:  # an op error: output dropped, EMIT not run, SET POST still applies
            walker.record_step(run, frame, pop, "error", "async", now_wall, now, rec, error=error, extra=extra)
        else:
            outputs.append((unit.op_name, output))
            if steps:
                walker.record_step(run, frame, pop, "completed", "async", now_wall, now, rec, output_value=output,
                                   extra=extra)
        rules.append(pop.op)
    walker.merge_outputs(run, frame.stage, outputs, rules, rec)
    return None


__all__ = ["rebuild_op", "apply_members", "merge_joined"]
