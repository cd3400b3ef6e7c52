"""JSON text in and out, with the number rules of LANGUAGE.md §6.1 and §6.18.

`loads` keeps integer-form numbers exact (`int`), rejects `NaN`/`Infinity` and numbers a
float cannot hold, and chooses which duplicate key wins. `dumps` writes numbers in JSON
form (integral floats as digits, exponents without leading zeros), which the standard
library cannot do, so it is a small serializer of its own; strings still go through the C
escaper of the `json` module.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from json.decoder import JSONDecodeError
from typing import Any

from txcl.values.numbers import float_json

try:  # the C escapers; fall back to the pure-Python ones
    from _json import encode_basestring as _escape
except ImportError:  # pragma: no cover
    from json.encoder import py_encode_basestring as _escape  # type: ignore[attr-defined]

__all__ = ["JsonError", "loads", "dumps"]


class JsonError(ValueError):
    """Invalid JSON text, or a value that has no JSON form. `line`/`column` are 1-based."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        self.line = line
        self.column = column
        super().__init__(message)


# ---------------------------------------------------------------- loading


def _reject_constant(name: str) -> Any:
    raise JsonError(f"invalid JSON: {name} is not a number in JSON")


def _parse_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:  # more digits than int() accepts by default
        return int(Decimal(text))


def _parse_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise JsonError(f"invalid JSON: number {text} is out of range")
    return value


def _first_wins(pairs: list[tuple[str, Any]]) -> dict:
    d = dict(pairs)
    if len(d) != len(pairs):
        d = {}
        for k, v in pairs:
            if k not in d:
                d[k] = v
    return d


_FIRST = json.JSONDecoder(
    object_pairs_hook=_first_wins, parse_int=_parse_int, parse_float=_parse_float,
    parse_constant=_reject_constant,
)
_LAST = json.JSONDecoder(
    parse_int=_parse_int, parse_float=_parse_float, parse_constant=_reject_constant,
)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


def loads(text: str, *, duplicates: str = "first") -> Any:
    """Parse JSON text. `duplicates` is "first" (envelopes) or "last" (`&json`)."""
    if duplicates == "first":
        decoder = _FIRST
    elif duplicates == "last":
        decoder = _LAST
    else:
        raise ValueError(f"duplicates must be 'first' or 'last', not {duplicates!r}")
    if not isinstance(text, str):
        if isinstance(text, (bytes, bytearray)):
            text = bytes(text).decode("utf-8", "replace")
        else:
            raise TypeError("loads() takes a str")
    try:
        value = decoder.decode(text)
    except JsonError as exc:
        raise exc from None
    except JSONDecodeError as exc:
        raise JsonError(
            f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
            exc.lineno, exc.colno,
        ) from None
    except RecursionError:
        raise JsonError("invalid JSON: nested too deeply") from None
    if _SURROGATE_ESCAPE.search(text):
        value = _fix_surrogates(value)
    return value


def _fix_surrogates(value: Any) -> Any:
    """Replace unpaired surrogates (from `\\udXXX` escapes) by U+FFFD, as Go's decoder does."""
    t = type(value)
    if t is str:
        return _LONE_SURROGATE.sub("\ufffd", value)
    if t is list:
        return [_fix_surrogates(v) for v in value]
    if t is dict:
        return {_LONE_SURROGATE.sub("\ufffd", k): _fix_surrogates(v) for k, v in value.items()}
    return value


# ---------------------------------------------------------------- dumping

_HTML = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                       "\u2028": "\\u2028", "\u2029": "\\u2029"})


def dumps(value: Any, *, sort_keys: bool = False, indent: int | None = None,
          html_escape: bool = False) -> str:
    """JSON text of a JSON-shaped value; numbers in JSON form (§6.18).

    Compact separators when `indent` is None; non-ASCII written raw. `html_escape` writes
    `< > &` and U+2028/U+2029 as `\\u` escapes (they can only occur inside strings, so the
    whole text is translated at once).
    """
    parts: list[str] = []
    try:
        if indent is None:
            _compact(value, parts, sort_keys)
        else:
            _indented(value, parts, sort_keys, " " * indent if isinstance(indent, int) else indent, "\n")
    except RecursionError:
        raise JsonError("value is nested too deeply for JSON") from None
    text = "".join(parts)
    if html_escape:
        text = text.translate(_HTML)
    return text


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        if value != value or value in (math.inf, -math.inf):
            raise JsonError(f"{value!r} has no JSON form")
        return float_json(value)
    if isinstance(value, str):
        return _escape(value)
    raise JsonError(f"a {type(value).__name__} value has no JSON form")


def _items(d: dict, sort_keys: bool):
    for k in d:
        if type(k) is not str:
            raise JsonError(f"object key {k!r} is not a string")
    return sorted(d.items()) if sort_keys else d.items()


def _compact(value: Any, out: list[str], sort_keys: bool) -> None:
    t = type(value)
    if t is str:
        out.append(_escape(value))
    elif t is dict or (t is not list and isinstance(value, dict)):
        if not value:
            out.append("{}")
            return
        out.append("{")
        first = True
        for k, v in _items(value, sort_keys):
            if first:
                first = False
            else:
                out.append(",")
            out.append(_escape(k))
            out.append(":")
            tv = type(v)
            if tv is str:
                out.append(_escape(v))
            elif tv is int:
                out.append(int.__repr__(v))
            else:
                _compact(v, out, sort_keys)
        out.append("}")
    elif t is list or t is tuple or isinstance(value, list):
        if not value:
            out.append("[]")
            return
        out.append("[")
        first = True
        for v in value:
            if first:
                first = False
            else:
                out.append(",")
            tv = type(v)
            if tv is str:
                out.append(_escape(v))
            elif tv is int:
                out.append(int.__repr__(v))
            else:
                _compact(v, out, sort_keys)
        out.append("]")
    else:
        out.append(_scalar(value))


def _indented(value: Any, out: list[str], sort_keys: bool, unit: str, nl: str) -> None:
    if isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        inner = nl + unit
        out.append("{")
        first = True
        for k, v in _items(value, sort_keys):
            out.append(inner if first else "," + inner)
            first = False
            out.append(_escape(k))
            out.append(": ")
            _indented(v, out, sort_keys, unit, inner)
        out.append(nl + "}")
    elif isinstance(value, (list, tuple)):
        if not value:
            out.append("[]")
            return
        inner = nl + unit
        out.append("[")
        first = True
        for v in value:
            out.append(inner if first else "," + inner)
            first = False
            _indented(v, out, sort_keys, unit, inner)
        out.append(nl + "]")
    else:
        out.append(_scalar(value))
