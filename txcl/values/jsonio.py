"""JSON text in and out, with exact integers and the JSON form of numbers.

`loads` keeps integer-form numbers exact (`int`), rejects `NaN`/`Infinity` and numbers a
float cannot hold, and chooses which duplicate key wins. `dumps` writes numbers in JSON
form (integral floats as digits, exponents without leading zeros), which the standard
library cannot do, so it is a small serializer of its own; strings still go through the C
escaper of the `json` module. Values orjson writes byte for byte alike (no integral or
exponent-form floats) are handed to orjson, which is far quicker.
"""

from __future__ import annotations

import json
import math
import re
from json.decoder import JSONDecodeError
from typing import Any

from txcl.values.numbers import float_json
from txcl.values.utf8 import decode_lossy

try:  # a compiled writer for the common shapes (see `_orjson_writes_alike`)
    import orjson as _orjson
except ImportError:  # pragma: no cover - a dependency where wheels exist
    _orjson = None  # type: ignore[assignment]

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


#: Integers are exact, up to this many digits (Python's own limit for int/text conversion,
#: which also keeps a hostile number from costing quadratic time).
MAX_INT_DIGITS = 4300


def _parse_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:  # more digits than int() accepts by default
        raise JsonError(f"invalid JSON: an integer of {len(text.lstrip('-'))} digits "
                        f"(at most {MAX_INT_DIGITS} are supported)") from None


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
# The same with the C int parser: int()'s digit limit raises ValueError, and then the
# decoders above (which handle any size) run again.
_FAST_FIRST = json.JSONDecoder(object_pairs_hook=_first_wins, parse_float=_parse_float,
                               parse_constant=_reject_constant)
_FAST_LAST = json.JSONDecoder(parse_float=_parse_float, parse_constant=_reject_constant)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


#: How deep arrays and objects may nest in any JSON txcl reads (request bodies, callbacks,
#: inputs, `&json`): deeper values are refused with a clear error instead of exhausting the
#: recursion of the steps that walk them later (copy, merge, encode).
MAX_DEPTH = 256


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether arrays/objects nest more than `limit` levels. Level by level (any depth is
    safe): `value` was just parsed from JSON text, so it is a tree and each container is
    visited once."""
    level = [value] if type(value) in (dict, list) else []
    depth = 1
    while level:
        if depth > limit:
            return True
        below = []
        for item in level:
            below.extend([c for c in (item.values() if type(item) is dict else item)
                          if type(c) is dict or type(c) is list])
        level = below
        depth += 1
    return False


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
            text = decode_lossy(bytes(text))
        else:
            raise TypeError("loads() takes a str")
    fast = _FAST_FIRST if decoder is _FIRST else _FAST_LAST
    try:
        try:
            value = fast.decode(text)
        except JsonError:
            raise
        except JSONDecodeError:
            raise
        except ValueError:  # an integer with more digits than int() takes by default
            value = decoder.decode(text)
    except JsonError as exc:
        raise exc from None
    except JSONDecodeError as exc:
        raise JsonError(
            f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
            exc.lineno, exc.colno,
        ) from None
    except RecursionError:
        raise JsonError(f"invalid JSON: arrays and objects nest deeper than {MAX_DEPTH} levels") from None
    if (text.count("[") + text.count("{") > MAX_DEPTH) and too_deep(value):
        raise JsonError(f"invalid JSON: arrays and objects nest deeper than {MAX_DEPTH} levels")
    if "\\u" in text and _SURROGATE_ESCAPE.search(text):
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
    """JSON text of a JSON-shaped value; numbers in JSON form.

    Compact separators when `indent` is None; non-ASCII written raw. `html_escape` writes
    `< > &` and U+2028/U+2029 as `\\u` escapes (they can only occur inside strings, so the
    whole text is translated at once).
    """
    if indent is None and not sort_keys and _orjson is not None and _orjson_writes_alike(value):
        try:
            text = _orjson.dumps(value).decode("utf-8")
        except (TypeError, ValueError):  # a 65-bit integer, a non-string key, a lone surrogate, depth
            pass
        else:
            return text.translate(_HTML) if html_escape else text
    try:
        if indent is None:
            text = _sorted(value) if sort_keys else _compact(value)
        else:
            parts: list[str] = []
            _indented(value, parts, sort_keys, " " * indent if isinstance(indent, int) else indent, "\n")
            text = "".join(parts)
    except RecursionError:
        raise JsonError("value is nested too deeply for JSON") from None
    except JsonError:  # a NaN or an infinity (JsonError is a ValueError: not the case below)
        raise
    except ValueError as exc:  # an integer past Python's int/text limit
        raise JsonError(f"value has no JSON form: an integer of more than {MAX_INT_DIGITS} digits") from exc
    except TypeError as exc:  # a non-string key reached the C escaper
        raise JsonError(f"value has no JSON form: {exc}") from None
    if html_escape:
        text = text.translate(_HTML)
    return text


def dumps_utf8(value: Any) -> bytes:
    """`dumps(value)` as UTF-8 bytes — what a response body or a request's content is —
    without the text in between when orjson writes it."""
    if _orjson is not None and _orjson_writes_alike(value):
        try:
            return _orjson.dumps(value)
        except (TypeError, ValueError):  # as in `dumps`: the careful way below
            pass
    return dumps(value).encode("utf-8")


def _orjson_writes_alike(value: Any) -> bool:
    """Whether orjson writes `value` exactly as `_compact` does: it differs only on floats
    that are integral (`1.0` where JSON form is `1`) or outside [1e-4, 1e15) (exponent forms),
    so any such float, any value of another kind, and anything nested deeper than JSON txcl
    reads (a value that contains itself, say) sends the value the careful way. Checking is a
    few µs per KB; orjson then writes ~30x quicker. Depth first: memory for one path only."""
    t = type(value)
    if t is not dict and t is not list and t is not tuple:  # a scalar
        if t is float:
            return not value.is_integer() and 1e-4 <= abs(value) < 1e15
        return t is str or t is int or t is bool or value is None
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            return False
        for child in (item.values() if type(item) is dict else item):
            tc = type(child)
            if tc is str or tc is int or tc is bool or child is None:
                continue
            if tc is dict or tc is list:
                stack.append((child, depth + 1))
            elif tc is float:
                if child.is_integer() or not 1e-4 <= abs(child) < 1e15:  # NaN fails the range too
                    return False
            else:
                return False
    return True


def _float(x: float) -> str:
    r = float.__repr__(x)
    if "e" not in r and "n" not in r:  # plain repr (1e-4 <= |x| < 1e16), finite
        return r[:-2] if r.endswith(".0") else r
    if x != x or x in (math.inf, -math.inf):
        raise JsonError(f"{r} has no JSON form")
    return float_json(x)


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
        return _float(value)
    if isinstance(value, str):
        return _escape(value)
    if isinstance(value, dict):
        return _compact(dict(value))
    if isinstance(value, (list, tuple)):
        return _compact(list(value))
    raise JsonError(f"a {type(value).__name__} value has no JSON form")


def _compact(v: Any) -> str:
    t = type(v)
    if t is str:
        return _escape(v)
    if t is dict:
        return "{" + ",".join([
            _escape(k) + ":" + (_escape(x) if type(x) is str else _compact(x))
            for k, x in v.items()]) + "}"
    if t is list:
        return "[" + ",".join([_escape(x) if type(x) is str else _compact(x) for x in v]) + "]"
    if t is int:
        return int.__repr__(v)
    if t is float:
        return _float(v)
    return _scalar(v)


def _sorted(v: Any) -> str:
    t = type(v)
    if t is str:
        return _escape(v)
    if t is dict or (t is not list and isinstance(v, dict)):
        return "{" + ",".join([
            _escape(k) + ":" + (_escape(x) if type(x) is str else _sorted(x))
            for k, x in sorted(v.items(), key=_key)]) + "}"
    if t is list or t is tuple or isinstance(v, list):
        return "[" + ",".join([_escape(x) if type(x) is str else _sorted(x) for x in v]) + "]"
    if t is int:
        return int.__repr__(v)
    if t is float:
        return _float(v)
    return _scalar(v)


def _key(item: tuple[Any, Any]) -> Any:
    k = item[0]
    if type(k) is not str:
        raise JsonError(f"object key {k!r} is not a string")
    return k


def _items(d: dict, sort_keys: bool):
    for k in d:
        if type(k) is not str:
            raise JsonError(f"object key {k!r} is not a string")
    return sorted(d.items()) if sort_keys else d.items()


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
