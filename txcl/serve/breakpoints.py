"""Request breakpoints: with `txcl serve --debug-breakpoints`, a request carrying
`?_txc.break=<scope>` (or `=<stack>/<scope>`) is walked up to that scope and answered with the
envelope as it enters it — nothing of that scope or after it runs:

    curl 'http://127.0.0.1:8080/checkout?_txc.break=300'

The answer is `200 {"breakpoint": "shop/300", "envelope": {...}}` (the whole envelope, its
private `_txc` facts included) with the header `x-txcl-breakpoint: shop/300`. A walk that
ends before reaching the scope answers as usual, with `x-txcl-breakpoint: not reached`. A
segment that resumes a suspended run never stops at a breakpoint. Every envelope carries
`_txc.flag_breakpoint = true` while the setting is on, so rules can tell.

Without the setting, `?_txc.break` is refused with 403 (txcl_breakpoints_off): it is a
development aid that shows private facts, never something production answers.
"""

from __future__ import annotations

import re
from typing import Any

from txcl.serve.shaping import Answer, json_answer

BREAK_PARAM = "_txc.break"
_TARGET = re.compile(r"^(?:([A-Za-z0-9_-]+(?:/[A-Za-z0-9_-]+)*)/)?(\d{1,9})$")


def parse_break(value: str) -> tuple[str | None, int] | None:
    """`200` -> (None, 200); `shop/200` -> ("shop", 200); anything else -> None."""
    m = _TARGET.match(value.strip())
    if m is None:
        return None
    return m.group(1), int(m.group(2))


def breakpoint_answer(outcome: Any) -> Answer:
    """The answer of a walk a breakpoint stopped: the envelope where it stopped."""
    return json_answer(200, {"breakpoint": outcome.breakpoint, "envelope": outcome.envelope},
                       [("x-txcl-breakpoint", outcome.breakpoint), ("cache-control", "no-store")])


__all__ = ["BREAK_PARAM", "parse_break", "breakpoint_answer"]
