"""Telling workers that the flow gave up on their call, through the cancel URL they gave.

A worker's 202 ack may carry ``{"cancel_url": "…"}``, or a rule may name one with ``WITH
cancel_url``. When txcl gives up on a call that was sent — the run is cancelled, fails or
expires, a sibling failed fast, the call timed out, a join deadline passed, or the stack ended
before the op's join — the store writes a *cancel call* in the same transaction. This module
delivers them after the commit: ``POST {"status": "cancelled", "reason": …,
"op_continuation_id": …}`` with the call's token in ``X-Txco-Continuation-Token``, at least
once, with exponential backoff and jitter, at most :data:`MAX_ATTEMPTS` times. Each outcome
is a run event (``txcl runs show``). Delivery never holds up a flow: it runs beside it, from
the sweeper and from a short periodic pass in ``txcl serve``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx

from txcl import metrics as _metrics
from txcl.egress import EgressDenied
from txcl.runtime_codes import EGRESS_DENIED
from txcl.store.records import CancelCall

log = logging.getLogger("txcl.continuations")

MAX_ATTEMPTS = 6  # then the cancel call is abandoned (recorded as such)
BACKOFF_MS = 1_000  # before the 2nd attempt; doubled each time, plus up to a quarter of jitter
TIMEOUT_S = 5.0  # per POST
LEASE_MS = 30_000  # a claimed call is not claimed again meanwhile (a crashed deliverer's expires)
CONCURRENCY = 32


def cancel_body(call: CancelCall) -> dict:
    return {"status": "cancelled", "reason": call.reason, "op_continuation_id": call.opc}


def cancel_headers(call: CancelCall) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Idempotency-Key": f"cancel:{call.opc}"}
    if call.token:
        headers["X-Txco-Continuation-Token"] = call.token
    return headers


def verdict(status: int | None, error: str | None) -> tuple[bool, bool]:
    """(delivered, worth retrying) for one POST's answer: 2xx is delivered, and so are 404 and
    410 (the worker no longer has the job: nothing left to stop); 408, 429, 5xx and network
    errors are tried again; any other answer will not change, so the call is abandoned."""
    if status is None:  # no answer: worth another try, unless the egress policy refused the address
        return False, not (error or "").startswith(EGRESS_DENIED.code)
    if 200 <= status < 300 or status in (404, 410):
        return True, False
    return False, status in (408, 429) or status >= 500


async def post_cancel(client: httpx.AsyncClient, call: CancelCall) -> tuple[int | None, str | None]:
    """POST one cancellation; (HTTP status or None, error text or None). Never raises for
    worker problems, and never puts the token in an error."""
    from txcl.values.jsonio import dumps_utf8

    try:
        response = await client.post(call.url, content=dumps_utf8(cancel_body(call)),
                                     headers=cancel_headers(call), timeout=httpx.Timeout(TIMEOUT_S))
    except EgressDenied as exc:
        return None, f"{EGRESS_DENIED.code}: {exc}"
    except httpx.TimeoutException:
        return None, f"no answer within {TIMEOUT_S:g}s"
    except (httpx.HTTPError, OSError, ValueError) as exc:
        return None, str(exc) or type(exc).__name__
    if 200 <= response.status_code < 300:
        return response.status_code, None
    return response.status_code, f"answered {response.status_code}"


async def deliver_due(service: Any, *, limit: int = 500) -> int:
    """Claim the cancel calls due now, POST them (at most :data:`CONCURRENCY` at once) and
    record each outcome (outcomes recorded together share a commit). Returns how many were
    attempted. A read comes first, so an idle server does not write."""
    store = service.store
    if not await service.call(store.cancel_calls_due, limit=1):
        return 0
    calls = await service.call(store.claim_cancel_calls, limit=limit, lease_ms=LEASE_MS)
    if not calls:
        return 0
    client = service.http()
    if hasattr(client, "httpx_client"):
        client = client.httpx_client()
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(call: CancelCall) -> None:
        async with gate:
            status, error = await post_cancel(client, call)
        delivered, retry = verdict(status, error)
        recorder = _metrics.current
        if recorder.enabled:
            recorder.cancellation("delivered" if delivered else "retry" if retry and call.attempts + 1 < MAX_ATTEMPTS
                                  else "abandoned")
        await service.call_batched(store.record_cancel_call, call.opc, delivered=delivered, error=error,
                           max_attempts=MAX_ATTEMPTS if retry or delivered else call.attempts + 1,
                           backoff_ms=BACKOFF_MS)

    await asyncio.gather(*(one(c) for c in calls))
    return len(calls)


__all__ = ["deliver_due", "post_cancel", "verdict", "cancel_body", "cancel_headers", "MAX_ATTEMPTS"]
