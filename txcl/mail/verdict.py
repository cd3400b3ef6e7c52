"""The LMTP replies of one delivery: one per recipient, from what the rules wrote.

- `@lmtp.res.recipients[i].{code, msg}`: the verdict of the envelope's i-th recipient; a slot
  the array does not reach is refused (550), never inherited — accepting is explicit;
- else `@lmtp.res.{code, msg}`: the verdict of every recipient;
- else (no rule wrote a verdict): 550 for every recipient (default-deny: the sender gets a
  bounce at once rather than a message silently lost).

Codes must be 2xx, 4xx or 5xx; an enhanced status code (RFC 3463) is put in front of the
text when the rule gave none.
"""

from __future__ import annotations

import re
from typing import Any

DEFAULT_DENY = (550, "no rule accepted this recipient")
_ENHANCED = re.compile(r"^[245]\.\d{1,3}\.\d{1,3}\b")
_ENHANCED_BY_CODE = {250: "2.0.0", 251: "2.1.5", 421: "4.3.0", 450: "4.2.0", 451: "4.3.0", 452: "4.2.2",
                     550: "5.1.1", 551: "5.1.6", 552: "5.2.2", 553: "5.1.3", 554: "5.7.1"}
MAX_TEXT = 200


def reply(code: int, text: str) -> str:
    """One reply line: the code, an enhanced status code, and printable ASCII text."""
    clean = "".join(ch if 32 <= ord(ch) < 127 else "?" for ch in text.replace("\r", " ").replace("\n", " "))
    clean = clean.strip()[:MAX_TEXT]
    if not _ENHANCED.match(clean):
        enhanced = _ENHANCED_BY_CODE.get(code, f"{code // 100}.0.0")
        clean = f"{enhanced} {clean}".rstrip()
    return f"{code} {clean}"


def _one(entry: Any) -> tuple[int, str] | None:
    """(code, text) of a verdict object; None when it has no usable code."""
    if not isinstance(entry, dict):
        return None
    code = entry.get("code")
    if isinstance(code, str) and code.strip().isdigit():
        code = int(code.strip())
    if isinstance(code, bool) or not isinstance(code, int) or code // 100 not in (2, 4, 5) or code > 599:
        return None
    text = entry.get("msg")
    return code, str(text) if text is not None else ("ok" if code < 300 else "")


def verdicts(res: Any, count: int) -> list[tuple[int, str]]:
    """The (code, text) of each of `count` recipients from `@lmtp.res`."""
    if not isinstance(res, dict):
        return [DEFAULT_DENY] * count
    per = res.get("recipients")
    if isinstance(per, list):
        out = []
        for i in range(count):
            entry = per[i] if i < len(per) else None
            got = _one(entry)
            if got is None and entry is not None and isinstance(entry, dict) and "code" in entry:
                got = (451, "a rule wrote a verdict that is not an SMTP code")
            out.append(got or DEFAULT_DENY)
        return out
    if "code" in res:
        got = _one(res) or (451, "a rule wrote a verdict that is not an SMTP code")
        return [got] * count
    return [DEFAULT_DENY] * count


__all__ = ["verdicts", "reply", "DEFAULT_DENY"]
