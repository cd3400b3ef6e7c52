"""The Python API of the runtime: `Interpreter(ops, store=...)` and its outcomes.

    interp = txcl.Interpreter(txcl.load_ops("."), store=txcl.store.open_store(".txcl-data/txcl.db"))
    outcome = interp.run_sync({"order": {...}}, stack="shop")
    if outcome.status == "completed": print(outcome.envelope)
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Awaitable, Callable

import attrs

from txcl import metrics as _metrics
from txcl import otel as _otel
from txcl import runtime_codes as rc
from txcl.errors import TxclError, check_depth
from txcl.ids import new_request_id
from txcl.ops.tree import OpsTree, load_ops
from txcl.runtime.budget import Budget, strip_budget_fields
from txcl.runtime.clock import now_rfc3339
from txcl.runtime.config import Settings
from txcl.runtime.hooks import WalkHooks
from txcl.runtime.kv import Kv
from txcl.runtime.state import Run
from txcl.runtime.stepping import run_within
from txcl.runtime.walker import WalkServices, Walker
from txcl.trace.recorder import TraceRecorder


class UnknownStack(TxclError):
    """The stack to walk is missing or ambiguous (a usage error)."""


# ---------------------------------------------------------------- outcomes

@attrs.frozen
class Completed:
    """Natural end, halt or end of stack. `envelope` has the budget fields removed."""

    envelope: dict
    rid: str
    halted: bool = False
    fuel_used: int = 0
    status: str = "completed"
    # what `run(respond=...)` made of this outcome (the caller's response), shaped once
    answer: Any = attrs.field(default=None, eq=False, repr=False)
    breakpoint: str | None = None  # the stage a request breakpoint stopped the walk at

    @property
    def error(self) -> None:
        return None


@attrs.frozen
class Failed:
    """Budget exhaustion, deadline, bad goto, join/continuable failure: `payload` is the
    JSON error body, never mixed with the envelope."""

    payload: dict
    http_status: int
    rid: str
    fuel_used: int = 0
    status: str = "failed"

    @property
    def error(self) -> dict:
        return self.payload

    @property
    def code(self) -> str | None:
        if "code" in self.payload:
            return self.payload["code"]
        err = self.payload.get("error")
        return err.get("code") if isinstance(err, dict) else None


@attrs.frozen
class Suspended:
    run_id: str
    rcid: str
    rid: str
    status: str = "suspended"

    @property
    def error(self) -> None:
        return None


Outcome = Completed | Failed | Suspended


def new_rid() -> str:
    return new_request_id()


class Interpreter:
    """Walks envelopes through a pinned OpsTree. One instance serves many requests."""

    def __init__(self, ops: OpsTree | str | Path, store: Any = None, settings: Settings | None = None,
                 hooks: WalkHooks | None = None, trace_sink: Callable[[Any], None] | None = None,
                 trace_batch: int = 1, trace_batch_delay_s: float = 0.05):
        """`trace_batch` > 1 group-commits that many traces per transaction (see
        txcl.trace.writer); `close()` / `flush_traces()` write what is left."""
        self.tree = ops if isinstance(ops, OpsTree) else load_ops(ops)
        self.store = store
        self.settings = settings or Settings()
        self._executor: ThreadPoolExecutor | None = None
        kv = Kv(store, self.settings.op_payload_max) if store is not None else None
        self.services = WalkServices(self.settings, store=store, executor=None, kv=kv)
        self.walker = Walker(self.tree, self.services, hooks)
        self.trace_writer = None
        if trace_sink is None and store is not None and trace_batch > 1:
            from txcl.trace.writer import ThreadedTraceWriter

            self.trace_writer = ThreadedTraceWriter(store, trace_batch, trace_batch_delay_s)
            trace_sink = self.trace_writer.submit
        self.trace_sink = trace_sink
        # a sink that packs every record as it arrives gets it packed by the recorder
        self._sink_packs = getattr(getattr(trace_sink, "__self__", trace_sink), "packs_records", False) is True

    # ------------------------------------------------------------ helpers
    def _pool(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=max(self.settings.py_threads, 1),
                                                thread_name_prefix="txcl-py")
            self.services.executor = self._executor
        return self._executor

    def default_stack(self) -> str:
        stacks = self.tree.user_stacks()
        if len(stacks) == 1:
            return stacks[0]
        if not stacks:
            raise UnknownStack("the OPS tree defines no stack")
        raise UnknownStack("the OPS tree defines several stacks; choose one with --stack: " + ", ".join(stacks))

    def new_run(self, envelope: dict, stack: str | None = None, *, src: str = "api", rid: str | None = None,
                mocks: list[str] | None = None) -> Run:
        """Stamp the envelope and build a fresh Run at `<stack>/0`."""
        if not isinstance(envelope, dict):
            raise TypeError("the envelope must be a JSON object (dict)")
        stack = stack or self.default_stack()
        if not self.tree.has_stack(stack):
            known = ", ".join(self.tree.known_stacks()) or "none"
            raise UnknownStack(f'unknown stack "{stack}" (stacks: {known})')
        rid = rid or new_rid()
        if "_ts" not in envelope:  # (an inlet stamps it as the request arrives)
            envelope["_ts"] = now_rfc3339()
        txc = envelope.get("_txc")
        if not isinstance(txc, dict):
            txc = {}
            envelope["_txc"] = txc
        txc["src"] = src
        txc["rid"] = rid
        txc["stack"] = stack
        if mocks is not None:
            txc["mocks"] = list(mocks)
        run_mocks = txc.get("mocks") if isinstance(txc.get("mocks"), list) else None
        web = txc.get("web")
        web_req = web.get("req") if isinstance(web, dict) and isinstance(web.get("req"), dict) else None
        budget = Budget.fresh(self.settings.max_fuel_per_request, self.settings.op_scope_ttl_max)
        strip_budget_fields(envelope)
        return Run(rid=rid, src=src, entry_stack=stack, stack=stack, envelope=envelope, budget=budget,
                   mocks=run_mocks, web_req=web_req, segment_id=rid, snapshot_id=None)

    # ------------------------------------------------------------ running
    async def run(self, envelope: dict, stack: str | None = None, *, src: str = "api", rid: str | None = None,
                  mocks: list[str] | None = None, bytes_in: int | None = None,
                  from_json: bool = False, respond: Callable[[Completed], Any] | None = None,
                  break_at: tuple[str | None, int] | None = None) -> Outcome:
        """Walk one request to its outcome (Completed, Failed or Suspended).

        `bytes_in` is the size of the received input when the caller knows it (an inlet that
        parsed a body); otherwise the trace measures the envelope. `from_json`: the envelope
        was read by txcl's JSON reader, which already bounds its nesting, so the walk over it
        that rules out a value too deep to process is skipped (its cost grows with the body's size).
        `respond` turns a Completed outcome into the caller's response (an object whose `body`
        is the bytes it will send): it is made before the trace is finished, handed back as
        `Completed.answer`, and its body's length is the trace's `bytes_out` — the output is
        encoded once, not once for the trace and again for the response. When the response
        has an integer `status`, the trace records it as the request's HTTP status (what was
        sent, even where the caller shaped the envelope's status differently).

        `break_at` (a request breakpoint, `?_txc.break=`): the walk stops as it enters that scope
        (of that stack, or of any stack when it is None) and the outcome is Completed with
        `breakpoint` naming the stage, its envelope as it entered the scope (not shaped by
        `respond`)."""
        if not from_json:
            check_depth(envelope, what="the envelope")
        run = self.new_run(envelope, stack, src=src, rid=rid, mocks=mocks)
        run.break_at = break_at
        return await self.drive(run, bytes_in=bytes_in, respond=respond)

    def run_sync(self, envelope: dict, stack: str | None = None, **kwargs: Any) -> Outcome:
        """Blocking twin of `run` (starts its own event loop)."""
        return asyncio.run(self._run_and_close(envelope, stack, **kwargs))

    async def _run_and_close(self, envelope: dict, stack: str | None, **kwargs: Any) -> Outcome:
        try:
            return await self.run(envelope, stack, **kwargs)
        finally:
            await self.aclose_http()

    def drive(self, run: Run, rec: TraceRecorder | None = None, *, bytes_in: int | None = None,
              respond: Callable[[Completed], Any] | None = None, resumed: bool = False) -> Awaitable[Outcome]:
        """Step `run` until its segment ends; write the trace; the outcome, to await
        (`respond`: see `run`; `resumed`: the segment resumes a parked run)."""
        return self._drive(run, rec, bytes_in, respond, resumed)

    async def _drive(self, run: Run, rec: TraceRecorder | None, bytes_in: int | None,
                     respond: Callable[[Completed], Any] | None, resumed: bool) -> Outcome:
        tracing = _otel.current
        if not tracing.enabled:
            return await self._drive_segment(run, rec, bytes_in, respond)
        # OpenTelemetry: the segment is a span (a served request's is the request's own)
        with tracing.segment(run, "resume" if resumed else "request"):
            return await self._drive_segment(run, rec, bytes_in, respond)

    async def _drive_segment(self, run: Run, rec: TraceRecorder | None, bytes_in: int | None,
                             respond: Callable[[Completed], Any] | None) -> Outcome:
        self._pool()
        settings = self.settings
        if rec is None:
            rec = TraceRecorder(settings.trace_mode if self.store is not None or self.trace_sink else "off",
                                run.rid, run.src, run.entry_stack, body_cap=settings.trace_body_cap_bytes,
                                origin_rid=run.origin_rid, run_id=run.run_id,
                                answers=settings.trace_ops == "answers")
        if rec.enabled and not rec.started:  # (a resume started its segment already)
            rec.set_input(run.envelope, bytes_in)
            rec.request_start(run.entry_stack, run.src)
        started = time.perf_counter()
        walker = self.walker
        when = asyncio.get_running_loop().time() + settings.request_deadline_ms / 1000.0
        try:
            await run_within(self._walk(run, rec), when)
        except TimeoutError:
            run.fail({"error": {"code": rc.REQUEST_DEADLINE.code,
                                "message": f"request deadline of {settings.request_deadline_ms} ms passed"}},
                     503, status="deadline", reason=rc.REQUEST_DEADLINE.code)
        await walker.hooks.segment_end(walker, run)
        if walker.debugger is not None:
            walker.debugger.segment_ended(run)
        outcome = self._outcome(run)
        if type(outcome) is Completed and _metrics.current.enabled:  # EMIT @telemetry.metrics
            txc = outcome.envelope.get("_txc")
            if type(txc) is dict and "telemetry" in txc:
                from txcl.telemetry import export

                export(outcome.envelope, _metrics.current)
        bytes_out = answer_status = None
        if respond is not None and type(outcome) is Completed and outcome.breakpoint is None:
            outcome = _answered(outcome, respond)
            answer = outcome.answer
            if answer is not None:
                bytes_out = len(answer.body)
                answer_status = getattr(answer, "status", None)
                note = getattr(answer, "trace_event", None)  # e.g. an answer that broke $defs.output
                if note is not None and rec.enabled:
                    rec.event(note[0], note[1])
        duration = int((time.perf_counter() - started) * 1000)
        if rec.enabled:
            http_status = run.http_status
            if isinstance(outcome, Completed):
                http_status = (answer_status if type(answer_status) is int
                               else _response_status(outcome.envelope))
            rec.finish(run.status, http_status=http_status, fuel_used=run.budget.fuel_used,
                       out=outcome.envelope if isinstance(outcome, Completed) else None,
                       error=outcome.payload if isinstance(outcome, Failed) else None, bytes_out=bytes_out)
            rec.request_done(run.budget.fuel_used, rec.request["bytes_out"], run.status, duration, run.reason)
            self._write_trace(rec)
        return outcome

    async def _walk(self, run: Run, rec: TraceRecorder) -> None:
        walker = self.walker
        if run.break_at is not None:
            await self._walk_to_break(run, rec)
            return
        recorder = _metrics.current
        if recorder.enabled or run.traced:
            await self._observed_walk(run, rec, recorder, _otel.current)
            return
        if not walker.local_steps(rec):
            while run.status == "running":
                await walker.step(run, rec)
            return
        step_local = walker.step_local
        while run.status == "running":
            if not step_local(run, rec):
                await walker.step(run, rec)

    async def _walk_to_break(self, run: Run, rec: TraceRecorder) -> None:
        """`_walk` for a request with a breakpoint: frame by frame, stopping (status halted,
        reason breakpoint) before the frame that enters the breakpoint's scope."""
        walker = self.walker
        want_stack, want_scope = run.break_at  # type: ignore[misc]
        while run.status == "running":
            scope, stage = walker.next_stage(run)
            if scope == want_scope and (want_stack is None or want_stack == run.stack):
                run.break_hit = stage
                run.status, run.reason = "halted", "breakpoint"
                if rec.enabled:
                    rec.event("breakpoint", {"stage": stage})
                return
            await walker.step(run, rec)

    async def _observed_walk(self, run: Run, rec: TraceRecorder, recorder: Any, tracing: Any) -> None:
        """`_walk` with each scope timed for the metrics and traced as a span (only when
        metrics or OpenTelemetry are on)."""
        walker = self.walker
        fuse = walker.local_steps(rec)
        clock = time.perf_counter
        timed = recorder.enabled
        while run.status == "running":
            stack, started = run.stack, clock()
            if run.traced:
                # a scope of local rules runs whole inside step_local (no op: nothing can be its
                # child), so it is traced after the fact; any other scope gets a span first
                if fuse and walker.step_local(run, rec):
                    tracing.local_scope(run, stack, started)
                else:
                    handle = tracing.open_scope(run)
                    try:
                        await walker.step(run, rec)
                    finally:
                        tracing.close_scope(handle)
            elif not (fuse and walker.step_local(run, rec)):
                await walker.step(run, rec)
            if timed:
                recorder.scope(stack, clock() - started)

    def _outcome(self, run: Run) -> Outcome:
        if run.status == "suspended":
            return Suspended(run.run_id or "", run.rcid or "", run.rid)
        if run.status in ("failed", "deadline"):
            return Failed(run.error or {}, run.http_status or 500, run.rid, run.budget.fuel_used)
        envelope = run.envelope
        strip_budget_fields(envelope)
        return Completed(envelope, run.rid, halted=run.status == "halted", fuel_used=run.budget.fuel_used,
                         breakpoint=run.break_hit)

    def _write_trace(self, rec: TraceRecorder) -> None:
        record = rec.build(self._sink_packs)
        if record is None:
            return
        if self.trace_sink is not None:
            self.trace_sink(record)
        elif self.store is not None:
            self.store.write_traces([record])

    async def aclose_http(self) -> None:
        client = self.services.http_client
        if client is not None:
            self.services.http_client = None
            await client.aclose()
        from txcl.runtime.schemes.mcp import close_clients

        await close_clients()

    def flush_traces(self) -> None:
        if self.trace_writer is not None:
            self.trace_writer.flush()

    def close(self) -> None:
        self.flush_traces()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
            self.services.executor = None
        client = self.services.http_client
        if client is not None:
            self.services.http_client = None
            try:
                asyncio.run(client.aclose())
            except RuntimeError:
                pass

    def __enter__(self) -> "Interpreter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _answered(outcome: Completed, respond: Callable[[Completed], Any]) -> Completed:
    """`outcome` with the response `respond` made of it; unchanged when `respond` failed (the
    caller then shapes the answer itself and reports what went wrong the way it always does)."""
    try:
        answer = respond(outcome)
    except Exception:  # noqa: BLE001 - reported by the caller's own shaping
        return outcome
    return Completed(outcome.envelope, outcome.rid, outcome.halted, outcome.fuel_used, outcome.status, answer)


def _response_status(envelope: dict) -> int:
    """`_txc.web.res.status` when it is a valid HTTP status, else 200. Looked up with `get`
    (most envelopes have no such key, and a raised KeyError costs more than the lookups)."""
    txc = envelope.get("_txc")
    web = txc.get("web") if type(txc) is dict else None
    res = web.get("res") if type(web) is dict else None
    status = res.get("status") if type(res) is dict else None
    if status is None:
        return 200
    try:
        status = int(status)
    except (TypeError, ValueError):
        return 200
    return status if 100 <= status <= 599 else 200


__all__ = ["Interpreter", "Completed", "Failed", "Suspended", "Outcome", "UnknownStack", "new_rid"]
