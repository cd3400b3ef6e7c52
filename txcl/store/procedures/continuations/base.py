"""What every continuation procedure shares: the run lock, the fence check, run events and
the small time helpers (see the package docstring for the lock order and the vocabulary)."""

from __future__ import annotations

from typing import Callable, Sequence, TypeVar

from txcl.ids import token_matches
from txcl.runoptions import UnitOptions
from txcl.store.backend import SqlBackend, Tx
from txcl.store.errors import RunLost, UnknownRun
from txcl.store.procedures.rows import Row, dumps, load_doc, loads
from txcl.store.records import Dispatch, Fence, JsonValue, UnitSpec
from txcl.store.states import children, interactions, runs, sql_in

_OPEN = sql_in(interactions.OPEN)
_IN_FLIGHT = sql_in(interactions.IN_FLIGHT)
# How many calls of a unit are in flight, as a sum of one count per status: each count is an
# index range on interactions(unit_id, status). Written `status IN (...)`, PostgreSQL's generic
# plan (a prepared statement's, after its fifth use) kept only unit_id in the index condition
# and filtered the status, walking every row version of the unit: a unit of n items then cost
# O(n) per item — 0.3 ms per item at 1,000 items.
# (A column expression of a query on await_units.)
IN_FLIGHT_COUNT = "(" + " + ".join(
    f"(SELECT COUNT(*) FROM interactions i WHERE i.unit_id = await_units.unit_id AND i.status = '{status}')"
    for status in interactions.IN_FLIGHT) + ")"
_PENDING_CHILD = sql_in(children.PENDING)
_FINISHED = sql_in(runs.FINISHED)

T = TypeVar("T")


# the joined marker of a deferred op passed over at its join deadline (on_join_deadline =
# "continue"): no segment merges it, and its late answer is recorded, never merged
PASSED_OVER = "passed-over"


def _full_deadline(unit: Row, it: Row, dispatched_default: int) -> int | None:
    """An interaction's deadline without heartbeats: the unit's, else its dispatch + budget."""
    if unit["deadline_ms"] is not None:
        return unit["deadline_ms"]
    if unit["budget_ms"] is None:
        return None
    return (it["dispatch_ms"] or dispatched_default) + unit["budget_ms"]


def _unit_deadline(spec: UnitSpec, now: int) -> int | None:
    """When a call of a new unit sent now must have answered: the unit's fixed deadline, else
    now plus its budget (None: no limit)."""
    if spec.deadline_ms is not None:
        return spec.deadline_ms
    if spec.budget_ms is not None:
        return now + spec.budget_ms
    return None


def _units_deadline(units: Sequence[UnitSpec], now: int) -> int | None:
    """The latest deadline among new units' calls (a unit failed at dispatch has none)."""
    found = [d for spec in units if spec.failed_error is None and spec.items
             for d in (_unit_deadline(spec, now),) if d is not None]
    return max(found) if found else None


def _ack_cancel_url(ack: JsonValue) -> str | None:
    """The cancel URL a worker's ack names (kept with the call's token), if any."""
    url = ack.get("cancel_url") if isinstance(ack, dict) else None
    return url if isinstance(url, str) else None


def _next_beat(deadline: int | None, every: int | None, now: int) -> int | None:
    """Under WITH heartbeat the deadline is one period away (never past `deadline`)."""
    if every is None:
        return deadline
    return now + every if deadline is None else min(deadline, now + every)


def _token_problem(token: str | None, row: Row) -> str | None:
    """None when ``token`` is the call's current token; ``superseded`` for the token of an
    earlier attempt (WITH retries: the call was sent again with a fresh one); else ``bad_token``."""
    if token_matches(token, row["token_hash"]):
        return None
    retired = row["retired_tokens"]
    if token and retired and any(token_matches(token, h) for h in retired.split(",") if h):
        return "superseded"
    return "bad_token"


# An interaction's item child with its terminal (if any), found by the interaction's opc.
_CHILD_OF_OPC = (
    "SELECT c.status AS child_status, c.version AS child_version, "
    "(SELECT 1 FROM continuation_facts f WHERE f.unit_id = c.unit_id AND f.kind = 'continuation' "
    "AND f.item_index = c.item_index) AS continuation_fact, x.* FROM interactions i "
    "JOIN item_children c ON c.unit_id = i.unit_id AND c.item_index = i.item_index "
    "LEFT JOIN terminals x ON x.opc = c.opc WHERE i.opc = ?")
_UNREAD = object()  # an argument the caller did not read




# Options decoded, by their stored JSON text: frozen records, shared as a unit's dispatches
# already share one (nothing changes them); cleared when full, as a node meets new units'
# options all the time.
_OPTIONS_BY_TEXT: dict[str, UnitOptions] = {}
_OPTIONS_KEPT = 1024


class ProcedureBase:
    """The store's state the procedures share, and the in-transaction steps every stage uses."""

    backend: SqlBackend
    node_id: str

    @staticmethod
    def _options(unit: Row, column: str = "options_json") -> UnitOptions:
        """A unit's resolved options (decided by the continuations layer when it built the unit).
        Decoded once per stored text: every item of a unit reads the same options (and
        decoding them was ~3 % of a node's CPU per item)."""
        text = unit[column]
        found = _OPTIONS_BY_TEXT.get(text) if type(text) is str else None
        if found is None:
            found = UnitOptions.from_json(loads(text))
            if type(text) is str:
                if len(_OPTIONS_BY_TEXT) >= _OPTIONS_KEPT:
                    _OPTIONS_BY_TEXT.clear()
                _OPTIONS_BY_TEXT[text] = found
        return found

    def now_ms(self) -> int:
        return self.backend.now_ms()

    def commit_count(self) -> int:
        return self.backend.commit_count()

    def run_batch(self, calls: Sequence, *, lock_first: Sequence[str] = ()) -> list:
        return self.backend.run_batch(calls, lock_first=lock_first)

    def run_together(self, fn: Callable[[], T]) -> T:
        """``fn``'s store calls in one write transaction (one commit; see ``SqlBackend.run_together``)."""
        return self.backend.run_together(fn)

    def _dispatch_of(self, t: Tx, it: Row, unit: Row, token: str | None, attempts: int) -> Dispatch:
        """An interaction's dispatch as its worker receives it."""
        return Dispatch(opc=it["opc"], token=token, run_id=it["run_id"], unit_id=unit["unit_id"],
                        op_name=unit["op_name"], op_stack=unit["op_stack"], stage=unit["dispatch_stage"],
                        exec_target=unit["exec_target"], directives=self._options(unit).call_directives,
                        item_index=it["item_index"], item_count=unit["expected"], kind=unit["kind"],
                        input=load_doc(it["input_json"], t, it["run_id"]), deadline_ms=it["deadline_ms"],
                        attempts=attempts, retry=it["retry_count"] or 0)

    @staticmethod
    def _lock(t: Tx, run_id: str) -> Row:
        row = t.lock_run(run_id)
        if row is None:
            raise UnknownRun(run_id)
        return row

    @staticmethod
    def _check_fence(run: Row, fence: Fence) -> None:
        status = run["status"]
        if status == "active" and fence.claim_token is None and run["segment_id"] == fence.segment_id:
            return
        if status == "resuming" and fence.claim_token is not None and run["claim_token"] == fence.claim_token:
            return
        raise RunLost(f"segment {fence.segment_id} no longer owns run {run['run_id']} (run is {status})")

    @staticmethod
    def _event(t: Tx, run_id: str, kind: str, key: str, data: JsonValue = None, *, seq: int | None = None) -> None:
        """A run event, once per key (a repeated repair records nothing new). Events are
        numbered 1, 2, … per run; `seq` is given only where the number is known without
        reading the run's events (a run this transaction created)."""
        if seq is not None:
            t.send("INSERT INTO run_events (run_id, seq, event_key, kind, at_ms, data_json) "
                   "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING", (run_id, seq, key, kind, t.now, dumps(data)))
            return
        # (the number as a value's subquery: `INSERT … SELECT` from the table it inserts into
        # makes SQLite copy the selected rows to a temporary table first, twice the cost)
        t.send(
            "INSERT INTO run_events (run_id, seq, event_key, kind, at_ms, data_json) "
            "VALUES (?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM run_events WHERE run_id = ?), ?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            (run_id, run_id, key, kind, t.now, dumps(data)),
        )
