"""Go duration strings (`"250ms"`, `"1.5s"`, `"1h30m"`), as LOOP EVERY and WITH timeout use them.

Follows Go's `time.ParseDuration`: optional sign, then one or more `<number><unit>` pairs
(fraction allowed, `.5s` and `5.s` too), units ns us µs μs ms s m h, or the bare `"0"`.
Fractions of a nanosecond are truncated; values beyond signed 64-bit nanoseconds are invalid.
"""

from __future__ import annotations

import re

_UNITS = {
    "ns": 1, "us": 1_000, "\u00b5s": 1_000, "\u03bcs": 1_000, "ms": 1_000_000,
    "s": 1_000_000_000, "m": 60_000_000_000, "h": 3_600_000_000_000,
}
_PART = re.compile(r"([0-9]*)(?:\.([0-9]*))?(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")
_MAX = 2**63 - 1


def parse_duration_ns(text: str) -> int | None:
    """Nanoseconds of a Go duration string, or None when it is not one."""
    s = text
    neg = False
    if s[:1] in "+-" and s:
        neg = s[0] == "-"
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        return None
    total = 0
    pos = 0
    while pos < len(s):
        m = _PART.match(s, pos)
        if m is None or m.end() == pos:
            return None
        whole, frac, unit = m.group(1), m.group(2), m.group(3)
        if not whole and not frac:
            return None
        if len(whole) > 30:  # beyond any int64 nanosecond count
            return None
        frac = (frac or "")[:30]
        scale = _UNITS[unit]
        value = int(whole or "0") * scale
        if frac:
            value += int(frac) * scale // 10 ** len(frac)
        total += value
        if total > _MAX + (1 if neg else 0):
            return None
        pos = m.end()
    return -total if neg else total
