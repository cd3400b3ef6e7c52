"""Argument helpers shared by the families. Each raises the call's
`&name: ...` error on a bad argument."""

from __future__ import annotations

from txcl.vocabulary import json_type

import math
import re
from typing import Any

from txcl.errors import TxclEvalError
from txcl.values.coerce import parse_go_float
from txcl.values.jsonio import JsonError, loads
from txcl.values.utf8 import decode_lossy

_ORDINAL = ("first", "second", "third", "fourth")
MAX_STRING_BYTES = 1_048_576
_MAX_FLOAT_INT = 2**53
_SURROGATES = re.compile(r"[\ud800-\udfff]")


def err(name: str, message: str) -> TxclEvalError:
    return TxclEvalError(f"&{name}: {message}")


# how a function's message words each JSON type ("a list": the reference's wording)
_DESCRIBED = {"null": "null", "boolean": "a boolean", "integer": "an integer", "number": "a float",
              "string": "a string", "array": "a list", "object": "an object"}


def describe(v: Any) -> str:
    """A short description of a value's type for messages."""
    name = json_type(v)
    return _DESCRIBED.get(name, name)


def arg_name(pos: int, what: str | None = None) -> str:
    if what:
        return what
    return f"{_ORDINAL[pos]} argument" if pos < len(_ORDINAL) else f"argument {pos + 1}"


def want_str(name: str, v: Any, pos: int, what: str | None = None) -> str:
    if isinstance(v, str):
        return v
    raise err(name, f"{arg_name(pos, what)} must be a string, got {describe(v)}")


def want_int(name: str, v: Any, pos: int, what: str | None = None) -> int:
    """The *int* helper: an int, or a float without fractional part."""
    if isinstance(v, bool):
        raise err(name, f"{arg_name(pos, what)} must be an integer, got a boolean")
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, float):
        raise err(name, f"{arg_name(pos, what)} must be an integer, got {v!r}")
    raise err(name, f"{arg_name(pos, what)} must be an integer, got {describe(v)}")


def want_num(name: str, v: Any, pos: int) -> float:
    """The *num* helper: a finite number, or a Go float syntax string with a finite value."""
    t = type(v)
    if t is bool or isinstance(v, bool):
        raise err(name, f"{arg_name(pos)} is not a number, got a boolean")
    if t is int or isinstance(v, int):
        try:
            return float(v)
        except OverflowError:
            raise err(name, f"{arg_name(pos)} is too large for a float") from None
    if t is float or isinstance(v, float):
        if math.isfinite(v):
            return float(v)
        raise err(name, f"{arg_name(pos)} is not a finite number")
    if t is str or isinstance(v, str):
        f = parse_go_float(v)
        if f is None:
            raise err(name, f"{arg_name(pos)} is not a number: {_quote(v)}")
        if not math.isfinite(f):
            raise err(name, f"{arg_name(pos)} is not a finite number: {_quote(v)}")
        return f
    raise err(name, f"{arg_name(pos)} is not a number, got {describe(v)}")


def _quote(s: str) -> str:
    if len(s) > 40:
        s = s[:40] + "..."
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def walkable(name: str, v: Any) -> Any:
    """The *walkable* helper: a JSON string is parsed, anything else walked as itself."""
    if isinstance(v, str):
        try:
            return loads(v, duplicates="first")
        except JsonError:
            raise err(name, "string value is not valid JSON") from None
    return v


def utf8(s: str) -> bytes:
    """UTF-8 bytes of a string; unpaired surrogates become U+FFFD."""
    try:
        return s.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATES.sub("\ufffd", s).encode("utf-8")


def from_bytes(b: bytes) -> str:
    """Bytes as text, each byte of invalid UTF-8 replaced by one U+FFFD (as Go decodes
    strings; Python's own "replace" writes one per invalid sequence)."""
    return decode_lossy(b)


def byte_len(s: str) -> int:
    return len(s) if s.isascii() else len(utf8(s))
