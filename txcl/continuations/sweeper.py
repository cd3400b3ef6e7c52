"""The sweeper pass (timeouts, expiry, stale claims, reconciliation, purge) as a function over the store.

``sweep(store, config)`` runs the passes in order — timeouts, expiry, stale claims,
reconciliation, purge — each over bounded batches of candidates, each candidate handled by its
own short store transaction that re-checks the condition (the store's CAS conditions make a
candidate that another process already handled a no-op). A pass is idempotent: a second pass
right after the first changes nothing.

Effects outside the store come back as data and through optional hooks: dispatches to (re)send
(``send``), sync siblings to re-run (``rerun_sync``), taken-over resumes to drive
(``drive_resume``), and extra purges (traces, kv) supplied by the host (``extra_purges``).

The reconciliation claim is the in-process set :data:`RECONCILING`: it only stops two
sweeps of one process from scanning the same unit at once and is never consulted for
correctness.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable, Iterable

from txcl import metrics as _metrics
from txcl.store.protocol import ContinuationStore
from txcl.store.records import ClaimRecord, Dispatch, ReleaseResult

RECONCILING: set[str] = set()
_reconciling_lock = threading.Lock()


@dataclass(frozen=True)
class SweepConfig:
    retention_ms: int = 7 * 24 * 3600 * 1000  # --continuation-retention
    stale_after_ms: int = 600_000  # --continuation-stale-resume-after
    max_attempts: int = 3  # --resume-max-attempts
    reconcile_after_ms: int = 30_000  # --reconcile-after
    lease_ms: int = 30_000  # lease of a reconcile claim on a child
    batch: int = 500
    purge_rounds: int = 40  # at most batch × purge_rounds runs purged per pass
    owner: str | None = None  # --node-id


@dataclass
class SweepReport:
    timed_out: list[str] = field(default_factory=list)
    expired: list[str] = field(default_factory=list)
    join_deadline_failed: list[str] = field(default_factory=list)
    taken_over: list[ClaimRecord] = field(default_factory=list)
    stale_failed: list[str] = field(default_factory=list)
    resent: list[Dispatch] = field(default_factory=list)
    promoted: list[Dispatch] = field(default_factory=list)
    sync_to_rerun: list[str] = field(default_factory=list)
    children_repaired: list[tuple[str, int]] = field(default_factory=list)
    settled: list[str] = field(default_factory=list)
    released: list[ClaimRecord] = field(default_factory=list)
    purged_runs: list[str] = field(default_factory=list)
    purged_snapshots: int = 0
    extra_purged: int = 0

    @property
    def changed(self) -> bool:
        """Did this pass change anything in the store?"""
        return any((self.timed_out, self.expired, self.join_deadline_failed, self.taken_over, self.stale_failed, self.resent, self.promoted,
                    self.children_repaired, self.settled, self.released, self.purged_runs, self.purged_snapshots,
                    self.extra_purged))

    def repairs(self) -> dict[str, int]:
        """How many of each kind of repair this pass made (for the metrics)."""
        return {"timed_out": len(self.timed_out), "expired": len(self.expired),
                "join_deadline_failed": len(self.join_deadline_failed), "taken_over": len(self.taken_over),
                "stale_failed": len(self.stale_failed), "resent": len(self.resent), "promoted": len(self.promoted),
                "children_repaired": len(self.children_repaired), "settled": len(self.settled),
                "released": len(self.released), "purged_runs": len(self.purged_runs)}

    @property
    def resumes_to_drive(self) -> list[ClaimRecord]:
        return [*self.taken_over, *self.released]


def _claim_unit(unit_id: str) -> bool:
    with _reconciling_lock:
        if unit_id in RECONCILING:
            return False
        RECONCILING.add(unit_id)
        return True


def _release_unit(unit_id: str) -> None:
    with _reconciling_lock:
        RECONCILING.discard(unit_id)


def sweep(
    store: ContinuationStore,
    config: SweepConfig = SweepConfig(),
    *,
    send: Callable[[list[Dispatch]], None] | None = None,
    rerun_sync: Callable[[str], None] | None = None,
    drive_resume: Callable[[ClaimRecord], None] | None = None,
    extra_purges: Iterable[Callable[[], int]] = (),
) -> SweepReport:
    """One idempotent sweeper pass; returns what it did."""
    report = SweepReport()
    batch = config.batch

    # 1. interactions past their deadline time out
    for opc in store.due_interactions(limit=batch):
        result = store.time_out_interaction(opc)
        if result.outcome == "timed_out":
            report.timed_out.append(opc)
            report.promoted.extend(result.dispatches)  # collect: the freed slot's next items
            if result.claim is not None:  # a collect unit completed by the timeout released its run
                report.released.append(result.claim)

    # 2. runs past their expiry expire
    for run_id in store.expirable_runs(limit=batch):
        result = store.expire_run(run_id)
        if result.expired:
            report.expired.append(run_id)
        elif result.claim is not None:  # its outcomes were all in: released instead of expired
            report.released.append(result.claim)

    # 2b. runs parked at a join past a deferred op's join deadline fail, or go on without it;
    # calls whose retry is due go out again
    sweep_join_deadlines(store, report, limit=batch)
    sweep_due_retries(store, report, limit=batch)

    # 3. resume claims without a heartbeat are taken over
    for run_id in store.stale_claims(stale_after_ms=config.stale_after_ms, limit=batch):
        result = store.take_over_claim(run_id, stale_after_ms=config.stale_after_ms,
                                       max_attempts=config.max_attempts, owner=config.owner)
        if result.outcome == "taken" and result.claim is not None:
            report.taken_over.append(result.claim)
        elif result.outcome == "failed":
            report.stale_failed.append(run_id)

    # 4. reconciliation, for work older than --reconcile-after
    older = config.reconcile_after_ms
    for opc in store.stuck_dispatches(older_than_ms=older, limit=batch):
        dispatch = store.resend_dispatch(opc, older_than_ms=older)
        if dispatch is not None:
            report.resent.append(dispatch)
    _promote_windows(store, report, store.promotable_units(limit=batch))
    report.sync_to_rerun.extend(store.unrecorded_sync_members(older_than_ms=older, limit=batch))
    for unit_id, index, opc in store.stuck_children(older_than_ms=older, limit=batch):
        if not _claim_unit(unit_id):
            continue
        try:
            version = store.claim_child(unit_id, index, older_than_ms=older, lease_ms=config.lease_ms,
                                        owner=config.owner)
            if version is not None and opc:
                result = store.continue_release(opc, child_version=version)
                report.children_repaired.append((unit_id, index))
                _note_release(report, result)
        finally:
            _release_unit(unit_id)
    for unit_id in store.unsettled_units(limit=batch):
        if not _claim_unit(unit_id):
            continue
        try:
            before = store.get_unit(unit_id)
            result = store.settle_and_release(unit_id)
            after = store.get_unit(unit_id)
            if before is not None and after is not None and (
                after.status != before.status or after.continuation_done != before.continuation_done
            ):
                report.settled.append(unit_id)
            _note_release(report, result)
        finally:
            _release_unit(unit_id)
    for run_id in store.releasable_runs(older_than_ms=older, limit=batch):
        _note_release(report, store.try_release(run_id, reconcile=True))

    # 5. purge: finished runs past their retention, a batch per transaction, until none is
    # left or the pass's share is used (a busy server finishes runs faster than one batch a pass)
    for _ in range(config.purge_rounds):
        purged = store.purge_finished(retention_ms=config.retention_ms, limit=batch)
        report.purged_runs.extend(purged)
        if len(purged) < batch:
            break
    report.purged_snapshots = store.purge_snapshots()
    for purge in extra_purges:
        report.extra_purged += int(purge() or 0)

    recorder = _metrics.current
    if recorder.enabled and report.changed:
        for kind, count in report.repairs().items():
            recorder.sweeper(kind, count)
    # effects outside the store, after everything is committed
    if send is not None and (report.resent or report.promoted):
        send([*report.resent, *report.promoted])
    if rerun_sync is not None:
        for opc in report.sync_to_rerun:
            rerun_sync(opc)
    if drive_resume is not None:
        for claim in report.resumes_to_drive:
            drive_resume(claim)
    return report


def sweep_join_deadlines(store: ContinuationStore, report: SweepReport, *,
                         limit: int = 500) -> None:
    """Runs parked at a join whose deferred op is past its ``join_deadline``: each fails with
    ``join_deadline``, or (``on_join_deadline = "continue"``) is released without the op."""
    for run_id in store.overdue_joins(limit=limit):
        result = store.miss_join_deadline(run_id)
        if result.outcome == "failed":
            report.join_deadline_failed.append(run_id)
        elif result.claim is not None:
            report.released.append(result.claim)


def sweep_due_retries(store: ContinuationStore, report: SweepReport, *, limit: int = 500) -> None:
    """Calls whose ``WITH retries`` wait is over go out again (as their unit's window allows)."""
    _promote_windows(store, report, store.due_retries(limit=limit))


def _promote_windows(store: ContinuationStore, report: SweepReport, unit_ids: Iterable[str]) -> None:
    """Fill the free window slots of these units (each claimed in-process while it is done)."""
    for unit_id in unit_ids:
        if _claim_unit(unit_id):
            try:
                report.promoted.extend(store.promote_window(unit_id))
            finally:
                _release_unit(unit_id)


def _note_release(report: SweepReport, result: ReleaseResult) -> None:
    if result.won and result.claim is not None:
        report.released.append(result.claim)
