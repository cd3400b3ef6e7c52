"""Cron ticks: every `--cron-period` (60 s), a stack named `_cron` receives a tick envelope, and
its rules decide what the moment calls for:

    WHEN @cron.hour == 9 && @cron.minute == 0
      EXEC "https://ops.example.com/morning-sweep"

Ticks fall on the period's boundaries of the wall clock (a 60 s period ticks at second zero of
each minute), so every node computes the same bucket for a tick; the store decides which node
fires it (`claim_tick`: the first to insert the bucket), so each tick runs once however many
nodes share the database. A tick is a request like any other (`_txc.src = "cron"`, its own
request id and trace).

Ticks missed while every node was down are skipped (`--cron-missed skip`, the default) or
fired on start-up, oldest first, at most `--cron-catch-up-max` of them (`catch-up`).

The clock fields are in UTC, or in the IANA zone of `--cron-timezone`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from txcl.cronticks import JOB, tick_fields
from txcl.ids import new_request_id

log = logging.getLogger("txcl.serve")

KEEP_TICKS_MS = 7 * 86_400_000  # fired ticks are remembered a week (they only guard against firing twice)

class CronTicker:
    """One node's ticker (a task of `txcl serve`)."""

    def __init__(self, state: Any, service: Any = None) -> None:
        self.state = state
        self.service = service  # the continuation service: store calls go through its lane
        settings = state.settings
        self.period_ms = settings.cron_period
        self.zone = settings.cron_timezone
        self.missed = settings.cron_missed
        self.catch_up_max = settings.cron_catch_up_max
        self.node = settings.effective_node_id
        self.fired = 0

    async def _store(self, fn: Any, *args: Any) -> Any:
        if self.service is not None:
            return await self.service.call(fn, *args)
        return await asyncio.to_thread(fn, *args)

    def _bucket(self, now_ms: int) -> int:
        return now_ms - now_ms % self.period_ms

    async def run(self) -> None:
        store = self.state.store
        now = self._bucket(int(time.time() * 1000))
        if self.missed == "catch-up" and self.state.tree.has_stack(JOB):
            last = await self._store(store.last_tick, JOB)
            if last is not None and last < now:
                missed = list(range(last + self.period_ms, now + 1, self.period_ms))[-self.catch_up_max:]
                for bucket in missed:
                    await self.fire(bucket)
        following = now + self.period_ms
        purged_at = 0.0
        while True:
            await asyncio.sleep(max(0.0, following / 1000 - time.time()))
            current = self._bucket(int(time.time() * 1000))
            if current > following and self.missed != "catch-up":
                following = current  # the process slept past ticks (a suspended VM): only the latest
            while following <= current:
                await self.fire(following)
                following += self.period_ms
            if time.monotonic() - purged_at > 3600 and self.state.tree.has_stack(JOB):
                purged_at = time.monotonic()
                await self._store(store.purge_ticks, current - KEEP_TICKS_MS)

    async def fire(self, bucket_ms: int) -> None:
        """Fire the tick of `bucket_ms` when this node wins it."""
        if not self.state.tree.has_stack(JOB):  # (a --watch reload may add or remove the stack)
            return
        rid = new_request_id()
        try:
            if not await self._store(self.state.store.claim_tick, JOB, bucket_ms, rid):
                return
            self.fired += 1
            envelope = {"_txc": {"cron": tick_fields(bucket_ms, self.zone, self.period_ms, self.fired, self.node)}}
            await self.state.interp.run(envelope, JOB, src="cron", rid=rid)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - one failed tick never stops the ticker
            log.warning("txcl: cron tick %s failed: %s: %s", bucket_ms, type(exc).__name__, exc)


__all__ = ["CronTicker"]
