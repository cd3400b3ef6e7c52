"""The Python side of durable runs, mirroring the commands `txcl run`, `complete` and `runs`.

    from txcl.continuations.api import durable_interpreter, complete, cancel, wait

    interp, service = durable_interpreter("path/to/workspace")
    outcome = interp.run_sync({"order": {...}}, stack="shop")      # Completed | Failed | Suspended
    complete(service.store, opc, {"status": "completed", "output": {"ok": True}})
    record = wait(service.store, outcome.run_id, timeout=60)        # the run once finished
    cancel(service.store, run_id, reason="duplicate order")         # an operator gives up on a run
    retry(service.store, run_id)                                    # …or gives a failed one another go

`complete` admits an outcome exactly as `txcl complete` does (admit, then continue; no token) and drives the
resume in-process when it wins the release.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from txcl.continuations.service import ContinuationService, open_run_store
from txcl.runtime_codes import normalize_error


def durable_interpreter(workspace: str | Path, *, db: str | Path | None = None, settings: Any = None) -> tuple[Any, Any]:
    """(Interpreter with the continuation hooks, its ContinuationService) for a workspace."""
    from txcl.ops.tree import find_workspace, load_ops
    from txcl.runtime.config import Settings

    ws, _ = find_workspace(workspace)
    settings = settings or Settings()
    store = open_run_store(db or settings.db_path(ws), settings)
    service = ContinuationService(store, settings, workspace=ws, inline_store=True)
    return service.interpreter(load_ops(ws)), service


def complete(store: Any, opc: str, outcome: dict, *, settings: Any = None, workspace: str | Path | None = None
             ) -> dict:
    """Admit `{"status": "completed", "output": …}` or `{"status": "failed", "error": …}` for
    `opc`; returns `{"status": "resumed"|"recorded"|"duplicate"|"conflict"|"cancelled"|
    "expired"|"unknown", "run_id", "run_status"}`."""
    from txcl.runtime.config import Settings

    status = outcome.get("status")
    if status in ("failed", "fail"):
        status, payload = "failed", normalize_error(outcome.get("error"))
    elif status == "completed":
        payload = outcome.get("output", {})
    else:
        raise ValueError(f"unknown outcome status {status!r}")
    service = ContinuationService(store, settings or Settings(),
                                  workspace=Path(workspace) if workspace is not None else None, inline_store=True)

    async def go() -> dict:
        try:
            admit, release = await service.complete(opc, status, payload, source="cli")
            result: dict[str, Any] = {"run_id": admit.run_id}
            won = release is not None and release.won and release.claim is not None
            if admit.outcome != "admitted" and not won:
                result["status"] = admit.outcome
            elif won:
                result["status"] = "resumed"
                await service.drive_resume(release.claim)
                await service.drain_tasks(60.0)
            else:
                result["status"] = "recorded"
            record = store.get_run(admit.run_id) if admit.run_id else None
            result["run_status"] = record.status if record is not None else None
            return result
        finally:
            await service.aclose()

    return asyncio.run(go())


def cancel(store: Any, run_id: str, reason: str | None = None) -> str:
    """Give up on a run (as `txcl runs cancel`): its open calls are cancelled (late callbacks
    get 410) and it fails with reason ``cancelled``. Returns ``cancelled``, the state of a run
    that had already finished, or ``unknown``."""
    return store.cancel_run(run_id, reason=reason)


def retry(store: Any, run_id: str) -> Any:
    """Give a run that failed because of its async ops another go (as `txcl runs retry`): the
    calls of its last wait without a completed answer are sent again, and once they answer the
    run resumes from the envelope saved when it began to wait. Returns a
    :class:`~txcl.store.records.RetryResult` (``outcome`` ``retried``, ``unknown``, the state of
    a run that is not failed, or ``not_retryable`` with ``reason``). The calls go out from a
    running `txcl serve` (within 250 ms) or `txcl sweep`."""
    return store.retry_run(run_id)


def wait(store: Any, run_id: str, timeout: float = 600.0, interval: float = 0.2) -> Any:
    """The run's record once it is completed, failed or expired, or the latest record when
    `timeout` seconds pass (blocking; polls the store)."""
    end = time.monotonic() + timeout
    while True:
        record = store.get_run(run_id)
        if record is None or record.status in ("completed", "failed", "expired") or time.monotonic() >= end:
            return record
        time.sleep(min(interval, max(0.0, end - time.monotonic())))
