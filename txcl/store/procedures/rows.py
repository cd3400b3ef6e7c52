"""Rows to records: the one mapping from a table's columns to the store's records."""

from __future__ import annotations

import json
from typing import Any

from txcl.store.records import (
    ChildRecord,
    ClaimRecord,
    InteractionRecord,
    JsonValue,
    RunRecord,
    TerminalRecord,
    UnitRecord,
)

Row = Any  # a result row, readable by column name (sqlite3.Row, or the PostgreSQL backend's row)


def dumps(value: JsonValue) -> str | None:
    if value is None:
        return None
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def loads(text: str | None) -> JsonValue:
    return None if text is None else json.loads(text)


def placeholders(n: int) -> str:
    return ",".join("?" * n)


# --------------------------------------------------------------------------------------------
# Row → record


def run_record(r: Row) -> RunRecord:
    return RunRecord(
        run_id=r["run_id"], rcid=r["rcid"], origin_rid=r["origin_rid"], entry_stack=r["entry_stack"],
        src=r["src"], snapshot_id=r["snapshot_id"], status=r["status"], version=r["version"],
        cur_stage=r["cur_stage"], cur_visit=r["cur_visit"], segment_id=r["segment_id"],
        claim_token=r["claim_token"], expires_ms=r["expires_ms"], created_ms=r["created_ms"],
        updated_ms=r["updated_ms"], finished_ms=r["finished_ms"], fail_reason=r["fail_reason"],
        result=loads(r["result_json"]), error=loads(r["error_json"]), next_seq=r["next_seq"],
    )


def unit_fields(r: Row, directives: Any, input_view: Any) -> dict[str, Any]:
    """The columns of a `units` row as UnitRecord fields (directives/input view given)."""
    return dict(
        unit_id=r["unit_id"], run_id=r["run_id"], created_seq=r["created_seq"], kind=r["kind"],
        op_name=r["op_name"], op_stack=r["op_stack"], op_scope=r["op_scope"],
        dispatch_stage=r["dispatch_stage"], dispatch_stack=r["dispatch_stack"],
        join_at_scope=r["join_at_scope"], segment_id=r["segment_id"], status=r["status"],
        version=r["version"], expected=r["expected"], dispatch_complete=bool(r["dispatch_complete"]),
        provider_done=r["provider_done"], continuation_done=r["continuation_done"],
        window=r["window_size"], on_item_error=r["on_item_error"], into=r["into_path"],
        exec_target=r["exec_target"], directives=directives, input_view=input_view,
        output=loads(r["output_json"]), error=loads(r["error_json"]), fuel_used=r["fuel_used"],
        budget_ms=r["budget_ms"], deadline_ms=r["deadline_ms"], created_ms=r["created_ms"],
        closed_ms=r["closed_ms"],
    )


def unit_record(r: Row) -> UnitRecord:
    return UnitRecord(**unit_fields(r, loads(r["directives_json"]), loads(r["input_view_json"])))


class _RawJson:
    """A JSON column's text handed to :class:`_LazyUnitRecord`, decoded on first access."""

    __slots__ = ("text",)

    def __init__(self, text: str | None) -> None:
        self.text = text


def _lazy_field(name: str) -> property:
    slot = "_lazy_" + name

    def get(self: Any) -> Any:
        value = getattr(self, slot)
        if isinstance(value, _RawJson):
            value = loads(value.text)
            object.__setattr__(self, slot, value)
        return value

    def set_(self: Any, value: Any) -> None:  # the dataclass __init__ (and dataclasses.replace)
        object.__setattr__(self, slot, value)

    return property(get, set_)


class _LazyUnitRecord(UnitRecord):
    """A unit record whose ``directives`` and ``input_view`` are decoded on first access only.
    For an itemized op both hold the whole array (``each`` and the op's input), so decoding
    them for every completion made each item cost O(n). Used for the records the hot paths
    hand out (materialisers, callback checks); it reads like any ``UnitRecord``."""

    __slots__ = ("_lazy_directives", "_lazy_input_view")

    directives = _lazy_field("directives")  # type: ignore[assignment]
    input_view = _lazy_field("input_view")  # type: ignore[assignment]


def lazy_unit_record(r: Row) -> UnitRecord:
    return _LazyUnitRecord(**unit_fields(r, _RawJson(r["directives_json"]), _RawJson(r["input_view_json"])))


def interaction_record(r: Row) -> InteractionRecord:
    return InteractionRecord(
        opc=r["opc"], unit_id=r["unit_id"], run_id=r["run_id"], item_index=r["item_index"],
        has_token=bool(r["token_hash"]), status=r["status"], version=r["version"],
        input=loads(r["input_json"]), deadline_ms=r["deadline_ms"], dispatch_owner=r["dispatch_owner"],
        dispatch_ms=r["dispatch_ms"], attempts=r["attempts"], ack=loads(r["ack_json"]),
        created_ms=r["created_ms"], closed_ms=r["closed_ms"],
    )


def terminal_record(r: Row) -> TerminalRecord:
    return TerminalRecord(
        opc=r["opc"], status=r["status"], payload=loads(r["payload_json"]), payload_sha256=r["payload_sha256"],
        source=r["source"], best_effort=bool(r["best_effort"]), transport=r["transport"],
        fuel_used=r["fuel_used"], recorded_ms=r["recorded_ms"],
    )


def child_record(r: Row) -> ChildRecord:
    return ChildRecord(
        unit_id=r["unit_id"], item_index=r["item_index"], opc=r["opc"], status=r["status"],
        version=r["version"], output=loads(r["output_json"]), error=loads(r["error_json"]),
        lease_owner=r["lease_owner"], lease_until_ms=r["lease_until_ms"], created_ms=r["created_ms"],
        updated_ms=r["updated_ms"],
    )


def claim_record(r: Row) -> ClaimRecord:
    return ClaimRecord(
        run_id=r["run_id"], stage=r["stage"], visit=r["visit"], claim_token=r["claim_token"], owner=r["owner"],
        segment_id=r["segment_id"], attempt=r["attempt"], claimed_ms=r["claimed_ms"], heartbeat_ms=r["heartbeat_ms"],
    )
