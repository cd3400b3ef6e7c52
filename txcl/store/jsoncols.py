"""JSON text of the store's document columns: compact and not ASCII-escaped, the text
``json.dumps(value, separators=(",", ":"), ensure_ascii=False)`` writes, read back as
``json.loads`` reads it.

A durable cycle writes about fifteen small documents (a worker's ack, budgets, an op's
output) and reads about ten. ``json.JSONEncoder.encode`` builds a new C encoder for every
call, and ``JSONDecoder.decode`` matches whitespace with two regular expressions around the C
scanner: for a document of a few dozen bytes that is more than half of its cost (see the
performance page, docs/performance.md). Here the C encoder and scanner are made once and called directly — the
same C code, so the same text and the same values. Where the interpreter has no C
accelerator, or its encoder writes a probe differently, the standard classes are used.
"""

from __future__ import annotations

import json
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from json.scanner import c_make_scanner  # type: ignore[attr-defined]
from typing import Any, Callable

__all__ = ["dumps", "loads"]

_STANDARD = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_standard_encode = _STANDARD.encode
_standard_decode = json.JSONDecoder().decode

# a document holding every kind of value, written both ways when this module loads
_PROBE = {"text": 'a "quoted" é\n\u2028 \ud800', "numbers": [0, -7, 2**70, 1.5, 1e300, -0.0, float("nan")],
          "nested": {"empty": {}, "list": [], "flags": [True, False, None]}, "1": "key"}


def _direct_encoder() -> Callable[[Any], str] | None:
    """The C encoder, made once (no circular check: store documents are trees built from
    JSON values), when there is one and it writes the probe as the standard encoder does."""
    if c_make_encoder is None:
        return None
    chunks = c_make_encoder(None, _STANDARD.default, encode_basestring, None, ":", ",", False, False, True)

    def encode(value: Any) -> str:
        return "".join(chunks(value, 0))

    try:
        same = encode(_PROBE) == _standard_encode(_PROBE)
    except Exception:  # noqa: BLE001 - an interpreter whose C encoder takes other arguments
        return None
    return encode if same else None


_encode = _direct_encoder() or _standard_encode
_scan = c_make_scanner(json.JSONDecoder()) if c_make_scanner is not None else None


def dumps(value: Any) -> str | None:
    """The document's text (None for None: an SQL NULL)."""
    return None if value is None else _encode(value)


def loads(text: str | None) -> Any:
    """The document of `text` (None for NULL). Text the scanner does not take whole in one go
    (surrounding whitespace, or not JSON at all) goes to the standard decoder, which reads it
    or raises ``json.JSONDecodeError`` as ``json.loads`` would."""
    if text is None:
        return None
    if _scan is not None:
        try:
            value, end = _scan(text, 0)
        except StopIteration:
            return _standard_decode(text)
        if end == len(text):
            return value
    return _standard_decode(text)
