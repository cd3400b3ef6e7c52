"""Regular expressions that are plain text, recognised so a match can skip the regex engine.

`.id =~ /^u_/` asks whether the text starts with `u_`: `str.startswith` answers that in a
tenth of the time of an RE2 search (encoding the text to UTF-8, crossing into C++, building a
match). `literal_shape` recognises the patterns whose meaning is one of four string tests —
starts with, ends with, equals, contains — and says which; anything else keeps RE2.

The test is exact only where RE2 would see the same characters: the generated code applies
it to ASCII text (`str.isascii()`, a flag CPython keeps on every string) and sends any other
text through RE2 as before, so a lone surrogate still fails the encoding as it always did.
"""

from __future__ import annotations

import re2

# Characters that stand for themselves in an RE2 pattern (no flags: case-sensitive, and `$`
# is the end of the text only). Letters and digits, and punctuation RE2 gives no meaning to.
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                   " _-:/@,;'\"!#%&=<>~`")
# Punctuation that a backslash makes literal (`\.` is a dot).
_ESCAPABLE = frozenset(".^$|?*+()[]{}\\/-")

PREFIX, SUFFIX, EXACT, CONTAINS = "startswith", "endswith", "exact", "contains"

# The anchor `Match` takes for a search (None where this google-re2 has no such thing).
UNANCHORED = getattr(getattr(re2, "_Anchor", None), "UNANCHORED", None)


def literal_shape(pattern: str) -> tuple[str, str] | None:
    """(kind, text) when `pattern` matches exactly the strings that start with / end with /
    equal / contain `text` (kind PREFIX, SUFFIX, EXACT or CONTAINS), else None."""
    if not pattern.isascii():
        return None
    body = pattern
    anchored_start = body.startswith("^")
    if anchored_start:
        body = body[1:]
    anchored_end = body.endswith("$") and not body.endswith("\\$")
    if anchored_end:
        body = body[:-1]
    chars: list[str] = []
    i, n = 0, len(body)
    while i < n:
        c = body[i]
        if c == "\\":
            if i + 1 < n and body[i + 1] in _ESCAPABLE:
                chars.append(body[i + 1])
                i += 2
                continue
            return None  # \d, \b, \x41, a trailing backslash…: RE2's business
        if c not in _PLAIN:
            return None
        chars.append(c)
        i += 1
    text = "".join(chars)
    if anchored_start and anchored_end:
        return EXACT, text
    if anchored_start:
        return PREFIX, text
    if anchored_end:
        return SUFFIX, text
    return CONTAINS, text


def match_span_reader(regex: object) -> object | None:
    """The RE2 object's own `Match(anchor, bytes, start, end)` — a list of (start, end) byte
    spans, `(-1, -1)` first when nothing matched — or None where this google-re2 does not
    expose it. `Regexp.search` wraps that call in a generator and a match object: calling it
    directly does the same search in a third of the time."""
    match = getattr(getattr(regex, "_regexp", None), "Match", None)
    return None if UNANCHORED is None else match
