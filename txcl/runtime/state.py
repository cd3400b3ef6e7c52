"""The walk's state: `Run` (everything a suspended flow needs to go on, JSON-serialisable)
and the transient `Frame` / `PreparedOp` / `OpOutcome` of one scope."""

from __future__ import annotations

from typing import Any

import attrs

from txcl.runtime.budget import Budget


@attrs.define(slots=False)
class Run:
    """Position, envelope and budgets of one flow. `step()` advances it one frame.

    status: running | completed | halted | failed | suspended | deadline.
    `joins` and `run_id`/`rcid` belong to the continuations layer; the walker keeps them.
    """

    rid: str
    src: str
    entry_stack: str
    stack: str
    envelope: dict
    budget: Budget
    requested_scope: int = 0
    previous_stage: str | None = None
    visits: dict[str, int] = attrs.Factory(dict)
    status: str = "running"
    error: dict | None = None
    http_status: int | None = None
    last_stage: str | None = None
    stacks_seen: list[str] = attrs.Factory(list)
    mocks: list[str] | None = None
    web_req: dict | None = None
    run_id: str | None = None
    rcid: str | None = None
    origin_rid: str | None = None
    segment_id: str | None = None
    snapshot_id: str | None = None
    joins: list[dict] = attrs.Factory(list)
    reason: str | None = None
    # a request breakpoint (`?_txc.break=`): (stack or None for any, scope); the walk stops as
    # it enters that scope and `break_hit` names the stage it stopped at
    break_at: tuple[str | None, int] | None = None
    break_hit: str | None = None
    trace_context: str | None = None  # W3C traceparent of the segment span (OpenTelemetry): a resume links to it
    traced: bool = False  # this segment's span records (OpenTelemetry on and sampled): scopes and ops get spans
    # the native tracer's span of this segment: its traceparent becomes `trace_context` only
    # when the run is written (a park), not on every request; never serialised itself
    trace_span: Any = None
    started_monotonic: float = 0.0
    # what the walk hooks keep about the segment driving this run (the continuations layer's
    # typed `txcl.continuations.segment.Segment`); never serialised
    segment: Any = None

    @property
    def finished(self) -> bool:
        return self.status != "running"

    def fail(self, payload: dict, http_status: int, status: str = "failed", reason: str | None = None) -> None:
        self.status = status
        self.error = payload
        self.http_status = http_status
        self.reason = reason

    def to_json(self) -> dict[str, Any]:
        return {
            "rid": self.rid, "src": self.src, "entry_stack": self.entry_stack, "stack": self.stack,
            "envelope": self.envelope, "budget": self.budget.to_json(),
            "requested_scope": self.requested_scope, "previous_stage": self.previous_stage,
            "visits": dict(self.visits), "status": self.status, "error": self.error,
            "http_status": self.http_status, "last_stage": self.last_stage,
            "stacks_seen": list(self.stacks_seen), "mocks": self.mocks, "web_req": self.web_req,
            "run_id": self.run_id, "rcid": self.rcid, "origin_rid": self.origin_rid,
            "segment_id": self.segment_id, "snapshot_id": self.snapshot_id, "joins": list(self.joins),
            "reason": self.reason,
            "trace_context": self.trace_span.traceparent() if self.trace_span is not None else self.trace_context,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Run":
        fields = dict(data)
        fields["budget"] = Budget.from_json(fields["budget"])
        known = {a.name for a in attrs.fields(cls)} - _NOT_SERIALISED
        return cls(**{k: v for k, v in fields.items() if k in known})


_NOT_SERIALISED = {"trace_span", "segment", "traced"}


@attrs.define(slots=False)
class PreparedOp:
    """One surviving rule of a scope after SET PRE / WITH / SELECT."""

    op: Any  # txcl.ops.tree.OpRule
    prepared: Any  # txcl.evaluate.rule.Prepared
    mode: str = "sync"  # sync | async | continuable (resolved WITH mode)

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def directives(self) -> dict:
        return self.prepared.directives


@attrs.define(slots=False)
class OpOutcome:
    """What one op contributed to its scope: the finished output (None on an op error)."""

    name: str
    output: dict | None
    status: str = "ok"  # ok | error | timeout | cancelled | completed
    error: str | None = None


@attrs.define(slots=False)
class Frame:
    """One entry into one scope (transient; continuations persist what they need)."""

    stack: str
    scope: int
    stage: str
    visit: int
    rules: tuple = ()
    ops: list[PreparedOp] = attrs.Factory(list)
    ran: list[Any] = attrs.Factory(list)  # OpRules whose SET POST applies, any order
    outcomes: dict[str, OpOutcome] = attrs.Factory(dict)
    halt_event: Any = None  # asyncio.Event when a LOOP runs in this frame
    special: bool = False  # an op resolved mode async/continuable
    penalty: float = 0.0  # seconds to sleep for a repeated transition
    ttl_raise_ignored: bool = False
    rec: Any = None  # the segment's TraceRecorder (for continuation hooks)
    before: Any = None  # full tracing: the envelope as the scope started (for its diff)
