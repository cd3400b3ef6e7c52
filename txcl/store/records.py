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
from typing import Any, Callable, Literal, Sequence, TypeVar, Union

from txcl.runoptions import UnitOptions
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
    # the resume's ResumeBundle, when it was read in the same store call right after the
    # release committed (see ContinuationService.complete); None: the resume reads it
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
    unit: UnitRecord | None = None


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



ParkBuilder = Callable[[Sequence[UnitRecord]], "tuple[JsonValue, JsonValue]"]


# ---------------------------------------------------------------------------------------------
# Traces and kv


# A summary step as the walker records it: a tuple in this field order (no dict per step).
# The store writes it as a JSON array with trailing nulls left out; `step_dict` turns it back.
STEP_ROW_FIELDS = ("seq", "stack", "scope", "name", "operation", "transport", "status", "started_ms",
                   "finished_ms", "duration_ms", "input_bytes", "output_bytes", "error")


def step_dict(row: Sequence[JsonValue], times_from: int = 0) -> dict[str, JsonValue]:
    """A step row (tuple or stored array, possibly shortened) as the step object readers use;
    its times are recorded as milliseconds after `times_from` (see `TraceRecord`)."""
    step: dict[str, JsonValue] = dict(zip(STEP_ROW_FIELDS, row))
    for name in STEP_ROW_FIELDS[len(row):]:
        step[name] = None
    step["stage"] = f"{step['stack']}/{step['scope']}"
    return shift_step(step, times_from) if times_from else step


def shift_step(step: dict[str, JsonValue], times_from: int) -> dict[str, JsonValue]:
    """`step` (changed in place) with its times made epoch milliseconds again."""
    for name in ("started_ms", "finished_ms"):
        value = step.get(name)
        if type(value) is int:
            step[name] = value + times_from
    return step


# The commonest timeline events are recorded and stored compact: `(seq, at_ms, code, *values)`
# with an integer code instead of `(seq, at_ms, kind, data)` with a dict, which costs the walk
# a dict per scope boundary and the stored row its repeated key names. Codes are part of the
# stored format: never renumber one; add new codes at the end.
COMPACT_EVENTS: dict[int, tuple[str, tuple[str, ...]]] = {
    1: ("stage.enter", ("stage", "fuel_used", "ttl")),
    2: ("stage.merge", ("stage", "ops")),
    3: ("request.start", ("stack", "src")),
    4: ("request.usage", ("fuel", "bytes_out")),
    5: ("request.end", ("status", "duration_ms", "reason")),  # reason left out when there is none
    6: ("stage.enter", ("stage", "fuel_used", "ttl")),  # a scope whose merge is implied (below)
    7: ("stage.enter", ("stage", "fuel_used", "ttl")),  # the same, its rules' steps folded in (below)
}
STAGE_ENTER, STAGE_MERGE, REQUEST_START, REQUEST_USAGE, REQUEST_END, STAGE_FUSED, STAGE_RULES = 1, 2, 3, 4, 5, 6, 7

# A scope of local rules only (no EXEC, WITH or LOOP) runs in one piece, and its `stage.merge`
# would repeat what the trace already holds: the ops merged are the rules whose steps the
# scope recorded, merged in name order, right after the last of them. So such a scope's entry
# is recorded as `STAGE_FUSED` and its merge is not written: the recorder only takes the
# merge's sequence number, which leaves the one gap in the scope's numbering, and readers put
# the merge back there (`expand_events`), stamped with the time of the record before it. A
# scope that ended without merging (the walk failed inside it) leaves no gap, so none is made
# up. Every event and step of a segment's trace is numbered from 1 without other gaps.


# A fused scope is stored as one `STAGE_RULES` event when its rules all ended well and
# recorded nothing else: `[seq, at_ms, 7, stage, fuel_used, ttl, entry_us, [name, us, …]]`,
# `entry_us` the microseconds past `at_ms` at which the scope was entered and each rule given
# by its name and duration in microseconds (every such rule ran without EXEC, WITH or LOOP:
# no operation, transport `noop`, status `ok`). Its steps are numbered after the entry, in
# order, and each started where the previous one ended, the first at the entry: readers
# rebuild them (`folded_steps`) and take the scope's merge as implied, as for STAGE_FUSED. A
# summary trace of local rules is a third smaller stored this way, and quicker to write.


def folded_steps(events: Sequence[Any], times_from: int = 0) -> list[dict[str, JsonValue]]:
    """The steps folded into a trace's `STAGE_RULES` events, as `step_dict` makes them (a
    malformed event gives none)."""
    steps: list[dict[str, JsonValue]] = []
    for event in events:
        if isinstance(event, dict) or len(event) < 8 or event[2] != STAGE_RULES:
            continue
        seq, at_ms, _code, stage, _fuel, _ttl, entry_us, fold = event[:8]
        if not (type(seq) is int and type(at_ms) is int and type(entry_us) is int and isinstance(fold, list)
                and isinstance(stage, str)):
            continue
        stack, _, scope_text = stage.rpartition("/")
        scope: JsonValue = int(scope_text) if scope_text.isdigit() else scope_text
        start = at_ms * 1000 + entry_us
        for i in range(0, len(fold) - 1, 2):
            took = fold[i + 1]
            if type(took) is not int:
                break
            seq += 1
            steps.append(step_dict((seq, stack, scope, fold[i], None, "noop", "ok", start // 1000,
                                    (start + took) // 1000, took / 1000), times_from))
            start += took
    return steps


def with_folded_steps(steps: list[dict[str, JsonValue]], events: Sequence[Any],
                      times_from: int = 0) -> list[dict[str, JsonValue]]:
    """`steps` (the trace's steps column, as dicts) and the steps folded into its events, in
    sequence order."""
    folded = folded_steps(events, times_from)
    if not folded:
        return steps
    return sorted(steps + folded, key=_step_seq)


def _step_seq(step: dict[str, JsonValue]) -> int:
    seq = step.get("seq")
    return seq if type(seq) is int else 0


def event_tuple(event: Sequence[JsonValue], times_from: int = 0) -> tuple:
    """A recorded or stored event as `(seq, at_ms, kind, data)`, compact ones expanded, its
    time recorded as milliseconds after `times_from` (see `TraceRecord`)."""
    code = event[2]
    at_ms = event[1]
    if times_from and type(at_ms) is int:
        at_ms += times_from
    if type(code) is not int:
        return (event[0], at_ms, *event[2:])
    known = COMPACT_EVENTS.get(code)
    if known is None:  # not ours to name: shown as it is stored
        return (event[0], at_ms, f"event.{code}", list(event[3:]))
    kind, fields = known
    return (event[0], at_ms, kind, dict(zip(fields, event[3:])))


def expand_events(events: Sequence[Any], steps: Sequence[dict[str, JsonValue]],
                  times_from: int = 0) -> list:
    """A trace's recorded or stored events as readers see them: compact ones expanded (to
    `(seq, at_ms, kind, data)`; events recorded as dicts stay dicts), times made epoch
    milliseconds, and the implied merges of `STAGE_FUSED` scopes put back. `steps`: the same
    trace's steps as dicts, their times in epoch milliseconds (`step_dict`)."""
    expanded = [event_dict(e, times_from) if isinstance(e, dict) else event_tuple(e, times_from)
                for e in events]
    fused = [i for i, e in enumerate(events) if not isinstance(e, dict) and e[2] in _IMPLIED_MERGE]
    return _with_implied_merges(expanded, fused, steps) if fused else expanded


_IMPLIED_MERGE = (STAGE_FUSED, STAGE_RULES)


def _with_implied_merges(expanded: list, fused: list[int], steps: Sequence[dict[str, JsonValue]]) -> list:
    """`expanded` with a `stage.merge` made for each scope entered at `expanded[i]`, i in
    `fused`, at the gap in its numbering (see `STAGE_FUSED`)."""
    at_of: dict[Any, Any] = {}
    for event in expanded:
        if isinstance(event, dict):
            at_of[event.get("seq")] = event.get("at_ms")
        else:
            at_of[event[0]] = event[1]
    name_of: dict[Any, Any] = {}
    for step in steps:
        at_of[step.get("seq")] = step.get("finished_ms")
        name_of[step.get("seq")] = step.get("name")
    last = max((seq for seq in at_of if type(seq) is int), default=0)
    merges = []
    for i in fused:
        seq, _at, _kind, data = expanded[i]
        if type(seq) is not int:
            continue
        names = []
        gap = seq + 1
        while gap in at_of:
            if gap in name_of:
                names.append(name_of[gap])
            gap += 1
        if gap < last:  # something was recorded after the merge: the scope did merge
            merges.append((gap, at_of[gap - 1], "stage.merge",
                           {"stage": data.get("stage") if isinstance(data, dict) else None,
                            "ops": sorted(names, key=str)}))
    if not merges:
        return expanded
    return sorted(expanded + merges, key=_event_seq)


def _event_seq(event: Any) -> int:
    seq = event.get("seq") if isinstance(event, dict) else event[0]
    return seq if type(seq) is int else 0


def event_dict(event: Sequence[JsonValue] | dict, times_from: int = 0) -> dict[str, JsonValue]:
    """A timeline event (a recorded tuple or a stored array) as the object readers use."""
    if isinstance(event, dict):
        at_ms = event.get("at_ms")
        return event | {"at_ms": at_ms + times_from} if times_from and type(at_ms) is int else event
    seq, at_ms, kind, data = event_tuple(event, times_from)
    return {"seq": seq, "at_ms": at_ms, "kind": kind, "data": data}


class TraceRecord:
    """One segment's trace, written in one transaction: the request row, its steps and its
    timeline events (``(seq, at_ms, kind, data)`` tuples as the recorder makes them, or the
    compact tuples of `COMPACT_EVENTS`; `events` gives every one in the first form).

    Steps are dicts, or summary rows (tuples in `STEP_ROW_FIELDS` order) as the walker
    records them; `steps` gives every one as a dict, `raw_steps` as recorded (for packing).

    `times_from`: the recorder keeps the steps' and events' times as milliseconds after the
    trace's start (small numbers, a quarter less text to store), and `steps` and `events` add
    it back; None when they are epoch milliseconds already (records read from the store,
    rows written before this form, records built by hand).

    A record waiting in a batch for its group commit is *packed* first (`pack()`): its
    steps and events become the two JSON texts the store writes, and the recorded lists are
    let go. Hundreds of records wait at a time; as texts they are a few objects each
    instead of dozens the garbage collector would scan again and again. Reading `steps` or
    `events` of a packed record decodes the texts (readers rarely do)."""

    __slots__ = ("request", "times_from", "rows_only", "_events", "_raw_steps", "_steps", "_expanded", "_packed")

    def __init__(self, request: dict[str, JsonValue], steps: list | None = None,
                 events: list[dict[str, JsonValue] | tuple] | None = None, times_from: int | None = None,
                 rows_only: bool = False, packed: tuple[str, str] | None = None):
        """`rows_only`: every step is a summary row (the recorder knows; packing then converts
        nothing). `packed`: the record made packed, its steps and events given as those texts."""
        self.request = request
        self.times_from = times_from
        self.rows_only = rows_only
        self._steps: list[dict[str, JsonValue]] | None = None
        self._expanded: list | None = None
        self._packed: tuple[str, str] | None = packed
        if packed is None:
            self._events: list | None = events if events is not None else []
            self._raw_steps: list | None = steps if steps is not None else []
        else:
            self._events = self._raw_steps = None

    def packed(self, pack: Callable[[list, list, bool], tuple[str, str]]) -> tuple[str, str]:
        """(steps, events) as JSON texts, made by `pack(raw_steps, events, rows_only)` once."""
        if self._packed is None:
            self._packed = pack(self._raw_steps or [], self._events or [], self.rows_only)
        return self._packed

    def pack(self, pack: Callable[[list, list, bool], tuple[str, str]]) -> None:
        """Keep only the packed texts (see the class docstring)."""
        self.packed(pack)
        self._raw_steps = self._events = self._steps = self._expanded = None

    @property
    def raw_steps(self) -> list:
        if self._raw_steps is None:
            self._raw_steps = [tuple(s) if isinstance(s, list) else s
                               for s in json.loads(self._packed[0])]  # type: ignore[index]
        return self._raw_steps

    @property
    def steps(self) -> list[dict[str, JsonValue]]:
        """Every step as a dict, times in epoch milliseconds."""
        if self._steps is None:
            since = self.times_from or 0
            self._steps = with_folded_steps(
                [step_dict(s, since) if type(s) is tuple else shift_step(dict(s), since) if since else s
                 for s in self.raw_steps], self._raw_events(), since)
        return self._steps

    def _raw_events(self) -> list:
        """The events as recorded, or as stored when the record is packed (decoded once)."""
        if self._events is None:
            self._events = json.loads(self._packed[1])  # type: ignore[index]
        return self._events

    @property
    def events(self) -> list:
        """Every event as `(seq, at_ms, kind, data)` (compact ones expanded, times in epoch
        milliseconds); the recorded list itself stays as it was, for packing."""
        if self._expanded is None:
            self._expanded = expand_events(self._raw_events(), self.steps, self.times_from or 0)
        return self._expanded

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TraceRecord):
            return NotImplemented
        return (self.request, self.steps, self.events) == (other.request, other.steps, other.events)

    def __repr__(self) -> str:
        return f"TraceRecord(request={self.request!r}, steps={self.steps!r}, events={self.events!r})"


@record
class KvEntry:
    key: str
    value: JsonValue
    version: int

