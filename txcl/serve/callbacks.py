"""`POST /_txc/continuations/op/<opc>/complete` — the worker callback.

Answers, checked in this order (no answer before the admitting transaction committed; a
non-2xx answer leaves the store unchanged, except that an open interaction found past its
deadline is timed out):

A body `{"status": "running", "progress": {…}}` is a heartbeat (WITH heartbeat): answered 200
`{"cancelled": false}` — `true` once the flow gave up on the op (410 for a job claimed from a
pull queue) — and never a completion. A heartbeat of a claimed job also extends its lease.

    404 unknown opc · 401 missing/wrong token (compared hashed, in constant time) ·
    413 body over --callback-max-bytes · 400 not JSON / unknown status / non-object output
    for a non-itemized op without `into` · 410 cancelled · 410 expired · 410 superseded (the
    token of an attempt that was retried) · 200 retrying (a retryable failure, sent again) · 200 duplicate ·
    409 conflicting completion (the first is kept) · 200 resumed (200 failed: the admitted failure
    failed its op, and the run goes on to fail) · 200 recorded ·
    503 store unavailable (Retry-After) · 500 unexpected

A won release is driven in a background task of this process (or handed to the parking
request when it is still answering), never inside the callback request.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from txcl import runtime_codes as rc
from txcl.continuations.acks import mark_then
from txcl.serve.shaping import Answer, error_payload, json_answer, store_unavailable_answer
from txcl.store.errors import StoreUnavailable

log = logging.getLogger("txcl.serve")

_NO_STORE = [("cache-control", "no-store")]


def _answer(status: int, payload: Any, extra: list[tuple[str, str]] | None = None) -> Answer:
    return json_answer(status, payload, [*_NO_STORE, *(extra or [])])


def _error(status: int, code: str, message: str, **details: Any) -> Answer:
    """Every error answer of txcl serve has one shape: `{"error": {"code", "message", …}}`."""
    return _answer(status, error_payload(code, message, **details))


def presented_token(headers: Any) -> str | None:
    """`Authorization: Bearer <token>` or `X-Txco-Continuation-Token: <token>`."""
    auth = headers.get("authorization")
    if auth:
        scheme, _, value = auth.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
    token = headers.get("x-txco-continuation-token")
    return token.strip() if token else None


class _TooLarge(Exception):
    pass


# A body over the cap is still read (and dropped) up to this much more, so the worker, busy
# sending it, gets to read the 413 instead of a connection closed under it (a broken pipe).
DRAIN_MAX = 16 * 1024 * 1024


async def _drain(stream: Any, already: int) -> None:
    async for chunk in stream:
        already += len(chunk)
        if already > DRAIN_MAX:
            return


async def read_capped(request: Any, cap: int) -> bytes:
    """The body, or _TooLarge (having drained a body not too far over the cap)."""
    stream = request.stream()
    try:
        declared = int(request.headers.get("content-length") or -1)
    except ValueError:
        declared = -1  # unreadable: the body is counted as it streams
    if declared > cap:
        if declared <= cap + DRAIN_MAX:
            await _drain(stream, 0)
        raise _TooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in stream:
        size += len(chunk)
        if size > cap:
            await _drain(stream, size - cap)
            raise _TooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def parse_completion(body: bytes, unit: Any) -> tuple[str, Any] | str:
    """(status, payload) of a callback body, or the 400 reason. A failure the worker marks
    `"retryable": true` has the status ``failed-retryable`` (sent again under WITH retries)."""
    from txcl.runtime_codes import normalize_error
    from txcl.values.jsonio import JsonError, loads

    try:
        data = loads(body.decode("utf-8"))
    except JsonError as exc:
        return f"body is not valid JSON: {exc}".replace(": invalid JSON", "")
    except (UnicodeDecodeError, ValueError):
        return "body is not valid JSON"
    if not isinstance(data, dict):
        return "body must be a JSON object"
    status = data.get("status")
    if status == "completed":
        output = data.get("output", {})
        if output is None and "output" not in data:
            output = {}
        itemized = unit is not None and unit.kind == "itemized"
        has_into = unit is not None and bool(unit.into)
        if not itemized and not has_into and not isinstance(output, dict):
            return "output must be a JSON object for an op without into"
        return "completed", output
    if status in ("failed", "fail"):
        return "failed-retryable" if data.get("retryable") is True else "failed", normalize_error(data.get("error"))
    if status == "running":  # a heartbeat, never a completion
        progress = data.get("progress")
        if progress is not None and not isinstance(progress, dict):
            return "progress must be a JSON object"
        return "running", progress
    valid = '"completed", "failed" or "running"'
    if isinstance(status, str):
        from txcl.suggest import did_you_mean

        close = did_you_mean(status, ["completed", "failed", "running"])
        return f"unknown status {status!r}: the status is {valid}" + (f' (did you mean "{close}"?)' if close else "")
    return f"status is missing: give {valid}"


def check_and_admit(store: Any, opc: str, token: str | None, body: bytes | None, cap: int,
                    pending_acks: Any = None, next_claim: tuple | None = None,
                    handed: list | None = None) -> Any:
    """The checks of a callback (unknown opc 404, bad token 401, body too large 413, bad body
    400), then the admission and its continuation: an `Answer` for a rejected request, else
    ``admit_and_continue``'s (AdmitResult, release). One store call (a read, then at most one
    write transaction), so it runs on the service's store lane and may share its commit with
    other admissions. `body` None: over the cap."""
    target = store.check_callback(opc, token)
    rejected = _rejection(target.outcome)
    if rejected is not None:
        return rejected
    if body is None:
        return _error(413, rc.BODY_TOO_LARGE.code, "body too large", limit=cap)
    parsed = parse_completion(body, target.unit)
    if isinstance(parsed, str):
        return _error(400, rc.BAD_CALLBACK.code, parsed)
    status, payload = parsed
    if status == "running":
        pulled = (getattr(target.unit, "exec_target", None) or "")[:8].lower() == "queue://"
        return heartbeat_answer(store.record_heartbeat(opc, token, payload), pulled=pulled)
    retryable = status == "failed-retryable"
    admit = functools.partial(store.admit_and_continue, opc, "failed" if retryable else status, payload,
                              source="callback", token=token, retryable=retryable)
    # the worker's ack, when still held back by this process, is written in the same transaction
    held = pending_acks.take(opc) if pending_acks is not None else None
    if next_claim is None:
        return mark_then(held, admit)
    return store.run_together(lambda: _admit_and_hand_over(store, mark_then(held, admit), next_claim, handed))


def _admit_and_hand_over(store: Any, result: Any, next_claim: tuple, handed: list | None) -> Any:
    """In the admission's transaction: the jobs of `next_claim`'s queue that the admission let
    out (an itemized op's next items) leased at once to the worker whose answer this is; they
    are kept out of what the admission sends (`handed` receives them)."""
    from txcl.store.procedures.continuations.queues import queue_of
    from txcl.store.records import evolve

    admit, release = result
    queue = next_claim[0]
    mine = [d for d in admit.dispatches if queue_of(d.exec_target) == queue]
    if not mine:
        return result
    taken = store.hand_over_jobs([(d.opc, queue) for d in mine], [next_claim])[0]
    if handed is not None:
        handed.extend(taken)
    gone = {d.opc for d, _ in taken}
    return evolve(admit, dispatches=tuple(d for d in admit.dispatches if d.opc not in gone)), release


def _rejection(outcome: str) -> Answer | None:
    """The error answer of a callback or heartbeat the store turned away (None: it did not)."""
    if outcome == "unknown":
        return _error(404, rc.UNKNOWN_OP_CONTINUATION.code, "unknown op continuation")
    if outcome == "bad_token":
        return _error(401, rc.BAD_TOKEN.code, "bad token")
    if outcome in ("cancelled", "expired", "superseded"):  # superseded: a retried call's earlier token
        return _error(410, rc.GONE.code, "the op continuation is gone", reason=outcome)
    return None


def heartbeat_answer(outcome: str, *, pulled: bool = False) -> Answer:
    """The answer to a heartbeat: 200 with `cancelled` (so a worker learns the flow gave up);
    for a job claimed from a pull queue, 410 (its worker holds a lease, not a connection txcl
    can call: the refusal tells it to stop)."""
    if outcome == "cancelled":
        if pulled:
            return _answer(410, {**error_payload(rc.GONE.code, "the job was cancelled", reason="cancelled"),
                                 "cancelled": True})
        return _answer(200, {"status": "cancelled", "cancelled": True})
    rejected = _rejection(outcome)
    if rejected is not None:
        return rejected
    return _answer(200, {"status": "running" if outcome == "alive" else outcome, "cancelled": False})


async def handle_callback(service: Any, request: Any, opc: str) -> Answer:
    """Every answer of the callback endpoint for one request (see docs/continuations.md)."""
    token = presented_token(request.headers)
    cap = service.settings.callback_max_bytes
    try:
        body: bytes | None = await read_capped(request, cap)
    except _TooLarge:
        body = None  # answered 413 unless the opc or token is wrong (rows 1–2 come first)
    next_claim = None
    query = getattr(request, "query_params", None) or {}  # (`txcl test` delivers answers without one)
    if "claim" in query:  # a pull worker asks for the jobs its answer lets out
        from txcl.serve.queues import next_claim_of

        next_claim = next_claim_of(service, request.scope, query, request.headers)
    handed: list = []
    answer = await admit_callback(service, opc, token, body, next_claim, handed)
    if handed and answer.status == 200:
        from txcl.serve.queues import job_of
        from txcl.values.jsonio import loads

        jobs = [job_of(d, until, next_claim[1], service.callback_base_url) for d, until in handed]
        return _answer(200, {**loads(answer.body.decode("utf-8")), "jobs": jobs})
    return answer


async def admit_callback(service: Any, opc: str, token: str | None, body: bytes | None,
                         next_claim: tuple | None = None, handed: list | None = None) -> Answer:
    """A worker's answer (`body`, None when over the cap) admitted and continued, as the answer
    the callback endpoint gives; brokered transports (txcl.serve.natslink) deliver through it too.
    `next_claim` (queue, lease, claimant, max): the jobs of that queue the admission lets out are
    leased to this worker in the same transaction and put in `handed`."""
    store = service.store
    cap = service.settings.callback_max_bytes
    try:
        checked = await service.call_admitting_on(service.run_of(opc), check_and_admit, store, opc, token, body,
                                                  cap, service.pending_acks, next_claim, handed)
        if isinstance(checked, Answer):
            return checked
        admit, release = service.admitted(*checked)
    except StoreUnavailable as exc:  # nothing lost: the worker sends the same callback again
        log.warning("txcl: callback %s: %s", opc, exc)
        return store_unavailable_answer(exc)
    except Exception:  # noqa: BLE001 - never a traceback to a worker
        log.exception("txcl: callback %s failed", opc)
        return _error(500, rc.INTERNAL_ERROR.code, "internal error; see the server log")
    outcome = admit.outcome
    rejected = _rejection(outcome)
    if rejected is not None:
        return rejected
    if outcome == "duplicate":
        if release is not None and release.won and release.claim is not None:  # the first delivery's continuation never ran
            service.start_resume(release.claim)
            return _answer(200, {"status": "resumed", "duplicate": True})
        return _answer(200, {"status": "recorded", "duplicate": True})
    if outcome == "conflict":
        return _error(409, rc.CONFLICTING_COMPLETION.code, "conflicting completion: the first outcome is kept")
    if outcome == "retrying":  # WITH retries: the call is sent again (a new token); this one is done
        return _answer(200, {"status": "retrying"})
    if release is not None and release.won and release.claim is not None:
        service.start_resume(release.claim)
        # a failure that failed its op: the run goes on only to fail (or to its on_item_error
        # handling); "resumed" would read as a success to the worker's operator
        return _answer(200, {"status": "failed" if release.unit_status == "failed" else "resumed"})
    return _answer(200, {"status": "recorded"})
