"""One job a worker runs: what txcl sent, and the calls back to it (heartbeats, the result)."""

from __future__ import annotations

import asyncio
import datetime as _dt
import logging
import random
from typing import Any

import attrs
import httpx

log = logging.getLogger("txcl.worker")

RETRY_STATUSES = (500, 502, 503, 504)  # a callback answered so is sent again; any other answer is final


class Retry(Exception):
    """The job failed in a way that may pass: txcl sends it again when the op has `WITH retries` left."""


class Fail(Exception):
    """The job failed for good: the op fails with this message."""


def _expiry(text: Any) -> float | None:
    """Seconds since the epoch of the dispatch's `expires_at` (None: not given)."""
    if not isinstance(text, str):
        return None
    try:
        return _dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


@attrs.define
class Job:
    """A dispatch: its input and the facts of `_txc` (see the worker guide)."""

    input: Any
    opc: str
    token: str | None
    callback_url: str | None
    idempotency_key: str
    run_id: str | None = None
    stack: str | None = None
    op: str | None = None
    item_index: int | None = None
    item_count: int | None = None
    heartbeat_ms: int | None = None
    expires_at: float | None = None
    client: Any = attrs.field(default=None, repr=False)  # the worker's httpx.AsyncClient
    cancelled: bool = False
    task: Any = attrs.field(default=None, repr=False)
    progress: Any = None
    # how answers travel when not over HTTP (a NATS job publishes them): body -> txcl's answer
    poster: Any = attrs.field(default=None, repr=False)
    # a pull worker's callbacks ask for the next jobs: extra headers, and what to do with an answer
    extra_headers: dict = attrs.field(factory=dict, repr=False)
    on_answer: Any = attrs.field(default=None, repr=False)

    Retry = Retry  # `raise job.Retry(...)` reads as it does in the guide
    Fail = Fail

    @classmethod
    def from_dispatch(cls, body: dict, headers: dict[str, str], client: Any) -> "Job":
        txc = body.get("_txc") if isinstance(body.get("_txc"), dict) else {}
        opc = str(txc.get("op_continuation_id") or headers.get("idempotency-key") or "")
        return cls(input=body.get("input"), opc=opc, token=headers.get("x-txco-continuation-token"),
                   callback_url=txc.get("callback_url"), idempotency_key=headers.get("idempotency-key") or opc,
                   run_id=txc.get("run_id"), stack=txc.get("stack"), op=txc.get("op"),
                   item_index=txc.get("item_index"), item_count=txc.get("item_count"),
                   heartbeat_ms=txc.get("heartbeat_ms"), expires_at=_expiry(txc.get("expires_at")), client=client)

    async def heartbeat(self, progress: Any = None) -> bool:
        """Tell txcl the job is alive (with `progress`, shown by `txcl runs show` and the
        dashboard); True when txcl has given up on it — the task is then cancelled."""
        if progress is not None:
            self.progress = progress
        body: dict[str, Any] = {"status": "running"}
        if self.progress is not None:
            body["progress"] = self.progress
        answer = await self._post(body, attempts=2)
        if isinstance(answer, dict) and answer.get("cancelled") is True:
            self.cancel("txcl gave up on the job")
            return True
        return False

    def cancel(self, why: str) -> None:
        if not self.cancelled:
            self.cancelled = True
            log.info("txcl worker: job %s cancelled: %s", self.opc, why)
            if self.task is not None and self.task is not asyncio.current_task():
                self.task.cancel()
            elif self.task is not None:
                raise asyncio.CancelledError(why)

    async def complete(self, output: Any) -> Any:
        return await self._post({"status": "completed", "output": output})

    async def fail(self, message: str, *, retryable: bool = False) -> Any:
        body: dict[str, Any] = {"status": "failed", "error": {"message": message}}
        if retryable:
            body["retryable"] = True
        return await self._post(body)

    async def _post(self, body: dict, attempts: int | None = None) -> Any:
        """POST to the callback URL: retried on connection errors and 5xx (honouring
        Retry-After) until accepted, refused, the job expires or `attempts` run out."""
        if self.poster is not None:
            return await self.poster(body)
        if not self.callback_url:
            return None  # `txcl run` without a base URL: only `txcl complete` can finish it
        headers = {**self.extra_headers, "authorization": f"Bearer {self.token}"} if self.token else \
            dict(self.extra_headers)
        wait, attempt = 0.2, 0
        while True:
            attempt += 1
            retry_after = None
            try:
                answer = await self.client.post(self.callback_url, json=body, headers=headers, timeout=30)
                if answer.status_code not in RETRY_STATUSES:
                    if answer.status_code >= 400:
                        log.warning("txcl worker: job %s: callback refused with %d: %s", self.opc,
                                    answer.status_code, answer.text[:200])
                    try:
                        data = answer.json()
                    except ValueError:
                        return None
                    if self.on_answer is not None and isinstance(data, dict) and body.get("status") != "running":
                        self.on_answer(data)
                    return data
                retry_after = answer.headers.get("retry-after")
            except httpx.HTTPError as exc:
                log.info("txcl worker: job %s: callback failed (%s); trying again", self.opc, exc)
            if attempts is not None and attempt >= attempts:
                return None
            delay = float(retry_after) if retry_after and retry_after.isdigit() else wait * (1 + random.random() / 2)
            if self.expires_at is not None and _now() + delay > self.expires_at:
                log.warning("txcl worker: job %s expired before its callback was accepted", self.opc)
                return None
            await asyncio.sleep(delay)
            wait = min(wait * 2, 10.0)


def _now() -> float:
    import time

    return time.time()


__all__ = ["Job", "Retry", "Fail"]
