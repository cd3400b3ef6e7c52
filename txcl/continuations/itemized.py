"""Itemized await (`WITH mode = "async", each = <array>, window = N, into = "<path>"`,
CONTINUATIONS.md §2.5, the await-unit model of §2.6).

One await unit owns one interaction per element (AU-2): the store writes them all with the
park (barrier) or the deferred dispatch, promotes the first `window` to `dispatching`, and
every admitted completion promotes the next queued items in `item_index` order inside the
same transaction (P4), so no more than `window` are ever in flight. Completions arrive in any
order; each goes through the two progress boundaries of AU-7 (terminal + `provider:<i>` fact,
then the child materialised + `continuation:<i>` fact); the unit is materialised once, as the
array read by `item_index` (AU-4), and the parent is released by the single compare-and-swap
of P5 (EC-6). Everything here is a builder: the durable mechanics live in the store
(txcl/store/continuations_sqlite.py) and the sweeper (§5.9 reconciliation).

This module adds:
- the `itemized` unit builder (directives → `UnitSpec`): `each` resolved to the items,
  `window` clamped to 1…--await-window-max (default --await-window-default), `on_item_error`
  `fail`/`collect`, the per-call budget (plus --deferred-join-slack when deferred);
- dispatch-time validation: `each` not an array, or more than --await-items-max elements →
  the unit is recorded `failed` with no interactions (barrier: the stage fails; deferred: the
  request ends at the join);
- the empty array: no unit, interaction, run or suspend — the op's output is `[]`, nested by
  `into` and merged with the scope (step `ok`, transport `async`, `items: 0`). When other
  async ops of the same scope park anyway, the empty op instead becomes a zero-item member
  that settles at the drain, so its `[]` is merged by the resume like every member's output.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from txcl.continuations.engine import (
    OpClass,
    _base_spec,
    _jsonable,
    recorder_of,
    register_unit_builder,
    worker_budget_ms,
)
from txcl.store.records import UnitSpec

if TYPE_CHECKING:
    from txcl.continuations.engine import ContinuationEngine
    from txcl.runtime.state import Frame, PreparedOp, Run
    from txcl.runtime.walker import Walker

POLICIES = ("fail", "collect")


def _items(pop: "PreparedOp") -> Any:
    """`each` as resolved by WITH (a path resolves to its value); a path string is read from
    the op's input view (after SET PRE), so `each = "orders"` works like `each = .orders`."""
    raw = (pop.directives or {}).get("each")
    if isinstance(raw, str):
        from txcl.values.paths import MISSING, PathError, read, split_path_string

        try:
            value = read(pop.prepared.input, split_path_string(raw.lstrip(".")))
        except (PathError, ValueError):
            return raw
        return raw if value is MISSING else value
    return raw


def item_problem(items: Any, settings: Any) -> str | None:
    """Dispatch-time validation of `each` (§2.5); None when fine."""
    if not isinstance(items, list):
        kind = "null" if items is None else type(items).__name__
        if isinstance(items, dict):
            kind = "object"
        elif isinstance(items, str):
            kind = "string"
        elif isinstance(items, bool):
            kind = "boolean"
        elif isinstance(items, (int, float)):
            kind = "number"
        return f"each must resolve to an array (got {kind})"
    limit = settings.await_items_max
    if limit and len(items) > limit:
        return f"each has {len(items)} elements, more than --await-items-max {limit}"
    return None


def window_of(directives: dict, settings: Any) -> int:
    """`window` when it is an integer within 1…--await-window-max, else the default."""
    raw = directives.get("window") if directives else None
    value: int | None = None
    if isinstance(raw, int) and not isinstance(raw, bool):
        value = raw
    elif isinstance(raw, float) and raw.is_integer():
        value = int(raw)
    elif isinstance(raw, str) and raw.strip().isdigit():
        value = int(raw.strip())
    if value is None or not 1 <= value <= settings.await_window_max:
        return settings.await_window_default
    return value


def policy_of(directives: dict) -> str:
    raw = directives.get("on_item_error") if directives else None
    return raw if raw in POLICIES else "fail"


def build_itemized(engine: "ContinuationEngine", run: "Run", frame: "Frame", pop: "PreparedOp",
                   opclass: OpClass) -> UnitSpec:
    settings = engine.service.settings
    directives = pop.directives or {}
    deferred = opclass.kind == "deferred"
    join = opclass.join_at_scope if deferred else None
    budget = worker_budget_ms(directives, settings.async_runtime_default)
    if deferred:
        budget += settings.deferred_join_slack
    items = _items(pop)
    problem = item_problem(items, settings)
    if problem is not None:
        return _base_spec(run, frame, pop, "itemized", [], join_at_scope=join,
                          failed_error={"message": problem})
    return _base_spec(run, frame, pop, "itemized", [_jsonable(x) for x in items], window=window_of(directives, settings),
                      on_item_error=policy_of(directives), budget_ms=budget, join_at_scope=join)


register_unit_builder("itemized", build_itemized)


# ---------------------------------------------------------------------------------------------
# the empty array (a class filter run by the engine before any mechanism)


def take_empty(walker: "Walker", run: "Run", frame: "Frame",
               classes: list[tuple["PreparedOp", OpClass]]) -> list[tuple["PreparedOp", OpClass]]:
    """Finish itemized ops over an empty array at once (`[]` under `into`, step `ok`).

    A barrier scope whose other async ops park anyway keeps its empty ops as members (a
    zero-item unit settles at the drain; the resume merges its `[]`)."""
    empties = [(p, c) for p, c in classes
               if c.unit_kind == "itemized" and c.kind in ("barrier", "deferred") and _items(p) == []]
    if not empties:
        return classes
    others_park = any(c.kind in ("barrier", "continuable") and not any(p is e for e, _ in empties)
                      for p, c in classes)
    rec = recorder_of(frame)
    remaining = []
    for pop, opclass in classes:
        if any(pop is e for e, _ in empties) and not (opclass.kind == "barrier" and others_park):
            now_wall, now = time.time(), time.perf_counter()
            walker._finish_op(run, frame, pop, [], False, "async", now_wall, now, rec, extra={"items": 0})
            continue
        remaining.append((pop, opclass))
    return remaining


def install(engine: "ContinuationEngine") -> None:
    """Called by `ContinuationEngine.__init__`: the empty-array filter."""
    filters = engine.__dict__.setdefault("class_filters", [])
    if take_empty not in filters:
        filters.append(take_empty)


__all__ = ["build_itemized", "take_empty", "item_problem", "window_of", "policy_of", "install"]
