"""Poll answers (and the long poll) as the builtin `txco://continuation-result`.

A poll is any request with `?_txc.continuation=<rcid>`; the router sends it to
`_sys/continuation`, whose shipped rule calls this builtin. It reads the run from the store
and writes the whole answer into `@web.res` (status, headers, base64 body), then halts:

- completed → `format=json`: 200 `{"continuation", "status": "completed", "result"}`;
  otherwise the final answer exactly as a synchronous request would have received it (plus
  `Cache-Control: no-store`), for browsers too (the wait page becomes the answer);
- running → JSON clients long-poll up to --continuation-longpoll-ms (never past the op's
  deadline minus 1.5 s) and get 202 `{"continuation", "status": "running"}` + Retry-After;
  browsers get the 202 wait page at once;
- failed / expired → 502 with the reason and error (browsers: a small HTML page);
- unknown, purged or malformed → 404 with the reason.
"""

from __future__ import annotations

import base64
import time
from typing import Any

from txcl import runtime_codes as rc
from txcl.ids import RCID_RE
from txcl.runtime.dispatch import OpContext, OpError
from txcl.serve.shaping import (
    Answer,
    error_payload,
    json_answer,
    shape_completed,
    store_unavailable_answer,
    strip_private,
)
from txcl.serve.waitpage import error_page, wait_page
from txcl.store.errors import StoreUnavailable

_SERVICE: Any = None
POLL_INTERVAL_S = 1.0  # re-read at least this often where changes are not announced across processes
ANNOUNCED_INTERVAL_S = 5.0  # a safety re-read where the store announces every node's changes
RUNNING = ("active", "waiting", "resuming")


def install(service: Any) -> None:
    """Make `txco://continuation-result` answer from `service`'s store (one per process)."""
    global _SERVICE
    _SERVICE = service
    from txcl.runtime.schemes.txco import register

    register("continuation-result", continuation_result)


def _first(values: Any) -> str:
    if isinstance(values, list):
        return ",".join(str(v) for v in values)
    return str(values) if values is not None else ""


def _no_store(answer: Answer) -> Answer:
    if answer.header("cache-control") is None:
        answer.set_header("cache-control", "no-store")
    return answer


def _html(status: int, body: bytes, extra: list[tuple[bytes, bytes]] = ()) -> Answer:  # type: ignore[assignment]
    return Answer(status, [(b"content-type", b"text/html; charset=utf-8"), (b"cache-control", b"no-store"),
                           *extra], body)


def not_found(rcid: str, reason: str, browser: bool) -> Answer:
    if browser:
        return _html(404, error_page(status=404, title="Unknown request",
                                     message="This request is unknown or has expired."))
    return json_answer(404, error_payload(rc.UNKNOWN_CONTINUATION.code, "unknown continuation, or it has expired",
                                          reason=reason, rcid=rcid), [("cache-control", "no-store")])


def answer_for(run: Any, rcid: str, *, browser: bool, want_json: bool, retry_after_s: int,
               private: bool = False, progress: list[dict] | None = None) -> Answer:
    """The answer for a run's current state (no waiting)."""
    status = run.status
    if status == "completed":
        result = run.result if isinstance(run.result, dict) else {}
        if want_json:
            shown = result if private else strip_private(result)
            return json_answer(200, {"continuation": rcid, "status": "completed", "result": shown},
                               [("cache-control", "no-store")])
        return _no_store(shape_completed(dict(result), private=private))
    if status in ("failed", "expired"):
        error = run.error if run.error is not None else {}
        reason = run.fail_reason or status
        if browser:
            message = error.get("message") if isinstance(error, dict) else None
            return _html(502, error_page(status=502, title="The request failed",
                                         message=str(message or reason)))
        return json_answer(502, {"continuation": rcid, "status": "failed", "reason": reason, "error": error},
                           [("cache-control", "no-store")])
    if browser:
        return _html(202, wait_page(rcid=rcid, created_ms=run.created_ms, refresh_s=retry_after_s,
                                    progress=progress),
                     [(b"retry-after", str(retry_after_s).encode())])
    running: dict[str, Any] = {"continuation": rcid, "status": "running"}
    if progress:
        running["progress"] = progress
    return json_answer(202, running, [("retry-after", str(retry_after_s)), ("cache-control", "no-store")])


async def poll_answer(service: Any, rcid: Any, *, browser: bool, want_json: bool, wait_s: float) -> Answer:
    settings = service.settings
    retry = max(1, -(-settings.poll_retry_after // 1000))
    if not isinstance(rcid, str) or not rcid:
        return not_found("", "empty_or_missing_rcid", browser)
    if not RCID_RE.match(rcid):
        return not_found(rcid, "malformed_rcid", browser)
    store = service.store
    run = await service.call(store.get_run_by_rcid, rcid)
    if run is None:
        return not_found(rcid, "unknown_or_expired", browser)
    if run.status in RUNNING and not browser and wait_s > 0:
        interval = ANNOUNCED_INTERVAL_S if getattr(store, "kind", "") == "postgresql" else POLL_INTERVAL_S
        end = time.monotonic() + wait_s
        run_id = run.run_id
        while True:
            with service.watch_run(run_id) as changed:  # watching before the read: no change slips between
                run = await service.call(store.get_run_by_rcid, rcid)
                left = end - time.monotonic()
                if run is None or run.status not in RUNNING or left <= 0:
                    break
                await service.until_changed(changed, min(interval, left))
        if run is None:
            return not_found(rcid, "unknown_or_expired", browser)
    progress = None
    if run.status in RUNNING:  # what the workers said of their progress (WITH heartbeat)
        progress = await service.call(store.run_progress, run.run_id)
    return answer_for(run, rcid, browser=browser, want_json=want_json, retry_after_s=retry,
                      private=settings.private, progress=progress)


def answer_to_res(answer: Answer) -> dict:
    headers: dict[str, list[str]] = {}
    for name, value in answer.headers:
        key = name.decode("latin-1")
        if key == "content-length":
            continue
        headers.setdefault(key, []).append(value.decode("latin-1"))
    return {"status": answer.status, "headers": headers, "body": base64.b64encode(answer.body).decode("ascii")}


async def continuation_result(op_input: dict, directives: dict, ctx: OpContext) -> dict:
    """`txco://continuation-result`: the poll answer into `@web.res`, then halt."""
    from txcl.ops.layout import is_system_stack

    if not is_system_stack(ctx.op_stack or ctx.stack):
        raise OpError("txco://continuation-result runs only in system stacks")
    service = _SERVICE
    if service is None:
        raise OpError("txco://continuation-result: continuations are not available in this process")
    req = ctx.web_req or {}
    headers = req.get("headers") if isinstance(req.get("headers"), dict) else {}
    url = req.get("url") if isinstance(req.get("url"), dict) else {}
    query = url.get("query") if isinstance(url.get("query"), dict) else {}
    txc = op_input.get("_txc") if isinstance(op_input.get("_txc"), dict) else {}
    rcid = txc.get("continuation")
    if rcid is None:
        values = query.get("_txc.continuation")
        rcid = values[0] if isinstance(values, list) and values else None
    formats = query.get("format") or []
    want_json = "json" in (formats if isinstance(formats, list) else [formats])
    accept = _first(headers.get("accept"))
    browser = "text/html" in accept and not want_json
    settings = service.settings
    wait_s = settings.continuation_longpoll_ms / 1000.0
    if ctx.deadline:
        wait_s = min(wait_s, ctx.deadline - time.monotonic() - 1.5)
    try:
        answer = await poll_answer(service, rcid, browser=browser, want_json=want_json, wait_s=max(0.0, wait_s))
    except StoreUnavailable as exc:  # the poll is safe to repeat: 503 with Retry-After
        answer = store_unavailable_answer(exc)
    return {"_txc": {"web": {"res": answer_to_res(answer)}, "halt": True}}
