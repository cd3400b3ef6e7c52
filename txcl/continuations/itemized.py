"""Itemized await (``WITH mode = "async", each = <array>, window = N, into = "<path>"``).

One await unit owns one interaction per element: the store writes them all with the park
(barrier) or the deferred dispatch, promotes the first ``window`` to ``dispatching``, and every
admitted completion promotes the next queued items in item order inside the same transaction,
so no more than ``window`` are ever in flight. Completions arrive in any order; each passes
two durable boundaries (its terminal and provider fact, then its child outcome and
continuation fact); the unit is materialised once, as the array read by item index, and the
parent released by one compare-and-swap. The builder (``each`` → items, the window, the item
error policy, dispatch-time validation) is :func:`txcl.continuations.model.build_itemized`;
the durable mechanics live in the store and the sweeper's reconciliation.

This module handles the empty array: no unit, interaction, run or suspend — the op's output is
``[]``, nested by ``into`` and merged with the scope (step ``ok``, transport ``async``,
``items: 0``). When other async ops of the same scope park anyway, the empty op instead
becomes a zero-item member that settles at the drain, so its ``[]`` is merged by the resume
like every member's output.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from txcl.continuations.model import OpClass, items_of
from txcl.continuations.segment import recorder_of

if TYPE_CHECKING:
    from txcl.continuations.ports import OpRunner
    from txcl.runtime.state import Frame, PreparedOp, Run


def take_empty(walker: "OpRunner", run: "Run", frame: "Frame",
               classes: list[tuple["PreparedOp", OpClass]]) -> list[tuple["PreparedOp", OpClass]]:
    """Finish itemized ops over an empty array at once (``[]`` under ``into``, step ``ok``);
    returns the ops left. A barrier scope whose other async ops park anyway keeps its empty
    ops as members."""
    empties = [p for p, c in classes
               if c.unit_kind == "itemized" and c.kind in ("barrier", "deferred") and items_of(p) == []]
    if not empties:
        return classes
    others_park = any(c.kind in ("barrier", "continuable") and not any(p is e for e in empties)
                      for p, c in classes)
    rec = recorder_of(frame)
    remaining = []
    for pop, opclass in classes:
        if any(pop is e for e in empties) and not (opclass.kind == "barrier" and others_park):
            now_wall, now = time.time(), time.perf_counter()
            walker.finish_op(run, frame, pop, [], False, "async", now_wall, now, rec, extra={"items": 0})
            continue
        remaining.append((pop, opclass))
    return remaining


__all__ = ["take_empty"]
