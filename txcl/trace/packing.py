"""Compact JSON text for trace steps and timeline events.

The store keeps a trace's steps and events as two JSON arrays. Summary steps arrive as rows
(tuples in `txcl.trace.format.STEP_ROW_FIELDS` order, trailing Nones already left out) and
are written as arrays; steps that carry more (bodies, a continuation's extra fields) are
objects without their None values and private `_` keys. orjson writes both when it takes
them, the `json` module otherwise; either way the text reads back as the same values.
"""

from __future__ import annotations

import json
from typing import Any

try:  # a compiled encoder, several times quicker than `json` on trace records
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson is a dependency where wheels exist
    _orjson = None  # type: ignore[assignment]

# Trace records are trees the walk builds from plain values, never cyclic: no cycle check.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str, check_circular=False)
_encode = _ENCODER.encode


def _stored(step: dict[str, Any] | tuple) -> Any:
    """A step as it is stored: a row as it is, an object without None values and `_` keys."""
    if type(step) is tuple:
        return step
    return {k: v for k, v in step.items() if v is not None and not k.startswith("_")}


def _stored_steps(steps: list[dict[str, Any] | tuple]) -> list:
    return [s if type(s) is tuple else _stored(s) for s in steps]


def pack_steps(steps: list[dict[str, Any] | tuple], rows_only: bool = False) -> str:
    """Steps as one JSON array: summary rows (tuples) as arrays, step dicts as objects.
    `rows_only`: the caller knows every step is a row (nothing to convert)."""
    stored = steps if rows_only else _stored_steps(steps)
    text = _fast_dumps(stored)
    return text if text is not None else _encode(stored)


def pack_events(events: list[Any]) -> str:
    """Events `(seq, at_ms, kind, data)` as arrays."""
    text = _fast_dumps(events)
    return text if text is not None else _encode(events)


def pack_trace(steps: list, events: list, rows_only: bool = False) -> tuple[str, str]:
    """A trace's steps and events as the two JSON texts the store writes (`rows_only`: see
    `pack_steps`). Once per trace: the common case (orjson takes both) in one frame."""
    stored = steps if rows_only else _stored_steps(steps)
    if _orjson is not None:
        try:
            return _orjson.dumps(stored).decode(), _orjson.dumps(events).decode()
        except (TypeError, ValueError):
            pass
    return pack_steps(stored, True), pack_events(events)


def _fast_dumps(value: Any) -> str | None:
    """orjson's text of `value` when orjson is installed and takes it (it refuses integers
    beyond 64 bits, keys that are not strings and objects of other types, for three), else
    None: the caller falls back to the `json` encoder (which writes such an object as its
    `str()`). Both give JSON that reads back as the same values (NaN aside, which orjson
    writes as null)."""
    if _orjson is None:
        return None
    try:
        return _orjson.dumps(value).decode()
    except (TypeError, ValueError):
        return None
