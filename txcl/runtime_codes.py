"""The runtime error-code table: every ``txcl_*`` code a request, a run or the server answers.

:mod:`txcl.codes` holds the codes of diagnostics about rule files (``TX…``); this module holds
the codes of errors at run time — what a client finds in ``{"error": {"code": …}}``, what a
failed run records, what a worker's callback is told. Each entry names its HTTP status, its
message template and a line of documentation; the reference page ``docs/reference/
runtime-errors.md`` is generated from this table, and a test keeps ``txcl_*`` literals out of
the rest of the code, so every place that raises or answers a code uses its entry.
"""

from __future__ import annotations

from typing import Any

import attrs


@attrs.frozen
class RuntimeCode:
    code: str
    http_status: int
    template: str  # the message, with {named} fields
    doc: str

    def message(self, **fields: Any) -> str:
        return self.template.format(**fields) if fields else self.template

    def error(self, message: str | None = None, **details: Any) -> dict:
        """``{"code": …, "message": …, **details}`` (the template's text unless ``message``)."""
        return {"code": self.code, "message": self.template if message is None else message, **details}



_BY_CODE: dict[str, RuntimeCode] = {}


def _entry(code: str, http_status: int, template: str, doc: str) -> RuntimeCode:
    entry = RuntimeCode(code, http_status, template, doc)
    if code in _BY_CODE:
        raise ValueError(f"runtime code {code} defined twice")
    _BY_CODE[code] = entry
    return entry


# --- a request's walk -------------------------------------------------------------------------
REQUEST_DEADLINE = _entry("txcl_request_deadline", 503, "the request took longer than its deadline",
                          "The whole request ran past `request_deadline` (a setting); nothing after that point ran.")
BAD_GOTO = _entry("txcl_bad_goto", 500, 'invalid @goto target "{target}"',
                  "An op answered with an `@goto` that names no stack, or a malformed one.")
GOTO_FORBIDDEN = _entry("txcl_goto_forbidden", 500, '@goto into system stack "{stack}" is not allowed',
                        "An op answered with an `@goto` into a system stack (`_sys/…`: a stack under a folder whose name starts with `_`).")
SCOPE_TTL_EXHAUSTED = _entry("txcl_scope_ttl_exhausted", 500, "the scope budget of the request ran out",
                             "The request visited more scopes than its budget allows (a `@goto` cycle, most often).")
VALUE_TOO_DEEP = _entry("txcl_value_too_deep", 400, "a value nests deeper than {limit} levels",
                        "A JSON value (a request body, an op's answer) nests deeper than the depth limit.")
UNKNOWN_STACK = _entry("txcl_unknown_stack", 500, "no stack {stack}",
                       "The request or a `@goto` names a stack the OPS tree does not have.")
CONTINUABLE_INVALID = _entry("txcl_continuable_invalid", 500, "the continuable op's answer is not valid",
                             "A continuable op (`mode = \"continuable\"`) answered something that is neither a "
                             "result nor a continuation.")
BAD_RESPONSE_STATUS = _entry("txcl_bad_response_status", 500, "the flow set an HTTP status that is not one",
                             "The envelope's `_txc.response.status` is not an integer HTTP status.")
BAD_RESPONSE_BODY = _entry("txcl_bad_response_body", 500, "the flow's response body cannot be sent",
                           "The envelope's response body is not text, bytes or JSON.")
INVALID_INPUT = _entry("txcl_invalid_input", 422, "the input does not match the $defs.input of the stack's schema",
                       "The request body fails the stack's `schema.json` `$defs.input` (with validation on).")
INVALID_OUTPUT = _entry("txcl_invalid_output", 500, "the answer does not match the $defs.output of the stack's schema",
                        "The flow's answer fails the stack's `schema.json` `$defs.output` (with validation on).")

EGRESS_DENIED = _entry("txcl_egress_denied", 502, "rule {rule}: {detail}",
                       "An op, an async dispatch or a cancel call was refused by the egress policy: its target "
                       "resolves to a link-local or cloud metadata address, to a private or loopback address the "
                       "`[egress]` settings refuse, or is on the deny list. The op fails like any op error; the "
                       "message names the rule, the host and the address.")


def egress_denied_message(rule: str, denial: Any) -> str:
    """`txcl_egress_denied: rule shop/charge: egress to … refused: …` (the op error's text)."""
    return f"{EGRESS_DENIED.code}: {EGRESS_DENIED.message(rule=rule, detail=denial)}"


# --- durable runs ---------------------------------------------------------------------------
OP_FAILED = _entry("txcl_op_failed", 502, "the async op failed",
                   "An awaited op failed (its worker answered `failed`, or its call could not be sent).")
JOIN_FAILED = _entry("txcl_join_failed", 502, "deferred op {op} {status}: {detail}",
                     "A deferred op (`join_at_scope`) failed, timed out or was cancelled before its join.")
JOIN_DEADLINE = _entry("txcl_join_deadline", 504, "deferred op {op} was not ready by its join_deadline{after}",
                       "A deferred op was not ready by its `WITH join_deadline` (and `on_join_deadline` is not "
                       "`\"continue\"`).")
HEARTBEAT_MISSED = _entry("txcl_heartbeat_missed", 502,
                          "{what}the worker sent no heartbeat for {seconds}s (WITH heartbeat)",
                          "A call under `WITH heartbeat` went a whole period without a heartbeat from its worker.")
LEASE_EXPIRED = _entry("txcl_lease_expired", 502,
                       "the worker that claimed the job from queue {queue} did not answer or heartbeat "
                       "within its {seconds}s lease",
                       "A job of a `queue://` op was claimed, but its worker neither answered nor extended "
                       "the lease in time; under `WITH retries` the job goes back to its queue.")
QUEUE_REFUSED = _entry("txcl_queue_refused", 403, "{reason}",
                       "A claim from a pull queue without the queue token (set `queue_token`), or from "
                       "another host while no token is set.")
BAD_CLAIM = _entry("txcl_bad_claim", 400, "{reason}",
                   "A claim from a pull queue whose body or queue name is not valid.")
RUN_EXPIRED = _entry("txcl_run_expired", 502, "the run expired before it finished",
                     "A durable run was still waiting when its deadline passed.")
RUN_LOST = _entry("txcl_run_lost", 503, "the resume failed {attempts} times",
                  "Every attempt to resume the run went stale (its process stopped), up to the limit.")
RUN_FAILED = _entry("txcl_run_failed", 502, "the run failed",
                    "A durable run failed without an error of its own to report (its reason says why).")
RESUME_FAILED = _entry("txcl_resume_failed", 502, "the resume of the run failed",
                       "A resume raised before it could finish the run.")
RUN_CANCELLED = _entry("txcl_run_cancelled", 502, "the run was cancelled",
                       "An operator cancelled the run (`txcl runs cancel`, or the admin endpoint).")
STORE_UNAVAILABLE = _entry("txcl_store_unavailable", 503, "the database is unavailable; retry later",
                           "The run store cannot be reached right now; nothing was lost, and the same request may "
                           "be sent again (the answer carries Retry-After).")

# --- callbacks and polls ------------------------------------------------------------------------
UNKNOWN_OP_CONTINUATION = _entry("txcl_unknown_op_continuation", 404, "unknown op continuation",
                                 "A callback or heartbeat names an op continuation id the store does not know.")
UNKNOWN_CONTINUATION = _entry("txcl_unknown_continuation", 404, "unknown continuation, or it has expired",
                              "A poll names a run continuation id the store does not know (or it was purged).")
BAD_TOKEN = _entry("txcl_bad_token", 401, "bad token",
                   "A callback's `X-Txco-Continuation-Token` is not the call's token.")
GONE = _entry("txcl_gone", 410, "the op continuation is gone",
              "A callback for a call the run no longer waits for (cancelled, expired, timed out or superseded "
              "by a retry).")
BAD_CALLBACK = _entry("txcl_bad_callback", 400, "the callback body is not valid",
                      "A callback's body is not the JSON the protocol asks for.")
CONFLICTING_COMPLETION = _entry("txcl_conflicting_completion", 409,
                                "conflicting completion: the first outcome is kept",
                                "A second callback for one call carries a different outcome than the first.")
BODY_TOO_LARGE = _entry("txcl_body_too_large", 413, "body too large",
                        "A request or callback body exceeds the size limit.")

# --- the server -----------------------------------------------------------------------------------
INTERNAL_ERROR = _entry("txcl_internal_error", 500, "internal error; see the server log",
                        "Something failed inside txcl; the server log has the details.")
SHUTTING_DOWN = _entry("txcl_shutting_down", 503, "the server is shutting down",
                       "The server stopped taking requests; send it again to another node or later.")
METHOD_NOT_ALLOWED = _entry("txcl_method_not_allowed", 405, "method not allowed",
                            "The endpoint takes another HTTP method (the answer's Allow header names it).")
UNAUTHORIZED = _entry("txcl_unauthorized", 401, "this needs Authorization: Bearer <admin token>",
                      "An admin endpoint was called without the admin token.")
FORBIDDEN = _entry("txcl_forbidden", 403, "forbidden",
                   "The dashboard refused an action not sent from its own page.")
NOT_FOUND = _entry("txcl_not_found", 404, "not found", "No such endpoint or admin operation.")
BAD_REQUEST = _entry("txcl_bad_request", 400, "bad request", "The request's body or arguments are not valid.")
UNKNOWN_RUN = _entry("txcl_unknown_run", 404, "no such run", "The run named does not exist (or was purged).")
BREAKPOINTS_OFF = _entry("txcl_breakpoints_off", 403, "request breakpoints are off on this server",
                         "A request asked for ?_txc.break=<scope>, which only a server started with "
                         "--debug-breakpoints honours.")
BAD_BREAKPOINT = _entry("txcl_bad_breakpoint", 400, "?_txc.break must be a scope (200) or a stage (shop/200)",
                        "The value of ?_txc.break is neither a scope number nor <stack>/<scope>.")
MISDIRECTED_REQUEST = _entry("txcl_misdirected_request", 421, "misdirected request",
                             "The dashboard was reached under a Host it does not serve (DNS rebinding guard).")



# --- the errors durable runs record ------------------------------------------------------------
# (an item's own error inside its op's, a timeout and a tolerance overrun carry no code of their
# own: the run's error — txcl_op_failed, txcl_join_failed … — does)


def error_text(error: Any) -> str:
    """The message of an error object (or the error itself when it is text)."""
    if isinstance(error, dict):
        message = error.get("message")
        if isinstance(message, str):
            return message
    if isinstance(error, str):
        return error
    from txcl.values.jsonio import dumps

    return dumps(error)


def normalize_error(error: Any) -> dict:
    """A worker's ``error``: an object as is, a string as ``{"message": s}``, absent → default."""
    if isinstance(error, dict):
        return error
    if isinstance(error, str):
        return {"message": error}
    if error is None:
        return {"message": "worker reported failure"}
    from txcl.values.jsonio import dumps

    return {"message": dumps(error)}


def item_failed_error(itemized: bool, item_index: int, detail: Any) -> Any:
    """A unit that failed fast because of its item ``item_index`` (a unary op: its own error)."""
    if not itemized:
        return detail
    message = detail.get("message") if isinstance(detail, dict) else detail
    return {"message": f"item {item_index} failed: {message}", "item_index": item_index, "detail": detail}


def too_many_failures_error(failed: int, expected: int, bound: str, first_index: int, first_detail: Any) -> dict:
    """A tolerating unit whose failed items exceed its ``tolerated_failures``."""
    return {"message": f"{failed} of {expected} items failed, more than tolerated_failures = {bound} allows "
                       f"(item {first_index}: {error_text(first_detail)})",
            "failed_items": failed, "item_index": first_index, "detail": first_detail}


def timeout_error(itemized: bool, item_index: int) -> dict:
    """A call whose deadline passed."""
    return {"message": f"item {item_index} timed out" if itemized else "timed out", "timeout": True}


def heartbeat_missed_error(itemized: bool, item_index: int, every_ms: int) -> dict:
    what = f"item {item_index}: " if itemized else ""
    return HEARTBEAT_MISSED.error(HEARTBEAT_MISSED.message(what=what, seconds=f"{every_ms / 1000:g}"),
                                  timeout=True, heartbeat_ms=every_ms)


def lease_expired_error(queue: str, lease_ms: int) -> dict:
    return LEASE_EXPIRED.error(LEASE_EXPIRED.message(queue=queue, seconds=f"{lease_ms / 1000:g}"),
                               queue=queue, lease_ms=lease_ms)


def join_failed_error(op: str, unit_id: str, status: str, error: Any) -> dict:
    """The run's error when a deferred op failed (its worker's error attached)."""
    words = status.replace("_", " ")
    detail = error if error is not None else {"message": words}
    return JOIN_FAILED.error(JOIN_FAILED.message(op=op, status=words, detail=error_text(detail)),
                             op=op, unit_id=unit_id, detail=detail)


def join_deadline_error(op: str, unit_id: str, written: str | None) -> dict:
    """The run's error when a deferred op was not ready by its ``join_deadline``."""
    after = f" ({written} after its dispatch)" if written else ""
    return JOIN_DEADLINE.error(JOIN_DEADLINE.message(op=op, after=after), op=op, unit_id=unit_id)


def expiry_error(reason: str, detail: Any) -> dict:
    """A run that expired (``reason``: ``expired``, ``timed_out`` or ``heartbeat_missed``)."""
    if reason == "heartbeat_missed" and isinstance(detail, dict) and isinstance(detail.get("error"), dict):
        return {**detail["error"], "unit_id": detail.get("unit_id"), "opc": detail.get("opc")}
    error = RUN_EXPIRED.error()
    if isinstance(detail, dict):
        error.update(detail)
    return error


def resume_exhausted_error(attempts: int) -> dict:
    return RUN_LOST.error(RUN_LOST.message(attempts=attempts))


def run_error_payload(record: Any) -> dict:
    """The error payload of a failed or expired run record (`{"error": {...}}`), as `txcl run`
    prints it and a rule test compares it."""
    error = record.error if record.error is not None else {"message": record.fail_reason or record.status}
    if isinstance(error, dict) and ("code" in error and ("fuel_used" in error or "ttl" in error)):
        return error  # a budget payload is already top level
    if record.status == "expired" and isinstance(error, dict):
        error = {"code": RUN_EXPIRED.code, **error}
    return {"error": error}


def all_codes() -> tuple[RuntimeCode, ...]:
    return tuple(_BY_CODE.values())


__all__ = ["RuntimeCode", "all_codes", "error_text", "normalize_error", "item_failed_error",
           "too_many_failures_error", "timeout_error", "heartbeat_missed_error", "join_failed_error",
           "join_deadline_error", "expiry_error", "resume_exhausted_error", "run_error_payload"] + [name for name, value in list(globals().items())
                                                     if isinstance(value, RuntimeCode)]
