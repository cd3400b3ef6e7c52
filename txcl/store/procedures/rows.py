"""Rows to records: the one mapping from a table's columns to the store's records."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from txcl.runoptions import UnitOptions
from txcl.store.blobs import needs_fetch, referenced_digests, unpack

# every document column's text, written and read one way (the procedures import dumps from here)
from txcl.store.jsoncols import dumps, loads  # noqa: F401
from txcl.store.records import (
    ChildRecord,
    ClaimRecord,
    InteractionRecord,
    JsonValue,
    RunRecord,
    TerminalRecord,
    UnitRecord,
)

if TYPE_CHECKING:
    from txcl.store.backend import Tx

Row = Any  # a result row, readable by column name (sqlite3.Row, or the PostgreSQL backend's row)


def load_doc(text: str | None, t: Tx | None, run_id: str) -> JsonValue:
    """A document column that may hold references to the run's stored strings (see
    txcl.store.blobs): plain JSON when it holds none, the strings read back through `t` when
    it does."""
    if not needs_fetch(text):
        return loads(text)
    if t is None:
        raise ValueError("a document with stored strings needs the transaction to read them")
    return unpack(text, lambda digests: read_blobs(t, run_id, digests))


def read_blobs(t: Tx, run_id: str, digests: list[str]) -> dict[str, str]:
    rows = t.all(f"SELECT digest, body FROM blobs WHERE run_id = ? AND digest IN ({placeholders(len(digests))})",
                 (run_id, *digests))
    return {r["digest"]: r["body"] for r in rows}


def write_blobs(t: Tx, run_id: str, blobs: dict[str, str]) -> None:
    """Store the strings `pack` moved out of this write's documents, each once per run (one
    that is already there is not sent again)."""
    if not blobs:
        return
    digests = sorted(blobs)
    have = {r["digest"] for r in t.all(
        f"SELECT digest FROM blobs WHERE run_id = ? AND digest IN ({placeholders(len(digests))})", (run_id, *digests))}
    for digest in digests:
        if digest not in have:
            t.send("INSERT INTO blobs (run_id, digest, body) VALUES (?, ?, ?)", (run_id, digest, blobs[digest]))
    blobs.clear()


def placeholders(n: int) -> str:
    return ",".join("?" * n)


# --------------------------------------------------------------------------------------------
# Row → record


def columns(r: Row) -> dict[str, Any]:
    """A row as a dict of its columns, for the builders below, which read most of them.

    `sqlite3.Row` finds a column by comparing its name with every column before it: about
    1,500 instructions a read in a 20-column row, and these builders read ~280 columns per
    suspend → callback → resume cycle (7% of its instructions). One dict, made in C, finds
    each by its hash. A name selected twice is read as the row itself reads it (with
    `sqlite3.Row`, its first column).
    """
    names = r.keys()
    values = tuple(r)
    if len(names) == len(values):
        made = dict(zip(names, values))
        if len(made) == len(names):
            return made
    return {name: r[name] for name in names}


def run_record(r: Row, t: Tx | None = None) -> RunRecord:
    r = columns(r)
    return RunRecord(
        run_id=r["run_id"], rcid=r["rcid"], origin_rid=r["origin_rid"], entry_stack=r["entry_stack"],
        src=r["src"], snapshot_id=r["snapshot_id"], status=r["status"], version=r["version"],
        cur_stage=r["cur_stage"], cur_visit=r["cur_visit"], segment_id=r["segment_id"],
        claim_token=r["claim_token"], expires_ms=r["expires_ms"], created_ms=r["created_ms"],
        updated_ms=r["updated_ms"], finished_ms=r["finished_ms"], fail_reason=r["fail_reason"],
        result=load_doc(r["result_json"], t, r["run_id"]), error=loads(r["error_json"]), next_seq=r["next_seq"],
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
        closed_ms=r["closed_ms"], join_deadline_ms=_column(r, "join_deadline_ms"),
        options=unit_options_of(r),
    )


def unit_options_of(r: Row) -> UnitOptions:
    """A unit row's resolved options (see txcl.runoptions)."""
    return UnitOptions.from_json(loads(_column(r, "options_json")))


# A unit's own columns, without its input view (an itemized unit's whole array, read and sent —
# on PostgreSQL decompressed — at every item otherwise) and its WITH options (their meaning is
# in options_json): what the procedures that admit, settle and release read once per item.
UNIT_ROW = ("SELECT unit_id, run_id, created_seq, kind, op_name, op_stack, op_scope, dispatch_stage, "
            "dispatch_stack, join_at_scope, segment_id, status, version, expected, dispatch_complete, "
            "provider_done, continuation_done, window_size, on_item_error, into_path, exec_target, "
            "output_json, error_json, fuel_used, budget_ms, deadline_ms, join_deadline_ms, "
            "options_json, created_ms, closed_ms FROM await_units")
# the same as a row a unit record can be made of: its view and directives come back None
UNIT_ROW_FOR_RECORD = UNIT_ROW.replace(" FROM await_units",
                                       ", NULL AS input_view_json, NULL AS directives_json FROM await_units")


def unit_record(r: Row, t: Tx | None = None) -> UnitRecord:
    r = columns(r)
    return UnitRecord(**unit_fields(r, loads(r["directives_json"]), load_doc(r["input_view_json"], t, r["run_id"])))


class _RawJson:
    """A JSON column's text handed to :class:`_LazyUnitRecord`, decoded on first access."""

    __slots__ = ("text",)

    def __init__(self, text: str | None) -> None:
        self.text = text

    def decode(self) -> JsonValue:
        return loads(self.text)


class _StoredJson(_RawJson):
    """A document column holding references to the run's stored strings: the strings are
    read when the record is made (inside its transaction), the document is decoded and
    the strings put back only on first access."""

    __slots__ = ("strings",)

    def __init__(self, text: str, t: "Tx | None", run_id: str) -> None:
        super().__init__(text)
        if t is None:
            raise ValueError("a document with stored strings needs the transaction to read them")
        digests = referenced_digests(text)
        self.strings = read_blobs(t, run_id, digests) if digests else {}

    def decode(self) -> JsonValue:
        strings = self.strings
        return unpack(self.text, lambda digests: {d: strings[d] for d in digests if d in strings})


def _lazy_field(name: str) -> property:
    slot = "_lazy_" + name

    def get(self: Any) -> Any:
        value = getattr(self, slot)
        if isinstance(value, _RawJson):
            value = value.decode()
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


def lazy_unit_record(r: Row, t: Tx | None = None) -> UnitRecord:
    r = columns(r)
    view = r["input_view_json"]
    # A view holding stored strings has them read now, while the transaction is there; like
    # any view it is decoded only if read. An itemized unit's view holds the whole array, and
    # every item's completion makes this record: decoding it each time made a run of n items
    # cost O(n²) once its input was big enough to have stored strings.
    input_view = _StoredJson(view, t, r["run_id"]) if needs_fetch(view) else _RawJson(view)
    return _LazyUnitRecord(**unit_fields(r, _RawJson(r["directives_json"]), input_view))


def interaction_record(r: Row, t: Tx | None = None) -> InteractionRecord:
    r = columns(r)
    return InteractionRecord(
        opc=r["opc"], unit_id=r["unit_id"], run_id=r["run_id"], item_index=r["item_index"],
        has_token=bool(r["token_hash"]), status=r["status"], version=r["version"],
        input=load_doc(r["input_json"], t, r["run_id"]), deadline_ms=r["deadline_ms"],
        dispatch_owner=r["dispatch_owner"],
        dispatch_ms=r["dispatch_ms"], attempts=r["attempts"], ack=loads(r["ack_json"]),
        created_ms=r["created_ms"], closed_ms=r["closed_ms"],
        heartbeat_ms=_column(r, "heartbeat_ms"), progress=loads(_column(r, "progress_json")),
        cancel_url=_column(r, "cancel_url"), retry_count=_column(r, "retry_count") or 0,
        retry_at_ms=_column(r, "retry_at_ms"),
    )


def _column(r: Row, name: str) -> Any:
    """A column a query may not have selected (None then)."""
    try:
        return r[name]
    except (IndexError, KeyError):
        return None


def terminal_record(r: Row) -> TerminalRecord:
    r = columns(r)
    return TerminalRecord(
        opc=r["opc"], status=r["status"], payload=loads(r["payload_json"]), payload_sha256=r["payload_sha256"],
        source=r["source"], best_effort=bool(r["best_effort"]), transport=r["transport"],
        fuel_used=r["fuel_used"], recorded_ms=r["recorded_ms"],
    )


def child_record(r: Row) -> ChildRecord:
    r = columns(r)
    return ChildRecord(
        unit_id=r["unit_id"], item_index=r["item_index"], opc=r["opc"], status=r["status"],
        version=r["version"], output=loads(r["output_json"]), error=loads(r["error_json"]),
        lease_owner=r["lease_owner"], lease_until_ms=r["lease_until_ms"], created_ms=r["created_ms"],
        updated_ms=r["updated_ms"],
    )


def claim_record(r: Row) -> ClaimRecord:
    r = columns(r)
    return ClaimRecord(
        run_id=r["run_id"], stage=r["stage"], visit=r["visit"], claim_token=r["claim_token"], owner=r["owner"],
        segment_id=r["segment_id"], attempt=r["attempt"], claimed_ms=r["claimed_ms"], heartbeat_ms=r["heartbeat_ms"],
    )
