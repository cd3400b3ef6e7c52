"""Decoding bytes that may not be valid UTF-8, the way Go does it: each invalid byte becomes
one U+FFFD (Python's own "replace" writes one per invalid sequence, so `"\\xe2\\x9c"` would
be one character in Python and two in Go)."""

from __future__ import annotations

import codecs

_HANDLER = "txcl-replace-per-byte"


def _one_replacement_per_byte(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    return "\ufffd" * (exc.end - exc.start), exc.end


codecs.register_error(_HANDLER, _one_replacement_per_byte)


def decode_lossy(data: bytes) -> str:
    """`data` as text; each byte that is not part of valid UTF-8 becomes one U+FFFD."""
    return data.decode("utf-8", _HANDLER)
