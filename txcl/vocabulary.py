"""The language's vocabulary, stated once (no editor dependencies).

- the keywords (clause keywords, LOOP modifiers, constants, reserved words): the lexer, the
  highlighter, the language server and the REPL read them here;
- the WITH keys the runtime consumes, each with its value's kind, range or choices, default,
  and what it needs to have an effect: `txcl check` validates literal values from this table
  (TX209, TX214's did-you-mean), the language server and the REPL complete and explain from it;
- the reserved ``_txc`` paths (what authors may write, what `@delete` may name);
- the one Go duration parser, and the one JSON type-name function.
"""

from __future__ import annotations

import re
from typing import Any

import attrs

# ---------------------------------------------------------------------------------------------
# keywords

CLAUSE_KEYWORDS: tuple[str, ...] = ("WHEN", "SET", "SELECT", "WITH", "PRIORITY", "EXEC", "LOOP", "EMIT")
LOOP_MODIFIERS: tuple[str, ...] = ("UNTIL", "SET", "EVERY", "MAX")
CONSTANTS: tuple[str, ...] = ("TRUE", "FALSE", "NULL")
RESERVED_WORDS: tuple[str, ...] = ("FN", "LET", "IF", "ELSE", "RETURN")
ITEM_WORDS: tuple[str, ...] = ("AS", "DEFAULT")  # inside SELECT items


# ---------------------------------------------------------------------------------------------
# Go durations ("250ms", "1.5s", "1h30m")

_UNITS_NS = {
    "ns": 1, "us": 1_000, "\u00b5s": 1_000, "\u03bcs": 1_000, "ms": 1_000_000,
    "s": 1_000_000_000, "m": 60_000_000_000, "h": 3_600_000_000_000,
}
DAY_NS = 86_400_000_000_000
_PART = re.compile(r"([0-9]*)(?:\.([0-9]*))?(ns|us|\u00b5s|\u03bcs|ms|s|m|h|d)")
_MAX_NS = 2**63 - 1


def parse_duration_ns(text: str, *, days: bool = False) -> int | None:
    """Nanoseconds of a Go duration string, or None when it is not one.

    As Go's ``time.ParseDuration``: an optional sign, then one or more ``<number><unit>``
    pairs (a fraction allowed, ``.5s`` and ``5.s`` too), units ns us µs μs ms s m h, or the bare
    ``"0"``. ``days`` also takes ``d`` (settings do). Fractions of a nanosecond are truncated
    toward zero; values beyond signed 64-bit nanoseconds are invalid."""
    if not isinstance(text, str):
        return None
    s = text
    neg = False
    if s[:1] in ("+", "-") and s:
        neg = s[0] == "-"
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        return None
    total = 0
    pos = 0
    while pos < len(s):
        m = _PART.match(s, pos)
        if m is None or m.end() == pos:
            return None
        whole, frac, unit = m.group(1), m.group(2), m.group(3)
        if not whole and not frac:
            return None
        if unit == "d" and not days:
            return None
        if len(whole) > 30:  # beyond any int64 nanosecond count
            return None
        frac = (frac or "")[:30]
        scale = DAY_NS if unit == "d" else _UNITS_NS[unit]
        value = int(whole or "0") * scale
        if frac:
            value += int(frac) * scale // 10 ** len(frac)
        total += value
        if total > _MAX_NS + (1 if neg else 0):
            return None
        pos = m.end()
    return -total if neg else total


# ---------------------------------------------------------------------------------------------
# JSON type names

def json_type(value: Any) -> str:
    """The JSON type of a Python JSON value: ``null``, ``boolean``, ``integer``, ``number``
    (a float), ``string``, ``array`` or ``object`` (bool before int). Messages word it their
    own way from this one answer (:func:`with_article`, or ``number`` for both numbers)."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def with_article(name: str) -> str:
    """``an integer``, ``a string`` (``null`` stays as it is)."""
    if name == "null":
        return name
    return ("an " if name[:1] in "aeiou" else "a ") + name


# ---------------------------------------------------------------------------------------------
# the reserved `_txc` namespace

#: Subtrees under which EMIT, SET POST, LOOP SET, `@delete` and untrusted outputs may write.
AUTHOR_WRITABLE: frozenset[tuple[str, ...]] = frozenset({
    ("_txc", "web", "res"), ("_txc", "lmtp", "res"), ("_txc", "goto"), ("_txc", "halt"),
    ("_txc", "delete"), ("_txc", "telemetry"), ("_txc", "llm", "reject"), ("_txc", "llm", "upstream"),
    ("_txc", "llm", "headers"), ("_txc", "llm", "context"),
})

#: Consumed inbound facts that `@delete` may name although they are reserved.
DELETE_ONLY_INBOUND: frozenset[tuple[str, ...]] = frozenset({
    ("_txc", "web", "req", "body"), ("_txc", "imap", "msg", "text"), ("_txc", "imap", "msg", "html"),
    ("_txc", "imap", "msg", "headers"), ("_txc", "calendar", "ical"), ("_txc", "calendar", "event"),
    ("_txc", "calendar", "prior"), ("_txc", "contacts", "vcard"), ("_txc", "contacts", "card"),
    ("_txc", "contacts", "prior"), ("_txc", "websocket", "msg", "text"), ("_txc", "websocket", "msg", "data"),
})

#: what `@cron.*` holds: the tick envelope of a `_cron` stack (txcl.serve.cron fills it)
CRON_FIELDS: dict[str, str] = {
    "minute": "the minute of the tick (0-59), in UTC or --cron-timezone",
    "hour": "the hour (0-23)",
    "dom": "the day of the month (1-31)",
    "dow": "the day of the week (0 Sunday to 6 Saturday)",
    "month": "the month (1-12)",
    "year": "the year",
    "mod5": "the minute modulo 5 (0 every five minutes)",
    "mod10": "the minute modulo 10",
    "mod15": "the minute modulo 15",
    "mod30": "the minute modulo 30",
    "bucket": "the tick's time, RFC 3339 in UTC: the same on every node (the key that fires it once)",
    "bucket_ms": "the tick's time in milliseconds since the epoch",
    "tick": "how many ticks this node has fired since it started",
    "job": '"_cron"',
    "node": "the node that fired the tick (--node-id)",
    "tz": "the zone of the clock fields (UTC, or --cron-timezone)",
    "period_s": "seconds between ticks (--cron-period)",
}

#: what `@scheduled.*` holds in a `_scheduled` stack (txcl.serve.scheduled fills it)
SCHEDULED_FIELDS: dict[str, str] = {
    "payload": "the JSON object the event was scheduled with",
    "idempotency_key": "the key it was scheduled under",
    "event_id": "the event's id in the store (txcl schedules show <id>)",
    "schedule_at": "the time it was scheduled for, RFC 3339 in UTC",
    "fired_at": "when it fired, RFC 3339 in UTC",
    "attempt": "1, or more when a node stopped while firing it and another fired it again",
    "origin_stack": "the stack whose rule scheduled it",
    "origin_rid": "the request id of the request that scheduled it",
    "node": "the node that fired it (--node-id)",
}

#: what `@lmtp.*` holds for a delivered message (txcl.serve.lmtp fills it; `res` is the
#: verdict the rules write)
LMTP_FIELDS: dict[str, str] = {
    "listener": "the listening address the message came in on",
    "client": "the delivering MTA: {ip, helo}",
    "mail": "the envelope sender: {from, size}",
    "rcpt": "the recipients of this envelope (those routed to this stack)",
    "transaction_rcpt": "every recipient of the delivery, in RCPT TO order",
    "msg": "the parsed message",
    "res": "the verdict the rules write: {code, msg} for every recipient, or recipients[i].{code, msg}",
}

#: what `@lmtp.msg.*` holds
LMTP_MSG_FIELDS: dict[str, str] = {
    "id": "the Message-ID header",
    "date": "the Date header, RFC 3339 in UTC",
    "from": "the From addresses: [{name, addr}]",
    "to": "the To addresses: [{name, addr}]",
    "cc": "the Cc addresses: [{name, addr}]",
    "subject": "the Subject header, decoded",
    "text": "the plain-text body",
    "html": "the HTML body",
    "headers": "every header, names lower-cased, each a list of values in order",
    "attachments": "[{name, type, size, sha256, inline}] of the attached parts (contents are in raw)",
    "raw": "the whole message as received, base64 with a b64: prefix",
}

#: the fields of each inlet's event, by the `_txc` key it lies under (TX244)
EVENT_FIELDS: dict[str, dict[str, str]] = {"cron": CRON_FIELDS, "scheduled": SCHEDULED_FIELDS,
                                           "lmtp": LMTP_FIELDS}


#: Control fields SET PRE must not write (they steer the walk after the op).
CONTROL_FIELDS: tuple[tuple[str, ...], ...] = (("_txc", "halt"), ("_txc", "goto"), ("_txc", "delete"),
                                               ("_txc", "web", "res"))


# ---------------------------------------------------------------------------------------------
# WITH keys

@attrs.frozen
class WithKey:
    name: str
    value: str  # the value's kind as the docs and the editor show it
    doc: str
    snippet: str  # text inserted after `name = `
    # what TX209 accepts as a literal value: "duration", "choice", "integer", "scope", "array",
    # "path", "string", "literal-string", "boolean", "count-or-percent", "url" (None: anything)
    check: str | None = None
    choices: tuple[Any, ...] = ()  # for "choice"
    minimum: int | None = None  # for "integer"
    maximum: int | None = None
    # (key, value) pairs this key needs to have an effect: value None means "present"
    requires: tuple[tuple[str, Any], ...] = ()
    default: str | None = None  # the default as the docs say it

    def markdown(self) -> str:
        """What the editor shows for the key (hover, completion): its kind, meaning, default
        and what it needs, all from this entry."""
        text = f"**WITH {self.name}** ({self.value}) — {self.doc}"
        if self.default is not None:
            text += f"\n\nDefault: {self.default}."
        needs = [needed if wanted is None else f'{needed} = "{wanted}"' for needed, wanted in self.requires]
        if needs:
            text += f"\n\nHas an effect only with {' and '.join(needs)}."
        return text


WITH_KEYS: tuple[WithKey, ...] = (
    WithKey("timeout", "number (ms) or duration", "Time limit of the op (default 5 s; with LOOP "
            "the whole loop, default 60 s; async/continuable: the worker's budget).", '"5s"',
            check="duration", default="5 s (60 s with LOOP)"),
    WithKey("mode", '"sync" | "async" | "continuable"', "Absent = sync. async: an outside worker "
            "calls back (http(s) only). continuable: answer synchronously within continue_after, "
            "else suspend.", '"async"',
            check="choice", choices=("sync", "async", "continuable"), default="sync"),
    WithKey("continue_after", "number (ms) or duration", "continuable: synchronous wait before "
            "suspending (default 5 s).", '"5s"',
            check="duration", default="5 s"),
    WithKey("join_at_scope", "integer", "async only: do not wait here; merge the result at the "
            "first scope at or above this number.", "500",
            check="scope"),
    WithKey("each", "array (usually a path)", "async only: one worker call per element; needs "
            "into.", ".items",
            check="array"),
    WithKey("window", "integer 1–1024", "With each: at most this many calls in flight (default 32).",
            "32",
            check="integer", minimum=1, maximum=1024, requires=(("each", None),), default="32"),
    WithKey("on_item_error", '"fail" | "collect" | "tolerate"', "With each: fail fast (default), store an "
            "{\"error\": …} object for the failed item, or do that until more than tolerated_failures fail.",
            '"collect"',
            check="choice", choices=("fail", "collect", "tolerate"), default="fail"),
    WithKey("heartbeat", "duration", 'mode = "async": the worker must POST {"status": "running"} to its '
            "callback URL at least this often, else the call times out early.", '"30s"',
            check="duration"),
    WithKey("join_deadline", "duration", "With join_at_scope: fail the run when the result is not in this "
            "long after the dispatch (at the join, or while parked there).", '"30s"',
            check="duration"),
    WithKey("on_join_deadline", '"fail" | "continue"', "With join_deadline: fail the run (default), or "
            "run the join scope without the result (a late result is recorded, never merged).", '"continue"',
            check="choice", choices=("fail", "continue"), default="fail"),
    WithKey("join_wait", "duration", "With join_at_scope: at the join, wait in the request up to this long "
            "for a result that is nearly there before answering 202.", '"500ms"',
            check="duration"),
    WithKey("cancel_url", "http(s) URL", 'mode = "async": POST {"status": "cancelled"} here when the flow '
            "gives up on the call (a worker's ack may name its own).", '"https://"',
            check="url", requires=(("mode", "async"),)),
    WithKey("retries", "integer 0–100", 'mode = "async": send a call again when its dispatch fails (no ack in '
            'time, no connection, a 5xx) or the worker answers {"status": "failed", "retryable": true}; '
            "each attempt gets a fresh token (per item with each).", "3",
            check="integer", minimum=0, maximum=100, requires=(("mode", "async"),), default="0"),
    WithKey("retry_backoff", "duration", "With retries: the wait before the first retry (default 1 s), "
            "doubled for each later one, plus jitter.", '"2s"',
            check="duration", requires=(("retries", None),), default="1 s"),
    WithKey("tolerated_failures", 'integer or "N%"', 'With on_item_error = "tolerate": how many items may '
            "fail (a count, or a percentage of the items) before the op fails.", '"10%"',
            check="count-or-percent", requires=(("on_item_error", "tolerate"),), default="0"),
    WithKey("max_duration", "number (ms) or duration", "mode = \"async\": the worker's time budget "
            "(timeout is then ignored).", '"10m"',
            check="duration"),
    WithKey("into", "path string", "Nest the op's whole output under this path before EMIT and "
            "merge.", '"result"',
            check="path"),
    WithKey("method", "string", "http(s): request method (default POST; GET, HEAD and DELETE send "
            "no body).", '"GET"',
            check="string", default="POST"),
    WithKey("url", "string", "http(s): URL that replaces the EXEC target.", '"https://"',
            check="string"),
    WithKey("status_into", "path string", "http(s): write the response status here; a non-2xx "
            "answer is then not an op error.", '"status"',
            check="path"),
    WithKey("headers", "string per header", "http(s): extra request headers, `headers.<name> = "
            "\"value\"`.", '"value"',
            check="string"),
    WithKey("body_encoding", "string", "http(s): request body encoding (form encoding).", '"form"',
            check="string"),
    WithKey("body_path", "string", "http(s): send only this part of the input as the body.",
            '"body"',
            check="string"),
    WithKey("redact", "comma-separated path strings", "Trace only: mask these values in recorded "
            "traces.", '"password"',
            check="literal-string"),
    WithKey("omit", "comma-separated path strings", "Trace only: leave these values out of "
            "recorded traces.", '"blob"',
            check="literal-string"),
    WithKey("debug", "boolean", "Record extra detail for this op in the trace.", "true",
            check="boolean", default="false"),
    WithKey("validate", "boolean", "Check the op's answer against its <name>.schema.json $defs.output; a "
            "violation is an op error (typed envelopes).", "true"),
)

WITH_KEY_DOCS: dict[str, WithKey] = {k.name: k for k in WITH_KEYS}

__all__ = ["WithKey", "WITH_KEYS", "WITH_KEY_DOCS"]
