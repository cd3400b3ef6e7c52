"""Pull queues in one process: claims, long polls and lapsed leases of ``queue://`` ops.

A ``queue://<name>`` op with ``mode = "async"`` is not sent anywhere: each call waits in the
store's ``queue_jobs`` until a worker claims it (``POST /_txc/queues/<name>/claim``, or the
worker SDK's pull client). The store hands each job out once, across processes and nodes; this
module only keeps the waiting claims of this process awake:

- a claim that finds nothing waits (up to the wait it asked for) for a job enqueued by this
  process — leased to it in the enqueueing transaction and handed over at once, with the
  latency of a push dispatch — or by another node (found by looking again every ``POLL_S``);
- a lease that ran out is a retryable failure of its call: the short deadline pass of every
  serving process (every 250 ms) lapses expired leases (``lapse``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import attrs

from txcl.store.procedures.continuations.queues import queue_of
from txcl.store.records import Dispatch

if TYPE_CHECKING:
    from txcl.continuations.service import ContinuationService

log = logging.getLogger("txcl.continuations")

POLL_S = 0.25  # how often a waiting claim looks for jobs other nodes enqueued
MAX_JOBS_PER_CLAIM = 100


def is_queued(dispatch: Dispatch) -> bool:
    """Does this dispatch wait in a pull queue (a ``queue://`` op)?"""
    return queue_of(dispatch.exec_target) is not None


def is_brokered(dispatch: Dispatch) -> bool:
    """Is this dispatch published to NATS (a ``nats://`` op)?"""
    target = dispatch.exec_target or ""
    return target[:7].lower() == "nats://"


@attrs.define(eq=False)
class _Waiting:
    """A claim of this process waiting for its queue to get a job."""

    queue: str
    lease_ms: int
    claimant: str
    limit: int
    handed: asyncio.Future  # the jobs an enqueue leased to it
    picked: bool = False  # an enqueue is leasing jobs to it: it must take them


class PullQueues:
    """The pull queues of one continuation service (see the module docstring)."""

    def __init__(self, service: "ContinuationService") -> None:
        self.service = service
        self._waiting: dict[str, list[_Waiting]] = {}

    async def enqueue(self, dispatches: list[Dispatch]) -> None:
        """Put calls in their queues; jobs that claims of this process are waiting for are
        leased to them in the same transaction and handed over at once."""
        jobs = [(d.opc, queue_of(d.exec_target) or "") for d in dispatches]
        picked: list[_Waiting] = []
        offered: dict[str, int] = {}
        for _, name in jobs:
            offered[name] = offered.get(name, 0) + 1
        for name, count in offered.items():
            waiting = self._waiting.get(name, [])
            while count > 0 and waiting:
                claim = waiting.pop(0)
                claim.picked = True
                picked.append(claim)
                count -= claim.limit
        store = self.service.store
        if not picked:
            await self.service.call_batched(store.enqueue_jobs, jobs)  # may share a commit
            return
        try:
            handed = await self.service.call_batched(
                store.hand_over_jobs, jobs, [(c.queue, c.lease_ms, c.claimant, c.limit) for c in picked])
        except BaseException as exc:
            for claim in picked:
                if not claim.handed.done():
                    claim.handed.set_exception(exc) if isinstance(exc, Exception) else claim.handed.cancel()
            raise
        for claim, got in zip(picked, handed):
            if not claim.handed.done():
                claim.handed.set_result(got)

    async def claim(self, name: str, *, lease_ms: int, claimant: str, limit: int = 1,
                    wait_s: float = 0.0, gone: asyncio.Event | None = None) -> list[tuple[Dispatch, int]]:
        """Up to `limit` jobs of queue `name`, leased to `claimant`; waits up to `wait_s` for
        one when none is ready (a long poll): a job this process enqueues meanwhile is handed
        over at once, one another node enqueued is found by looking again every POLL_S. Stops
        waiting once `gone` is set (the claiming client disconnected: no job is leased to
        nobody)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, wait_s)
        limit = min(limit, MAX_JOBS_PER_CLAIM)
        store = self.service.store
        while True:
            if gone is not None and gone.is_set():
                return []
            # (claims may share a commit: each takes its rows with skip-locked, so none waits on another)
            jobs = await self.service.call_batched(store.claim_jobs, name, lease_ms=lease_ms,
                                                   claimant=claimant, limit=limit)
            left = deadline - loop.time()
            if jobs or left <= 0:
                return jobs
            waiting = _Waiting(name, lease_ms, claimant, limit, loop.create_future())
            self._waiting.setdefault(name, []).append(waiting)
            waits: list[asyncio.Future] = [waiting.handed]
            if gone is not None:
                waits.append(asyncio.ensure_future(gone.wait()))
            try:
                await asyncio.wait(waits, timeout=min(POLL_S, left), return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits[1:]:
                    w.cancel()
                if not waiting.picked:
                    queue = self._waiting.get(name, [])
                    if waiting in queue:
                        queue.remove(waiting)
            if waiting.picked:  # an enqueue is leasing jobs to this claim: they are its answer
                handed = await waiting.handed
                if handed:
                    return handed

    async def lapse(self, name: str | None = None, limit: int = 100, *, unrecorded: bool = False) -> int:
        """Fail or retry the calls whose lease ran out (of queue `name`, or of every queue; with
        `unrecorded`, also lapses whose failure went unrecorded); releases won on the way are
        resumed. How many lapsed."""
        service = self.service
        opcs = await service.call(service.store.lapsed_leases, queue=name, limit=limit)
        if unrecorded:
            opcs += await service.call(service.store.unrecorded_lapses, limit=limit)
        n = 0
        for opc in opcs:
            found = await service.call_admitting(service.store.lapse_and_continue, opc)
            if found is None:
                continue
            n += 1
            try:
                _, release = service.admitted(*found)
            except Exception as exc:  # noqa: BLE001 - the failure is recorded; the sweeper continues the run
                log.warning("txcl: continuing after the lapsed lease of %s failed: %r", opc, exc)
                continue
            if release is not None and release.won and release.claim is not None:
                service.start_resume(release.claim)
        return n


__all__ = ["PullQueues", "is_queued", "is_brokered", "POLL_S"]
