"""Running the sweeper inside a process: once at startup, then every
--continuation-sweep-period (`txcl serve`), or on demand (`txcl sweep [--loop]`).

The pass itself (`sweeper.sweep`) is synchronous store work and runs beside the store lane; its
effects outside the store — resending dispatches, driving released or taken-over resumes —
happen afterwards on the event loop through the process's `ContinuationService`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from txcl.continuations.barrier import rerun_sync_member
from txcl.continuations.cancellations import deliver_due
from txcl.continuations.sweeper import SweepConfig, SweepReport, sweep, sweep_due_retries, sweep_join_deadlines
from txcl.store.errors import StoreUnavailable

log = logging.getLogger("txcl.continuations")

DEADLINE_PERIOD_MS = 250  # the short pass: join deadlines and cancellations owed to workers


def sweep_config(settings: Any) -> SweepConfig:
    return SweepConfig(retention_ms=settings.continuation_retention,
                       stale_after_ms=settings.continuation_stale_resume_after,
                       max_attempts=max(1, settings.resume_max_attempts),
                       reconcile_after_ms=settings.reconcile_after,
                       lease_ms=max(settings.reconcile_after, 1000),
                       owner=settings.effective_node_id)


async def sweep_once(service: Any) -> SweepReport:
    """One pass; then send what must be (re)sent and drive the resumes it won."""
    store = service.store
    settings = service.settings

    def purge_traces() -> int:
        return int(store.purge_traces(store.now_ms() - settings.trace_retention) or 0)

    report = await service.lane.apart(sweep, store, sweep_config(settings),
                                      extra_purges=(purge_traces,))
    if report.purged_runs or report.extra_purged:  # a purge can leave a large write-ahead log behind
        await service.lane.apart(store.backend.checkpoint)
    outgoing = [*report.resent, *report.promoted]
    if outgoing:
        service.send_later(outgoing)
    for claim in report.resumes_to_drive:
        service.start_resume(claim)
    if report.sync_to_rerun:
        for opc in report.sync_to_rerun:
            service.spawn(rerun_sync_member(service, opc))
    await service.queues.lapse(unrecorded=True)
    await deliver_due(service)
    return report


async def deadline_pass(service: Any) -> SweepReport:
    """The short pass: runs parked past a join deadline (failed, or resumed without the op),
    calls whose retry is due (sent again), pull-queue jobs whose lease ran out (retried or
    failed), then the cancellations owed to workers. Cheap when there is nothing to do (four
    reads)."""
    report = SweepReport()

    def store_work() -> None:
        sweep_join_deadlines(service.store, report)
        sweep_due_retries(service.store, report)

    await service.lane.apart(store_work)
    for claim in report.released:
        service.start_resume(claim)
    if report.promoted:
        service.send_later(report.promoted)
    await service.queues.lapse()
    await deliver_due(service)
    return report


async def deadlines_forever(service: Any, period_ms: int = DEADLINE_PERIOD_MS) -> None:
    """`deadline_pass` every `period_ms`, so join deadlines and cancellations do not wait for
    the (much longer) sweeper period."""
    while True:
        try:
            await deadline_pass(service)
        except asyncio.CancelledError:
            raise
        except StoreUnavailable as exc:
            log.warning("txcl: deadline pass skipped: %s", exc)
        except Exception:  # noqa: BLE001 - retried next period
            log.exception("txcl: deadline pass failed")
        await asyncio.sleep(period_ms / 1000.0)


async def sweep_forever(service: Any, period_ms: int) -> None:
    """Sweep now, then every `period_ms` (0: only the startup pass)."""
    while True:
        try:
            await sweep_once(service)
        except asyncio.CancelledError:
            raise
        except StoreUnavailable as exc:  # the next period tries again
            log.warning("txcl: sweeper pass skipped: %s", exc)
        except Exception:  # noqa: BLE001 - a failed pass is retried next period
            log.exception("txcl: sweeper pass failed")
        if period_ms <= 0:
            return
        await asyncio.sleep(period_ms / 1000.0)
