"""The server's log lines: plain text (the default) or one JSON object per line, with the
request, run and stack they concern, and nothing secret in them.

`--log-format json` writes objects such as

    {"time": "2026-12-06T11:40:02.118Z", "level": "info", "logger": "txcl", "message":
     "POST /orders 200", "event": "access", "request_id": "01J…", "method": "POST",
     "path": "/orders", "status": 200, "latency_ms": 3.4}

`request_id`, `run_id`, `stack` and `scope` come from the log context (:func:`bind`), which
the server sets for each request and each resume, so every line written while a request runs
carries them; a call may add its own with ``extra={"event": …}``.

Every line, in either format, passes through :class:`Redactor` first: the admin token, any
credential after ``Bearer`` or ``Basic``, continuation tokens in headers, and every secret
value a rule's `WITH secrets.*` has used in this process are replaced by ``[redacted]``.
"""

from __future__ import annotations

import contextvars
import datetime as _dt
import json
import logging
import re
import sys
from contextlib import contextmanager
from typing import Any, Iterable, Iterator

FORMATS = ("text", "json")
CONTEXT_FIELDS = ("request_id", "run_id", "stack", "scope")
EXTRA_FIELDS = ("event", "method", "path", "status", "latency_ms", "op", "code", "attempt", "node")
REDACTED = "[redacted]"

#: the fields of the running request or resume (the server sets a fresh dict per request)
log_context: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("txcl.logs.context", default=None)


@contextmanager
def bind(**fields: Any) -> Iterator[None]:
    """Add fields to the log context of the running task (and the tasks it starts)."""
    current = log_context.get()
    token = log_context.set({**current, **fields} if current else fields)
    try:
        yield
    finally:
        log_context.reset(token)


def bound() -> dict[str, Any]:
    return dict(log_context.get() or {})


# ---------------------------------------------------------------------- redaction

_CREDENTIAL = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{4,}")
_TOKEN_HEADER = re.compile(r"(?i)(x-txco-continuation-token['\"]?\s*[:=]\s*['\"]?)[^\s'\",}]+")
_known: dict[str, None] = {}  # values never to print (the admin token, secrets used by rules), oldest first
_MAX_KNOWN = 1024


def never_log(values: Iterable[str | None]) -> None:
    """Register values no log line may contain (kept for the life of the process; a secret
    used on every op call is looked up, not appended again)."""
    for value in values:
        if value and len(value) >= 4 and value not in _known:
            if len(_known) >= _MAX_KNOWN:
                del _known[next(iter(_known))]
            _known[value] = None


def redact(text: str) -> str:
    for value in _known:
        if value in text:
            text = text.replace(value, REDACTED)
    text = _CREDENTIAL.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    return _TOKEN_HEADER.sub(lambda m: m.group(1) + REDACTED, text)


class Redactor(logging.Filter):
    """Replaces the message (arguments merged in) and any traceback text with a redacted copy."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message or record.args:
            record.msg, record.args = cleaned, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


# ---------------------------------------------------------------------- formats

class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, RFC 3339), level, logger, message, the log
    context's fields and the record's own structured fields."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if message.startswith("txcl: "):
            message = message[len("txcl: "):]
        when = _dt.datetime.fromtimestamp(record.created, _dt.timezone.utc)
        doc: dict[str, Any] = {"time": when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z",
                               "level": record.levelname.lower(), "logger": record.name, "message": message}
        context = log_context.get()
        if context:
            for key in CONTEXT_FIELDS:
                if context.get(key) is not None:
                    doc[key] = context[key]
        for key in (*CONTEXT_FIELDS, *EXTRA_FIELDS):
            value = record.__dict__.get(key)
            if value is not None:
                doc[key] = value
        if record.exc_text:
            doc["exception"] = record.exc_text
        return json.dumps(doc, ensure_ascii=False, default=str)


def handler(fmt: str = "text", stream: Any = None) -> logging.Handler:
    """A stderr handler in `fmt`, with the redactor in front."""
    out = logging.StreamHandler(stream or sys.stderr)
    out.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter("%(message)s"))
    out.addFilter(Redactor())
    return out


__all__ = ["FORMATS", "log_context", "bind", "bound", "never_log", "redact", "Redactor", "JsonFormatter", "handler"]
