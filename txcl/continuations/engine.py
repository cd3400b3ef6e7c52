"""The continuations layer's `WalkHooks` (RUNTIME.md §3.2 steps 3, 8–11, 17).

`classify` sorts a scope's prepared ops by CONTINUATIONS.md §2.1; `ContinuationEngine`
routes each class to its mechanism:

- deferred ops (`join_at_scope` above the scope) → the deferred plug-in (`deferred.py`),
  which also owns the join check of step 3;
- a continuable op → `continuable.py` (§2.4);
- barrier ops → `barrier.py` (§2.2): every op still in the set becomes a member unit;
- everything else stays synchronous.

Await units come in four kinds, `unary` (one worker call), `itemized` (one call per element,
§2.5), `local` (a promoted continuable op) and `sync` (a sync sibling inside a barrier).
Each kind has a *unit builder* (prepared op → `UnitSpec`) registered in `UNIT_BUILDERS`;
`itemized.py` registers its own builder and materialiser, `deferred.py` installs itself as
`engine.deferred`. Suspends are keyed by (run, stage, visit) in the store, so a stage may
park any number of times.

The engine keeps nothing about a flow in memory that matters for correctness: the store's
records decide. A segment's fence (segment id, claim token) travels on the `Run` object.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Protocol

import attrs

from txcl.store.errors import RunLost
from txcl.store.records import Fence, RunSpec, UnitSpec
from txcl.values.coerce import duration_to_ms

if TYPE_CHECKING:
    from txcl.continuations.service import ContinuationService
    from txcl.runtime.state import Frame, PreparedOp, Run
    from txcl.runtime.walker import Walker
    from txcl.trace.recorder import TraceRecorder

log = logging.getLogger("txcl.continuations")

UNIT_KINDS = ("unary", "itemized", "local", "sync")
OP_CLASSES = ("sync", "barrier", "deferred", "continuable")


# ---------------------------------------------------------------------------------------------
# classification (§2.1)


@attrs.frozen
class OpClass:
    """How one prepared op is handled at its scope."""

    kind: str  # sync | barrier | deferred | continuable
    unit_kind: str | None = None  # unary | itemized | local | sync (None: plain sync op)
    join_at_scope: int | None = None  # deferred floor; for continuable: the offending value
    join_raw: Any = None


def _join_value(directives: dict) -> int | None:
    """`join_at_scope` as an integer, or None (absent, or a non-integer value: ignored, DJ-6)."""
    raw = directives.get("join_at_scope") if directives else None
    if raw is None or isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    if isinstance(raw, float) and raw.is_integer():
        return int(raw)
    if isinstance(raw, str) and raw.strip().lstrip("-").isdigit():
        return int(raw.strip())
    return None


def is_async_target(pop: "PreparedOp") -> bool:
    """`mode = "async"` applies to http(s):// targets only; elsewhere it runs synchronously."""
    target = pop.op.target
    return target is not None and target.kind == "http"


def classify(pop: "PreparedOp", scope: int) -> OpClass:
    """CONTINUATIONS.md §2.1 for one prepared op at scope `scope`."""
    directives = pop.directives or {}
    mode = pop.mode
    if mode == "continuable":
        if pop.op.target is None:
            return OpClass("sync")
        return OpClass("continuable", "local", _join_value(directives), directives.get("join_at_scope"))
    if mode != "async" or not is_async_target(pop):
        return OpClass("sync")
    unit_kind = "itemized" if "each" in directives else "unary"
    join = _join_value(directives)
    if join is not None and join > scope:
        return OpClass("deferred", unit_kind, join)
    return OpClass("barrier", unit_kind)


# ---------------------------------------------------------------------------------------------
# unit builders


class UnitBuilder(Protocol):
    def __call__(self, engine: "ContinuationEngine", run: "Run", frame: "Frame", pop: "PreparedOp",
                 opclass: OpClass) -> UnitSpec: ...


UNIT_BUILDERS: dict[str, UnitBuilder] = {}


def register_unit_builder(kind: str, builder: UnitBuilder) -> None:
    """Plug in the builder of one unit kind (itemized.py registers `itemized`)."""
    if kind not in UNIT_KINDS:
        raise ValueError(f"unknown unit kind {kind!r}")
    UNIT_BUILDERS[kind] = builder


def worker_budget_ms(directives: dict, default_ms: int) -> int:
    """§2.2 step 8: `max_duration`, else `timeout`, else --async-runtime-default."""
    for key in ("max_duration", "timeout"):
        raw = directives.get(key) if directives else None
        if raw is None:
            continue
        ms = duration_to_ms(raw)
        if ms is not None and ms >= 0:
            return ms
    return default_ms


def _base_spec(run: "Run", frame: "Frame", pop: "PreparedOp", kind: str, items: list, **extra: Any) -> UnitSpec:
    op = pop.op
    directives = pop.directives or {}
    into = directives.get("into") if isinstance(directives.get("into"), str) else None
    return UnitSpec(kind=kind, op_name=op.name, items=items, op_stack=op.stack, op_scope=op.scope,
                    dispatch_stage=frame.stage, dispatch_stack=frame.stack, into=into,
                    exec_target=op.exec_text, directives=_jsonable(directives),
                    input_view=_jsonable(pop.prepared.input), **extra)


def build_unary(engine: "ContinuationEngine", run: "Run", frame: "Frame", pop: "PreparedOp",
                opclass: OpClass) -> UnitSpec:
    settings = engine.service.settings
    budget = worker_budget_ms(pop.directives or {}, settings.async_runtime_default)
    if opclass.kind == "deferred":
        budget += settings.deferred_join_slack
    return _base_spec(run, frame, pop, "unary", [worker_input(pop.prepared.dispatched)], budget_ms=budget,
                      join_at_scope=opclass.join_at_scope if opclass.kind == "deferred" else None)


def build_sync(engine: "ContinuationEngine", run: "Run", frame: "Frame", pop: "PreparedOp",
               opclass: OpClass) -> UnitSpec:
    """A sync sibling inside a barrier: recorded so the resume can merge it (no token)."""
    return _base_spec(run, frame, pop, "sync", [_jsonable(pop.prepared.dispatched)])


register_unit_builder("unary", build_unary)
register_unit_builder("sync", build_sync)


def worker_input(value: Any) -> Any:
    """What a worker receives as `input`: the dispatched input without the budget fields."""
    from txcl.runtime.budget import strip_budget_fields

    copy = _jsonable(value)
    if isinstance(copy, dict):
        strip_budget_fields(copy)
    return copy


def _jsonable(value: Any) -> Any:
    """A deep copy that is plain JSON (the store serialises it)."""
    from txcl.values.merge import deep_copy

    return deep_copy(value)


# ---------------------------------------------------------------------------------------------
# fences and run identity on the Run object


def fence_of(run: "Run") -> Fence:
    """The fence of the segment driving `run` (origin request or resume claim)."""
    return Fence(run.segment_id or run.rid, run.__dict__.get("claim_token"))


def set_claim(run: "Run", segment_id: str, claim_token: str | None) -> None:
    run.segment_id = segment_id
    run.__dict__["claim_token"] = claim_token


def run_spec(engine: "ContinuationEngine", walker: "Walker", run: "Run") -> RunSpec | str:
    """The run to park on: its id when it exists, else what P1 needs (snapshot frozen now)."""
    if run.run_id is not None:
        return run.run_id
    snapshot_id, body = engine.service.snapshot_of(walker.tree)
    return RunSpec(origin_rid=run.origin_rid or run.rid, entry_stack=run.entry_stack, src=run.src,
                   snapshot_id=snapshot_id, snapshot_body=body)


def run_state(run: "Run", frame: "Frame") -> dict:
    """What a resume needs besides the envelope: position, visits, budgets (JSON)."""
    data = run.to_json()
    data.pop("envelope", None)
    data["frame"] = {"stack": frame.stack, "scope": frame.scope, "stage": frame.stage, "visit": frame.visit}
    return data


def adopt_run(run: "Run", record: Any, rec: "TraceRecorder | None" = None) -> None:
    """Copy the store's run identity onto the Run (and its trace) after P1/P2."""
    if rec is not None and rec.enabled and rec.request.get("run_id") is None:
        rec.request["run_id"] = record.run_id
    run.run_id = record.run_id
    run.rcid = record.rcid
    run.origin_rid = record.origin_rid
    run.snapshot_id = record.snapshot_id


def recorder_of(frame: "Frame") -> "TraceRecorder":
    rec = getattr(frame, "rec", None)
    if rec is None:
        from txcl.trace.recorder import TraceRecorder

        rec = TraceRecorder("off", "", "", "")
        frame.rec = rec
    return rec


# ---------------------------------------------------------------------------------------------
# plug-in points for issue-5 mechanisms


class DeferredPlugin(Protocol):
    """Deferred join (§2.3), installed as `engine.deferred` by `deferred.py`."""

    async def dispatch(self, engine: "ContinuationEngine", walker: "Walker", run: "Run", frame: "Frame",
                       ops: list[tuple["PreparedOp", OpClass]]) -> None: ...

    async def join_check(self, engine: "ContinuationEngine", walker: "Walker", run: "Run", frame: "Frame") -> None: ...


# ---------------------------------------------------------------------------------------------
# the hooks


class ContinuationEngine:
    """`WalkHooks` with durable suspends. One per `ContinuationService` (shared by segments)."""

    def __init__(self, service: "ContinuationService"):
        self.service = service
        self.deferred: DeferredPlugin | None = None
        self.on_frame: list[Callable[["Walker", "Run", "Frame"], Any]] = []
        try:  # the issue-5 mechanisms register themselves when present
            from txcl.continuations import deferred as _deferred  # type: ignore[attr-defined]

            install = getattr(_deferred, "install", None)
            if install is not None:
                install(self)
        except ImportError:
            pass
        self.class_filters: list[Callable[..., Any]] = []  # run before the mechanisms (itemized: empty arrays)
        try:
            from txcl.continuations import itemized as _itemized  # registers the itemized builder

            install = getattr(_itemized, "install", None)
            if install is not None:
                install(self)
        except ImportError:
            pass

    # step 3 ---------------------------------------------------------------------------------
    async def join_check(self, walker: "Walker", run: "Run", frame: "Frame") -> None:
        if run.__dict__.get("claim_token") is not None:
            from txcl.continuations.resume import heartbeat_at_frame

            if not await heartbeat_at_frame(self.service, run):
                return
        if self.deferred is not None and run.run_id is not None and run.joins:
            await self.deferred.join_check(self, walker, run, frame)

    # steps 8–11 -----------------------------------------------------------------------------
    async def dispatch_special(self, walker: "Walker", run: "Run", frame: "Frame",
                               ops: list["PreparedOp"]) -> list["PreparedOp"]:
        classes = [(pop, classify(pop, frame.scope)) for pop in ops]
        for class_filter in self.class_filters:  # e.g. itemized ops over an empty array finish at once
            classes = class_filter(walker, run, frame, classes)
        deferred = [(p, c) for p, c in classes if c.kind == "deferred"]
        if deferred:
            if self.deferred is not None:
                await self.deferred.dispatch(self, walker, run, frame, deferred)
                if run.finished:
                    return []
                remaining = [(p, c) for p, c in classes if c.kind != "deferred"]
            else:  # no deferred support installed: the op waits at its own scope (a barrier)
                remaining = [(p, OpClass("barrier", c.unit_kind) if c.kind == "deferred" else c)
                             for p, c in classes]
        else:
            remaining = classes
        continuable = [(p, c) for p, c in remaining if c.kind == "continuable"]
        if continuable:
            from txcl.continuations.continuable import run_continuable

            return await run_continuable(self, walker, run, frame, remaining)
        if any(c.kind == "barrier" for _, c in remaining):
            from txcl.continuations.barrier import park_barrier

            await park_barrier(self, walker, run, frame, remaining)
            return []
        return [p for p, _ in remaining]

    # step 17 --------------------------------------------------------------------------------
    async def segment_end(self, walker: "Walker", run: "Run") -> None:
        """P7 for a segment that drives an existing run and did not suspend."""
        if run.status == "suspended":
            self.service.suspended_envelopes[run.rid] = run.envelope
            if len(self.service.suspended_envelopes) > 10_000:  # never answered: forget the oldest
                self.service.suspended_envelopes.pop(next(iter(self.service.suspended_envelopes)))
            return
        if run.run_id is None or run.status == "running" or run.__dict__.get("finished_in_store"):
            return  # (finished_in_store: the join check's P6 already failed the run in its transaction)
        try:
            await self._finish(run)
        finally:
            self.service.notify_run(run.run_id)

    async def _finish(self, run: "Run") -> None:
        from txcl.runtime.budget import strip_budget_fields
        from txcl.values.merge import deep_copy

        store = self.service.store
        fence = fence_of(run)
        try:
            if run.status in ("completed", "halted"):
                result = deep_copy(run.envelope)
                strip_budget_fields(result)
                await self.service.run_store(store.finish_segment, run.run_id, fence, status="completed",
                                             result=result)
            elif run.reason == "txcl_run_lost":
                return
            else:
                error = run.error
                if isinstance(error, dict) and isinstance(error.get("error"), dict) and len(error) == 1:
                    error = error["error"]
                await self.service.run_store(store.finish_segment, run.run_id, fence, status="failed", error=error,
                                             fail_reason=run.reason or "failed")
        except RunLost as exc:
            log.warning("txcl: %s", exc)
            run.fail({"error": {"code": "txcl_run_lost", "message": str(exc)}}, 503, reason="txcl_run_lost")


def run_lost(run: "Run", exc: Exception) -> None:
    """A failed fence ends the segment with `txcl_run_lost` and discards its work (§5.1)."""
    run.fail({"error": {"code": "txcl_run_lost", "message": str(exc)}}, 503, reason="txcl_run_lost")


__all__ = ["ContinuationEngine", "OpClass", "classify", "register_unit_builder", "UNIT_BUILDERS", "UNIT_KINDS",
           "worker_budget_ms", "fence_of", "set_claim", "run_spec", "run_state", "adopt_run", "run_lost"]
