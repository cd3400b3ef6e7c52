"""Trace redaction: `omit` then `redact` path strings, plus the values
that are always masked (credential headers, continuation tokens, hmac keys)."""

from __future__ import annotations

from typing import Any, Iterable

from txcl.values.merge import deep_copy
from txcl.values.paths import delete, has, split_path_string, write

REDACTED = "[redacted]"
ALWAYS_KEYS = frozenset({"authorization", "cookie", "set-cookie", "x-txco-continuation-token",
                         "continuation_token"})


def parse_path_list(text: str) -> list[tuple[str, ...]]:
    """`"a.b, c"` → [("a", "b"), ("c",)] (items trimmed, empty items skipped)."""
    out: list[tuple[str, ...]] = []
    for item in _split_commas(text):
        item = item.strip()
        if not item:
            continue
        if item.startswith("@"):
            item = "_txc." + item[1:]
        elif item.startswith("."):
            item = item[1:]
        segs = split_path_string(item)
        if segs and all(segs):
            out.append(segs)
    return out


def _split_commas(text: str) -> list[str]:
    parts, cur, escaped = [], [], False
    for ch in text:
        if escaped:
            cur.append(ch)
            escaped = False
        elif ch == "\\":
            cur.append(ch)
            escaped = True
        elif ch == ",":
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


class Redactor:
    def __init__(self, omit: Iterable[tuple[str, ...]] = (), redact: Iterable[tuple[str, ...]] = ()):
        self.omit = sorted(set(omit))
        self.redact = sorted(set(redact))

    def apply(self, value: Any, owned: bool = False) -> Any:
        """A redacted deep copy of `value` (the original is untouched); with `owned` the
        caller hands over a private copy, which is redacted in place instead."""
        if value is None:
            return None
        out = value if owned else deep_copy(value)
        if isinstance(out, dict):
            for segs in self.omit:
                delete(out, segs)
            for segs in self.redact:
                if has(out, segs):
                    out = write(out, segs, REDACTED)
        return _mask_always(out)


def _mask_always(value: Any) -> Any:
    if isinstance(value, dict):
        for key in list(value):
            if key.lower() in ALWAYS_KEYS:
                value[key] = REDACTED
            else:
                value[key] = _mask_always(value[key])
        return value
    if isinstance(value, list):
        return [_mask_always(v) for v in value]
    return value
