"""`POST /_txc/queues/<name>/claim` — a worker takes jobs from a pull queue (`queue://<name>` ops).

    POST /_txc/queues/resize/claim
    Authorization: Bearer <queue token>
    {"max": 10, "wait": 20, "lease": 60, "worker": "host-7"}     (every field optional)

`max` jobs at most (1–100, default 1); `wait` seconds to wait for one when none is ready (a
long poll; default 0; cut to --queue-max-wait); `lease` seconds the worker holds each job
before it goes back (1 s – 1 h; default --queue-lease); `worker` a name for the traces and the
dashboard.

Answers 200 `{"jobs": [...]}` — each job the body a push worker would be sent (`input`, `_txc`
with `op_continuation_id`, `callback_url`, `expires_at`, `item_index` …) plus `token`, the
job's `idempotency_key`, and `_txc.queue`, `_txc.lease_ms`, `_txc.lease_until`; `[]` when the
wait ended with none. The worker then answers through `callback_url` with the token, exactly
as a push worker: `{"status": "running"}` heartbeats extend the lease, `completed`/`failed`
settle the job — and a callback may ask for the jobs its answer lets out (`?claim=<queue>`,
answered with `jobs` beside its status; see `next_claim_of`), saving the worker a claim per
job. 400 a bad body or queue name, 403 without the queue token (or, when no
--queue-token is set, a claim from another host than this one), 405 not POST, 503 the store
is unavailable (nothing was claimed).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import re
from typing import Any

from txcl import runtime_codes as rc
from txcl.asgi_body import read_capped_body
from txcl.continuations.worker_client import dispatch_body, iso_ms
from txcl.ids import admin_token_matches
from txcl.serve.admin import bearer_token
from txcl.serve.shaping import Answer, error_payload, json_answer, store_unavailable_answer
from txcl.store.errors import StoreUnavailable
from txcl.syntax.targets import QUEUE_NAME

PREFIX = "/_txc/queues/"
_CLAIM = re.compile(r"^/_txc/queues/([^/]+)/claim$")
MAX_BODY = 16 * 1024
MAX_JOBS = 100
_NO_STORE = [("cache-control", "no-store")]


def _error(status: int, code: str, message: str, extra: list[tuple[str, str]] | None = None) -> Answer:
    return json_answer(status, error_payload(code, message), [*_NO_STORE, *(extra or [])])


def _loopback(scope: dict) -> bool:
    client = scope.get("client")
    if not client:
        return False
    try:
        return ipaddress.ip_address(str(client[0]).split("%")[0]).is_loopback
    except ValueError:
        return False


def _number(data: dict, key: str, low: float, high: float, default: float) -> float | str:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        return f"{key} must be a number from {low:g} to {high:g}"
    return float(value)


def parse_claim(raw: bytes, settings: Any) -> dict | str:
    """The claim's fields, or what is wrong with the body."""
    data: Any = {}
    if raw.strip():
        try:
            data = json.loads(raw)
        except ValueError:
            return 'the body must be JSON, such as {"max": 1, "wait": 20}'
    if not isinstance(data, dict):
        return 'the body must be a JSON object, such as {"max": 1, "wait": 20}'
    unknown = sorted(set(data) - {"max", "wait", "lease", "worker"})
    if unknown:
        return f"unknown field {unknown[0]!r}: a claim takes max, wait, lease and worker"
    most = _number(data, "max", 1, MAX_JOBS, 1)
    wait = _number(data, "wait", 0, 3600, 0)
    lease = _number(data, "lease", 1, 3600, settings.queue_lease / 1000)
    for value in (most, wait, lease):
        if isinstance(value, str):
            return value
    if isinstance(most, float) and most != int(most):
        return "max must be a whole number"
    worker = data.get("worker", "")
    if not isinstance(worker, str) or len(worker) > 200:
        return "worker must be a string of at most 200 characters"
    # a longer wait than this server grants is cut to its --queue-max-wait (the answer is then [])
    return {"max": int(most), "wait": min(float(wait), settings.queue_max_wait / 1000),
            "lease_ms": int(float(lease) * 1000), "worker": worker}


def job_of(dispatch: Any, lease_until_ms: int, lease_ms: int, base_url: str | None) -> dict:
    """One claimed job as the worker receives it."""
    body = dispatch_body(dispatch, base_url)
    body["_txc"].update(queue=dispatch.exec_target[len("queue://"):], lease_ms=lease_ms,
                        lease_until=iso_ms(lease_until_ms))
    body["token"] = dispatch.token
    body["idempotency_key"] = dispatch.idempotency_key
    return body


def claim_refusal(scope: dict, token: str | None, presented: str | None) -> Answer | None:
    """403 unless the claim may be made: the queue token presented when one is set, else a
    client on this host."""
    if token is not None:
        if not admin_token_matches(presented, token):
            return _error(403, rc.QUEUE_REFUSED.code, "a claim needs Authorization: Bearer <queue token>",
                          [("www-authenticate", 'Bearer realm="txcl queues"')])
    elif not _loopback(scope):
        return _error(403, rc.QUEUE_REFUSED.code, "claims from other hosts need a queue token: start txcl serve "
                                                  "with --queue-token (or queue_token in txcl.toml)")
    return None


def next_claim_of(service: Any, scope: dict, query: Any, headers: Any) -> tuple[str, int, str, int] | None:
    """A worker's callback may ask for the jobs its answer lets out (`?claim=<queue>&max=N`,
    optionally `&lease=<seconds>&worker=<name>`; the queue token in `X-Txcl-Queue-Token` when
    one is set): (queue, lease ms, claimant, max) for the admission to lease them with, or None
    when not asked or not allowed (the answer itself stands either way)."""
    name = query.get("claim")
    if not name or not QUEUE_NAME.fullmatch(name):
        return None
    settings = service.settings
    if claim_refusal(scope, settings.queue_token, headers.get("x-txcl-queue-token")) is not None:
        return None
    try:
        most = max(1, min(int(query.get("max", "1")), MAX_JOBS))
        lease_ms = int(float(query["lease"]) * 1000) if "lease" in query else settings.queue_lease
    except ValueError:
        return None
    if not 1_000 <= lease_ms <= 3_600_000:
        return None
    claimant = (query.get("worker") or str((scope.get("client") or ("?",))[0]))[:200]
    return name, lease_ms, claimant, most


async def handle_claim(scope: dict, receive: Any, service: Any) -> Answer:
    """The answer to one claim (see the module docstring)."""
    settings = service.settings
    refused = claim_refusal(scope, settings.queue_token, bearer_token(scope))
    if refused is not None:
        return refused
    found = _CLAIM.match(scope["path"])
    if found is None:
        return _error(404, rc.NOT_FOUND.code, "a claim is POST /_txc/queues/<name>/claim")
    name = found.group(1)
    if not QUEUE_NAME.fullmatch(name):
        return _error(400, rc.BAD_CLAIM.code, f"{name!r} is not a queue name (letters, digits, _, - and .)")
    if scope["method"] != "POST":
        return _error(405, rc.METHOD_NOT_ALLOWED.code, "use POST", [("allow", "POST")])
    raw = await read_capped_body(receive, MAX_BODY)
    if raw is None:
        return _error(400, rc.BAD_CLAIM.code, f"a claim's body is at most {MAX_BODY} bytes")
    claim = parse_claim(raw, settings)
    if isinstance(claim, str):
        return _error(400, rc.BAD_CLAIM.code, claim)
    claimant = claim["worker"] or f"{(scope.get('client') or ('?',))[0]}"
    gone = asyncio.Event()

    async def watch() -> None:  # the body is read: the next message is the client leaving
        while (await receive())["type"] != "http.disconnect":
            pass
        gone.set()

    watcher = asyncio.ensure_future(watch())
    try:
        jobs = await service.queues.claim(name, lease_ms=claim["lease_ms"], claimant=claimant,
                                          limit=claim["max"], wait_s=claim["wait"], gone=gone)
    except StoreUnavailable as exc:
        return store_unavailable_answer(exc)
    finally:
        watcher.cancel()
    base = service.callback_base_url
    return json_answer(200, {"jobs": [job_of(d, until, claim["lease_ms"], base) for d, until in jobs]}, _NO_STORE)


__all__ = ["handle_claim", "next_claim_of", "claim_refusal", "PREFIX", "parse_claim", "job_of"]
