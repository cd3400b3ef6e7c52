"""The poller of scheduled events: every `--scheduled-poll` (1 s) a node claims the events
that are due by the database's clock and delivers each into the `_scheduled` stack as a
request (`_txc.src = "scheduled"`, `@scheduled.*`), so an event fires within about a poll
of its time, and at start-up the events that came due while every node was down fire at
once.

A claim is a conditional update in the store, so each event fires on one node however many
share the database. A node that stops while firing leaves its claim; after
`--scheduled-stale-after` another node fires the event again (`@scheduled.attempt` is then
2). Fired, failed and cancelled events are forgotten after `--scheduled-retention`.

The `_scheduled` stack's existence is the subscription: without one, events stay pending.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from txcl.ids import new_request_id
from txcl.scheduling import JOB, scheduled_envelope

log = logging.getLogger("txcl.serve")


class ScheduledPoller:
    """One node's poller (a task of `txcl serve`)."""

    def __init__(self, state: Any, service: Any = None) -> None:
        self.state = state
        self.service = service
        settings = state.settings
        self.period_s = settings.scheduled_poll / 1000
        self.max_inflight = settings.scheduled_max_inflight
        self.stale_after_ms = settings.scheduled_stale_after
        self.retention_ms = settings.scheduled_retention
        self.node = settings.effective_node_id
        self.fired = 0

    async def _store(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        if self.service is not None:
            return await self.service.call(fn, *args, **kwargs)
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def run(self) -> None:
        purged_at = 0.0
        while True:
            try:
                if self.state.tree.has_stack(JOB):  # (a --watch reload may add or remove the stack)
                    await self.poll_once()
                    if time.monotonic() - purged_at > 3600:
                        purged_at = time.monotonic()
                        now = await self._store(self.state.store.backend.now_ms)
                        await self._store(self.state.store.purge_events, now - self.retention_ms)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the store may be down a while; poll again
                log.warning("txcl: the scheduled-events poll failed: %s: %s", type(exc).__name__, exc)
            await asyncio.sleep(self.period_s)

    async def poll_once(self) -> int:
        """Claim and fire what is due now (repeating while a full batch came back)."""
        total = 0
        while True:
            events = await self._store(self.state.store.claim_due_events, limit=self.max_inflight,
                                       stale_after_ms=self.stale_after_ms)
            if events:
                await asyncio.gather(*(self.fire(e) for e in events))
                total += len(events)
            if len(events) < self.max_inflight:
                return total

    async def fire(self, event: Any) -> None:
        rid = new_request_id()
        envelope = scheduled_envelope(payload=event.payload, key=event.idempotency_key, event_id=event.event_id,
                                      schedule_at_ms=event.schedule_at_ms, fired_at_ms=int(time.time() * 1000),
                                      attempt=event.attempts, origin_stack=event.origin_stack,
                                      origin_rid=event.origin_rid, node=self.node)
        status, error = "fired", None
        try:
            await self.state.interp.run(envelope, JOB, src="scheduled", rid=rid)
            self.fired += 1
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - one failed event never stops the poller
            status, error = "failed", f"{type(exc).__name__}: {exc}"
            log.warning("txcl: scheduled event %s failed: %s", event.idempotency_key, error)
        try:
            await self._store(self.state.store.finish_event, event.idempotency_key, event.event_id,
                              status=status, rid=rid, error=error)
        except Exception as exc:  # noqa: BLE001 - the claim goes stale and another node fires it again
            log.warning("txcl: could not record scheduled event %s as %s: %s", event.idempotency_key, status, exc)


__all__ = ["ScheduledPoller"]
