"""What a scope's ops become: pure functions from prepared ops to classes and await units.

- :func:`op_class_of` sorts an op: ``sync``, ``barrier`` (``mode = "async"``, waits at its own
  scope), ``deferred`` (``mode = "async"`` with ``join_at_scope`` above its scope) or
  ``continuable``;
- the unit builders turn an op into the :class:`UnitSpec` the store records: ``unary`` (one
  worker call), ``itemized`` (one call per element of ``each``), ``local`` (a promoted
  continuable op, run inside txcl) and ``sync`` (a sync sibling inside a barrier);
- the two rules every mechanism shares, stated once here: the **floor rule** (when a deferred
  op is due for its join) and the **merge order** (how results that arrive in any order are
  merged).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from txcl.evaluate.rule import json_type
from txcl.runoptions import unit_options
from txcl.runtime.budget import strip_budget_fields
from txcl.store.records import UnitRecord, UnitSpec
from txcl.syntax.targets import ASYNC_KINDS
from txcl.values.coerce import duration_to_ms, tolerance_text
from txcl.values.merge import deep_copy
from txcl.values.paths import MISSING, PathError, read, split_path_string

if TYPE_CHECKING:
    from txcl.runtime.config import Settings
    from txcl.runtime.state import Frame, PreparedOp

ITEM_POLICIES = ("fail", "collect", "tolerate")


# ---------------------------------------------------------------------------------------------
# classification


@attrs.frozen
class OpClass:
    """How one prepared op is handled at its scope."""

    kind: str  # sync | barrier | deferred | continuable
    unit_kind: str | None = None  # unary | itemized | local (None: a plain sync op)
    join_at_scope: int | None = None  # deferred: the floor; continuable: the offending value
    join_raw: Any = None


def join_value(directives: dict | None) -> int | None:
    """``join_at_scope`` as an integer, or None (absent; a non-integer value is ignored)."""
    raw = directives.get("join_at_scope") if directives else None
    if raw is None or isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    if isinstance(raw, float) and raw.is_integer():
        return int(raw)
    if isinstance(raw, str) and raw.strip().lstrip("-").isdigit():
        return int(raw.strip())
    return None


def op_class_of(pop: "PreparedOp", scope: int) -> OpClass:
    """The class of one prepared op at scope `scope`. ``mode = "async"`` applies to http(s),
    mcp+http(s) and queue targets only (elsewhere the op runs synchronously); a ``join_at_scope`` at or below the
    op's own scope makes it a plain barrier."""
    directives = pop.directives or {}
    target = pop.op.target
    if pop.mode == "continuable":
        if target is None:
            return OpClass("sync")
        return OpClass("continuable", "local", join_value(directives), directives.get("join_at_scope"))
    if pop.mode != "async" or target is None or target.kind not in ASYNC_KINDS:
        return OpClass("sync")
    unit_kind = "itemized" if "each" in directives else "unary"
    join = join_value(directives)
    if join is not None and join > scope:
        return OpClass("deferred", unit_kind, join)
    return OpClass("barrier", unit_kind)


# ---------------------------------------------------------------------------------------------
# the floor rule and the merge order


def join_due(dispatch_stack: str | None, floor: int, stack: str, scope: int) -> bool:
    """A deferred op is due for its join at the first frame whose scope reaches its floor in
    the stack it was dispatched from — or at the first frame of any other stack the flow moves
    to (the join scope need not exist)."""
    return dispatch_stack != stack or floor <= scope


def merge_order(unit: UnitRecord) -> tuple[str, int]:
    """Results that arrive in any order merge by op name, then in dispatch order."""
    return unit.op_name, unit.created_seq


# ---------------------------------------------------------------------------------------------
# unit builders


def worker_budget_ms(directives: dict | None, default_ms: int) -> int:
    """A worker's time budget: ``max_duration``, else ``timeout``, else --async-runtime-default."""
    for key in ("max_duration", "timeout"):
        raw = directives.get(key) if directives else None
        if raw is None:
            continue
        ms = duration_to_ms(raw)
        if ms is not None and ms >= 0:
            return ms
    return default_ms


def worker_input(value: Any) -> Any:
    """What a worker receives as ``input``: the dispatched input without the budget fields."""
    copy = deep_copy(value)
    if isinstance(copy, dict):
        strip_budget_fields(copy)
    return copy


def base_spec(frame: "Frame", pop: "PreparedOp", kind: str, items: list, **extra: Any) -> UnitSpec:
    op = pop.op
    directives = pop.directives or {}
    into = directives.get("into") if isinstance(directives.get("into"), str) else None
    # the unit's options are resolved here, once: the store applies them as data
    options = unit_options(kind, extra.get("on_item_error", "fail"), len(items), directives)
    return UnitSpec(kind=kind, op_name=op.name, items=items, op_stack=op.stack, op_scope=op.scope,
                    dispatch_stage=frame.stage, dispatch_stack=frame.stack, into=into,
                    exec_target=op.exec_text, directives=deep_copy(directives),
                    input_view=deep_copy(pop.prepared.input), options=options, **extra)


def join_deadline_of(directives: dict | None) -> int | None:
    """``WITH join_deadline`` in ms (None: absent or not a duration)."""
    raw = directives.get("join_deadline") if directives else None
    ms = duration_to_ms(raw) if raw is not None else None
    return ms if ms is not None and ms >= 0 else None


def runs_in_process(pop: "PreparedOp") -> bool:
    """An ``mcp+`` op: txcl calls the tool itself (txcl.continuations.inprocess)."""
    target = pop.op.target
    return target is not None and target.kind == "mcp"


def _worker_budget(settings: "Settings", pop: "PreparedOp", deferred: bool) -> int:
    budget = worker_budget_ms(pop.directives or {}, settings.async_runtime_default)
    if runs_in_process(pop):  # it occupies this process: capped like a sync op
        budget = min(budget, settings.op_timeout_max)
    return budget + settings.deferred_join_slack if deferred else budget


def in_process_fuel(pop: "PreparedOp", calls: int) -> int:
    """The fuel an in-process unit spends on its own: one EXEC charge per call. It is added
    to the flow's fuel when the unit's result is merged (a remote worker's time costs none)."""
    from txcl.runtime.budget import DISPATCH_FUEL

    return DISPATCH_FUEL * calls if runs_in_process(pop) else 0


def build_unary(settings: "Settings", frame: "Frame", pop: "PreparedOp", opclass: OpClass) -> UnitSpec:
    deferred = opclass.kind == "deferred"
    return base_spec(frame, pop, "unary", [worker_input(pop.prepared.dispatched)],
                     budget_ms=_worker_budget(settings, pop, deferred),
                     join_at_scope=opclass.join_at_scope if deferred else None, fuel_used=in_process_fuel(pop, 1),
                     join_deadline_ms=join_deadline_of(pop.directives) if deferred else None)


def build_sync(settings: "Settings", frame: "Frame", pop: "PreparedOp", opclass: OpClass) -> UnitSpec:
    """A sync sibling inside a barrier: recorded so the resume can merge it (no token)."""
    return base_spec(frame, pop, "sync", [deep_copy(pop.prepared.dispatched)])


def items_of(pop: "PreparedOp") -> Any:
    """``each`` as resolved by WITH (a path resolves to its value); a path string is read from
    the op's input view (after SET PRE), so ``each = "orders"`` works like ``each = .orders``."""
    raw = (pop.directives or {}).get("each")
    if isinstance(raw, str):
        try:
            value = read(pop.prepared.input, split_path_string(raw.lstrip(".")))
        except (PathError, ValueError):
            return raw
        return raw if value is MISSING else value
    return raw


def item_problem(items: Any, settings: "Settings") -> str | None:
    """Why ``each`` cannot be awaited (None when it can)."""
    if not isinstance(items, list):
        return f"each must resolve to an array (got {json_type(items)})"
    limit = settings.await_items_max
    if limit and len(items) > limit:
        return f"each has {len(items)} elements, more than --await-items-max {limit}"
    return None


def window_of(directives: dict | None, settings: "Settings") -> int:
    """``window`` when it is an integer within 1…--await-window-max, else the default."""
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


def item_policy(directives: dict | None) -> str:
    """``fail``, ``collect``, or ``tolerate:<n>`` / ``tolerate:<p>%`` with ``tolerated_failures``
    (an integer ≥ 0 or a percentage string; anything else tolerates none)."""
    raw = directives.get("on_item_error") if directives else None
    if raw not in ITEM_POLICIES:
        return "fail"
    if raw != "tolerate":
        return raw
    return f"tolerate:{tolerance_text((directives or {}).get('tolerated_failures'))}"


def build_itemized(settings: "Settings", frame: "Frame", pop: "PreparedOp", opclass: OpClass) -> UnitSpec:
    """One interaction per element of ``each``; an ``each`` that is not an array (or is too
    long) makes a unit that failed at dispatch, with no interactions."""
    directives = pop.directives or {}
    deferred = opclass.kind == "deferred"
    join = opclass.join_at_scope if deferred else None
    items = items_of(pop)
    problem = item_problem(items, settings)
    if problem is not None:
        return base_spec(frame, pop, "itemized", [], join_at_scope=join, failed_error={"message": problem})
    return base_spec(frame, pop, "itemized", [deep_copy(x) for x in items], window=window_of(directives, settings),
                     on_item_error=item_policy(directives), budget_ms=_worker_budget(settings, pop, deferred),
                     join_at_scope=join, fuel_used=in_process_fuel(pop, len(items)),
                     join_deadline_ms=join_deadline_of(directives) if deferred else None)


def build_unit(settings: "Settings", frame: "Frame", pop: "PreparedOp", opclass: OpClass) -> UnitSpec:
    """The unit of an awaited op (``unary``/``itemized``) or of a barrier's sync sibling."""
    if opclass.unit_kind == "itemized" and opclass.kind in ("barrier", "deferred"):
        return build_itemized(settings, frame, pop, opclass)
    if opclass.unit_kind == "unary" and opclass.kind in ("barrier", "deferred"):
        return build_unary(settings, frame, pop, opclass)
    return build_sync(settings, frame, pop, opclass)


__all__ = ["OpClass", "op_class_of", "join_value", "join_due", "merge_order", "worker_budget_ms", "worker_input",
           "base_spec", "build_unit", "build_unary", "build_sync", "build_itemized", "items_of", "item_problem",
           "window_of", "item_policy", "runs_in_process", "in_process_fuel"]
