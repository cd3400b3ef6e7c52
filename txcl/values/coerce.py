"""Coercions of WHEN conditions (text, integer, float and boolean forms), Go float and duration
syntax, and the print form of numbers.

Every function tests `bool` before `int` (Python's `True` is an `int`).
"""

from __future__ import annotations

from txcl.vocabulary import parse_duration_ns as _go_duration_ns

import math
import re
from typing import Any

from txcl.values.jsonio import dumps
from txcl.values.numbers import float_print, float_text
from txcl.values.paths import MISSING

__all__ = [
    "text_form", "int_form", "float_form", "bool_form", "parse_go_float", "print_form",
    "parse_duration_ns", "duration_to_ms", "tolerance_text",
]

_INT_TEXT = re.compile(r"-?[0-9]+")
_DEC_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_HEX_FLOAT = re.compile(r"([+-]?)0[xX]((?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)")
_SPECIAL = {"inf": math.inf, "+inf": math.inf, "-inf": -math.inf,
            "infinity": math.inf, "+infinity": math.inf, "-infinity": -math.inf,
            "nan": math.nan}


def text_form(v: Any) -> str:
    """Text form for string comparisons and regex matching."""
    t = type(v)
    if t is str:
        return v
    if v is None or v is MISSING:
        return ""
    if t is bool:
        return "true" if v else "false"
    if t is int:
        return int.__repr__(v)
    if t is float:
        return float_text(v)
    if isinstance(v, (list, dict)):
        return dumps(v)
    if isinstance(v, (bool, int, float, str)):
        return text_form(_plain(v))
    return ""


def int_form(v: Any) -> int:
    """Integer form: floats truncate toward zero; only `-?[0-9]+` strings convert."""
    t = type(v)
    if t is int:
        return v
    if t is bool:
        return 1 if v else 0
    if t is float:
        if v != v or v in (math.inf, -math.inf):
            return 0
        return int(v)
    if t is str:
        if _INT_TEXT.fullmatch(v):
            try:
                return int(v)
            except ValueError:  # more digits than int() accepts
                return 0
        return 0
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, (int, float, str)):
        return int_form(_plain(v))
    return 0


def _plain(v: Any) -> Any:
    """A subclass instance (IntEnum, str subclass ...) as the plain builtin value."""
    if isinstance(v, bool):
        return bool(v)
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        return float(v)
    if isinstance(v, str):
        return str.__str__(v)
    return v


def float_form(v: Any) -> float:
    """Float form: numbers as floats, Go float syntax strings parsed, else 0.0."""
    t = type(v)
    if t is float:
        return v
    if t is int:
        try:
            return float(v)
        except OverflowError:
            return math.inf if v > 0 else -math.inf
    if t is bool:
        return 1.0 if v else 0.0
    if t is str:
        f = parse_go_float(v)
        return 0.0 if f is None else f
    if isinstance(v, (bool, int, float, str)):
        return float_form(_plain(v))
    return 0.0


def bool_form(v: Any) -> bool:
    """Boolean form: strings "1", "t", "true" in any casing are true; numbers when non-zero."""
    t = type(v)
    if t is bool:
        return v
    if t is str:
        return len(v) <= 4 and v.lower() in ("1", "t", "true")
    if t is int or t is float:
        return v != 0
    if isinstance(v, (bool, int, float, str)):
        return bool_form(_plain(v))
    return False


def parse_go_float(s: str) -> float | None:
    """A string in Go's ParseFloat syntax as a float, or None. Out of range gives ±inf."""
    if _DEC_FLOAT.fullmatch(s):
        return float(s)  # Python also overflows to ±inf and underflows to 0
    special = _SPECIAL.get(s.lower()) if len(s) <= 9 else None
    if special is not None:
        return special
    m = _HEX_FLOAT.fullmatch(s)
    if m:
        try:
            f = float.fromhex(m.group(2))
        except OverflowError:
            f = math.inf
        return -f if m.group(1) == "-" else f
    return None


def print_form(v: Any) -> str:
    """Go `%v` style print form (`null` is `<nil>`; callers skip it at top level)."""
    t = type(v)
    if t is str:
        return v
    if v is None or v is MISSING:
        return "<nil>"
    if t is bool:
        return "true" if v else "false"
    if t is int:
        return int.__repr__(v)
    if t is float:
        return float_print(v)
    if isinstance(v, list):
        return "[" + " ".join([print_form(x) for x in v]) + "]"
    if isinstance(v, dict):
        return "map[" + " ".join(
            [f"{print_form(k)}:{print_form(v[k])}" for k in sorted(v, key=str)]) + "]"
    if isinstance(v, (bool, int, float, str)):
        return print_form(_plain(v))
    return str(v)


# ---------------------------------------------------------------- durations

# (the one parser is txcl.vocabulary.parse_duration_ns)
# Durations are parsed exactly (integer arithmetic), which is slow next to a dict lookup, and the
# walk meets the same few short texts (`WITH timeout = "30s"`) over and over.
_DURATIONS: dict[str, int | None] = {}
_DURATIONS_MAX = 1024
_DURATION_TEXT_MAX = 64


def parse_duration_ns(s: str) -> int | None:
    """Go duration syntax in nanoseconds, or None when invalid.

    Negative durations are returned as negative numbers; callers decide whether they are
    allowed. Values beyond the int64 range are invalid, as in Go.
    """
    if type(s) is str and len(s) <= _DURATION_TEXT_MAX:
        try:
            return _DURATIONS[s]
        except KeyError:
            pass
        ns = _parse_duration_ns(s)
        if len(_DURATIONS) >= _DURATIONS_MAX:
            _DURATIONS.clear()
        _DURATIONS[s] = ns
        return ns
    return _parse_duration_ns(s)


def _parse_duration_ns(s: str) -> int | None:
    return _go_duration_ns(s) if isinstance(s, str) else None


def duration_to_ms(value: Any) -> int | None:
    """Milliseconds from an int (ms), an integral float, or a duration string; else None.

    Duration strings are truncated toward zero to whole milliseconds.
    """
    t = type(value)
    if t is bool:
        return None
    if t is int:
        return value
    if t is float:
        if value.is_integer():
            return int(value)
        return None
    if t is str:
        ns = parse_duration_ns(value)
        if ns is None:
            return None
        q = abs(ns) // 1_000_000
        return -q if ns < 0 else q
    return None


def tolerance_text(value: Any) -> str:
    """`5` or `10%` for a valid ``WITH tolerated_failures`` (a count from 0, or a percentage
    string from 0 to 100), else `0`."""
    if isinstance(value, bool):
        return "0"
    if isinstance(value, int) and value >= 0:
        return str(value)
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return str(int(value))
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            return text
        if text.endswith("%"):
            try:
                pct = float(text[:-1])
            except ValueError:
                return "0"
            if 0 <= pct <= 100:
                return f"{pct:g}%"
    return "0"
