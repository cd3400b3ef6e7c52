"""What a durable op's WITH options mean for its unit, resolved once.

The continuations layer calls :func:`unit_options` when it builds a unit and hands the result
to the store, which keeps it with the unit (``await_units.options_json``) and applies it as
data: whether one failed item fails the unit, how many it tolerates, the wait before each
retry, the heartbeat period, the cancel URL, what happens at a join deadline, and the
directives each call is sent with. The store never reads a rule's WITH options itself; it
uses this module only to backfill the options of units written by an older txcl.
"""

from __future__ import annotations

import random
from typing import Any

import attrs

from txcl.values.coerce import duration_to_ms

MAX_RETRIES = 100
RETRY_BACKOFF_MS = 1_000
MAX_RETRY_WAIT_MS = 600_000
MAX_CANCEL_URL = 2048


@attrs.frozen
class UnitOptions:
    """A unit's resolved options (plain data; stored as JSON with the unit)."""

    fails_fast: bool = True  # one failed item fails the whole unit at once
    tolerated_failures: int | None = None  # how many failed items it accepts (None: it does not count)
    tolerated_text: str | None = None  # the bound as the rule wrote it ("3", "10%"), for the error
    retry_delays_ms: tuple[int, ...] = ()  # the wait before each retry; its length is the retry count
    heartbeat_ms: int | None = None  # how often the worker must say it is alive
    cancel_url: str | None = None  # where to POST a cancellation
    pass_over_at_join_deadline: bool = False  # on_join_deadline = "continue"
    join_deadline_text: str | None = None  # WITH join_deadline as written, for the error
    sanitize_outputs: bool = False  # item outputs are untrusted: reserved keys are dropped
    call_directives: Any = None  # the WITH options each call carries (without `each`)

    def to_json(self) -> dict:
        out = attrs.asdict(self)
        out["retry_delays_ms"] = list(self.retry_delays_ms)
        return out

    @classmethod
    def from_json(cls, value: Any) -> "UnitOptions":
        """The stored form back (a value of another shape gives the defaults' fields)."""
        if not isinstance(value, dict):
            return cls()
        fields = value if value.keys() == _FIELD_NAMES else {k: v for k, v in value.items() if k in _FIELD_NAMES}
        delays = fields.get("retry_delays_ms")
        if delays:
            fields = {**fields, "retry_delays_ms": tuple(d for d in delays if isinstance(d, int))
                      if isinstance(delays, list) else ()}
        elif delays is not None:
            fields = {**fields, "retry_delays_ms": ()}
        return cls(**fields)


_FIELD_NAMES = frozenset(f.name for f in attrs.fields(UnitOptions))


def usable_cancel_url(url: Any) -> bool:
    """A cancel URL txcl will call: an absolute http(s) URL of at most 2,048 characters, with
    no line break or NUL (it would split the request's header)."""
    return (isinstance(url, str) and len(url) <= MAX_CANCEL_URL and url.startswith(("http://", "https://"))
            and not any(c in url for c in "\r\n\0"))


def fails_fast(kind: str, on_item_error: str) -> bool:
    """A sync sibling is best effort; an itemized op with ``on_item_error = "collect"`` (or
    ``"tolerate"``, within its bound) keeps every item's outcome; everything else fails at its
    first failure."""
    return kind != "sync" and not (kind == "itemized" and (on_item_error == "collect"
                                                            or on_item_error.startswith("tolerate:")))


def tolerated(on_item_error: str, expected: int) -> int | None:
    """How many failed items an ``on_item_error = "tolerate"`` unit of ``expected`` items
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


def retry_delays(directives: dict, rng: random.Random | None = None) -> tuple[int, ...]:
    """``WITH retries = N, retry_backoff = "1s"``: the wait before each of the N retries (0 to
    100; none when absent or invalid): the backoff (default 1 s) doubled per retry already
    done, at most 10 minutes, plus up to a quarter of jitter."""
    raw = directives.get("retries")
    count = raw if isinstance(raw, int) and not isinstance(raw, bool) and 0 <= raw <= MAX_RETRIES else 0
    backoff = directives.get("retry_backoff")
    ms = duration_to_ms(backoff) if backoff is not None else None
    first = ms if ms is not None and ms >= 0 else RETRY_BACKOFF_MS
    pick = rng or random
    out = []
    for done in range(count):
        delay = min(first * (2 ** min(done, 30)), MAX_RETRY_WAIT_MS)
        out.append(delay + pick.randint(0, delay // 4))
    return tuple(out)


def heartbeat_ms(directives: dict) -> int | None:
    """``WITH heartbeat``: how often the worker must say it is alive (None: not asked)."""
    raw = directives.get("heartbeat")
    ms = duration_to_ms(raw) if raw is not None else None
    return ms if ms is not None and ms > 0 else None


def unit_options(kind: str, on_item_error: str, expected: int, directives: Any) -> UnitOptions:
    """The options of a unit of ``kind`` with ``expected`` items, from its op's WITH options."""
    d = directives if isinstance(directives, dict) else {}
    tokened = kind in ("unary", "itemized")
    url = d.get("cancel_url")
    join_deadline = d.get("join_deadline")
    count = tolerated(on_item_error, expected) if kind == "itemized" else None
    return UnitOptions(
        fails_fast=fails_fast(kind, on_item_error),
        tolerated_failures=count,
        tolerated_text=on_item_error[len("tolerate:"):] if count is not None else None,
        retry_delays_ms=retry_delays(d) if tokened else (),
        heartbeat_ms=heartbeat_ms(d) if tokened else None,
        cancel_url=url if tokened and usable_cancel_url(url) else None,
        pass_over_at_join_deadline=d.get("on_join_deadline") == "continue",
        join_deadline_text=join_deadline if isinstance(join_deadline, str) else None,
        sanitize_outputs=kind == "itemized",
        call_directives={k: v for k, v in d.items() if k != "each"} if isinstance(directives, dict) else directives,
    )


__all__ = ["UnitOptions", "unit_options", "usable_cancel_url", "fails_fast", "tolerated", "retry_delays",
           "heartbeat_ms", "MAX_RETRIES", "RETRY_BACKOFF_MS", "MAX_RETRY_WAIT_MS"]
