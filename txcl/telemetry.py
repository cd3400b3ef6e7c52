"""Application metrics: the intents a stack writes at `_txc.telemetry.metrics`.

    EMIT @telemetry.metrics = &array(&object("name", "book.queued", "kind", "counter",
                                             "value", 1, "attrs", &object("source", "search")))

After a request (or a resumed run) completes, its intents are validated here and handed to
the metrics recorder (txcl.metrics), which exports them through the Prometheus endpoint and
the OpenTelemetry meter. Validation never fails the request: a bad intent is dropped and
counted (`txcl_telemetry_dropped_total{reason}`). With metrics off the intents are ignored.

Each intent is an object:

| field | required | |
| --- | --- | --- |
| `name` | yes | letters, digits and `_`, parts joined by dots (`book.queued`), at most 100 characters |
| `kind` | yes | `counter` or `histogram` |
| `value` | yes | a number; a counter's is at least 0 |
| `unit` | no | a short string (`"1"`, `"ms"`, `"bytes"`) |
| `attrs` | no | an object of scalar values (strings, numbers, booleans) |

Caps: at most 64 intents per request (the rest dropped, reason `too_many`), 16 attributes
per intent (the rest left out), keys of 64 characters and values of 128 (longer values are
cut). Attributes whose key looks sensitive (`email`, `token`, `password`, `secret`, …) keep
their key but have the value `[redacted]`.
"""

from __future__ import annotations

import math
import re
from typing import Any

import attrs

MAX_INTENTS = 64
MAX_ATTRS = 16
MAX_KEY = 64
MAX_VALUE = 128
MAX_NAME = 100
KINDS = ("counter", "histogram")
NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*$")
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SENSITIVE = ("email", "mail", "token", "password", "passwd", "secret", "apikey", "api_key", "auth", "cookie",
             "session", "credential", "ssn", "phone", "card")
REDACTED = "[redacted]"
PATH = ("_txc", "telemetry", "metrics")


@attrs.frozen
class Intent:
    name: str
    kind: str
    value: float
    unit: str | None
    attrs: dict[str, str]


def _sensitive(key: str) -> bool:
    lowered = key.lower()
    return any(word in lowered for word in SENSITIVE)


def check_intent(item: Any) -> tuple[Intent | None, str | None]:
    """(the intent, None) or (None, the reason it is dropped)."""
    if not isinstance(item, dict):
        return None, "not_an_object"
    name, kind, value = item.get("name"), item.get("kind"), item.get("value")
    if not isinstance(name, str) or not name or len(name) > MAX_NAME or not NAME.match(name):
        return None, "bad_name"
    if kind not in KINDS:
        return None, "bad_kind"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None, "bad_value"
    if kind == "counter" and value < 0:
        return None, "negative_counter"
    unit = item.get("unit")
    if unit is not None and not (isinstance(unit, str) and 0 < len(unit) <= 16):
        return None, "bad_unit"
    raw = item.get("attrs", {})
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        return None, "bad_attrs"
    kept: dict[str, str] = {}
    for key, val in raw.items():
        if len(kept) >= MAX_ATTRS:
            break
        if not isinstance(key, str) or not key or len(key) > MAX_KEY or not _KEY.match(key):
            return None, "bad_attr_key"
        if isinstance(val, bool):
            text = "true" if val else "false"
        elif isinstance(val, (int, float)):
            text = repr(val) if isinstance(val, float) else str(val)
        elif isinstance(val, str):
            text = val[:MAX_VALUE]
        else:
            return None, "bad_attr_value"
        kept[key] = REDACTED if _sensitive(key) else text
    return Intent(name, kind, float(value), unit, kept), None


def intents_of(envelope: Any) -> tuple[list[Intent], list[str]]:
    """The valid intents at `_txc.telemetry.metrics` of a finished envelope, and the reason
    of each dropped one."""
    txc = envelope.get("_txc") if isinstance(envelope, dict) else None
    telemetry = txc.get("telemetry") if isinstance(txc, dict) else None
    items = telemetry.get("metrics") if isinstance(telemetry, dict) else None
    if items is None:
        return [], []
    if isinstance(items, dict):
        items = [items]
    if not isinstance(items, list):
        return [], ["not_an_array"]
    kept: list[Intent] = []
    dropped: list[str] = []
    for index, item in enumerate(items):
        if index >= MAX_INTENTS:
            dropped.extend(["too_many"] * (len(items) - MAX_INTENTS))
            break
        intent, reason = check_intent(item)
        if intent is None:
            dropped.append(reason or "invalid")
        else:
            kept.append(intent)
    return kept, dropped


def export(envelope: Any, recorder: Any) -> None:
    """Hand a finished envelope's intents to `recorder` (never raises: a request is never
    failed by its metrics)."""
    try:
        kept, dropped = intents_of(envelope)
        for reason in dropped:
            recorder.dropped(reason)
        for intent in kept:
            recorder.application(intent.name, intent.kind, intent.value, intent.attrs, intent.unit)
    except Exception:  # noqa: BLE001 - best effort, as the reference's telemetry is
        recorder.dropped("internal")


__all__ = ["Intent", "check_intent", "intents_of", "export", "MAX_INTENTS", "MAX_ATTRS", "KINDS", "PATH",
           "REDACTED"]
