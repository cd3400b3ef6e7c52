"""Scheduled events: what `EXEC "txco://schedule"` accepts and what a `_scheduled` stack
receives (shared by the builtin, `txcl check`, `txcl test` and the server's poller).

    EXEC "txco://schedule" WITH
      idempotency_key = "drip:" + .reader.email,   # the event's name: reschedule or cancel it by it
      schedule_at     = "2026-06-30T08:00:00Z",    # RFC 3339, "not before"
      payload         = .job                       # a JSON object, given to the _scheduled stack

At its time the event is delivered into the `_scheduled` stack as `@scheduled.*`.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from txcl.vocabulary import SCHEDULED_FIELDS

JOB = "_scheduled"
MAX_KEY_BYTES = 512
DIRECTIVES = ("idempotency_key", "schedule_at", "payload", "cancel")

class ScheduleError(ValueError):
    """A directive of txco://schedule that cannot be used (the message says which and why)."""


def parse_schedule_at(value: Any) -> int:
    """Milliseconds since the epoch of an RFC 3339 time with a zone (``Z`` or ``+02:00``)."""
    if not isinstance(value, str) or not value.strip():
        raise ScheduleError("schedule_at must be an RFC 3339 time such as \"2026-06-30T08:00:00Z\"")
    text = value.strip()
    try:
        moment = _dt.datetime.fromisoformat(text[:-1] + "+00:00" if text[-1:] in "zZ" else text)
    except ValueError:
        raise ScheduleError(f"schedule_at {value!r} is not an RFC 3339 time (like \"2026-06-30T08:00:00Z\")") from None
    if moment.tzinfo is None:
        raise ScheduleError(f"schedule_at {value!r} has no time zone: end it with Z or an offset such as +02:00")
    return int(moment.timestamp() * 1000)


def check_key(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ScheduleError("idempotency_key (a non-empty string) is required")
    if len(value.encode("utf-8")) > MAX_KEY_BYTES:
        raise ScheduleError(f"idempotency_key is longer than {MAX_KEY_BYTES} bytes")
    return value


def rfc3339(ms: int | None) -> str | None:
    if ms is None:
        return None
    moment = _dt.datetime.fromtimestamp(ms / 1000, _dt.timezone.utc)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    return text + (f".{ms % 1000:03d}Z" if ms % 1000 else "Z")


def scheduled_fields(*, payload: Any, key: str, event_id: str, schedule_at_ms: int, fired_at_ms: int,
                     attempt: int = 1, origin_stack: str | None = None, origin_rid: str | None = None,
                     node: str = "test") -> dict[str, Any]:
    """`_txc.scheduled` of an event firing."""
    return {"payload": payload, "idempotency_key": key, "event_id": event_id,
            "schedule_at": rfc3339(schedule_at_ms), "fired_at": rfc3339(fired_at_ms), "attempt": attempt,
            "origin_stack": origin_stack, "origin_rid": origin_rid, "node": node}


def scheduled_envelope(**fields: Any) -> dict[str, Any]:
    """The whole envelope a `_scheduled` stack receives (see `scheduled_fields`)."""
    return {"_txc": {"scheduled": scheduled_fields(**fields)}}


__all__ = ["JOB", "SCHEDULED_FIELDS", "ScheduleError", "parse_schedule_at", "check_key", "rfc3339",
           "scheduled_fields", "scheduled_envelope", "DIRECTIVES"]
