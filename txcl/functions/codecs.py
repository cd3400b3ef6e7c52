"""Codecs and JSON."""

from __future__ import annotations

import binascii
import re
from urllib.parse import quote_plus, unquote_to_bytes

from txcl.functions.helpers import err, from_bytes, utf8, want_str
from txcl.functions.registry import function
from txcl.values.jsonio import JsonError, dumps, loads

_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


@function("b64encode", min_args=1, max_args=1, signature="b64encode(s)",
          doc="standard padded base64 of the UTF-8 bytes of s")
def _b64encode(args: list) -> str:
    s = want_str("b64encode", args[0], 0)
    return binascii.b2a_base64(utf8(s), newline=False).decode("ascii")


@function("b64decode", min_args=1, max_args=1, signature="b64decode(s)",
          doc="decode standard padded base64 (CR/LF ignored) to text")
def _b64decode(args: list) -> str:
    s = want_str("b64decode", args[0], 0)
    if "\r" in s or "\n" in s:
        s = s.replace("\r", "").replace("\n", "")
    if not s.isascii():
        raise err("b64decode", "illegal base64 data: non-ASCII character")
    try:
        data = binascii.a2b_base64(s.encode("ascii"), strict_mode=True)
    except (binascii.Error, ValueError) as exc:
        raise err("b64decode", f"illegal base64 data: {exc}") from None
    return from_bytes(data)


@function("urlencode", min_args=1, max_args=1, signature="urlencode(s)",
          doc="form (query) encoding: space as +, other reserved bytes as %XX")
def _urlencode(args: list) -> str:
    s = want_str("urlencode", args[0], 0)
    return quote_plus(utf8(s), safe="")


@function("urldecode", min_args=1, max_args=1, signature="urldecode(s)",
          doc="form (query) decoding: + as space, %XX as a byte")
def _urldecode(args: list) -> str:
    s = want_str("urldecode", args[0], 0)
    m = _BAD_ESCAPE.search(s)
    if m:
        raise err("urldecode", f'invalid URL escape "{s[m.start():m.start() + 3]}"')
    return from_bytes(unquote_to_bytes(s.replace("+", " ")))


@function("json", min_args=1, max_args=1, signature="json(s)",
          doc="parse JSON text (duplicate keys: the last wins)")
def _json(args: list) -> object:
    s = want_str("json", args[0], 0)
    if s == "":
        raise err("json", "empty input")
    try:
        return loads(s, duplicates="last")
    except JsonError as exc:
        raise err("json", str(exc)) from None


@function("to_json", min_args=1, max_args=1, signature="to_json(v)",
          doc="compact JSON text with sorted keys and HTML-safe escapes")
def _to_json(args: list) -> str:
    try:
        return dumps(args[0], sort_keys=True, html_escape=True)
    except JsonError as exc:
        raise err("to_json", str(exc)) from None
