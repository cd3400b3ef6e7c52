"""Strings. Lengths and offsets count UTF-8 bytes."""

from __future__ import annotations

import hashlib
from txcl.functions.helpers import (
    MAX_STRING_BYTES, byte_len, describe, err, from_bytes, utf8, want_int, want_str,
)
from txcl.functions.registry import function
from txcl.values.coerce import print_form


@function("concat", min_args=0, max_args=None, signature="concat(...)",
          doc="the arguments in print form joined together (null skipped)")
def _concat(args: list) -> str:
    if len(args) == 2:
        a, b = args
        if type(a) is str and type(b) is str:
            return a + b
    out = []
    for a in args:
        if type(a) is str:
            out.append(a)
        elif a is not None:
            out.append(print_form(a))
    return "".join(out)


@function("len", min_args=1, max_args=1, signature="len(v)",
          doc="UTF-8 byte length of a string, size of a list or object, 0 for null")
def _len(args: list) -> int:
    v = args[0]
    if isinstance(v, str):
        return byte_len(v)
    if isinstance(v, (list, dict)):
        return len(v)
    if v is None:
        return 0
    raise err("len", f"cannot take the length of {describe(v)}")


@function("split", min_args=2, max_args=2, signature="split(s, sep)",
          doc="list of the pieces of s cut at every sep (sep \"\": one per character)")
def _split(args: list) -> list[str]:
    s = want_str("split", args[0], 0)
    sep = want_str("split", args[1], 1)
    if sep == "":
        return list(s)
    return s.split(sep)


@function("join", min_args=2, max_args=2, signature="join(list, sep)",
          doc="the list elements in print form joined with sep (null as \"\")")
def _join(args: list) -> str:
    items = args[0]
    if not isinstance(items, list):
        raise err("join", f"first argument must be a list, got {describe(items)}")
    sep = want_str("join", args[1], 1)
    if sep and len(items) > 1 and byte_len(sep) * (len(items) - 1) > MAX_STRING_BYTES:
        # checked before building: the separators alone would pass the 1 MiB a function may add
        raise err("join", f"{len(items) - 1:,} separators of {byte_len(sep):,} bytes would add more than 1 MiB")
    return sep.join(["" if x is None else x if type(x) is str else print_form(x) for x in items])


@function("substr", min_args=3, max_args=3, signature="substr(s, start, end)",
          doc="the UTF-8 bytes [start, end) of s")
def _substr(args: list) -> str:
    s = want_str("substr", args[0], 0)
    start = want_int("substr", args[1], 1, "start")
    end = want_int("substr", args[2], 2, "end")
    if start < 0 or end < 0:
        raise err("substr", f"negative index ({start}, {end})")
    if start > end:
        raise err("substr", f"start {start} is after end {end}")
    if s.isascii():
        if end > len(s):
            raise err("substr", f"end {end} is beyond the length {len(s)}")
        return s[start:end]
    b = utf8(s)
    if end > len(b):
        raise err("substr", f"end {end} is beyond the length {len(b)}")
    return from_bytes(b[start:end])


@function("repeat", min_args=2, max_args=2, signature="repeat(s, n)",
          doc="s repeated n times (at most 1 MiB)")
def _repeat(args: list) -> str:
    s = want_str("repeat", args[0], 0)
    n = want_int("repeat", args[1], 1, "count")
    if n < 0:
        raise err("repeat", f"negative count {n}")
    if s == "":
        return ""
    if byte_len(s) * n > MAX_STRING_BYTES:
        raise err("repeat", f"result would be longer than {MAX_STRING_BYTES} bytes")
    return s * n


@function("pad", min_args=3, max_args=3, signature="pad(s, width, fill)",
          doc="s padded with fill to |width| bytes, on the left (width > 0) or right (< 0)")
def _pad(args: list) -> str:
    s = want_str("pad", args[0], 0)
    width = want_int("pad", args[1], 1, "width")
    fill = want_str("pad", args[2], 2, "fill")
    if width == 0:
        raise err("pad", "width must not be 0")
    target = abs(width)
    have = byte_len(s)
    if have >= target:
        return s
    if fill == "":
        raise err("pad", "empty fill")
    if target > MAX_STRING_BYTES:
        raise err("pad", f"result would be longer than {MAX_STRING_BYTES} bytes")
    missing = target - have
    fb = utf8(fill)
    padding = (fb * (missing // len(fb) + 1))[:missing]
    text = padding.decode("ascii") if padding.isascii() else from_bytes(padding)
    return text + s if width > 0 else s + text


@function("sha256", min_args=1, max_args=1, signature="sha256(s)",
          doc="lowercase hex SHA-256 of the UTF-8 bytes of s")
def _sha256(args: list) -> str:
    s = want_str("sha256", args[0], 0)
    return hashlib.sha256(utf8(s)).hexdigest()
