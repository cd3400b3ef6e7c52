"""Pull queues in one process: claims, long polls and lapsed leases of ``queue://`` ops.

A ``queue://<name>`` op with ``mode = "async"`` is not sent anywhere: each call waits in the
store's ``queue_jobs`` until a worker claims it (``POST /_txc/queues/<name>/claim``, or the
worker SDK's pull client). The store hands each job out once, across processes and nodes; this
module only keeps the waiting claims of this process awake:

- a claim that finds nothing waits (up to the wait it asked for) for a job enqueued by this
  process — woken at once — or by another node (found by polling the store every
  ``POLL_S``);
- a lease that ran out is a retryable failure of its call: the short deadline pass of every
  serving process (every 250 ms) lapses expired leases (``lapse``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from txcl.store.procedures.continuations.queues import queue_of
from txcl.store.records import Dispatch

if TYPE_CHECKING:
    from txcl.continuations.service import ContinuationService

log = logging.getLogger("txcl.continuations")

POLL_S = 0.25  # how often a waiting claim looks for jobs other nodes enqueued
MAX_JOBS_PER_CLAIM = 100
GATHER_S = 0.003  # a claim for several jobs, woken by one, waits this long for more


def is_queued(dispatch: Dispatch) -> bool:
    """Does this dispatch wait in a pull queue (a ``queue://`` op)?"""
    return queue_of(dispatch.exec_target) is not None


def is_brokered(dispatch: Dispatch) -> bool:
    """Is this dispatch published to NATS (a ``nats://`` op)?"""
    target = dispatch.exec_target or ""
    return target[:7].lower() == "nats://"


class PullQueues:
    """The pull queues of one continuation service (see the module docstring)."""

    def __init__(self, service: "ContinuationService") -> None:
        self.service = service
        self._events: dict[str, asyncio.Event] = {}

    async def enqueue(self, dispatches: list[Dispatch]) -> None:
        jobs = [(d.opc, queue_of(d.exec_target) or "") for d in dispatches]
        await self.service.call_batched(self.service.store.enqueue_jobs, jobs)  # may share a commit
        for name in {q for _, q in jobs}:
            event = self._events.get(name)
            if event is not None:
                event.set()

    async def claim(self, name: str, *, lease_ms: int, claimant: str, limit: int = 1,
                    wait_s: float = 0.0, gone: asyncio.Event | None = None) -> list[tuple[Dispatch, int]]:
        """Up to `limit` jobs of queue `name`, leased to `claimant`; waits up to `wait_s` for
        one when none is ready (a long poll), and stops waiting once `gone` is set (the
        claiming client disconnected: no job is leased to nobody)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, wait_s)
        while True:
            if gone is not None and gone.is_set():
                return []
            event = self._events.setdefault(name, asyncio.Event())
            event.clear()
            # (claims may share a commit: each takes its rows with skip-locked, so none waits on another)
            jobs = await self.service.call_batched(self.service.store.claim_jobs, name, lease_ms=lease_ms,
                                                   claimant=claimant, limit=min(limit, MAX_JOBS_PER_CLAIM))
            left = deadline - loop.time()
            if jobs or left <= 0:
                return jobs
            waits = [asyncio.ensure_future(event.wait())]
            if gone is not None:
                waits.append(asyncio.ensure_future(gone.wait()))
            try:
                await asyncio.wait(waits, timeout=min(POLL_S, left), return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()
            if limit > 1 and event.is_set():  # jobs come in one by one as items settle: let a few gather
                await asyncio.sleep(GATHER_S)

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
