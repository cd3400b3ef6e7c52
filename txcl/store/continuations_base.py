"""The continuation store protocol (CONTINUATIONS.md §5.4) and its plain-data records.

Every procedure of §5.4 is one method and one transaction. The store knows nothing of rules:
callers pass plain JSON-able values (envelopes, budgets, inputs, outputs, errors) and get
frozen records back. How a worker's terminal becomes a child output (sanitising, RUNTIME.md
§3.9) is the caller's decision, passed as a ``Materializer``; the default keeps the payload.

Fencing (§5.1): a segment proves it owns the flow with a :class:`Fence` — the origin request
by its segment id while the run is ``active``, a resuming segment by its claim token while
the run is ``resuming``. A failed fence raises :class:`RunLost`.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Literal, Protocol, Sequence, runtime_checkable

# ---------------------------------------------------------------------------------------------
# States (§5.3)

RUN_OPEN = ("active", "waiting", "resuming")
RUN_FINISHED = ("completed", "failed", "expired")
UNIT_TERMINAL = ("completed", "failed", "timed_out", "cancelled")
UNIT_BAD = ("failed", "timed_out", "cancelled")
INTERACTION_OPEN = ("queued", "dispatching", "dispatched")
INTERACTION_IN_FLIGHT = ("dispatching", "dispatched")
CHILD_PENDING = ("queued", "running")

UnitKind = Literal["unary", "itemized", "local", "sync"]
SuspendKind = Literal["barrier", "join", "promotion"]
MemberRole = Literal["op", "sync", "join", "promotion"]
TerminalSource = Literal["callback", "ack", "local", "sync", "cli"]


class ContinuationStoreError(Exception):
    """Base class of the store's own errors."""


class RunLost(ContinuationStoreError):
    """The fence failed: the segment no longer owns the run (``txcl_run_lost``)."""


class UnknownRun(ContinuationStoreError):
    """No run with that id."""


class SchemaTooNew(ContinuationStoreError):
    """The database was written by a newer version of txcl."""


# ---------------------------------------------------------------------------------------------
# Helpers shared by every backend


def canonical_json(value: Any) -> bytes:
    """Canonical payload (§3.4): sorted keys, no insignificant whitespace, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode(
        "utf-8"
    )


def payload_sha256(value: Any) -> str:
    return hashlib.sha256(canonical_json(value)).hexdigest()


def snapshot_id_for(body: bytes) -> str:
    """Content address of an ops snapshot body (the caller may use its own id, RUNTIME §1.7)."""
    return hashlib.sha256(body).hexdigest()


_STAGE_SAFE = re.compile(r"[^A-Za-z0-9_-]")


def resume_segment_id(run_id: str, stage: str, visit: int, attempt: int = 1) -> str:
    """Segment (and trace) id of a resume: RUNTIME.md §8.2."""
    base = f"resume-{run_id}-{_STAGE_SAFE.sub('_', stage)}-v{visit}"
    return base if attempt <= 1 else f"{base}-a{attempt}"


def inline_segment_id(origin_rid: str, visit: int) -> str:
    """Segment id of a request that drained its own suspend (§1 'segment')."""
    return f"{origin_rid}/v{visit}"


# ---------------------------------------------------------------------------------------------
# Records (read side)


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    rcid: str
    origin_rid: str
    entry_stack: str
    src: str
    snapshot_id: str | None
    status: str
    version: int
    cur_stage: str | None
    cur_visit: int | None
    segment_id: str | None
    claim_token: str | None
    expires_ms: int | None
    created_ms: int
    updated_ms: int
    finished_ms: int | None
    fail_reason: str | None
    result: Any
    error: Any
    next_seq: int


@dataclass(frozen=True)
class SuspendRecord:
    run_id: str
    stage: str
    visit: int
    kind: str
    status: str
    envelope: Any
    budgets: Any
    segment_id: str | None
    dispatch_complete: bool
    suspended_ms: int
    closed_ms: int | None
    members: tuple[tuple[str, str], ...] = ()  # (unit_id, role) in unit creation order


@dataclass(frozen=True)
class UnitRecord:
    unit_id: str
    run_id: str
    created_seq: int
    kind: str
    op_name: str
    op_stack: str | None
    op_scope: int | None
    dispatch_stage: str | None
    dispatch_stack: str | None
    join_at_scope: int | None
    segment_id: str | None
    status: str
    version: int
    expected: int
    dispatch_complete: bool
    provider_done: int
    continuation_done: int
    window: int
    on_item_error: str
    into: str | None
    exec_target: str | None
    directives: Any
    input_view: Any
    output: Any
    error: Any
    fuel_used: int
    budget_ms: int | None
    deadline_ms: int | None
    created_ms: int
    closed_ms: int | None

    @property
    def deferred(self) -> bool:
        return self.join_at_scope is not None


@dataclass(frozen=True)
class InteractionRecord:
    opc: str
    unit_id: str
    run_id: str
    item_index: int
    has_token: bool
    status: str
    version: int
    input: Any
    deadline_ms: int | None
    dispatch_owner: str | None
    dispatch_ms: int | None
    attempts: int
    ack: Any
    created_ms: int
    closed_ms: int | None


@dataclass(frozen=True)
class TerminalRecord:
    opc: str
    status: str  # completed | failed
    payload: Any  # the output (completed) or the error (failed), as received
    payload_sha256: str
    source: str
    best_effort: bool
    transport: str | None
    fuel_used: int
    recorded_ms: int


@dataclass(frozen=True)
class ChildRecord:
    unit_id: str
    item_index: int
    opc: str | None
    status: str
    version: int
    output: Any
    error: Any
    lease_owner: str | None
    lease_until_ms: int | None
    created_ms: int
    updated_ms: int


@dataclass(frozen=True)
class ClaimRecord:
    run_id: str
    stage: str
    visit: int
    claim_token: str
    owner: str
    segment_id: str
    attempt: int
    claimed_ms: int
    heartbeat_ms: int


@dataclass(frozen=True)
class RunEvent:
    run_id: str
    seq: int
    event_key: str
    kind: str
    at_ms: int
    data: Any


@dataclass(frozen=True)
class JoinedMarker:
    unit_id: str
    run_id: str
    segment_id: str
    joined_ms: int


# ---------------------------------------------------------------------------------------------
# Requests (write side)


@dataclass(frozen=True)
class RunSpec:
    """What P1 needs to create a run (ignored when the request's run already exists)."""

    origin_rid: str
    entry_stack: str
    src: str = "http"
    snapshot_id: str | None = None
    snapshot_body: bytes | None = None  # stored compressed, insert-if-absent


@dataclass(frozen=True)
class Fence:
    """Who writes: the driving segment's id, plus its claim token when resuming."""

    segment_id: str
    claim_token: str | None = None


@dataclass(frozen=True)
class UnitSpec:
    """A new await unit and its interactions (one per element of ``items``).

    ``items`` holds each interaction's stored input: one element for unary/local/sync units,
    one per array element for itemized ones. ``budget_ms`` is each interaction's deadline
    offset from its promotion (worker budget, plus the join slack for deferred units);
    ``deadline_ms`` instead fixes an absolute deadline (a promoted continuable op: op start +
    timeout). ``failed_error`` records a unit that failed at dispatch with no interactions.
    """

    kind: str
    op_name: str
    items: Sequence[Any] = ()
    op_stack: str | None = None
    op_scope: int | None = None
    dispatch_stage: str | None = None
    dispatch_stack: str | None = None
    join_at_scope: int | None = None
    window: int = 1
    on_item_error: str = "fail"
    into: str | None = None
    exec_target: str | None = None
    directives: Any = None
    input_view: Any = None
    budget_ms: int | None = None
    deadline_ms: int | None = None
    role: str | None = None  # suspend member role; default by kind
    failed_error: Any = None
    fuel_used: int = 0

    @property
    def tokened(self) -> bool:
        return self.kind in ("unary", "itemized")


@dataclass(frozen=True)
class Materialized:
    """A child's materialised outcome built from its terminal."""

    status: Literal["succeeded", "failed"]
    output: Any = None
    error: Any = None


Materializer = Callable[[UnitRecord, InteractionRecord, TerminalRecord], Materialized]


def default_materialize(unit: UnitRecord, interaction: InteractionRecord, terminal: TerminalRecord) -> Materialized:
    """Keep the payload as the child's value (callers that sanitise pass their own)."""
    if terminal.status == "completed":
        return Materialized("succeeded", output=terminal.payload)
    return Materialized("failed", error=terminal.payload)


# ---------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class Dispatch:
    """One interaction to POST now (its token exists only here, never in the store)."""

    opc: str
    token: str | None
    run_id: str
    unit_id: str
    op_name: str
    op_stack: str | None
    stage: str | None
    exec_target: str | None
    directives: Any
    item_index: int
    item_count: int
    kind: str
    input: Any
    deadline_ms: int | None
    attempts: int


@dataclass(frozen=True)
class CreateRunResult:
    run: RunRecord
    created: bool


@dataclass(frozen=True)
class DispatchResult:
    run: RunRecord
    created: bool
    unit_ids: tuple[str, ...]
    dispatches: tuple[Dispatch, ...]


@dataclass(frozen=True)
class ParkResult:
    run: RunRecord
    created: bool
    stage: str
    visit: int
    unit_ids: tuple[str, ...]
    dispatches: tuple[Dispatch, ...]


AdmitOutcome = Literal["unknown", "bad_token", "cancelled", "expired", "duplicate", "conflict", "admitted"]


@dataclass(frozen=True)
class CallbackTarget:
    """What the callback endpoint needs before it reads the body (§3.4 rows 1–2, 4)."""

    outcome: Literal["unknown", "bad_token", "ok"]
    interaction: InteractionRecord | None = None
    unit: UnitRecord | None = None


@dataclass(frozen=True)
class AdmitResult:
    outcome: AdmitOutcome
    opc: str
    run_id: str | None = None
    unit_id: str | None = None
    item_index: int | None = None
    child_version: int | None = None
    dispatches: tuple[Dispatch, ...] = ()
    terminal: TerminalRecord | None = None
    claim: ClaimRecord | None = None  # set when an overdue interaction timed out (row 6) released the run


@dataclass(frozen=True)
class ExpireResult:
    """P9. ``expired``: the run is now ``expired``. A parked run whose every awaited outcome was
    admitted in time is not expired for the store's own lag (a child not yet materialised after a
    crash): P9 first drains its suspend, and if that releases it, ``claim`` is set instead."""

    expired: bool
    claim: ClaimRecord | None = None

    def __bool__(self) -> bool:
        return self.expired


@dataclass(frozen=True)
class TimeoutResult:
    """P8: ``timed_out`` (this call closed it), ``not_due``, ``unknown`` or the closed status.
    ``claim`` is set when the timeout (``on_item_error = "collect"``) completed the unit and
    released the run: the caller drives that resume. ``expired`` tells that the run expired.
    ``dispatches`` are queued items promoted into the slot the timed-out item freed (collect):
    the caller sends them, as after an admitted completion."""

    outcome: str
    claim: ClaimRecord | None = None
    expired: bool = False
    dispatches: tuple[Dispatch, ...] = ()  # collect: the freed window slot promoted the next items


@dataclass(frozen=True)
class ReleaseResult:
    """Outcome of P5 (and of the drain/sweeper release check)."""

    outcome: Literal["resumed", "recorded"]
    run_id: str | None = None
    unit_status: str | None = None
    claim: ClaimRecord | None = None
    materialized: bool = False

    @property
    def won(self) -> bool:
        return self.outcome == "resumed"


@dataclass(frozen=True)
class JoinResult:
    """P6: ``proceed`` (merge ``merged`` in order, go on), ``failed`` (run failed), ``parked``."""

    outcome: Literal["proceed", "failed", "parked"]
    merged: tuple[UnitRecord, ...] = ()
    failed: UnitRecord | None = None
    park: ParkResult | None = None
    error: Any = None


@dataclass(frozen=True)
class ResumeBundle:
    """Everything a resuming segment loads (claim verified, heartbeat refreshed)."""

    run: RunRecord
    suspend: SuspendRecord
    claim: ClaimRecord
    members: tuple[UnitRecord, ...]  # by (op_name, created_seq)


@dataclass(frozen=True)
class TakeoverResult:
    outcome: Literal["taken", "failed", "not_stale", "gone"]
    claim: ClaimRecord | None = None


ParkBuilder = Callable[[Sequence[UnitRecord]], "tuple[Any, Any]"]
JoinErrorBuilder = Callable[[UnitRecord], Any]


# ---------------------------------------------------------------------------------------------
# The protocol


@runtime_checkable
class ContinuationStore(Protocol):
    """One method per procedure of CONTINUATIONS.md §5.4, plus reads. Pure data in and out."""

    # clock (integer ms since the epoch; tests inject their own)
    def now_ms(self) -> int: ...

    # P1
    def create_or_reuse_run(self, spec: RunSpec, *, status: str = "active", fence_segment: str | None = None) -> CreateRunResult: ...
    # deferred dispatch transaction (§2.3 algorithm): P1 + units + first window + expiry
    def dispatch_deferred(self, run: RunSpec | str, fence: Fence, units: Sequence[UnitSpec]) -> DispatchResult: ...
    # P2
    def park_suspend(
        self,
        run: RunSpec | str,
        fence: Fence,
        *,
        stage: str,
        kind: str,
        envelope: Any,
        budgets: Any,
        units: Sequence[UnitSpec] = (),
        member_unit_ids: Sequence[str] = (),
    ) -> ParkResult: ...
    # P3
    def mark_ack(self, acks: Sequence[tuple[str, Any]]) -> int: ...
    # P4
    def check_callback(self, opc: str, token: str | None) -> CallbackTarget: ...
    def admit_terminal(
        self,
        opc: str,
        status: str,
        payload: Any,
        *,
        source: str,
        token: str | None = None,
        best_effort: bool = False,
        transport: str | None = None,
        fuel_used: int = 0,
    ) -> AdmitResult: ...
    # P5
    def continue_release(self, opc: str, *, child_version: int | None = None, materialize: Materializer | None = None) -> ReleaseResult: ...
    def try_release(
        self, run_id: str, *, materialize: Materializer | None = None, reconcile: bool = False,
        segment_id: str | None = None,
    ) -> ReleaseResult: ...
    # P6
    def join_check(
        self,
        run_id: str,
        fence: Fence,
        *,
        stage: str,
        stack: str,
        scope: int,
        build_park: ParkBuilder | None = None,
        materialize: Materializer | None = None,
        join_error: JoinErrorBuilder | None = None,
    ) -> JoinResult: ...
    def record_join(self, unit_id: str, fence: Fence) -> bool: ...
    # resume side of P5/P11
    def claim_resume(self, run_id: str, claim_token: str) -> ResumeBundle: ...
    # P7
    def finish_segment(
        self, run_id: str, fence: Fence, *, status: str, result: Any = None, error: Any = None, fail_reason: str | None = None
    ) -> RunRecord: ...
    # P8, P9
    def time_out_interaction(self, opc: str, *, materialize: Materializer | None = None) -> TimeoutResult: ...
    def expire_run(self, run_id: str, *, materialize: Materializer | None = None) -> ExpireResult: ...
    # P10, P11
    def take_over_claim(self, run_id: str, *, stale_after_ms: int, max_attempts: int, owner: str | None = None) -> TakeoverResult: ...
    def heartbeat(self, run_id: str, claim_token: str) -> None: ...
    # P12 and reconciliation (§5.8, §5.9)
    def purge_run(self, run_id: str, *, retention_ms: int) -> bool: ...
    def purge_snapshots(self) -> int: ...
    def resend_dispatch(self, opc: str, *, older_than_ms: int) -> Dispatch | None: ...
    def promote_window(self, unit_id: str) -> tuple[Dispatch, ...]: ...
    def claim_child(self, unit_id: str, item_index: int, *, older_than_ms: int, lease_ms: int, owner: str | None = None) -> int | None: ...
    def settle_and_release(self, unit_id: str, *, materialize: Materializer | None = None) -> ReleaseResult: ...

    # reads
    def get_run(self, run_id: str) -> RunRecord | None: ...
    def get_run_by_rcid(self, rcid: str) -> RunRecord | None: ...
    def get_run_by_origin(self, origin_rid: str) -> RunRecord | None: ...
    def list_runs(self, *, status: str | None = None, limit: int = 100) -> list[RunRecord]: ...
    def get_suspend(self, run_id: str, stage: str, visit: int) -> SuspendRecord | None: ...
    def list_suspends(self, run_id: str) -> list[SuspendRecord]: ...
    def get_unit(self, unit_id: str) -> UnitRecord | None: ...
    def list_units(self, run_id: str) -> list[UnitRecord]: ...
    def get_interaction(self, opc: str) -> InteractionRecord | None: ...
    def find_interaction(self, run_id: str, op_name: str | None = None, item_index: int = 0) -> InteractionRecord | None: ...
    def list_interactions(self, unit_id: str) -> list[InteractionRecord]: ...
    def get_terminal(self, opc: str) -> TerminalRecord | None: ...
    def list_children(self, unit_id: str) -> list[ChildRecord]: ...
    def list_facts(self, unit_id: str) -> list[tuple[str, int]]: ...
    def get_joined_marker(self, unit_id: str) -> JoinedMarker | None: ...
    def get_claim(self, run_id: str) -> ClaimRecord | None: ...
    def list_run_events(self, run_id: str) -> list[RunEvent]: ...
    def get_snapshot(self, snapshot_id: str) -> bytes | None: ...
    def put_snapshot(self, snapshot_id: str, body: bytes) -> bool: ...

    # sweeper candidates (bounded batches)
    def due_interactions(self, *, limit: int = 500) -> list[str]: ...
    def expirable_runs(self, *, limit: int = 500) -> list[str]: ...
    def stale_claims(self, *, stale_after_ms: int, limit: int = 500) -> list[str]: ...
    def stuck_dispatches(self, *, older_than_ms: int, limit: int = 500) -> list[str]: ...
    def promotable_units(self, *, limit: int = 500) -> list[str]: ...
    def stuck_children(self, *, older_than_ms: int, limit: int = 500) -> list[tuple[str, int, str]]: ...
    def unsettled_units(self, *, limit: int = 500) -> list[str]: ...
    def releasable_runs(self, *, limit: int = 500) -> list[str]: ...
    def unrecorded_sync_members(self, *, older_than_ms: int, limit: int = 500) -> list[str]: ...
    def purgeable_runs(self, *, retention_ms: int, limit: int = 500) -> list[str]: ...
