"""Compact JSON text for trace steps and timeline events.

The store keeps a trace's steps and events as two JSON arrays. Encoding the step objects
with the `json` module is a visible share of a summary-mode request's cost, while most of a
step's text repeats from one request to the next: its stage, stack, scope, name, operation
and transport are facts of its rule. `pack_steps` caches that fragment and formats the
varying numbers directly, falling back to the `json` encoder for anything outside the
common shape. The text is plain JSON and reads back as the objects the encoder would give.
"""

from __future__ import annotations

import json
import math
from typing import Any

try:  # a compiled encoder, several times quicker than `json` on trace records
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson is a dependency where wheels exist
    _orjson = None  # type: ignore[assignment]

# Trace records are trees the walk builds from plain values, never cyclic: no cycle check.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str, check_circular=False)
_encode = _ENCODER.encode

_CACHE_LIMIT = 20_000
_STRINGS: dict[str, str] = {}
_PREFIXES: dict[tuple, str] = {}

# Step keys the fast path formats itself; any other key sends the step to the encoder.
_FAST_STEP_KEYS = frozenset({"stage", "stack", "scope", "name", "operation", "transport", "status",
                             "started_ms", "finished_ms", "duration_ms", "input_bytes", "output_bytes",
                             "error", "seq"})


def json_string(text: str) -> str:
    """The JSON text of a string, cached (stage names, statuses and kinds repeat)."""
    found = _STRINGS.get(text)
    if found is None:
        found = _encode(text)
        if len(_STRINGS) >= _CACHE_LIMIT:
            _STRINGS.clear()
        _STRINGS[text] = found
    return found


def _number(value: Any) -> str | None:
    """JSON text of an int or a finite float, else None."""
    t = type(value)
    if t is int:
        return str(value)
    if t is float and math.isfinite(value):
        return repr(value)
    return None


def pack_step(step: dict[str, Any]) -> str:
    """One step as a JSON object; keys whose value is None or that start with `_` are left out."""
    if step.keys() <= _FAST_STEP_KEYS:
        try:
            text = _fast_step(step)
        except (KeyError, TypeError):
            text = None
        if text is not None:
            return text
    return _encode({k: v for k, v in step.items() if v is not None and not k.startswith("_")})


def _fast_step(step: dict[str, Any]) -> str | None:
    operation = step.get("operation")
    key = (step["stage"], step["stack"], step["scope"], step["name"], operation, step["transport"])
    prefix = _PREFIXES.get(key)
    if prefix is None:
        if None in (key[0], key[1], key[2], key[3], key[5]):
            return None
        fixed = {"stage": key[0], "stack": key[1], "scope": key[2], "name": key[3]}
        if operation is not None:
            fixed["operation"] = operation
        fixed["transport"] = key[5]
        prefix = _encode(fixed)[:-1]  # without the closing brace
        if len(_PREFIXES) >= _CACHE_LIMIT:
            _PREFIXES.clear()
        _PREFIXES[key] = prefix
    status = step["status"]
    seq, started, finished, duration = step["seq"], step["started_ms"], step["finished_ms"], step["duration_ms"]
    if type(status) is not str or type(seq) is not int or type(started) is not int or type(finished) is not int:
        return None
    duration_text = _number(duration)
    if duration_text is None:
        return None
    tail = ""
    for name in ("input_bytes", "output_bytes"):
        value = step.get(name)
        if value is not None:
            if type(value) is not int:
                return None
            tail += f',"{name}":{value}'
    error = step.get("error")
    if error is not None:
        tail += ',"error":' + _encode(error)
    return (f'{prefix},"status":{json_string(status)},"started_ms":{started},"finished_ms":{finished},'
            f'"duration_ms":{duration_text}{tail},"seq":{seq}}}')


def pack_steps(steps: list[dict[str, Any] | tuple]) -> str:
    """Steps as one JSON array: summary rows (tuples) as arrays, step dicts as objects."""
    if all(type(s) is tuple for s in steps):
        text = _fast_dumps(steps)
        if text is not None:
            return text
    return "[" + ",".join([_encode(s) if type(s) is tuple else pack_step(s) for s in steps]) + "]"


def pack_events(events: list[Any]) -> str:
    """Events `(seq, at_ms, kind, data)` as arrays."""
    text = _fast_dumps(events)
    return text if text is not None else _encode(events)


def _fast_dumps(value: Any) -> str | None:
    """orjson's text of `value` when orjson is installed and takes it (it refuses integers
    beyond 64 bits and keys that are not strings, for two), else None: the caller falls back to the `json` encoder. Both
    give JSON that reads back as the same values (NaN aside, which orjson writes as null)."""
    if _orjson is None:
        return None
    try:
        return _orjson.dumps(value, default=str).decode("utf-8")
    except (TypeError, ValueError):
        return None
