"""The `Debugger` a walker calls at every clause it reaches (see `Walker.debugger`).

Each call is a *point*: a scope's entry, a rule's WHEN (whether it holds or not), its SET,
SELECT and WITH once its input is prepared, its EXEC before the call, each LOOP pass, its EMIT
once the answer is in, and the end of a segment. At each point the debugger decides whether to
stop — a breakpoint there (its condition and hit count holding), an exception filter, a step in
progress, a pause asked for — and, when it stops, holds the walk's thread until the client
resumes it. The walk runs in its own thread (see txcl/debug/adapter.py), so holding it holds
nothing else.

Stepping: `next` stops at the next clause or rule (inside a LOOP: the next pass), `step in`
also stops at each LOOP pass and, from an async op, at the scope its answer joins, `step out`
stops at the next scope's entry.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from txcl.debug.breakpoints import Breakpoint, ClauseLines

_DEPTH = {"scope": 1, "loop": 3, "end": 0}
_CLAUSES_AT_PREPARE = ("set_pre", "select", "set_post", "with")
_ANSWERED = frozenset(("ok", "noop", "completed", "recorded", "resumed"))  # step statuses that are not failures
_LINE_KINDS = frozenset(("when", "set_pre", "select", "set_post", "with", "exec", "loop", "emit"))


class DebugAborted(BaseException):
    """The client ended the session: the walk stops where it stands (a BaseException, so no
    `except Exception` in the walk takes it for an op's failure)."""


@dataclass
class OpView:
    """What the debugger knows of one rule in the scope being walked."""

    op: Any
    conditions: list = field(default_factory=list)
    matched: bool | None = None
    selected: bool = False
    input: Any = None
    answer: Any = None
    output: Any = None
    error: str | None = None
    status: str | None = None
    prepare_error: str | None = None


@dataclass
class ScopeView:
    """The scope being walked: where, its entry envelope, its rules."""

    run: Any
    frame: Any
    envelope: Any
    ops: dict[int, OpView] = field(default_factory=dict)

    def of(self, op: Any) -> OpView:
        found = self.ops.get(id(op))
        if found is None:
            found = self.ops[id(op)] = OpView(op)
        return found


@dataclass
class Point:
    """Where the walk stands when the debugger is called."""

    kind: str  # scope | when | set_pre | select | set_post | with | exec | loop | emit | answer | end
    run: Any
    scope: ScopeView | None
    op: Any = None
    line: int | None = None
    detail: dict = field(default_factory=dict)

    @property
    def depth(self) -> int:
        return _DEPTH.get(self.kind, 2)

    @property
    def envelope(self) -> Any:
        """The envelope conditions and `evaluate` see here: the scope's entry envelope."""
        if self.scope is not None:
            return self.scope.envelope
        return self.run.envelope if self.run is not None else {}


class Events:
    """What the debugger tells the client (the adapter gives the real one)."""

    def stopped(self, reason: str, text: str | None, hit_ids: list[int]) -> None: ...

    def output(self, text: str, category: str = "console") -> None: ...


class Debugger:
    """Breakpoints, stepping and the held walk; attach it to a walker before the walk starts."""

    def __init__(self, events: Events | None = None) -> None:
        self.events = events or Events()
        self.cond = threading.Condition()
        self.line_breakpoints: dict[str, list[Breakpoint]] = {}  # realpath -> breakpoints
        self.function_breakpoints: list[Breakpoint] = []
        self.launch_breakpoints: list[Breakpoint] = []  # the launch's `stopAt` (kept when the client sets its own)
        self.exception_filters: set[str] = set()
        self.mode = "run"  # run | entry | next | in | out | join
        self.step_depth = 2
        self.join_target: tuple[str, int] | None = None
        self.pause_requested = False
        self.aborted = False
        self.stopped: Point | None = None
        self.scope: ScopeView | None = None
        self.root: str = os.getcwd()  # where the tree's relative rule paths start (the workspace)

    # ------------------------------------------------------------ set-up
    def attach(self, walker: Any) -> None:
        """Every scope through the general path, every call through `run_op`: each clause is a point."""
        walker.debugger = self
        walker.fuse_local = False
        walker.call_in_place = False

    def path_of(self, op: Any) -> str | None:
        """The real path of `op`'s rule file (rule paths are relative to the workspace)."""
        if not op.file:
            return None
        return os.path.realpath(os.path.join(self.root, op.file))

    def set_line_breakpoints(self, path: str, specs: list[dict], next_id: Callable[[], int]) -> list[Breakpoint]:
        """Replace the breakpoints of one file; each lands on the first line of the clause its
        line stands on, or stays unverified with the reason."""
        key = os.path.realpath(path)
        lines = ClauseLines.of_file(key)  # read now: the file may have changed since the last time
        out: list[Breakpoint] = []
        for spec in specs:
            bp = Breakpoint.of(next_id(), spec)
            line = spec.get("line")
            found = lines.at(line) if lines is not None and isinstance(line, int) else None
            if found is not None:
                bp.clause, bp.line = found
            else:
                bp.verified, bp.line = False, line if isinstance(line, int) else None
                bp.message = ("not a rule file that parses" if lines is None else
                              "no clause on this line (breakpoints stand on WHEN, SET, SELECT, WITH, EXEC, LOOP or EMIT)")
            out.append(bp)
        with self.cond:
            self.line_breakpoints[key] = out
        return out

    @staticmethod
    def named_breakpoints(specs: list[dict], next_id: Callable[[], int],
                          known: Callable[[str], str | None]) -> list[Breakpoint]:
        """`stack/scope` (its entry) or `stack/scope/rule` (that rule's first clause, its WHEN
        when it has one); `known(name)` says why a name is not in the tree (None: it is)."""
        out: list[Breakpoint] = []
        for spec in specs:
            bp = Breakpoint.of(next_id(), spec)
            bp.name = str(spec.get("name") or "").strip().strip("/")
            problem = known(bp.name)
            if problem is not None:
                bp.verified, bp.message = False, problem
            out.append(bp)
        return out

    def set_function_breakpoints(self, specs: list[dict], next_id: Callable[[], int],
                                 known: Callable[[str], str | None]) -> list[Breakpoint]:
        """Replace the client's function breakpoints (see `named_breakpoints`)."""
        out = self.named_breakpoints(specs, next_id, known)
        with self.cond:
            self.function_breakpoints = out
        return out

    # ------------------------------------------------------------ the walker's calls
    def scope_selected(self, run: Any, frame: Any, rules: Any, selected: Any, envelope: Any) -> None:
        from txcl.explain import when_outcome
        from txcl.values.merge import deep_copy

        scope = self.scope = ScopeView(run, frame, deep_copy(envelope))
        chosen = {id(op) for op in selected}
        for op in rules:
            view = scope.of(op)
            view.selected = id(op) in chosen
            view.conditions, view.matched = when_outcome(op, envelope)
        self._at(Point("scope", run, scope))
        for op in rules:
            if op.rule.when is not None:
                self._at(Point("when", run, scope, op, self._line(op, "when")))

    def op_prepared(self, run: Any, frame: Any, pop: Any) -> None:
        scope = self._scope_for(run, frame)
        view = scope.of(pop.op)
        view.input = pop.prepared.dispatched
        view.prepare_error = pop.prepared.error
        for kind in _CLAUSES_AT_PREPARE:
            line = self._line(pop.op, kind)
            if line is not None:
                self._at(Point(kind, run, scope, pop.op, line))

    def op_dispatch(self, run: Any, frame: Any, pop: Any, op_input: Any) -> None:
        scope = self._scope_for(run, frame)
        scope.of(pop.op).input = op_input
        self._at(Point("exec", run, scope, pop.op, self._line(pop.op, "exec")))

    def loop_pass(self, run: Any, frame: Any, pop: Any, passes: int, pass_input: Any, answer: Any, view: Any) -> None:
        scope = self._scope_for(run, frame)
        self._at(Point("loop", run, scope, pop.op, self._line(pop.op, "loop"),
                       {"pass": passes, "input": pass_input, "answer": answer, "view": view}))

    def note_answer(self, pop: Any, raw: Any) -> None:
        if self.scope is not None:
            self.scope.of(pop.op).answer = raw

    def op_recorded(self, run: Any, frame: Any, pop: Any, status: str, input_value: Any, output_value: Any,
                    error: str | None) -> None:
        scope = self._scope_for(run, frame)
        view = scope.of(pop.op)
        view.status, view.output, view.error = status, output_value, error
        if input_value is not None:
            view.input = input_value
        op = pop.op
        if status == "pending":  # an async op sent: its EXEC
            directives = pop.prepared.directives or {}
            self._at(Point("exec", run, scope, op, self._line(op, "exec"),
                           {"async": True, "join_at_scope": directives.get("join_at_scope")}))
            return
        if status == "cancelled":
            return
        line = self._line(op, "emit")
        kind = "emit"
        if line is None:
            line, kind = self._line(op, "exec") or self._line(op, "loop"), "answer"
        exception = None
        if status not in _ANSWERED or error:  # (a LOOP that stopped on an error is "ok" with its error)
            exception = ("opError", f"{op.stack}/{op.scope}/{op.name}: {error or status}")
        if line is None and exception is None:
            return  # a rule of SETs only: nothing more to show
        self._at(Point(kind, run, scope, op, line), exception)

    def segment_ended(self, run: Any) -> None:
        from txcl.runtime.budget import FUEL_EXHAUSTED, TTL_EXHAUSTED

        if run.status == "suspended":
            waiting = [j.get("op") or j.get("unit_id") for j in (run.joins or []) if isinstance(j, dict)]
            where = getattr(run, "last_stage", None)
            text = (f"the run suspended at {where}" if where else "the run suspended") + (
                f", waiting for {', '.join(map(str, waiting))}" if waiting else " to wait for async answers")
            self._at(Point("end", run, self.scope), ("suspend", text))
        elif run.reason in (FUEL_EXHAUSTED, TTL_EXHAUSTED):
            self._at(Point("end", run, self.scope), ("exhausted", f"the walk ran out: {run.reason}"))

    # ------------------------------------------------------------ the client's calls
    def resume(self, mode: str) -> None:
        """continue (`run`), `next`, `in` or `out` from where the walk stopped."""
        with self.cond:
            point = self.stopped
            self.join_target = None
            if mode == "in" and point is not None and point.kind == "exec" and point.detail.get("async"):
                target = _join_scope(point)
                if target is not None:
                    mode, self.join_target = "join", target
            self.mode = mode
            self.step_depth = max(point.depth if point is not None else 2, 2)
            self.stopped = None
            self.cond.notify_all()

    def pause(self) -> None:
        with self.cond:
            self.pause_requested = True

    def abort(self) -> None:
        with self.cond:
            self.aborted = True
            self.stopped = None
            self.cond.notify_all()

    # ------------------------------------------------------------ stopping
    def _scope_for(self, run: Any, frame: Any) -> ScopeView:
        scope = self.scope
        if scope is None or scope.run is not run or scope.frame is not frame:
            from txcl.values.merge import deep_copy

            scope = self.scope = ScopeView(run, frame, deep_copy(run.envelope))
        return scope

    def _line(self, op: Any, kind: str) -> int | None:
        lines = ClauseLines.of_rule(op.rule)
        return lines.line_of(kind)

    def _breakpoints_at(self, point: Point) -> tuple[list[Breakpoint], str]:
        """The breakpoints standing where `point` is, and the stop reason they give."""
        if point.kind == "scope":
            name = f"{point.scope.frame.stack}/{point.scope.frame.scope}"
            return [bp for bp in self._named() if bp.name == name], "function breakpoint"
        op = point.op
        if op is None or point.line is None or point.kind not in _LINE_KINDS:
            return [], ""
        path = self.path_of(op)
        if path is not None:
            found = [bp for bp in self.line_breakpoints.get(path, ()) if bp.verified and bp.line == point.line]
            if found:
                return found, "breakpoint"
        first = next((c.kind for c in op.rule.clauses if c.kind in _LINE_KINDS), None)
        if point.kind == first and not point.detail.get("pass"):
            name = f"{op.stack}/{op.scope}/{op.name}"
            return [bp for bp in self._named() if bp.name == name], "function breakpoint"
        return [], ""

    def _named(self) -> list[Breakpoint]:
        return self.function_breakpoints + self.launch_breakpoints

    def _step_stops(self, point: Point) -> bool:
        mode = self.mode
        if mode == "run" or point.kind == "end":
            return False
        if mode in ("in", "entry"):
            return True
        if mode == "next":
            return point.depth <= self.step_depth
        if mode == "out":
            return point.kind == "scope"
        if mode == "join":
            frame = point.scope.frame if point.scope is not None else None
            return (point.kind == "scope" and frame is not None
                    and (frame.stack, frame.scope) == self.join_target)
        return False

    def _at(self, point: Point, exception: tuple[str, str] | None = None) -> None:
        if self.aborted:
            raise DebugAborted()
        reason: str | None = None
        text: str | None = None
        hit_ids: list[int] = []
        if exception is not None and exception[0] in self.exception_filters:
            reason, text = "exception", exception[1]
        if reason is None:
            candidates, kind = self._breakpoints_at(point)
            for bp in candidates:
                if not bp.reached(point.envelope):
                    continue
                if bp.log_message is not None:
                    from txcl.debug.breakpoints import render_log

                    self.events.output(render_log(bp.log_message, point.envelope) + "\n")
                    continue
                hit_ids.append(bp.id)
            if hit_ids:
                reason = kind
        with self.cond:
            if reason is None and self.pause_requested:
                reason = "pause"
            if reason is None and self._step_stops(point):
                reason = "step"
            if reason is None:
                return
            self.stopped = point
            self.mode = "run"
            self.pause_requested = False
        self.events.stopped(reason, text, hit_ids)
        with self.cond:
            while self.stopped is point and not self.aborted:
                self.cond.wait()
        if self.aborted:
            raise DebugAborted()


def _join_scope(point: Point) -> tuple[str, int] | None:
    raw = point.detail.get("join_at_scope")
    try:
        scope = int(raw)
    except (TypeError, ValueError):
        return None
    stack = point.scope.frame.stack if point.scope is not None else point.op.stack
    return stack, scope
