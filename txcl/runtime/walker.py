"""The scope walk as a state machine over `Run`.

`step(run)` performs one frame (`enter(stack, requested_scope, previous_stage)`); the
pieces of a frame are separate methods so the continuations layer can reuse them when it
resumes a suspended scope (`tail`, `complete_scope`). Nothing here waits for anything but
the ops of the current scope, so a run can stop after any frame and go on later from
`Run.to_json()`.
"""

from __future__ import annotations

import asyncio
import fnmatch
import logging
import re
import time
from concurrent.futures import ThreadPoolExecutor
from operator import attrgetter, itemgetter
from time import perf_counter_ns
from typing import Any, Callable

import attrs

from txcl import metrics as _metrics
from txcl import otel as _otel
from txcl import runtime_codes as rc

from txcl.evaluate.control import Control, apply_delete, read_control
from txcl.evaluate.cow import private_input, write_paths
from txcl.evaluate.plan import RulePlan, rule_plan
from txcl.evaluate.rule import Prepared, apply_set_post, finish_output, json_type, local_output, nest_into, prepare
from txcl.evaluate.when import compile_condition
from txcl.ops.layout import is_system_stack
from txcl.ops.tree import OpRule, OpsTree
from txcl.runtime.budget import DISPATCH_FUEL
from txcl.runtime.config import Settings
from txcl.runtime.dispatch import OpContext, OpError, resolve_py_target
from txcl.syntax.targets import ExecTarget
from txcl.runtime.hooks import NoHooks, WalkHooks
from txcl.runtime.kv import Kv
from txcl.runtime.schemes.goto import jump_output
from txcl.runtime.schemes.py import call_py
from txcl.runtime.schemes.txco import plain_builtin, start_builtin
from txcl.runtime.state import Frame, OpOutcome, PreparedOp, Run
from txcl.runtime.stepping import first_step, run_within
from txcl.trace.format import STAGE_ENTER, STAGE_FUSED, STEP_ROW_FIELDS
from txcl.trace.recorder import TraceRecorder, _json_size
from txcl.trace.redact import parse_path_list
from txcl.values.coerce import bool_form, duration_to_ms
from txcl.values.merge import deep_copy, merge_into
from txcl.values.reserved import sanitize_untrusted

log = logging.getLogger("txcl.ops")

_SCOPE_CACHE_LIMIT = 4096
_NO_CONTROL = Control()
_UNKNOWN: Any = object()

GOTO_SEGMENTS = ("_txc", "goto")
TTL_SEGMENTS = ("_txc", "ttl")
_STACK_OK = re.compile(r"^[A-Za-z0-9_-]+(/[A-Za-z0-9_-]+)*$")


@attrs.define(slots=False)
class WalkServices:
    """Effects the walk reaches through: settings, store, HTTP client, thread pool, clock."""

    settings: Settings
    store: Any = None  # txcl.store.base.Store or None
    http_client: Any = None  # httpx.AsyncClient, created lazily
    executor: ThreadPoolExecutor | None = None
    sleep: Callable[[float], Any] = asyncio.sleep
    kv: Kv | None = None
    # `txcl test`: answers an in-process target (txco://, py://) without calling it, or None
    # to call it; returns the raw output or raises OpError. HTTP targets are answered by the
    # test's HTTP transport instead, so they take the production path.
    # answers an op call instead of making it: (target, op input, the op's rule) -> output, or
    # None to make the call (`txcl test`'s mocks, `txcl replay`'s recording); http(s) targets
    # only when it has `answers_http = True`
    stand_in: Callable[[Any, dict, Any], Any] | None = None

    def http(self):
        if self.http_client is None:
            from txcl.runtime.schemes.http import new_client

            self.http_client = new_client(self.egress())
        return self.http_client

    def secrets(self):
        """Where the secrets a rule names are looked up (built once)."""
        provider = self.__dict__.get("_secrets")
        if provider is None:
            from txcl.secrets import SecretProvider

            provider = self._secrets = SecretProvider.from_settings(self.settings)
        return provider

    def egress(self):
        """The egress policy of these settings (built once)."""
        policy = self.__dict__.get("_egress")
        if policy is None:
            from txcl.egress import EgressPolicy

            policy = self._egress = EgressPolicy.from_settings(self.settings)
        return policy


class Walker:
    """Walks runs over one pinned OpsTree."""

    def __init__(self, tree: OpsTree, services: WalkServices, hooks: WalkHooks | None = None):
        self.tree = tree
        self.services = services
        self.settings = services.settings
        self.hooks: WalkHooks = hooks or NoHooks()
        self._redactions: dict[str, tuple[set, set]] = {}
        # (stack, requested scope) -> (resolved scope or None, stage text): the tree is pinned.
        self._scopes: dict[tuple[str, int], tuple[int | None, str]] = {}
        self._plain_hooks = type(self.hooks) is NoHooks
        # (stack, scope) -> its rules when all are local and plain, else None (`_local_rules`)
        self._locals: dict[tuple[str, int], tuple[OpRule, ...] | None] = {}
        self.fuse_local = True  # off: every scope takes the general path (tests compare both)
        self.call_in_place = True  # off: plain builtins are dispatched as tasks too (tests compare both)
        # `txcl test --coverage`: told which rules each entered scope considered and selected
        self.observer: Any = None
        # `txcl dap`: told of every clause the walk reaches, and may hold the walk there
        # (txcl.debug.engine.Debugger; it turns fusing and in-place calls off when attached)
        self.debugger: Any = None

    @staticmethod
    def facts(op: OpRule) -> "_Facts":
        found = op.facts
        if found is None:
            found = _Facts.of(op)
            object.__setattr__(op, "facts", found)  # pure function of the rule: safe to share
        return found

    # ================================================================ frames
    def local_steps(self, rec: TraceRecorder) -> bool:
        """Whether `step_local` may take scopes of this segment (not in full tracing, under
        `txcl test --coverage`'s observer, or with fusing turned off)."""
        return self.fuse_local and self.observer is None and not rec.full

    def step_local(self, run: Run, rec: TraceRecorder) -> bool:
        """The next frame of `run` in one call when its scope holds only local, plain rules
        (`_local_rules`) and nothing else is due at its entry: the same budget charges,
        events, steps and merge as `step`, without a coroutine or a Frame. Returns False,
        having changed nothing, when the frame needs `step` (the end of the stack, a repeated
        transition, a join check or heartbeat due, rules that dispatch). The scope is entered
        as `STAGE_FUSED` in the trace: its merge is implied, not recorded. Call only when
        `local_steps(rec)`."""
        stack = run.stack
        scope, stage = self._resolve(stack, run.requested_scope)
        if scope is None:
            return False
        rules = self._locals.get((stack, scope), _UNKNOWN)
        if rules is _UNKNOWN:
            rules = self._local_rules(stack, scope)
        if rules is None or (not self._plain_hooks and self.hooks.frame_checks_due(run)):
            return False
        if run.budget.enter_frame(run.previous_stage, stage, only_new=True) is None:
            return False
        if self._exhausted(run, stage):
            return True
        if stack not in run.stacks_seen:
            self._first_entry(run, stack, rec)
        self._count_visit(run, stage, rec, STAGE_FUSED)
        self._local_scope(run, stack, scope, stage, rules, rec, rec.entered_ns, True)
        return True

    async def step(self, run: Run, rec: TraceRecorder) -> None:
        """Advance `run` by one frame; sets `run.status` when the segment ends."""
        frame = self.enter(run, rec)
        if frame is None or run.finished:
            return
        frame.rec = rec  # for the continuation hooks (trace steps and events)
        if not self._plain_hooks and self.hooks.frame_checks_due(run):
            await self.hooks.join_check(self, run, frame)
            if run.finished:
                return
        if self.fuse_local:
            local = self._locals.get((frame.stack, frame.scope), _UNKNOWN)
            if local is _UNKNOWN:
                local = self._local_rules(frame.stack, frame.scope)
            if local is not None and not frame.penalty and self.local_steps(rec):
                self._local_scope(run, frame.stack, frame.scope, frame.stage, local, rec,
                                  rec.entered_ns if self._plain_hooks else 0)
                return
        # run_frame, inlined: scopes of local rules only (no EXEC) take no coroutine at all
        self.select_ops(run, frame, rec)
        ops = frame.ops
        if frame.special:
            ops = await self.hooks.dispatch_special(self, run, frame, ops)
            if run.finished:
                return
        if not self._dispatch_at_once(run, frame, ops, rec):
            await self.dispatch_sync(run, frame, ops, rec)
        self.complete_scope(run, frame, rec)

    async def run_frame(self, run: Run, frame: Frame, rec: TraceRecorder) -> None:
        """The rest of an entered frame, from WHEN to the next scope (a join resume re-enters a scope here)."""
        frame.rec = rec
        self.select_ops(run, frame, rec)
        ops = frame.ops
        if frame.special:
            ops = await self.hooks.dispatch_special(self, run, frame, ops)
            if run.finished:
                return
        if not self._dispatch_at_once(run, frame, ops, rec):
            await self.dispatch_sync(run, frame, ops, rec)
        self.complete_scope(run, frame, rec)

    def _dispatch_at_once(self, run: Run, frame: Frame, ops: list[PreparedOp], rec: TraceRecorder) -> bool:
        """Dispatch `ops` when nothing needs awaiting — no op has an EXEC, or every EXEC calls
        a plain builtin (`_in_place`) — and say so; False (nothing done) when `dispatch_sync`
        must: an op waits, or the frame sleeps a repeated transition's penalty first."""
        if frame.penalty:
            return False
        for pop in ops:
            if pop.op.target is not None:
                break
        else:
            self._dispatch_local(frame, ops, run, rec)
            return True
        if self.call_in_place and self._in_place(run, ops):
            self._dispatch_in_place(run, frame, ops, rec)
            return True
        return False

    def enter(self, run: Run, rec: TraceRecorder) -> Frame | None:
        """Budget entry, then the scope. None when the stack has ended."""
        stack = run.stack
        scope, stage = self._resolve(stack, run.requested_scope)
        repeated = run.budget.enter_frame(run.previous_stage, stage)
        if repeated:
            rec.event("stage.penalty", {"transition": f"{run.previous_stage}->{stage}",
                                        "fuel": 50, "sleep_ms": self.settings.op_repeat_penalty_ms})
        if self._exhausted(run, stage):
            return None
        if scope is None:
            run.status = "completed"
            return None
        if stack not in run.stacks_seen:
            self._first_entry(run, stack, rec)
        visit = self._count_visit(run, stage, rec)
        frame = Frame(stack, scope, stage, visit)
        if rec.full:
            frame.before = rec.scope_entered(run.envelope)
        if repeated and self.settings.op_repeat_penalty_ms:
            frame.penalty = self.settings.op_repeat_penalty_ms / 1000.0  # slept by dispatch_sync
        return frame

    def _first_entry(self, run: Run, stack: str, rec: TraceRecorder) -> None:
        """The walk enters `stack` for the first time: its redaction paths join the trace's."""
        run.stacks_seen.append(stack)
        omit, redact = self.redaction_paths(stack)
        if omit or redact:
            rec.add_redactions(omit, redact)

    @staticmethod
    def _exhausted(run: Run, stage: str) -> bool:
        """Fail `run` when its TTL or fuel ran out at this frame's entry."""
        budget = run.budget
        if (budget.max_ttl and budget.ttl <= 0) or (budget.max_fuel and budget.fuel_used > budget.max_fuel):
            payload = budget.exhaustion_payload(stage)
            run.fail(payload, 500, reason=payload["code"])
            return True
        return False

    @staticmethod
    def _count_visit(run: Run, stage: str, rec: TraceRecorder, code: int = STAGE_ENTER) -> int:
        """A scope entered: its visit counted, the budget written into `_txc`, the
        `stage.enter` event. Returns the visit's number."""
        visits = run.visits
        visit = visits[stage] = visits.get(stage, 0) + 1
        run.last_stage = stage
        budget = run.budget
        budget.write_into(run.envelope)
        if rec.enabled:
            if code == STAGE_FUSED:  # recorded once its rules have run (see `_local_scope`)
                rec.fused_enter(stage, budget.fuel_used, budget.ttl)
            else:
                rec.stage_enter(stage, budget.fuel_used, budget.ttl, code)
        return visit

    def next_stage(self, run: Run) -> tuple[int | None, str]:
        """The scope (None: the stack's end) and stage text the next frame of `run` enters."""
        return self._resolve(run.stack, run.requested_scope)

    def _resolve(self, stack: str, requested: int) -> tuple[int | None, str]:
        """The scope entered for `requested` (cached) and its stage text."""
        key = (stack, requested)
        found = self._scopes.get(key)
        if found is None:
            scope = self.tree.next_scope(stack, requested)
            found = (scope, f"{stack}/{scope if scope is not None else requested}")
            if len(self._scopes) >= _SCOPE_CACHE_LIMIT:
                self._scopes.clear()
            self._scopes[key] = found
        return found

    def _matching(self, e0: Any, rules: Any) -> list[OpRule]:
        """The rules whose WHEN matches E0, narrowed to the highest PRIORITY given."""
        matched = []
        top = 0
        if isinstance(e0, dict):  # no envelope object matches nothing (when_matches)
            facts_of = self.facts
            for op in rules:
                facts = op.facts or facts_of(op)
                when = facts.when
                if when is not None:
                    try:
                        if not when(e0):
                            continue
                    except Exception:  # noqa: BLE001 - evaluation never raises
                        continue
                matched.append(op)
                if facts.priority > top:
                    top = facts.priority
        if top > 0:
            matched = [op for op in matched if op.facts.priority == top]
        return matched

    def select_ops(self, run: Run, frame: Frame, rec: TraceRecorder) -> None:
        """WHEN on E0, PRIORITY, per-rule SET PRE / WITH / SELECT, mode."""
        e0 = run.envelope
        rules = self.tree.rules_at(frame.stack, frame.scope)
        matched = self._matching(e0, rules)
        frame.rules = tuple(matched)
        if self.observer is not None:
            self.observer.scope_selected(frame, rules, frame.rules, e0)
        debugger = self.debugger
        if debugger is not None:
            debugger.scope_selected(run, frame, rules, frame.rules, e0)
        ops: list[PreparedOp] = []
        for op in matched:
            rule = op.rule
            paths = op.facts.write_paths
            if paths is None:
                op_input = deep_copy(e0)
            elif paths:
                op_input = private_input(e0, paths)
            else:
                op_input = e0
            prepared = prepare(rule, op_input, plan=op.facts.plan)
            mode = "sync"
            if prepared.error is None and prepared.directives:
                raw_mode = prepared.directives.get("mode")
                if raw_mode in ("async", "continuable"):
                    mode = raw_mode
                    frame.special = True
            ops.append(PreparedOp(op, prepared, mode))
            if debugger is not None:
                debugger.op_prepared(run, frame, ops[-1])
        frame.ops = ops

    # ================================================================ dispatch
    async def dispatch_sync(self, run: Run, frame: Frame, ops: list[PreparedOp], rec: TraceRecorder) -> None:
        """Every op concurrently, each under its own timeout, then its tail."""
        if frame.penalty:
            await self.services.sleep(frame.penalty)
        remote = self._dispatch_local(frame, ops, run, rec)
        if len(remote) == 1:
            await self.run_op(run, frame, remote[0], rec)
        elif remote:
            await asyncio.gather(*(self.run_op(run, frame, pop, rec) for pop in remote))

    def _dispatch_local(self, frame: Frame, ops: list[PreparedOp], run: Run, rec: TraceRecorder) -> list[PreparedOp]:
        """The part of dispatch that needs no waiting: rules without EXEC get their tail now.
        Returns the ops that must be dispatched."""
        if len(ops) > 1 and any(p.op.rule.loop is not None for p in ops):
            frame.halt_event = asyncio.Event()
        remote: list[PreparedOp] = []
        timed = rec.enabled
        for pop in ops:
            if pop.op.target is not None:
                remote.append(pop)
            else:
                self.finish_op(run, frame, pop, {}, True, "noop", time.time() if timed else 0.0,
                                time.perf_counter() if timed else 0.0, rec)
        return remote

    def op_timeout(self, directives: dict, default_ms: int) -> tuple[int, str | None]:
        raw = directives.get("timeout") if directives else None
        if raw is None:
            return default_ms, None
        ms = duration_to_ms(raw)
        if ms is None or ms < 0:
            return default_ms, None
        if ms > self.settings.op_timeout_max:
            return ms, (f"timeout {raw} exceeds --op-timeout-max "
                        f"{_fmt_ms(self.settings.op_timeout_max)}")
        return ms, None

    def _is_mocked(self, run: Run, op: OpRule) -> bool:
        if not run.mocks or "mock-response.json" not in op.fixtures:
            return False
        key = f"{op.stack}/{op.scope}/{op.name}"
        verdict = False
        for pattern in run.mocks:
            if not isinstance(pattern, str):
                continue
            if pattern.startswith("!"):
                if fnmatch.fnmatchcase(key, pattern[1:]):
                    verdict = False
            elif fnmatch.fnmatchcase(key, pattern):
                verdict = True
        return verdict

    def op_context(self, run: Run, frame: Frame, pop: PreparedOp, directives: dict, deadline: float) -> OpContext:
        op = pop.op
        tree = self.tree
        return OpContext(run.rid, frame.stack, frame.scope, op.name, directives, deadline, log, self.services.kv,
                         run.src, op.stack, tree.workspace, tree, op.fixtures, run.entry_stack, run.web_req)

    async def call_target(self, run: Run, frame: Frame, pop: PreparedOp, target: ExecTarget, op_input: dict,
                          directives: dict, timeout_ms: int) -> tuple[Any, Any]:
        """One dispatch of `target` (no tail). Returns (raw output, http status info)."""
        deadline = time.monotonic() + timeout_ms / 1000.0
        kind = target.kind
        if kind in ("goto", "stage"):
            return jump_output(target, frame.stack), None
        stand_in = self.services.stand_in
        if stand_in is not None and (kind != "http" or getattr(stand_in, "answers_http", False)):
            answered = stand_in(target, op_input, pop.op)
            if answered is not None:
                return answered, None
        ctx = self.op_context(run, frame, pop, directives, deadline)
        try:
            if kind == "builtin":
                # called directly: only an `async def` builtin waits (under the op's timeout,
                # counted from `deadline`, where a timer could ever fire)
                raw = _builtin_output(target, op_input, directives, ctx)
                if hasattr(raw, "__await__"):
                    loop = asyncio.get_running_loop()
                    raw = await run_within(raw, loop.time() + (deadline - time.monotonic()))
                return raw, None
            when = asyncio.get_running_loop().time() + timeout_ms / 1000.0
            if kind == "py":
                func = pop.op.func
                if func is None:
                    func, problem = resolve_py_target(target, self.tree.workspace)
                    if problem is not None:
                        raise OpError(problem)
                return await run_within(call_py(func, op_input, ctx, self.services.executor), when), None
            if kind == "http":
                from txcl.runtime.schemes.http import call_http

                raw, status, status_into = await run_within(call_http(
                    self.services.http(), target.url or target.text, op_input, directives, ctx,
                    self.settings.op_payload_max, timeout_ms / 1000.0, self.services.secrets()), when)
                return raw, (status, status_into)
            if kind == "mcp":
                from txcl.runtime.schemes.mcp import call_mcp

                return await run_within(call_mcp(target, op_input, directives, timeout_ms / 1000.0,
                                                 payload_max=self.settings.op_payload_max,
                                                 policy=self.services.egress(),
                                                 rule=f"{pop.op.stack}/{pop.op.name}",
                                                 secrets=self.services.secrets()), when), None
            if kind in ("queue", "nats"):  # reached only with a computed mode that is not "async"
                raise OpError(f'{target.text} waits for a worker to take the job: it needs mode = "async"')
        except TimeoutError:
            raise OpError(f"timeout after {_fmt_ms(timeout_ms)}", status="timeout") from None
        raise OpError(f"op not found: {target.text}")

    def stamped_input(self, frame: Frame, pop: PreparedOp, target: ExecTarget, source: dict) -> dict:
        """The dispatched input with the identity stamp `_txc.op` / `_txc.step`."""
        if not target.stamped:
            return source
        out = dict(source)
        txc = out.get("_txc")
        txc = dict(txc) if isinstance(txc, dict) else {}
        txc["op"] = f"{pop.op.stack}/{pop.op.name}"
        txc["step"] = frame.scope
        out["_txc"] = txc
        return out

    async def run_op(self, run: Run, frame: Frame, pop: PreparedOp, rec: TraceRecorder) -> None:
        """Dispatch one sync op (or its LOOP) and apply its tail; never raises an op error."""
        op = pop.op
        target: ExecTarget = op.target
        started_wall, started = time.time(), time.perf_counter()
        if op.rule.loop is not None:
            from txcl.runtime.loop import run_loop

            await run_loop(self, run, frame, pop, rec, started_wall, started)
            return
        mocked = self._is_mocked(run, op)
        transport = "mock" if mocked else target.transport
        trusted = False if mocked else target.trusted
        started_op = self._dispatch_start(run, frame, pop, transport, started_wall, started, rec)
        if started_op is None:
            return
        timeout_ms, op_input = started_op
        if self.debugger is not None:
            self.debugger.op_dispatch(run, frame, pop, op_input)
        try:
            if mocked:
                raw, http_info = deep_copy(op.fixtures["mock-response.json"]), None
            else:
                raw, http_info = await self.call_target(run, frame, pop, target, op_input, pop.directives, timeout_ms)
        except OpError as exc:
            self.op_failed(run, frame, pop, exc, transport, started_wall, started, rec, op_input)
            return
        except asyncio.CancelledError:
            self.record_step(run, frame, pop, "cancelled", transport, started_wall, started, rec,
                         error="cancelled", input_value=op_input)
            raise
        self.finish_op(run, frame, pop, raw, trusted, transport, started_wall, started, rec,
                        input_value=op_input, http_info=http_info)

    def _dispatch_start(self, run: Run, frame: Frame, pop: PreparedOp, transport: str, started_wall: float,
                        started: float, rec: TraceRecorder) -> tuple[int, dict] | None:
        """An op about to be dispatched: its timeout in ms and its stamped input, its fuel
        charged; None when its WITH timeout is refused (the op has failed)."""
        timeout_ms, problem = self.op_timeout(pop.directives, self.settings.op_timeout)
        if problem is not None and pop.op.stack.startswith("_sys"):
            # a shipped system rule (the poll handler asks for 60s) follows the operator's cap
            timeout_ms, problem = self.settings.op_timeout_max, None
        if problem is not None:
            self.op_failed(run, frame, pop, OpError(problem), transport, started_wall, started, rec, None)
            return None
        run.budget.charge(DISPATCH_FUEL)
        return timeout_ms, self.stamped_input(frame, pop, pop.op.target, pop.prepared.dispatched)

    def _in_place(self, run: Run, ops: list[PreparedOp]) -> bool:
        """Whether every op of a frame that dispatches calls a plain builtin (a `def`, which
        never waits) without LOOP, in a run that asks for no mocks: `_dispatch_in_place`
        then does what `dispatch_sync` would, without a coroutine per op."""
        if run.mocks:
            return False
        for pop in ops:
            op = pop.op
            target = op.target
            if target is not None and (target.kind != "builtin" or op.rule.loop is not None
                                       or not plain_builtin(target.name)):
                return False
        return True

    def _dispatch_in_place(self, run: Run, frame: Frame, ops: list[PreparedOp], rec: TraceRecorder) -> None:
        """`dispatch_sync` for ops that all call plain builtins (`_in_place`): rules without
        EXEC get their tail, then each builtin is called and its tail applied, in the order
        the ops are given — the order in which `dispatch_sync`'s tasks would finish, as none
        of them waits."""
        for pop in self._dispatch_local(frame, ops, run, rec):
            self._call_in_place(run, frame, pop, rec)

    def _call_in_place(self, run: Run, frame: Frame, pop: PreparedOp, rec: TraceRecorder) -> None:
        """`run_op` for one op calling a plain builtin (not mocked, no LOOP), in one call."""
        target: ExecTarget = pop.op.target
        started_wall, started = time.time(), time.perf_counter()
        transport = target.transport
        started_op = self._dispatch_start(run, frame, pop, transport, started_wall, started, rec)
        if started_op is None:
            return
        timeout_ms, op_input = started_op
        directives = pop.directives
        stand_in = self.services.stand_in
        try:
            raw = stand_in(target, op_input, pop.op) if stand_in is not None else None
            if raw is None:
                ctx = self.op_context(run, frame, pop, directives, time.monotonic() + timeout_ms / 1000.0)
                raw = _builtin_output(target, op_input, directives, ctx)
                if hasattr(raw, "__await__"):  # made an `async def` since `_in_place` looked
                    raw = _done_without_waiting(raw, target.text)
        except OpError as exc:
            self.op_failed(run, frame, pop, exc, transport, started_wall, started, rec, op_input)
            return
        self.finish_op(run, frame, pop, raw, target.trusted, transport, started_wall, started, rec,
                       input_value=op_input)

    # ================================================================ the per-op tail
    def tail(self, run: Run, frame: Frame, pop: PreparedOp, raw: Any, trusted: bool,
             http_info: Any = None) -> tuple[dict | None, str | None, list[str]]:
        """The tail of an op: debug key, null, into, status_into, object check, sanitise, EMIT."""
        if isinstance(raw, dict) and "_txc_op_debug" in raw:
            raw = {k: v for k, v in raw.items() if k != "_txc_op_debug"}
        if raw is None:
            raw = {}
        if self.debugger is not None:
            self.debugger.note_answer(pop, raw)
        prepared: Prepared = pop.prepared
        dropped: list[str] = []
        directives = prepared.directives
        if directives and directives.get("validate") is True:
            problem = pop.op.output_problem(raw)
            if problem is not None:
                return None, problem, dropped
        if directives and "into" in directives:
            raw, dropped_into = nest_into(directives, raw)
            if dropped_into:
                dropped.append(dropped_into)
            prepared = attrs.evolve(prepared, directives={k: v for k, v in directives.items() if k != "into"})
        if http_info is not None:
            from txcl.runtime.schemes.http import apply_status_into

            raw = apply_status_into(raw, http_info[1], http_info[0])
        if raw is not None and not isinstance(raw, dict):
            return None, f"op output is not a JSON object (got {json_type(raw)})", dropped
        if not trusted and raw:
            raw, sanitised = sanitize_untrusted(raw)
            dropped.extend(sanitised)
        ttl_before = run.budget.ttl
        finished = finish_output(pop.op.rule, prepared, raw, ttl_before if run.budget.max_ttl else None,
                                 (pop.op.facts or self.facts(pop.op)).plan)
        dropped.extend(finished.dropped)
        if finished.output is None:
            return None, finished.error, dropped
        if (pop.op.facts or self.facts(pop.op)).emits_ttl and finished.ttl is not None:  # None: not numeric, ignored
            if finished.ttl < ttl_before:
                run.budget.lower_ttl(finished.ttl)
            else:
                frame.ttl_raise_ignored = True
        return _without_ttl(finished.output), None, dropped

    def finish_op(self, run: Run, frame: Frame, pop: PreparedOp, raw: Any, trusted: bool, transport: str,
                   started_wall: float, started: float, rec: TraceRecorder, *, input_value: Any = None,
                   http_info: Any = None, extra: dict | None = None) -> None:
        output, error, dropped = self.tail(run, frame, pop, raw, trusted, http_info)
        if dropped:
            self.note_dropped(rec, pop, dropped)
        if frame.ttl_raise_ignored:
            rec.event("budget.ttl_raise_ignored", {"op": pop.name, "ttl": run.budget.ttl})
            frame.ttl_raise_ignored = False
        op = pop.op
        name = op.name
        if output is None:
            frame.outcomes[name] = OpOutcome(name, None, "error", error)
            frame.ran.append(op)
            self.record_step(run, frame, pop, "error", transport, started_wall, started, rec, error=error,
                         input_value=input_value, extra=extra)
            return
        frame.outcomes[name] = OpOutcome(name, output, "ok", None)
        frame.ran.append(op)
        if frame.halt_event is not None:
            txc = output.get("_txc")
            if isinstance(txc, dict) and bool_form(txc.get("halt")):
                frame.halt_event.set()
        self.record_step(run, frame, pop, "ok", transport, started_wall, started, rec,
                     input_value=input_value, output_value=output, extra=extra)

    def op_failed(self, run: Run, frame: Frame, pop: PreparedOp, exc: OpError, transport: str,
                   started_wall: float, started: float, rec: TraceRecorder, input_value: Any,
                   extra: dict | None = None) -> None:
        frame.outcomes[pop.name] = OpOutcome(pop.name, None, exc.status, exc.message)
        frame.ran.append(pop.op)
        tb = getattr(exc, "traceback", None)
        if tb and rec.enabled:
            extra = dict(extra or {})
            extra["traceback"] = tb
        code = getattr(exc, "code", None)
        if code and rec.enabled:
            extra = dict(extra or {})
            extra["code"] = code
        self.record_step(run, frame, pop, exc.status, transport, started_wall, started, rec, error=exc.message,
                     input_value=input_value, extra=extra)

    def note_dropped(self, rec: TraceRecorder, pop: PreparedOp, dropped: list[str]) -> None:
        if rec.enabled:
            for path in dropped:
                rec.event("envelope.reserved_write_dropped", {"path": path, "op": pop.name})

    def record_step(self, run: Run, frame: Frame, pop: PreparedOp, status: str, transport: str, started_wall: float,
                started: float, rec: TraceRecorder, *, error: str | None = None, input_value: Any = None,
                output_value: Any = None, extra: dict | None = None) -> None:
        if self.debugger is not None:
            self.debugger.op_recorded(run, frame, pop, status, input_value, output_value, error)
        recorder = _metrics.current
        if recorder.enabled:
            recorder.op(transport, status, time.perf_counter() - started)
        sizes = None  # (bytes in, bytes out), measured once for the span and the trace row
        if run.traced:
            sizes = (_json_size(input_value), _json_size(output_value))
            _otel.current.op(run, frame, pop.op, transport, status, started_wall, time.perf_counter() - started, error,
                             *sizes)
        if not rec.enabled:
            return
        duration = (time.perf_counter() - started) * 1000.0
        directives = pop.prepared.directives
        detail = directives.get("debug") is True if directives else False
        op = pop.op
        since = rec.times_from  # the row's times are counted from the trace's start
        row = (frame.stack, frame.scope, op.name, (op.facts or self.facts(op)).operation, transport, status,
               int(started_wall * 1000) - since, int(started_wall * 1000 + duration) - since,
               int(duration * 1000) / 1000)
        if transport != "noop":
            if sizes is None:
                sizes = (_json_size(input_value), _json_size(output_value))
            row += (*sizes, error)
        elif error is not None:
            row += (None, None, error)
        bodies = rec.full or detail or (rec.answers and transport != "noop")  # --trace-ops answers: op bodies
        if not (bodies or extra):  # the common case: a compact row, no dict
            rec.summary_step(*row)
            return
        step = dict(zip(STEP_ROW_FIELDS[1:], row))
        step["stage"] = frame.stage
        if extra:
            step.update(extra)
        if bodies:
            rec.step(step, detail=True, rule=self.facts(op).trace_source if rec.full or detail else None,
                     input_value=input_value if input_value is not None else pop.prepared.dispatched,
                     output_value=output_value)  # the recorder takes its own snapshot
        else:
            rec.step(step)

    # ================================================================ scopes of local rules
    def _local_rules(self, stack: str, scope: int) -> tuple[OpRule, ...] | None:
        """The rules of a scope when every one is local and plain — no EXEC, no LOOP, no WITH
        (so no mode, `into` or debug), no EMIT of the TTL — else None. Cached: the tree is
        pinned."""
        rules = tuple(self.tree.rules_at(stack, scope))
        facts_of = self.facts
        plain = all(op.target is None and op.rule.loop is None and not op.rule.with_
                    and not (op.facts or facts_of(op)).emits_ttl for op in rules)
        found = rules if plain else None
        if len(self._locals) >= _SCOPE_CACHE_LIMIT:
            self._locals.clear()
        self._locals[(stack, scope)] = found
        return found

    def _local_scope(self, run: Run, stack: str, scope: int, stage: str, rules: tuple[OpRule, ...],
                     rec: TraceRecorder, start_ns: int = 0, implied: bool = False) -> None:
        """A scope of local rules (`_local_rules`) from WHEN to the next position, fused:
        what `select_ops`, each op's tail and `complete_scope` do for ops without EXEC, WITH
        or LOOP, without the objects and calls that only ops which dispatch need. Each
        matched rule is run whole (`local_output`) before the next: the order cannot show,
        as each works on its own copy-on-write input and nothing reaches the envelope before
        the merge. `start_ns`: when the scope was entered (`perf_counter_ns()`; 0: now).
        `implied`: the scope was entered as STAGE_FUSED (`TraceRecorder.fused_enter`): its
        entry is recorded after its rules, their steps folded in while they end well, and
        its merge is not recorded."""
        e0 = run.envelope
        matched = self._matching(e0, rules)
        outputs: list[tuple[str, dict | None]] = []
        fold: list | None = None
        if matched:
            budget = run.budget
            ttl = budget.ttl if budget.max_ttl else None
            timed = rec.enabled
            # each rule's step is timed from the end of the previous one, the first from the
            # scope's entry (matching the rules counts to it): one clock reading per rule
            if timed and not start_ns:
                start_ns = perf_counter_ns()
            if implied and timed:
                if rec.folds:
                    fold = []
                else:  # the entry now, the steps on their own
                    rec.unfold(stack, scope, [])
            for op in matched:
                facts = op.facts
                paths = facts.write_paths
                output, error, dropped = local_output(op.rule, private_input(e0, paths) if paths else e0,
                                                      facts.plan, ttl)
                name = op.name
                if fold is not None and (dropped or output is None):
                    rec.unfold(stack, scope, fold)  # this step is recorded on its own
                    fold = None
                if dropped and timed:
                    for path in dropped:
                        rec.event("envelope.reserved_write_dropped", {"path": path, "op": name})
                outputs.append((name, None if output is None else _without_ttl(output)))
                if timed:
                    end_ns = perf_counter_ns()
                    if fold is not None:
                        fold += (name, (end_ns - start_ns) // 1000)
                    else:
                        rec.local_step(stack, scope, name, facts.operation, "error" if output is None else "ok",
                                       start_ns, end_ns, error)
                    start_ns = end_ns
                if facts.writes_goto:
                    budget.charge(DISPATCH_FUEL)
        if implied and rec.enabled:
            rec.fused_done(fold)
        # every output was built by EMIT and is shared with nothing: moved, not copied
        ran = self.merge_outputs(run, stage, outputs, matched, rec, owned=True)
        control = self._control(run, stack, rec)
        if rec.enabled:
            if implied:  # entered as STAGE_FUSED: the merge's number taken, the event implied
                rec.seq += 1
            else:
                rec.stage_merge(stage, [ran[0].name] if len(ran) == 1 else list(map(_by_name, ran)))
        self._move_on(run, stack, scope, stage, control, rec)

    # ================================================================ end of scope
    def complete_scope(self, run: Run, frame: Frame, rec: TraceRecorder) -> None:
        """The end of a scope: merge in op-name order, SET POST, deletes, control, next."""
        outcomes = frame.outcomes
        outputs = [(name, outcomes[name].output) for name in outcomes]
        facts_of = self.facts
        for op in frame.ran:
            if op.target is None and (op.facts or facts_of(op)).writes_goto:
                run.budget.charge(DISPATCH_FUEL)
        ran = self.merge_outputs(run, frame.stage, outputs, frame.ran, rec)
        control = self._control(run, frame.stack, rec)
        if rec.enabled:
            rec.stage_merge(frame.stage, [ran[0].name] if len(ran) == 1 else list(map(_by_name, ran)))
            if rec.full:
                rec.scope_done(frame.stage, frame.before, run.envelope)
        self.next_position(run, frame, control, rec)

    @staticmethod
    def _control(run: Run, stack: str, rec: TraceRecorder) -> Any:
        """After the merge: `_txc.delete` applied, then halt / goto read."""
        envelope = run.envelope
        txc = envelope.get("_txc")
        if type(txc) is dict and "delete" not in txc and "halt" not in txc and "goto" not in txc:
            return _NO_CONTROL  # what apply_delete and read_control would find: nothing to do
        refused = apply_delete(envelope)
        for path in refused:
            rec.event("envelope.delete_refused", {"path": path})
        return read_control(envelope, stack)

    def merge_outputs(self, run: Run, stage: str, outputs: list[tuple[str, dict | None]], ran: list[OpRule],
                      rec: TraceRecorder, owned: bool = False) -> list[OpRule]:
        """The one merge of a scope's results: each output deep-merged into the envelope in op-name
        order (outputs of one name keep their given order), then the SET POST of every rule that
        ran, in op-name order. Used at the end of every scope and for results that arrive later
        (a deferred op's join, a resumed barrier). Returns the rules in the order applied.
        `owned`: the outputs were made by the rules themselves (EMIT onto an empty output) and
        are dropped after this merge, so they are moved into the envelope, not copied."""
        envelope = run.envelope
        ordered = sorted(outputs, key=_first) if len(outputs) > 1 else outputs
        for _name, output in ordered:
            if output:
                merge_into(envelope, output, owned)
        ran = sorted(ran, key=_by_name) if len(ran) > 1 else ran
        facts_of = self.facts
        for op in ran:  # (a loop, not any(): no generator made for the commonest case, none)
            if (op.facts or facts_of(op)).has_set_post:
                break
        else:
            return ran
        result = apply_set_post([op.rule for op in ran], envelope)
        if rec.enabled:
            for path in result.dropped:
                rec.event("envelope.reserved_write_dropped", {"path": path, "op": "SET POST"})
        if result.error is not None:
            rec.event("envelope.set_post_failed", {"stage": stage, "error": result.error})
        run.envelope = result.envelope
        return ran

    def next_position(self, run: Run, frame: Frame, control: Any, rec: TraceRecorder) -> None:
        """Where the walk goes next: halt, goto, or the next scope."""
        self._move_on(run, frame.stack, frame.scope, frame.stage, control, rec)

    def _move_on(self, run: Run, stack: str, scope: int, stage: str, control: Any, rec: TraceRecorder) -> None:
        """`next_position` for the scope `stage` (`stack`/`scope`)."""
        if control.halt:
            rec.event("request.halt", {"stage": stage})
            run.status = "halted"
            return
        if control.error is not None:
            run.fail({"error": {"code": rc.BAD_GOTO.code, "message": control.error}}, 500, reason=rc.BAD_GOTO.code)
            return
        if control.goto is not None:
            to_stack, to_scope = control.goto
            if not _STACK_OK.match(to_stack) or to_scope > 999_999_999:
                value = f"{to_stack}/{to_scope}"
                run.fail({"error": {"code": rc.BAD_GOTO.code, "message": f'invalid @goto target "{value}"'}}, 500,
                         reason=rc.BAD_GOTO.code)
                return
            if not self.tree.has_stack(to_stack):
                run.fail({"error": {"code": rc.BAD_GOTO.code,
                                    "message": f'@goto target "{to_stack}/{to_scope}": there is no stack "{to_stack}"'}},
                         500, reason=rc.BAD_GOTO.code)
                return
            if is_system_stack(to_stack) and to_stack != stack:
                run.fail({"error": {"code": rc.GOTO_FORBIDDEN.code,
                                    "message": f'@goto into system stack "{to_stack}" is not allowed'}}, 500,
                         reason=rc.GOTO_FORBIDDEN.code)
                return
            rec.event("stage.jump", {"from": stage, "to": f"{to_stack}/{to_scope}"})
            run.stack = to_stack
            run.requested_scope = to_scope
            run.previous_stage = stage
            return
        following = self._resolve(stack, scope + 1)[0]
        if following is None:
            run.status = "completed"
            return
        run.requested_scope = following
        run.previous_stage = stage

    # ================================================================ trace redaction
    def redaction_paths(self, stack: str) -> tuple[set, set]:
        cached = self._redactions.get(stack)
        if cached is None:
            omit: set = set()
            redact: set = set()
            for scope in self.tree.effective_scopes(stack):
                for op in self.tree.rules_at(stack, scope):
                    for pair in op.rule.with_:
                        if pair.key_text in ("omit", "redact") and type(pair.value).__name__ == "StringLit":
                            (omit if pair.key_text == "omit" else redact).update(parse_path_list(pair.value.value))
            cached = (omit, redact)
            self._redactions[stack] = cached
        return cached


@attrs.frozen
class _Facts:
    """What the walk needs to know about a rule, computed once per loaded rule."""

    write_paths: list | None
    when: Callable[[Any], Any] | None  # the compiled WHEN; None matches (no WHEN)
    priority: int
    operation: str | None  # the EXEC text, for trace steps
    emits_ttl: bool
    writes_goto: bool
    has_set_post: bool
    trace_source: str  # rule text for full-mode traces, hmac `key` literals masked
    plan: RulePlan  # the rule's data steps (txcl.evaluate.plan)

    @classmethod
    def of(cls, op: OpRule) -> "_Facts":
        rule = op.rule
        return cls(
            write_paths=write_paths(rule),
            when=_compiled_when(rule),
            priority=rule.priority_value,
            operation=op.exec_text,
            emits_ttl=any(a.target.segments == TTL_SEGMENTS for a in rule.emit),
            writes_goto=any(a.target.segments == GOTO_SEGMENTS for a in (*rule.emit, *rule.set_post)),
            has_set_post=bool(rule.set_post),
            trace_source=_mask_hmac_keys(op),
            plan=rule_plan(rule),
        )


def _without_ttl(output: dict | None) -> dict | None:
    """An op output without `_txc.ttl` (EMIT lowers the TTL through the budget, never by merging)."""
    if output and TTL_SEGMENTS[0] in output:
        txc = output.get("_txc")
        if isinstance(txc, dict) and "ttl" in txc:
            txc = dict(txc)
            del txc["ttl"]
            output = dict(output)
            if txc:
                output["_txc"] = txc
            else:
                del output["_txc"]
    return output


def _never(envelope: Any) -> bool:
    return False


def _compiled_when(rule: Any) -> Callable[[Any], Any] | None:
    """The WHEN predicate (None when the rule has no WHEN); a condition that cannot be
    compiled matches nothing, as `when_matches` has it."""
    if rule.when is None:
        return None
    try:
        return compile_condition(rule.when.condition)
    except Exception:  # noqa: BLE001 - evaluation never raises
        return _never


def _mask_hmac_keys(op: OpRule) -> str:
    source = op.source
    target = op.target
    if target is None or target.kind != "builtin" or target.name not in ("hmac-sign", "hmac-verify"):
        return source
    spans = sorted((p.value.span.start.offset, p.value.span.end.offset) for p in op.rule.with_
                   if p.key_text == "key" and p.value.span.end.offset > p.value.span.start.offset)
    for start, end in reversed(spans):
        source = source[:start] + '"[redacted]"' + source[end:]
    return source


# sort keys and the names of merged rules, read in C (no Python frame per rule)
_by_name = attrgetter("name")
_first = itemgetter(0)


def _builtin_output(target: ExecTarget, op_input: dict, directives: dict, ctx: OpContext) -> Any:
    """What the builtin of `target` gives back: its output (a plain `def` that hands back an
    awaitable has it run to its end, or fails its op), or an awaitable of it (`async def`)."""
    raw = start_builtin(target.name, op_input, directives, ctx)
    if hasattr(raw, "__await__") and plain_builtin(target.name):
        return _done_without_waiting(raw, target.text)
    return raw


def _done_without_waiting(awaitable: Any, text: str) -> Any:
    """The result of an awaitable a plain builtin handed back, when it has one without
    waiting; an op error when it would wait (a builtin that waits is an `async def`)."""
    if not asyncio.iscoroutine(awaitable):
        raise OpError(f"{text} handed back an awaitable; a builtin that waits must be an async def")
    done, value = first_step(awaitable)
    if not done:
        awaitable.close()
        raise OpError(f"{text} waited; a builtin that waits must be an async def")
    return value


def _fmt_ms(ms: int) -> str:
    if ms % 60_000 == 0 and ms >= 60_000:
        return f"{ms // 60_000}m"
    if ms % 1000 == 0 and ms >= 1000:
        return f"{ms // 1000}s"
    return f"{ms}ms"
