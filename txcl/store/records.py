"""The store's plain-data records: what goes in (specs) and what comes out (records and
results), with the state names of every table as ``Literal`` types.

Nothing here knows rules: values are plain JSON (:data:`JsonValue`), envelopes included. What
a rule's WITH options mean for a unit is resolved by the continuations layer before the store
sees it (:class:`~txcl.runoptions.UnitOptions`, stored with the unit).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Sequence, TypeVar, Union

from txcl.runoptions import UnitOptions
from txcl.trace.format import TraceRecord  # noqa: F401 - the store hands traces out as these
from txcl.store.states import children, interactions, runs, units
from txcl.store.states.children import ChildStatus
from txcl.store.states.interactions import InteractionStatus
from txcl.store.states.runs import RunStatus
from txcl.store.states.suspends import SuspendKind, SuspendStatus
from txcl.store.states.terminals import TerminalSource, TerminalStatus
from txcl.store.states.units import UnitKind, UnitStatus

JsonValue = Union[None, bool, int, float, str, list["JsonValue"], dict[str, "JsonValue"]]

# ---------------------------------------------------------------------------------------------
# States and kinds

# (each table's states, groups and transitions live in its module of txcl.store.states)
ItemErrorPolicy = str  # "fail", "collect", or "tolerate:<count>" / "tolerate:<percent>%"
MemberRole = Literal["op", "sync", "join", "promotion"]

RUN_OPEN = runs.OPEN
RUN_FINISHED = runs.FINISHED
UNIT_TERMINAL = units.TERMINAL
UNIT_BAD = units.BAD
INTERACTION_OPEN = interactions.OPEN
INTERACTION_IN_FLIGHT = interactions.IN_FLIGHT
CHILD_PENDING = children.PENDING
DEFAULT_ROLE: dict[str, MemberRole] = {"unary": "op", "itemized": "op", "local": "promotion", "sync": "sync"}


# ---------------------------------------------------------------------------------------------
# Helpers shared by every backend


def canonical_json(value: JsonValue) -> bytes:
    """The canonical form of a payload: sorted keys, no insignificant whitespace, UTF-8 (two
    callbacks carry "the same outcome" when these bytes are equal)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode(
        "utf-8"
    )


def payload_sha256(value: JsonValue) -> str:
    return hashlib.sha256(canonical_json(value)).hexdigest()


def snapshot_id_for(body: bytes) -> str:
    """Content address of an ops snapshot body (the caller may use its own id)."""
    return hashlib.sha256(body).hexdigest()


_STAGE_SAFE = re.compile(r"[^A-Za-z0-9_-]")


def resume_segment_id(run_id: str, stage: str, visit: int, attempt: int = 1, resume_round: int = 1) -> str:
    """Segment (and trace) id of a resume: ``resume-<run>-<stage>-v<visit>`` (``-r<n>`` when the
    suspend is resumed again after ``txcl runs retry``, ``-a<n>`` after the n-th takeover)."""
    base = f"resume-{run_id}-{_STAGE_SAFE.sub('_', stage)}-v{visit}"
    if resume_round > 1:
        base += f"-r{resume_round}"
    return base if attempt <= 1 else f"{base}-a{attempt}"


def inline_segment_id(origin_rid: str, visit: int) -> str:
    """Segment id of a request that drained its own suspend and goes on inline."""
    return f"{origin_rid}/v{visit}"


# ---------------------------------------------------------------------------------------------
# Records (read side)

# Records are made by the dozen for every suspend and resume: a frozen dataclass sets each
# field through object.__setattr__, several times the cost of a plain store. So they are
# ordinary dataclasses *treated* as immutable — nothing assigns to one after it is made;
# `evolve` (or dataclasses.replace) makes a changed copy. They compare and hash by value.
record = dataclass(eq=True, unsafe_hash=True)

_Record = TypeVar("_Record")


def evolve(rec: _Record, **changes: Any) -> _Record:
    """A copy of the record `rec` with `changes` — dataclasses.replace without its per-field
    work (a record's fields are its instance dict; classes with slots go through replace)."""
    cls = type(rec)
    fields = cls.__dataclass_fields__  # type: ignore[attr-defined]
    for name in changes:
        if name not in fields:
            raise TypeError(f"{cls.__name__} has no field {name!r}")
    if "__slots__" in cls.__dict__:
        return replace(rec, **changes)  # type: ignore[type-var]
    new = object.__new__(cls)
    new.__dict__.update(rec.__dict__, **changes)
    return new


@record
class RunRecord:
    run_id: str
    rcid: str
    origin_rid: str
    entry_stack: str
    src: str
    snapshot_id: str | None
    status: RunStatus
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
    result: JsonValue
    error: JsonValue
    next_seq: int


@record
class SuspendRecord:
    run_id: str
    stage: str
    visit: int
    kind: SuspendKind
    status: SuspendStatus
    envelope: JsonValue
    budgets: JsonValue
    segment_id: str | None
    dispatch_complete: bool
    suspended_ms: int
    closed_ms: int | None
    members: tuple[tuple[str, MemberRole], ...] = ()  # (unit_id, role) in unit creation order


@record
class UnitRecord:
    unit_id: str
    run_id: str
    created_seq: int
    kind: UnitKind
    op_name: str
    op_stack: str | None
    op_scope: int | None
    dispatch_stage: str | None
    dispatch_stack: str | None
    join_at_scope: int | None
    segment_id: str | None
    status: UnitStatus
    version: int
    expected: int
    dispatch_complete: bool
    provider_done: int
    continuation_done: int
    window: int
    on_item_error: ItemErrorPolicy
    into: str | None
    exec_target: str | None
    directives: JsonValue
    input_view: JsonValue
    output: JsonValue
    error: JsonValue
    fuel_used: int
    budget_ms: int | None
    deadline_ms: int | None
    created_ms: int
    closed_ms: int | None
    join_deadline_ms: int | None = None  # WITH join_deadline: dispatch + the deadline
    options: UnitOptions = UnitOptions()

    @property
    def deferred(self) -> bool:
        return self.join_at_scope is not None


@record
class InteractionRecord:
    opc: str
    unit_id: str
    run_id: str
    item_index: int
    has_token: bool
    status: InteractionStatus
    version: int
    input: JsonValue
    deadline_ms: int | None
    dispatch_owner: str | None
    dispatch_ms: int | None
    attempts: int
    ack: JsonValue
    created_ms: int
    closed_ms: int | None
    heartbeat_ms: int | None = None  # WITH heartbeat: the worker's last heartbeat
    progress: JsonValue = None  # …and the progress it reported
    cancel_url: str | None = None  # where txcl POSTs a cancellation (the worker's ack or WITH cancel_url)
    retry_count: int = 0  # WITH retries: how many times this call was sent again after failing
    retry_at_ms: int | None = None  # …and when the next attempt goes out (while it waits)


@record
class TerminalRecord:
    opc: str
    status: TerminalStatus
    payload: JsonValue  # the output (completed) or the error (failed), as received
    payload_sha256: str
    source: TerminalSource
    best_effort: bool
    transport: str | None
    fuel_used: int
    recorded_ms: int


@record
class ChildRecord:
    unit_id: str
    item_index: int
    opc: str | None
    status: ChildStatus
    version: int
    output: JsonValue
    error: JsonValue
    lease_owner: str | None
    lease_until_ms: int | None
    created_ms: int
    updated_ms: int


@record
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
    # the resume's ResumeBundle, when the release built it from what it read under the run's
    # lock (or it was read in the same store call right after the release committed, see
    # ContinuationService._read_resume); None: the resume reads it
    bundle: Any = field(default=None, compare=False, repr=False)


@record
class RunEvent:
    run_id: str
    seq: int
    event_key: str
    kind: str
    at_ms: int
    data: JsonValue


@record
class JoinedMarker:
    unit_id: str
    run_id: str
    segment_id: str
    joined_ms: int


# ---------------------------------------------------------------------------------------------
# Requests (write side)


@record
class RunSpec:
    """What creating a run needs (ignored when the request's run already exists)."""

    origin_rid: str
    entry_stack: str
    src: str = "http"
    snapshot_id: str | None = None
    snapshot_body: bytes | None = None  # stored compressed, insert-if-absent


@record
class Fence:
    """Who writes: the driving segment's id, plus its claim token when resuming."""

    segment_id: str
    claim_token: str | None = None


@record
class UnitSpec:
    """A new await unit and its interactions (one per element of ``items``).

    ``items`` holds each interaction's stored input: one element for unary/local/sync units,
    one per array element for itemized ones. ``budget_ms`` is each interaction's deadline
    offset from its promotion (worker budget, plus the join slack for deferred units);
    ``deadline_ms`` instead fixes an absolute deadline (a promoted continuable op: op start +
    timeout). ``failed_error`` records a unit that failed at dispatch with no interactions.
    """

    kind: UnitKind
    op_name: str
    items: Sequence[JsonValue] = ()
    op_stack: str | None = None
    op_scope: int | None = None
    dispatch_stage: str | None = None
    dispatch_stack: str | None = None
    join_at_scope: int | None = None
    window: int = 1
    on_item_error: ItemErrorPolicy = "fail"
    into: str | None = None
    exec_target: str | None = None
    directives: JsonValue = None
    input_view: JsonValue = None
    budget_ms: int | None = None
    deadline_ms: int | None = None
    role: MemberRole | None = None  # suspend member role; default by kind
    failed_error: JsonValue = None
    fuel_used: int = 0
    join_deadline_ms: int | None = None  # WITH join_deadline, relative to the dispatch
    options: UnitOptions | None = None  # resolved by the continuations layer (required to insert)

    @property
    def tokened(self) -> bool:
        return self.kind in ("unary", "itemized")


@record
class Materialized:
    """A child's materialised outcome built from its terminal."""

    status: Literal["succeeded", "failed"]
    output: JsonValue = None
    error: JsonValue = None




# ---------------------------------------------------------------------------------------------
# Results


@record
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
    directives: JsonValue
    item_index: int
    item_count: int
    kind: UnitKind
    input: JsonValue
    deadline_ms: int | None
    attempts: int
    retry: int = 0  # WITH retries: 0 for the first try, n for the n-th retry after a failure

    @property
    def idempotency_key(self) -> str:
        """What a worker dedupes on: a resend of the same try repeats it; a retry is new work."""
        return self.opc if not self.retry else f"{self.opc}.retry{self.retry}"


@record
class CreateRunResult:
    run: RunRecord
    created: bool


@record
class DispatchResult:
    run: RunRecord
    created: bool
    unit_ids: tuple[str, ...]
    dispatches: tuple[Dispatch, ...]


@record
class ParkResult:
    run: RunRecord
    created: bool
    stage: str
    visit: int
    unit_ids: tuple[str, ...]
    dispatches: tuple[Dispatch, ...]


AdmitOutcome = Literal["unknown", "bad_token", "superseded", "cancelled", "expired", "duplicate", "conflict",
                       "admitted", "retrying"]


@record
class CallbackTarget:
    """What the callback endpoint needs before it reads the body (unknown opc, bad token)."""

    outcome: Literal["unknown", "bad_token", "superseded", "ok"]  # superseded: an earlier attempt's token
    interaction: InteractionRecord | None = None
    unit: UnitRecord | None = None  # without its input view and directives (None): the check never needs them


@record
class AdmitResult:
    outcome: AdmitOutcome
    opc: str
    run_id: str | None = None
    unit_id: str | None = None
    item_index: int | None = None
    child_version: int | None = None
    dispatches: tuple[Dispatch, ...] = ()
    terminal: TerminalRecord | None = None
    claim: ClaimRecord | None = None  # set when an overdue interaction, timed out by this call, released the run


@record
class ExpireResult:
    """The expiry of a run. ``expired``: the run is now ``expired``. A parked run whose every
    awaited outcome was admitted in time is not expired for the store's own lag (a child not yet
    materialised after a crash): the expiry first drains its suspend, and if that releases it,
    ``claim`` is set instead."""

    expired: bool
    claim: ClaimRecord | None = None

    def __bool__(self) -> bool:
        return self.expired


@record
class TimeoutResult:
    """An interaction's timeout: ``timed_out`` (this call closed it), ``not_due``, ``unknown``,
    ``busy`` (another node holds the run) or the closed status. ``claim`` is set when the timeout (``on_item_error = "collect"``) completed the unit and
    released the run: the caller drives that resume. ``expired`` tells that the run expired.
    ``dispatches`` are queued items promoted into the slot the timed-out item freed (collect):
    the caller sends them, as after an admitted completion."""

    outcome: str
    claim: ClaimRecord | None = None
    expired: bool = False
    dispatches: tuple[Dispatch, ...] = ()  # collect: the freed window slot promoted the next items


@record
class ReleaseResult:
    """The outcome of a release attempt (a completion's, the drain's or the sweeper's)."""

    outcome: Literal["resumed", "recorded"]
    run_id: str | None = None
    unit_status: UnitStatus | None = None
    claim: ClaimRecord | None = None
    materialized: bool = False

    @property
    def won(self) -> bool:
        return self.outcome == "resumed"


@record
class JoinResult:
    """The join check: ``proceed`` (merge ``merged`` in order, go on), ``failed`` (run failed), ``parked``."""

    outcome: Literal["proceed", "failed", "parked"]
    merged: tuple[UnitRecord, ...] = ()
    failed: UnitRecord | None = None
    park: ParkResult | None = None
    error: JsonValue = None
    passed_over: tuple[UnitRecord, ...] = ()  # past their join deadline, never merged (on_join_deadline = "continue")


@record
class JoinDeadlineResult:
    """The sweeper's join-deadline pass over one parked run: ``failed`` (the run failed with
    ``join_deadline``), ``released`` (the overdue ops were passed over and the run released:
    ``claim``), ``waiting`` (passed over, other members still pending) or ``not_due``."""

    outcome: Literal["failed", "released", "waiting", "not_due"]
    claim: "ClaimRecord | None" = None


@record
class RetryResult:
    """``txcl runs retry``: ``retried`` (the run waits again at its last suspend; ``units``
    were reopened and their failed calls go out again), ``unknown``, a state the run is in that
    cannot be retried (``waiting``, ``completed``, …), or ``not_retryable`` with ``reason``."""

    outcome: str
    units: tuple[str, ...] = ()
    calls: int = 0
    reason: str | None = None


@record
class CancelCall:
    """A cancellation owed to a worker: POST ``{"status": "cancelled", …}`` to ``url``."""

    opc: str
    run_id: str
    url: str
    token: str | None
    reason: str
    attempts: int


@record
class ResumeBundle:
    """Everything a resuming segment loads (claim verified, heartbeat refreshed)."""

    run: RunRecord
    suspend: SuspendRecord
    claim: ClaimRecord
    members: tuple[UnitRecord, ...]  # by (op_name, created_seq)


@record
class TakeoverResult:
    outcome: Literal["taken", "failed", "not_stale", "gone"]
    claim: ClaimRecord | None = None





# ---------------------------------------------------------------------------------------------
# Kv


@record
class KvEntry:
    key: str
    value: JsonValue
    version: int

