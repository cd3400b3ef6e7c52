"""LOOP: repeat one op's dispatch inside its scope task.

Stop reasons: done (UNTIL true on the view), max (MAX passes), fuel (request fuel exhausted),
timeout (the loop deadline), halted (a sibling's output set a truthy `@halt`), error (a pass or
a LOOP SET / WITH failed). The accumulated output plus the trusted record
`_txc.runtime.loop.<name>` merges in every case.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

import attrs

from txcl.errors import TxclEvalError
from txcl.evaluate.plan import is_dropped_target
from txcl.evaluate.rule import resolve_directives
from txcl.evaluate.values import resolve
from txcl.evaluate.when import condition_matches
from txcl.runtime.budget import DISPATCH_FUEL
from txcl.runtime.dispatch import OpError
from txcl.values.merge import copy_value, merge_into
from txcl.values.paths import PathError, write
from txcl.values.reserved import sanitize_untrusted

if TYPE_CHECKING:
    from txcl.runtime.state import Frame, PreparedOp, Run
    from txcl.runtime.walker import Walker
    from txcl.trace.recorder import TraceRecorder

DEFAULT_EVERY_S = 0.050
MIN_EVERY_S = 0.002
DEFAULT_MAX = 10
LOOPABLE = ("builtin", "http", "py")


def _admission_error(walker: "Walker", pop: "PreparedOp") -> str | None:
    target = pop.op.target
    loop = pop.op.rule.loop
    if target is None or target.kind not in LOOPABLE:
        return f"LOOP cannot repeat {target.text if target else 'an op without EXEC'}"
    if pop.mode != "sync":
        return f'LOOP needs a sync op; mode = "{pop.mode}" leaves the request'
    maximum = loop.max if loop.max is not None else DEFAULT_MAX
    if maximum > walker.settings.op_loop_max:
        return f"LOOP MAX {maximum} exceeds --op-loop-max {walker.settings.op_loop_max}"
    return None


async def run_loop(walker: "Walker", run: "Run", frame: "Frame", pop: "PreparedOp", rec: "TraceRecorder",
                   started_wall: float, started: float) -> None:
    """Run the whole loop of `pop` and hand the result to the walker's tail."""
    target = pop.op.target
    transport = target.transport
    problem = _admission_error(walker, pop)
    if problem is not None:
        walker.op_failed(run, frame, pop, OpError(problem), transport, started_wall, started, rec, None)
        return
    timeout_ms, problem = walker.op_timeout(pop.directives, walker.settings.loop_timeout)
    if problem is not None:
        walker.op_failed(run, frame, pop, OpError(problem), transport, started_wall, started, rec, None)
        return
    loop = pop.op.rule.loop
    maximum = loop.max if loop.max is not None else DEFAULT_MAX
    every = DEFAULT_EVERY_S if loop.every_ns is None else max(loop.every_ns / 1e9, MIN_EVERY_S)
    deadline = time.monotonic() + timeout_ms / 1000.0
    view: dict = pop.prepared.input
    pass_input: dict = pop.prepared.dispatched
    directives: dict = pop.prepared.directives
    accumulator: dict = {}
    trusted = target.trusted
    passes = 0
    stop = "max"
    error: str | None = None
    halt = frame.halt_event
    first_input: Any = None
    while True:
        remaining_ms = int((deadline - time.monotonic()) * 1000)
        if remaining_ms <= 0:
            stop = "timeout"
            break
        run.budget.charge(DISPATCH_FUEL)
        passes += 1
        stamped = walker.stamped_input(frame, pop, target, pass_input)
        if first_input is None:
            first_input = stamped
            if walker.debugger is not None:
                walker.debugger.op_dispatch(run, frame, pop, stamped)
        try:
            raw, http_info = await walker.call_target(run, frame, pop, target, stamped, directives, remaining_ms)
        except OpError as exc:
            if exc.status == "timeout" and time.monotonic() >= deadline - 0.001:
                stop = "timeout"
            else:
                stop, error = "error", exc.message
            break
        if isinstance(raw, dict) and "_txc_op_debug" in raw:
            raw = {k: v for k, v in raw.items() if k != "_txc_op_debug"}
        if raw is None:
            raw = {}
        if http_info is not None:
            from txcl.runtime.schemes.http import apply_status_into

            raw = apply_status_into(raw, http_info[1], http_info[0])
        if not isinstance(raw, dict):
            stop, error = "error", "op output is not a JSON object"
            break
        if not trusted and raw:
            raw, dropped = sanitize_untrusted(raw)
            walker.note_dropped(rec, pop, dropped)
        if raw:
            merge_into(accumulator, raw)
            merge_into(view, raw)
        if walker.debugger is not None:
            walker.debugger.loop_pass(run, frame, pop, passes, stamped, raw, view)
        if run.budget.fuel_exhausted():
            stop = "fuel"
            break
        if time.monotonic() >= deadline:
            stop = "timeout"
            break
        if halt is not None and halt.is_set():
            stop = "halted"
            break
        if condition_matches(loop.until, view):
            stop = "done"
            break
        if passes >= maximum:
            stop = "max"
            break
        wait = min(every, max(deadline - time.monotonic(), 0.0))
        if halt is not None:
            try:
                await asyncio.wait_for(halt.wait(), wait)
                stop = "halted"
                break
            except TimeoutError:
                pass
        else:
            await walker.services.sleep(wait)
        if time.monotonic() >= deadline:
            stop = "timeout"
            break
        try:
            pass_input = _apply_loop_set(loop, view, pass_input)
            if pop.op.rule.with_:
                directives = resolve_directives(pop.op.rule, view)
        except (TxclEvalError, PathError) as exc:
            stop, error = "error", str(exc)
            break
    record: dict[str, Any] = {"passes": passes, "stop": stop,
                              "elapsed_ms": int((time.perf_counter() - started) * 1000)}
    if error is not None:
        record["error"] = error
    # The tail sees the accumulator as a trusted output (passes were sanitised already).
    pop_for_tail = pop
    if directives is not pop.prepared.directives:
        pop_for_tail = attrs.evolve(pop, prepared=attrs.evolve(pop.prepared, directives=directives))
    output, tail_error, dropped = walker.tail(run, frame, pop_for_tail, accumulator, True)
    walker.note_dropped(rec, pop, dropped)
    if output is None:
        output = {}
        error = error or tail_error
    output = dict(output)
    merge_into(output, {"_txc": {"runtime": {"loop": {pop.name: record}}}})
    from txcl.runtime.state import OpOutcome

    frame.outcomes[pop.name] = OpOutcome(pop.name, output, "ok", error)
    frame.ran.append(pop.op)
    walker.record_step(run, frame, pop, "ok", transport, started_wall, started, rec, error=error,
                   input_value=first_input, output_value=output, extra={"passes": passes, "stop": stop})


def _apply_loop_set(loop: Any, view: dict, pass_input: dict) -> dict:
    """LOOP SET: overwrite each target in the view and the next pass's input."""
    same = pass_input is view
    for assignment in loop.set:
        segments = assignment.target.segments
        if is_dropped_target(segments):
            continue
        try:
            value = resolve(assignment.value, view)
            copied = copy_value(value) if not same else None
        except TxclEvalError as exc:
            raise TxclEvalError(f"LOOP SET {assignment.target.text}: {exc}") from None
        write(view, segments, value)
        if not same:
            pass_input = write(pass_input, segments, copied)
    return pass_input
