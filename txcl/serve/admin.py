"""Run operations over HTTP, for operators: on `txcl serve` only when --admin-token is set.

    POST /_txc/admin/runs/<run id or rcid>/cancel     {"reason": "…"} (optional)
    POST /_txc/admin/runs/<run id or rcid>/retry
         Authorization: Bearer <admin token>

Answers: 200 `{"run_id", "status": "cancelled"}` (or `"retried"`, with `units` and `calls`);
409 when the run is in no state for it (`status`: its state, or `not_retryable` with a
`reason`); 404 for an unknown run; 401 without the right token; 405 for another method. The
token is compared in constant time and never logged.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any, Awaitable, Callable

from txcl import runtime_codes as rc
from txcl.asgi_body import read_capped_body
from txcl.continuations.operator import resolve_run_id, retry_by_id
from txcl.ids import admin_token_matches
from txcl.serve.shaping import Answer, error_payload, json_answer

PATH = "/_txc/admin"
_OPERATION = re.compile(r"^/_txc/admin/runs/([A-Za-z0-9_-]{1,80})/(cancel|retry)$")
MAX_BODY = 16 * 1024


def bearer_token(scope: dict) -> str | None:
    """The token of an `Authorization: Bearer …` header (the admin endpoint and the metrics)."""
    for key, value in scope.get("headers", ()):
        if key == b"authorization":
            text = value.decode("latin-1")
            return text[7:].strip() if text[:7].lower() == "bearer " else None
    return None


async def handle(scope: dict, receive: Any, store: Any, token: str, lane: Any = None) -> Answer:
    """The answer to one admin request (see the module docstring). `lane` runs the store work
    (the continuation service's store lane, whose batched calls share commits; default: a
    worker thread per call)."""
    run: Callable[..., Awaitable[Any]] = lane.call if lane is not None else asyncio.to_thread
    batched: Callable[..., Awaitable[Any]] = lane.call_batched if lane is not None else asyncio.to_thread
    if not admin_token_matches(bearer_token(scope), token):
        return json_answer(401, error_payload(rc.UNAUTHORIZED.code, "this needs Authorization: Bearer <admin token>"),
                           [("www-authenticate", 'Bearer realm="txcl admin"'), ("cache-control", "no-store")])
    found = _OPERATION.match(scope["path"])
    if found is None:
        return json_answer(404, error_payload(rc.NOT_FOUND.code, "no such admin operation"))
    if scope["method"] != "POST":
        return json_answer(405, error_payload(rc.METHOD_NOT_ALLOWED.code, "use POST"), [("allow", "POST")])
    reason = None
    raw = await read_capped_body(receive, MAX_BODY)
    if raw is None:
        return json_answer(400, error_payload(rc.BAD_REQUEST.code, f"the body is at most {MAX_BODY} bytes"))
    if raw.strip():
        try:
            data = json.loads(raw)
        except ValueError:
            return json_answer(400, error_payload(rc.BAD_REQUEST.code, "the body must be JSON: {\"reason\": \"…\"}"))
        if not isinstance(data, dict) or not isinstance(data.get("reason", ""), str):
            return json_answer(400, error_payload(rc.BAD_REQUEST.code, "the body must be {\"reason\": \"…\"}"))
        reason = (data.get("reason") or "").strip()[:500] or None
    ident = found.group(1)
    if found.group(2) == "retry":
        return await _retry(store, ident, run)
    run_id = await run(resolve_run_id, store, ident)
    if run_id is None:
        return json_answer(404, error_payload(rc.UNKNOWN_RUN.code, f"no run {ident}"))
    outcome = await batched(store.cancel_run, run_id, reason=reason)
    return json_answer(200 if outcome == "cancelled" else 409, {"run_id": run_id, "status": outcome})


async def _retry(store: Any, ident: str, run: Callable[..., Awaitable[Any]]) -> Answer:
    result = await run(retry_by_id, store, ident)
    if result is None:
        return json_answer(404, error_payload(rc.UNKNOWN_RUN.code, f"no run {ident}"))
    run_id, outcome = result
    if outcome.outcome == "retried":
        return json_answer(200, {"run_id": run_id, "status": "retried", "units": list(outcome.units),
                                 "calls": outcome.calls})
    body: dict[str, Any] = {"run_id": run_id, "status": outcome.outcome}
    if outcome.reason:
        body["reason"] = outcome.reason
    return json_answer(409, body)


__all__ = ["handle", "PATH"]
