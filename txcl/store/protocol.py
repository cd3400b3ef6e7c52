"""What callers may use of a store: :class:`TraceStore`, :class:`KvStore`,
:class:`ContinuationStore`, and the :class:`StorePolicy` the continuations layer gives it.

The store knows nothing of rules. Callers pass plain JSON values and get frozen records back;
the few decisions that are not the store's own — how a worker's answer becomes an item's
outcome, which failures fail a unit at once, the error objects the store writes — come from
the policy, so each is stated once, in the continuations layer.
"""

from __future__ import annotations

from typing import Callable, Protocol, Sequence, TypeVar, runtime_checkable

from txcl.store.records import (
    AdmitResult,
    CallbackTarget,
    CancelCall,
    ChildRecord,
    ClaimRecord,
    CreateRunResult,
    Dispatch,
    DispatchResult,
    ExpireResult,
    Fence,
    InteractionRecord,
    ItemErrorPolicy,
    JoinDeadlineResult,
    JoinedMarker,
    JoinResult,
    JsonValue,
    KvEntry,
    Materialized,
    Materializer,
    ParkBuilder,
    ParkResult,
    ReleaseResult,
    ResumeBundle,
    RetryResult,
    RunEvent,
    RunRecord,
    RunSpec,
    SuspendRecord,
    TakeoverResult,
    TerminalRecord,
    TimeoutResult,
    TraceRecord,
    UnitKind,
    UnitRecord,
    UnitSpec,
)

T = TypeVar("T")


class StorePolicy(Protocol):
    """Decisions and texts the store applies but does not own."""

    def materialize(self, unit: UnitRecord, interaction: InteractionRecord, terminal: TerminalRecord
                    ) -> Materialized:
        """An item's child outcome from its terminal (e.g. sanitised as untrusted)."""

    def fails_fast(self, kind: UnitKind, on_item_error: ItemErrorPolicy) -> bool:
        """Whether one failed item fails the whole unit at once."""

    def heartbeat_every_ms(self, directives: JsonValue) -> int | None:
        """How often a unit's worker must send a heartbeat (None: not asked)."""

    def heartbeat_missed_error(self, kind: UnitKind, item_index: int, every_ms: int) -> JsonValue:
        """The error of an interaction whose worker stopped sending heartbeats."""

    def tolerated(self, on_item_error: ItemErrorPolicy, expected: int) -> int | None:
        """How many failed items a tolerating unit accepts (None: the policy does not count)."""

    def too_many_failures_error(self, failed: int, expected: int, on_item_error: ItemErrorPolicy,
                                first_index: int, first_detail: JsonValue) -> JsonValue:
        """The unit's error when its failed items exceed what it tolerates."""

    def unit_failed_error(self, kind: UnitKind, item_index: int, detail: JsonValue) -> JsonValue:
        """The error of a unit that failed fast because of the item at ``item_index``."""

    def timeout_error(self, kind: UnitKind, item_index: int) -> JsonValue:
        """The error of an interaction whose deadline passed."""

    def expiry_error(self, reason: str, detail: JsonValue) -> JsonValue:
        """The error of a run that expired (``reason``: ``expired`` or ``timed_out``)."""

    def resume_exhausted_error(self, attempts: int) -> JsonValue:
        """The error of a run whose resume went stale ``attempts`` times."""

    def join_failed_error(self, unit: UnitRecord) -> JsonValue:
        """The error of a run whose deferred unit failed at its join."""

    def retries_of(self, directives: JsonValue) -> tuple[int, int]:
        """(how many times a failed call is sent again, the first wait in ms)."""

    def retry_delay_ms(self, backoff_ms: int, retries_done: int) -> int:
        """The wait before the next retry."""

    def cancel_url_of(self, directives: JsonValue) -> str | None:
        """The cancel URL a rule names for its calls (None: none)."""

    def passes_over_at_join_deadline(self, directives: JsonValue) -> bool:
        """Whether a deferred op not ready by its join deadline is passed over (else the run fails)."""

    def join_deadline_error(self, unit: UnitRecord) -> JsonValue:
        """The error of a run whose deferred op was not ready by its join deadline."""


@runtime_checkable
class TraceStore(Protocol):
    def write_traces(self, traces: list[TraceRecord]) -> None:
        """Write every record (request row, steps, events) in one transaction."""

    def get_trace(self, rid: str) -> TraceRecord | None: ...

    def last_trace_rid(self) -> str | None: ...

    def trace_rids_for_run(self, run_id: str) -> list[str]: ...

    def trace_documents(self, stack: str, limit: int = 1000) -> list[tuple[str | None, str | None]]: ...

    def recent_traces(self, stack: str | None = None, before_ms: int | None = None,
                      limit: int = 50) -> list[dict]: ...

    def trace_summaries_for_run(self, run_id: str, origin_rid: str | None = None) -> list[dict]: ...

    def purge_traces(self, before_ms: int) -> int: ...


@runtime_checkable
class KvStore(Protocol):
    def kv_get(self, ns: str, key: str, now_ms: int) -> KvEntry | None: ...

    def kv_set(self, ns: str, key: str, value: JsonValue, now_ms: int, expires_ms: int | None = None) -> int:
        """Store ``value``; returns the new version."""

    def kv_delete(self, ns: str, key: str, now_ms: int) -> bool: ...

    def kv_incr(self, ns: str, key: str, by: int, now_ms: int) -> KvEntry:
        """Atomic add; a missing key counts as 0; raises KvError on a non-integer value."""

    def kv_cas(self, ns: str, key: str, value: JsonValue, expect_version: int, now_ms: int
               ) -> tuple[bool, KvEntry | None]:
        """Atomic compare-and-swap; expect_version 0 means "must not exist"."""

    def kv_list(self, ns: str, prefix: str, limit: int, now_ms: int) -> tuple[list[KvEntry], bool]: ...


@runtime_checkable
class ContinuationStore(Protocol):
    """Durable runs. Each write method is one transaction; ``skip_locked`` (the sweeper's
    procedures) leaves a run another node holds right now to that node."""

    def now_ms(self) -> int:
        """The database clock (or the injected test clock), ms since the epoch."""

    def run_batch(self, calls: Sequence[Callable[[], object]]) -> list[tuple[bool, object]]:
        """Independent calls in one transaction (one commit); a call that fails is undone alone."""

    def run_together(self, fn: Callable[[], T]) -> T:
        """``fn``'s store calls (each may read what the one before wrote) in one transaction."""

    def subscribe(self, listener: Callable[[str | None], None]) -> None:
        """``listener(run_id)`` after a commit changed a run (``None``: anything may have)."""

    # runs, dispatch and parks
    def create_or_reuse_run(self, spec: RunSpec, *, status: str = "active",
                            fence_segment: str | None = None) -> CreateRunResult: ...
    def dispatch_deferred(self, run: RunSpec | str, fence: Fence, units: Sequence[UnitSpec]) -> DispatchResult: ...
    def park_suspend(self, run: RunSpec | str, fence: Fence, *, stage: str, kind: str, envelope: JsonValue,
                     budgets: JsonValue, units: Sequence[UnitSpec] = (),
                     member_unit_ids: Sequence[str] = ()) -> ParkResult: ...
    def mark_ack(self, acks: Sequence[tuple[str, JsonValue] | tuple[str, JsonValue, str | None]]) -> int: ...

    def touch_dispatches(self, opcs: Sequence[str]) -> int: ...

    # completions
    def check_callback(self, opc: str, token: str | None) -> CallbackTarget: ...
    def record_heartbeat(self, opc: str, token: str | None, progress: JsonValue = None) -> str: ...
    def admit_terminal(self, opc: str, status: str, payload: JsonValue, *, source: str, token: str | None = None,
                       best_effort: bool = False, transport: str | None = None,
                       fuel_used: int = 0, retryable: bool = False, ack: tuple | None = None) -> AdmitResult: ...
    def due_retries(self, *, limit: int = 500) -> list[str]: ...
    def continue_release(self, opc: str, *, child_version: int | None = None,
                         materialize: Materializer | None = None) -> ReleaseResult: ...
    def admit_and_continue(self, opc: str, status: str, payload: JsonValue, *, source: str,
                           token: str | None = None, best_effort: bool = False, transport: str | None = None,
                           retryable: bool = False, materialize: Materializer | None = None,
                           ack: tuple | None = None) -> tuple[AdmitResult, ReleaseResult | Exception | None]: ...
    def try_release(self, run_id: str, *, materialize: Materializer | None = None, reconcile: bool = False,
                    segment_id: str | None = None) -> ReleaseResult: ...
    def settle_and_release(self, unit_id: str, *, materialize: Materializer | None = None,
                           skip_locked: bool = True) -> ReleaseResult: ...

    # deferred joins
    def join_check(self, run_id: str, fence: Fence, *, unit_ids: Sequence[str], stage: str,
                   build_park: ParkBuilder | None = None, materialize: Materializer | None = None,
                   join_error: Callable[[UnitRecord], JsonValue] | None = None) -> JoinResult: ...
    def record_join(self, unit_id: str, fence: Fence) -> bool: ...

    # resumes, the end of a segment, claims
    def claim_resume(self, run_id: str, claim_token: str) -> ResumeBundle: ...
    def finish_segment(self, run_id: str, fence: Fence, *, status: str, result: JsonValue = None,
                       error: JsonValue = None, fail_reason: str | None = None) -> RunRecord: ...
    def heartbeat(self, run_id: str, claim_token: str) -> None: ...
    def take_over_claim(self, run_id: str, *, stale_after_ms: int, max_attempts: int, owner: str | None = None,
                        skip_locked: bool = True) -> TakeoverResult: ...

    # timeouts, expiry, purge, reconciliation
    def time_out_interaction(self, opc: str, *, materialize: Materializer | None = None,
                             skip_locked: bool = True) -> TimeoutResult: ...
    def expire_run(self, run_id: str, *, materialize: Materializer | None = None,
                   skip_locked: bool = True) -> ExpireResult: ...
    def miss_join_deadline(self, run_id: str, *, materialize: Materializer | None = None,
                           skip_locked: bool = True) -> JoinDeadlineResult: ...
    def overdue_joins(self, *, limit: int = 500) -> list[str]: ...
    def cancel_calls_due(self, *, limit: int = 100) -> list[str]: ...
    def list_cancel_calls(self, run_id: str) -> list[dict]: ...
    def claim_cancel_calls(self, *, limit: int = 100, lease_ms: int = 30_000) -> list[CancelCall]: ...
    def record_cancel_call(self, opc: str, *, delivered: bool, error: str | None = None,
                           max_attempts: int = 6, backoff_ms: int = 1_000) -> str: ...
    def purge_finished(self, *, retention_ms: int, limit: int = 500) -> list[str]: ...
    def purge_snapshots(self) -> int: ...
    def resend_dispatch(self, opc: str, *, older_than_ms: int, skip_locked: bool = True) -> Dispatch | None: ...
    def promote_window(self, unit_id: str, *, skip_locked: bool = True) -> tuple[Dispatch, ...]: ...
    def claim_child(self, unit_id: str, item_index: int, *, older_than_ms: int, lease_ms: int,
                    owner: str | None = None, skip_locked: bool = True) -> int | None: ...

    # reads
    def get_run(self, run_id: str) -> RunRecord | None: ...
    def get_run_by_rcid(self, rcid: str) -> RunRecord | None: ...
    def get_run_by_origin(self, origin_rid: str) -> RunRecord | None: ...
    def list_runs(self, *, status: str | Sequence[str] | None = None, limit: int = 100) -> list[RunRecord]: ...
    def run_page(self, *, status: str | None = None, stack: str | None = None, text: str | None = None,
                 before: tuple[int, str] | None = None, limit: int = 50) -> list[dict]: ...
    def run_counts(self) -> dict[str, int]: ...
    def run_progress(self, run_id: str, limit: int = 50) -> list[dict]: ...
    def cancel_run(self, run_id: str, *, reason: str | None = None) -> str: ...
    def retry_run(self, run_id: str) -> RetryResult: ...
    def run_stacks(self, limit: int = 200) -> list[str]: ...
    def get_suspend(self, run_id: str, stage: str, visit: int) -> SuspendRecord | None: ...
    def list_suspends(self, run_id: str) -> list[SuspendRecord]: ...
    def get_unit(self, unit_id: str) -> UnitRecord | None: ...
    def list_units(self, run_id: str) -> list[UnitRecord]: ...
    def get_interaction(self, opc: str) -> InteractionRecord | None: ...
    def find_interaction(self, run_id: str, op_name: str | None = None,
                         item_index: int = 0) -> InteractionRecord | None: ...
    def list_interactions(self, unit_id: str) -> list[InteractionRecord]: ...
    def get_terminal(self, opc: str) -> TerminalRecord | None: ...
    def list_children(self, unit_id: str) -> list[ChildRecord]: ...
    def list_facts(self, unit_id: str) -> list[tuple[str, int]]: ...
    def get_joined_marker(self, unit_id: str) -> JoinedMarker | None: ...
    def get_claim(self, run_id: str) -> ClaimRecord | None: ...
    def list_run_events(self, run_id: str) -> list[RunEvent]: ...
    def get_snapshot(self, snapshot_id: str) -> bytes | None: ...
    def put_snapshot(self, snapshot_id: str, body: bytes) -> bool: ...

    # sweeper candidates (bounded batches; each procedure re-checks its condition)
    def due_interactions(self, *, limit: int = 500) -> list[str]: ...
    def expirable_runs(self, *, limit: int = 500) -> list[str]: ...
    def stale_claims(self, *, stale_after_ms: int, limit: int = 500) -> list[str]: ...
    def stuck_dispatches(self, *, older_than_ms: int, limit: int = 500) -> list[str]: ...
    def promotable_units(self, *, limit: int = 500) -> list[str]: ...
    def stuck_children(self, *, older_than_ms: int, limit: int = 500) -> list[tuple[str, int, str]]: ...
    def unsettled_units(self, *, limit: int = 500) -> list[str]: ...
    def releasable_runs(self, *, older_than_ms: int = 0, limit: int = 500) -> list[str]: ...
    def unrecorded_sync_members(self, *, older_than_ms: int, limit: int = 500) -> list[str]: ...


class Store(TraceStore, KvStore, ContinuationStore, Protocol):
    """Everything in one database."""

    def close(self) -> None: ...


__all__ = ["StorePolicy", "TraceStore", "KvStore", "ContinuationStore", "Store"]
