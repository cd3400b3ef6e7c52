"""The decisions and error texts of durable runs, stated once.

The store applies them (it is given :data:`POLICY`) but does not own them: how a worker's
answer becomes an item's outcome, which failures fail a unit at once, and the error objects
written for failed units, timeouts, expiry, stale resumes and failed joins.
"""

from __future__ import annotations

from txcl.store.records import (
    InteractionRecord,
    ItemErrorPolicy,
    JsonValue,
    Materialized,
    TerminalRecord,
    UnitKind,
    UnitRecord,
)

JOIN_FAILED = "txcl_join_failed"
RUN_EXPIRED = "txcl_run_expired"
RUN_LOST = "txcl_run_lost"
OP_FAILED = "txcl_op_failed"
RESUME_FAILED = "txcl_resume_failed"
HEARTBEAT_MISSED = "txcl_heartbeat_missed"
JOIN_DEADLINE = "txcl_join_deadline"
MAX_RETRIES = 100
RETRY_BACKOFF_MS = 1_000
MAX_RETRY_WAIT_MS = 600_000


def error_text(error: JsonValue) -> str:
    """The message of an error object (or the error itself when it is text)."""
    if isinstance(error, dict):
        message = error.get("message")
        if isinstance(message, str):
            return message
    if isinstance(error, str):
        return error
    from txcl.values.jsonio import dumps

    return dumps(error)


def normalize_error(error: JsonValue) -> dict:
    """A worker's ``error``: an object as is, a string as ``{"message": s}``, absent → default."""
    if isinstance(error, dict):
        return error
    if isinstance(error, str):
        return {"message": error}
    if error is None:
        return {"message": "worker reported failure"}
    from txcl.values.jsonio import dumps

    return {"message": dumps(error)}


class ContinuationPolicy:
    """The :class:`txcl.store.protocol.StorePolicy` of txcl."""

    def materialize(self, unit: UnitRecord, interaction: InteractionRecord, terminal: TerminalRecord
                    ) -> Materialized:
        """Item outputs are sanitised as untrusted here; a unary output is sanitised after its
        ``into`` by the op's tail, local and sync outputs by their transport."""
        if terminal.status == "completed":
            output = terminal.payload
            if unit.kind == "itemized" and isinstance(output, dict):
                from txcl.values.reserved import sanitize_untrusted

                output, _ = sanitize_untrusted(output)
            return Materialized("succeeded", output=output)
        return Materialized("failed", error=normalize_error(terminal.payload))

    def fails_fast(self, kind: UnitKind, on_item_error: ItemErrorPolicy) -> bool:
        """A sync sibling is best effort; an itemized op with ``on_item_error = "collect"``
        (or ``"tolerate"``, within its bound) keeps every item's outcome; everything else
        fails at its first failure."""
        return kind != "sync" and not (kind == "itemized" and (on_item_error == "collect"
                                                                or on_item_error.startswith("tolerate:")))

    def tolerated(self, on_item_error: ItemErrorPolicy, expected: int) -> int | None:
        """How many failed items an ``on_item_error = "tolerate"`` unit of `expected` items
        accepts (None for the other policies). A percentage rounds down."""
        if not on_item_error.startswith("tolerate:"):
            return None
        bound = on_item_error[len("tolerate:"):]
        try:
            if bound.endswith("%"):
                return int(expected * float(bound[:-1]) / 100.0)
            return int(bound)
        except ValueError:
            return 0

    def too_many_failures_error(self, failed: int, expected: int, on_item_error: ItemErrorPolicy,
                                first_index: int, first_detail: JsonValue) -> JsonValue:
        bound = on_item_error[len("tolerate:"):]
        return {"message": f"{failed} of {expected} items failed, more than tolerated_failures = {bound} allows "
                           f"(item {first_index}: {error_text(first_detail)})",
                "failed_items": failed, "item_index": first_index, "detail": first_detail}

    def unit_failed_error(self, kind: UnitKind, item_index: int, detail: JsonValue) -> JsonValue:
        if kind != "itemized":
            return detail
        message = detail.get("message") if isinstance(detail, dict) else detail
        return {"message": f"item {item_index} failed: {message}", "item_index": item_index, "detail": detail}

    def timeout_error(self, kind: UnitKind, item_index: int) -> JsonValue:
        return {"message": f"item {item_index} timed out" if kind == "itemized" else "timed out", "timeout": True}

    def heartbeat_every_ms(self, directives: JsonValue) -> int | None:
        """``WITH heartbeat``: how often the worker must say it is alive (None: not asked)."""
        from txcl.values.coerce import duration_to_ms

        raw = directives.get("heartbeat") if isinstance(directives, dict) else None
        ms = duration_to_ms(raw) if raw is not None else None
        return ms if ms is not None and ms > 0 else None

    def heartbeat_missed_error(self, kind: UnitKind, item_index: int, every_ms: int) -> JsonValue:
        what = f"item {item_index}: " if kind == "itemized" else ""
        return {"code": HEARTBEAT_MISSED,
                "message": f"{what}the worker sent no heartbeat for {every_ms / 1000:g}s (WITH heartbeat)",
                "timeout": True, "heartbeat_ms": every_ms}

    def retries_of(self, directives: JsonValue) -> tuple[int, int]:
        """``WITH retries = N, retry_backoff = "1s"``: how often a failed call is sent again
        (0 to 100; 0 when absent or invalid) and the first wait (default 1 s)."""
        from txcl.values.coerce import duration_to_ms

        if not isinstance(directives, dict):
            return 0, RETRY_BACKOFF_MS
        raw = directives.get("retries")
        count = raw if isinstance(raw, int) and not isinstance(raw, bool) and 0 <= raw <= MAX_RETRIES else 0
        backoff = directives.get("retry_backoff")
        ms = duration_to_ms(backoff) if backoff is not None else None
        return count, ms if ms is not None and ms >= 0 else RETRY_BACKOFF_MS

    def retry_delay_ms(self, backoff_ms: int, retries_done: int) -> int:
        """The wait before retry number ``retries_done + 1``: ``backoff`` doubled per retry
        already done, at most 10 minutes, plus up to a quarter of jitter."""
        import random

        delay = min(backoff_ms * (2 ** min(retries_done, 30)), MAX_RETRY_WAIT_MS)
        return delay + random.randint(0, delay // 4)

    def cancel_url_of(self, directives: JsonValue) -> str | None:
        """``WITH cancel_url``: where to POST a cancellation when the flow gives up on a call
        (a worker's ack may name its own, which then wins)."""
        from txcl.continuations.worker_client import usable_cancel_url

        url = directives.get("cancel_url") if isinstance(directives, dict) else None
        return url if usable_cancel_url(url) else None

    def passes_over_at_join_deadline(self, directives: JsonValue) -> bool:
        """``WITH on_join_deadline = "continue"``: a deferred op not ready by its join deadline
        is passed over (the join scope runs without it) instead of failing the run."""
        return isinstance(directives, dict) and directives.get("on_join_deadline") == "continue"

    def join_deadline_error(self, unit: UnitRecord) -> JsonValue:
        """The run's error when a deferred op was not ready by its ``join_deadline``."""
        raw = unit.directives.get("join_deadline") if isinstance(unit.directives, dict) else None
        after = f" ({raw} after its dispatch)" if isinstance(raw, str) else ""
        return {"code": JOIN_DEADLINE,
                "message": f"deferred op {unit.op_name} was not ready by its join_deadline{after}",
                "op": unit.op_name, "unit_id": unit.unit_id}

    def expiry_error(self, reason: str, detail: JsonValue) -> JsonValue:
        if reason == "heartbeat_missed" and isinstance(detail, dict) and isinstance(detail.get("error"), dict):
            return {**detail["error"], "unit_id": detail.get("unit_id"), "opc": detail.get("opc")}
        error: dict = {"code": RUN_EXPIRED, "message": "the run expired before it finished"}
        if isinstance(detail, dict):
            error.update(detail)
        return error

    def resume_exhausted_error(self, attempts: int) -> JsonValue:
        return {"code": RUN_LOST, "message": f"the resume failed {attempts} times"}

    def join_failed_error(self, unit: UnitRecord) -> JsonValue:
        """The run's error when a deferred unit failed (the worker's error attached)."""
        status = unit.status.replace("_", " ")
        detail = unit.error if unit.error is not None else {"message": status}
        return {"code": JOIN_FAILED, "message": f"deferred op {unit.op_name} {status}: {error_text(detail)}",
                "op": unit.op_name, "unit_id": unit.unit_id, "detail": detail}


POLICY = ContinuationPolicy()

__all__ = ["POLICY", "ContinuationPolicy", "error_text", "normalize_error", "JOIN_FAILED", "JOIN_DEADLINE", "RUN_EXPIRED",
           "RUN_LOST", "OP_FAILED"]
