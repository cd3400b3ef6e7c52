"""Settle units: an answer becomes an item's child outcome and a continuation fact; a unit whose
facts are all in settles, and the next window of items is promoted."""

from __future__ import annotations

from typing import Sequence

from txcl.ids import hash_token, new_token
from txcl.runoptions import UnitOptions
from txcl.runtime_codes import item_failed_error, normalize_error, too_many_failures_error
from txcl.store.backend import Tx
from txcl.store.procedures.continuations.base import (
    IN_FLIGHT_COUNT,
    _CHILD_OF_OPC,
    _IN_FLIGHT,
    _OPEN,
    _PENDING_CHILD,
    _UNREAD,
    ProcedureBase,
    _next_beat,
)
from txcl.store.procedures.rows import UNIT_ROW, Row, columns, dumps, load_doc, loads, placeholders, terminal_record
from txcl.store.records import CHILD_PENDING, Dispatch, Materialized, TerminalRecord
from txcl.store.states.terminals import CHILD_OUTCOME
from txcl.values.reserved import sanitize_untrusted


def child_outcome(options: UnitOptions, terminal: TerminalRecord) -> Materialized:
    """An item's child outcome from its worker's terminal: a completed answer's payload is
    its output (an item output is untrusted when the unit's options say so: its reserved keys
    are dropped); a failed answer's payload is its error, normalised to an object."""
    if terminal.status == "completed":
        output = terminal.payload
        if options.sanitize_outputs and isinstance(output, dict):
            output, _ = sanitize_untrusted(output)
        return Materialized(CHILD_OUTCOME["completed"], output=output)
    return Materialized(CHILD_OUTCOME["failed"], error=normalize_error(terminal.payload))


# `_promote`'s reads, sent together: the queued calls of a waiting unit that fit in its free
# window slots (window size minus calls in flight: the LIMIT, 0 when the unit is not waiting),
# in item order — through the (unit, status, item) index; and the unit's columns they are
# dispatched with (not its input view: an itemized unit's whole array).
_PROMOTABLE = (
    "SELECT opc, run_id, item_index, input_json, attempts, retry_count FROM interactions "
    "WHERE unit_id = ? AND status = 'queued' AND (retry_at_ms IS NULL OR retry_at_ms <= ?) "
    "ORDER BY item_index LIMIT COALESCE((SELECT CASE WHEN free > 0 THEN free ELSE 0 END FROM "
    f"(SELECT window_size - {IN_FLIGHT_COUNT} AS free FROM await_units WHERE unit_id = ? AND status = 'waiting') "
    "AS slots), 0)"
)
_DISPATCH_COLUMNS = ("SELECT kind, deadline_ms, budget_ms, dispatch_stage, options_json, op_name, op_stack, "
                     "exec_target, expected FROM await_units WHERE unit_id = ?")


# a pending child's outcome, compare-and-swap on its version (`_materialize_child`)
_SETTLE_CHILD = ("UPDATE item_children SET status = ?, output_json = ?, error_json = ?, version = version + 1, "
                 "updated_ms = ?, lease_owner = NULL, lease_until_ms = NULL "
                 f"WHERE unit_id = ? AND item_index = ? AND version = ? AND status IN {_PENDING_CHILD}")

# a unit's failed child of the lowest index, through the partial index of failed children
# (`index`: the dialect's hint naming it; `unit`: the unit id's placeholder or a subquery)
FIRST_FAILED_CHILD = ("SELECT item_index, error_json FROM item_children {index} WHERE status = 'failed' "
                      "AND unit_id = {unit} ORDER BY item_index LIMIT 1")


class SettleProcedures(ProcedureBase):
    def _promote(self, t: Tx, unit_id: str) -> tuple[list[Dispatch], int | None]:
        """Move queued interactions to ``dispatching`` while in-flight < window (item order)."""
        # the queued calls that fit in the unit's free window slots and the unit's dispatch
        # columns, in one round trip; the unit's input view (an itemized unit's whole array)
        # is not read, nor decompressed, once per item
        rows, units = t.read_many((_PROMOTABLE, (unit_id, t.now, unit_id)), (_DISPATCH_COLUMNS, (unit_id,)))
        if not rows or not units:
            return [], None
        unit = units[0]
        tokened = unit["kind"] in ("unary", "itemized")
        if unit["deadline_ms"] is not None:
            deadline = unit["deadline_ms"]
        elif unit["budget_ms"] is not None:
            deadline = t.now + unit["budget_ms"]
        else:
            deadline = None
        stage = unit["dispatch_stage"]
        options = self._options(unit)
        every = options.heartbeat_ms
        # with WITH heartbeat the interaction times out one period after its last sign of life
        # (the dispatch, then each heartbeat), never later than its deadline
        due = _next_beat(deadline, every, t.now)
        cancel_url = options.cancel_url if tokened else None
        out: list[Dispatch] = []
        updates = []
        for r in rows:
            token = new_token() if tokened else None
            updates.append((hash_token(token) if token else None, due, self.node_id, t.now, cancel_url,
                            token if cancel_url else None, r["opc"]))
            out.append(
                Dispatch(
                    opc=r["opc"], token=token, run_id=r["run_id"], unit_id=unit_id, op_name=unit["op_name"],
                    op_stack=unit["op_stack"], stage=stage, exec_target=unit["exec_target"],
                    directives=options.call_directives, item_index=r["item_index"],
                    item_count=unit["expected"], kind=unit["kind"],
                    input=load_doc(r["input_json"], t, r["run_id"]),
                    deadline_ms=deadline, attempts=r["attempts"] + 1, retry=r["retry_count"] or 0,
                )
            )
        t.many(
            "UPDATE interactions SET status = 'dispatching', token_hash = ?, deadline_ms = ?, dispatch_owner = ?, "
            "dispatch_ms = ?, cancel_url = ?, cancel_token = ?, attempts = attempts + 1, retry_at_ms = NULL, "
            "version = version + 1 WHERE opc = ? AND status = 'queued'",
            updates,
        )
        return out, deadline

    @staticmethod
    def _owe_cancels(t: Tx, where: str, params: tuple, reason: str) -> None:
        """Calls already sent whose worker gave (or whose rule named) a cancel URL are owed a
        cancellation: one ``cancel_calls`` row each, delivered after the commit by the sweeper
        (at least once, with backoff). The raw token moves there and leaves the interaction."""
        t.send(
            "INSERT INTO cancel_calls (opc, run_id, url, token, reason, status, attempts, next_ms, created_ms) "
            f"SELECT opc, run_id, cancel_url, cancel_token, ?, 'pending', 0, ?, ? FROM interactions "
            f"WHERE {where} AND status IN {_IN_FLIGHT} AND cancel_url IS NOT NULL ON CONFLICT DO NOTHING",
            (reason, t.now, t.now, *params),
        )
        t.send(f"UPDATE interactions SET cancel_token = NULL WHERE {where} AND cancel_token IS NOT NULL", params)

    def _close_units(self, t: Tx, unit_ids: Sequence[str], interaction_status: str, unit_status: str = "cancelled",
                     *, reason: str = "cancelled") -> None:
        """Close units: open interactions → interaction_status (their workers are owed a
        cancellation for ``reason``), pending children cancelled."""
        for chunk_start in range(0, len(unit_ids), 500):
            chunk = list(unit_ids[chunk_start:chunk_start + 500])
            ph = placeholders(len(chunk))
            self._owe_cancels(t, f"unit_id IN ({ph})", tuple(chunk), reason)
            t.send(
                f"UPDATE interactions SET status = ?, closed_ms = ?, version = version + 1 "
                f"WHERE unit_id IN ({ph}) AND status IN {_OPEN}",
                (interaction_status, t.now, *chunk),
            )
            t.send(
                f"UPDATE item_children SET status = 'cancelled', version = version + 1, updated_ms = ?, "
                f"lease_owner = NULL WHERE unit_id IN ({ph}) AND status IN {_PENDING_CHILD}",
                (t.now, *chunk),
            )
            t.send(
                f"UPDATE await_units SET status = ?, version = version + 1, closed_ms = ? "
                f"WHERE unit_id IN ({ph}) AND status = 'waiting'",
                (unit_status, t.now, *chunk),
            )

    def _materialize_child(self, t: Tx, unit: Row, opc: str, carried_version: int | None, it: Row | None = None,
                           child: Row | None | object = _UNREAD) -> str | None:
        """The item's child outcome from its terminal. A child whose version moved since the
        caller read it (a reconcile claim in between) is reloaded and retried once while still
        ``queued``/``running``; a child already settled is never overwritten. Returns the
        child's resulting status. `it` and `child` (its row as `_CHILD_OF_OPC` reads it): when
        the caller has read them already."""
        if it is None:
            it = t.one("SELECT * FROM interactions WHERE opc = ?", (opc,))
        if it is None:
            return None
        if child is _UNREAD:
            child = t.one(_CHILD_OF_OPC, (opc,))
        if child is None:
            return None
        if child["child_status"] not in CHILD_PENDING:
            return child["child_status"]
        if child["opc"] is None:  # no terminal yet
            return child["child_status"]
        m = child_outcome(self._options(unit), terminal_record(child))
        version = child["child_version"] if carried_version is None else carried_version
        outcome = (m.status, dumps(m.output), dumps(m.error), t.now, unit["unit_id"], it["item_index"])
        if version == child["child_version"]:
            # the row was read in this transaction with the run locked (every writer of a
            # run's records takes that lock first): the compare-and-swap will change it, so it
            # goes without waiting for its answer
            t.send(_SETTLE_CHILD, (*outcome, version))
            t.fault("materialize")
            return m.status
        for _attempt in range(2):
            changed = t.run(_SETTLE_CHILD, (*outcome, version))
            if changed:
                t.fault("materialize")
                return m.status
            fresh = t.one("SELECT status, version FROM item_children WHERE unit_id = ? AND item_index = ?",
                          (unit["unit_id"], it["item_index"]))
            if fresh["status"] not in CHILD_PENDING:  # succeeded: idempotent; failed/cancelled: never overwritten
                return fresh["status"]
            version = fresh["version"]
        return t.one("SELECT status FROM item_children WHERE unit_id = ? AND item_index = ?",
                     (unit["unit_id"], it["item_index"]))["status"]

    @staticmethod
    def _add_facts(t: Tx, unit_id: str, kind: str, count: int) -> None:
        column = "provider_done" if kind == "provider" else "continuation_done"
        if count:
            t.send(f"UPDATE await_units SET {column} = {column} + ? WHERE unit_id = ?", (count, unit_id))

    @staticmethod
    def _fact(t: Tx, unit_id: str, kind: str, item_index: int, *, counted: bool = False) -> bool:
        """Record a provider or continuation fact (once per item) and count it on the unit.
        The count goes first, raised only while the fact is absent: under the run lock nobody
        else inserts it in between, and neither statement needs to wait for an answer —
        unless `counted` asks whether the count went up (True: the fact is new; without
        `counted`, always False)."""
        column = "provider_done" if kind == "provider" else "continuation_done"
        count = (f"UPDATE await_units SET {column} = {column} + 1 WHERE unit_id = ? AND NOT EXISTS "
                 "(SELECT 1 FROM continuation_facts WHERE unit_id = ? AND kind = ? AND item_index = ?)",
                 (unit_id, unit_id, kind, item_index))
        raised = False
        if counted:
            raised = t.run(*count) == 1
        else:
            t.send(*count)
        t.send("INSERT INTO continuation_facts (unit_id, kind, item_index, recorded_ms) VALUES (?, ?, ?, ?) "
               "ON CONFLICT DO NOTHING", (unit_id, kind, item_index, t.now))
        return raised

    def _record_continuation_fact(self, t: Tx, unit: Row, item_index: int, child_status: str | None,
                                  recorded: bool | None = None) -> Row:
        """Only a succeeded child counts — or a failed one of a unit that does not fail fast.
        Returns the unit's row as it now stands (`unit` with its continuation count raised
        when the fact was new): nothing else writes the unit meanwhile, under the run lock.
        `recorded`: whether the fact exists, when the caller read it with the run locked in
        this transaction (its statements then go without waiting for an answer)."""
        ok = child_status == "succeeded" or (
            child_status == "failed" and not self._options(unit).fails_fast)
        if not ok or unit["status"] != "waiting":
            return unit
        if recorded is None:
            new = self._fact(t, unit["unit_id"], "continuation", item_index, counted=True)
        else:
            new = not recorded
            if new:
                self._fact(t, unit["unit_id"], "continuation", item_index)
        if new:
            unit = {**columns(unit), "continuation_done": unit["continuation_done"] + 1}
        return unit

    def _settle_unit(self, t: Tx, unit_id: str, *, reconcile: bool = False, unit: Row | None = None,
                     first_failed: Row | None | object = _UNREAD) -> str:
        """Complete (or fail) a unit from its stored facts and children. Returns its status.
        `unit`: its current row, when the caller has it (else it is read). `first_failed`:
        the unit's failed child of the lowest index (None: none), when the caller read it
        with the run locked in this transaction and wrote no failed child since."""
        if unit is None:
            unit = t.one(f"{UNIT_ROW} WHERE unit_id = ?", (unit_id,))
        if unit is None:
            return "gone"
        if unit["status"] != "waiting":
            return unit["status"]
        options = self._options(unit)
        kind = unit["kind"]
        fail_fast = options.fails_fast
        # through the partial index of failed children: cost flat in the unit's size (a scan of
        # every child per completion made a large itemized await quadratic)
        failed_index = t.backend.dialect.using_index("item_children_failed")
        bound = options.tolerated_failures
        if bound is not None:
            failed = t.one(f"SELECT COUNT(*) AS n, MIN(item_index) AS first FROM item_children {failed_index} "
                           "WHERE unit_id = ? AND status = 'failed'", (unit_id,))
            if failed["n"] > bound:  # more than tolerated: the unit fails now, as a fail-fast one would
                first = t.one("SELECT error_json FROM item_children WHERE unit_id = ? AND item_index = ?",
                              (unit_id, failed["first"]))
                error = too_many_failures_error(failed["n"], unit["expected"], options.tolerated_text or "0",
                                                failed["first"], loads(first["error_json"]))
                t.send("UPDATE await_units SET error_json = ? WHERE unit_id = ?", (dumps(error), unit_id))
                self._close_units(t, [unit_id], "cancelled", unit_status="failed", reason="item_failed")
                return "failed"
        if fail_fast and unit["continuation_done"] < unit["expected"]:
            # (with every fact present no child can have failed: facts follow succeeded children only)
            bad = (t.one(FIRST_FAILED_CHILD.format(index=failed_index, unit="?"), (unit_id,))
                   if first_failed is _UNREAD else first_failed)
            if bad is not None:
                error = item_failed_error(kind == "itemized", bad["item_index"], loads(bad["error_json"]))
                t.send("UPDATE await_units SET error_json = ? WHERE unit_id = ?", (dumps(error), unit_id))
                self._close_units(t, [unit_id], "cancelled", unit_status="failed", reason="item_failed")
                return "failed"
        expected = unit["expected"]
        done = unit["continuation_done"]
        if done < expected and (unit["provider_done"] >= expected or reconcile):
            # repair missing continuation facts, only for settled children the unit accepts
            accepted = "('succeeded', 'failed')" if not fail_fast else "('succeeded')"
            repaired = t.returning(
                "INSERT INTO continuation_facts (unit_id, kind, item_index, recorded_ms) "
                f"SELECT unit_id, 'continuation', item_index, ? FROM item_children WHERE unit_id = ? "
                f"AND status IN {accepted} ON CONFLICT DO NOTHING RETURNING item_index",
                (t.now, unit_id),
            )
            if repaired:
                self._add_facts(t, unit_id, "continuation", len(repaired))
                done += len(repaired)
                self._event(t, unit["run_id"], "reconcile.facts", f"reconcile.facts:{unit_id}:{done}",
                            {"unit_id": unit_id, "items": sorted(r[0] for r in repaired)})
        if done < expected:
            return "waiting"
        children = t.all(
            "SELECT item_index, status, output_json, error_json FROM item_children WHERE unit_id = ? "
            "ORDER BY item_index",
            (unit_id,),
        )
        allowed = ("succeeded",) if fail_fast else ("succeeded", "failed")
        if len(children) != expected or any(c["status"] not in allowed for c in children):
            return "waiting"
        error = None
        if kind == "itemized":
            output = [
                loads(c["output_json"]) if c["status"] == "succeeded" else {"error": loads(c["error_json"])}
                for c in children
            ]
        elif expected == 0:
            output = None
        else:
            c = children[0]
            output = loads(c["output_json"]) if c["status"] == "succeeded" else None
            if c["status"] == "failed":  # a best-effort sync sibling: completed, error noted
                error = loads(c["error_json"])
        # the unit's row was read in this transaction with its run locked (every writer of a
        # unit holds that lock), so the compare-and-swap changes it: sent without waiting
        t.send(
            "UPDATE await_units SET status = 'completed', output_json = ?, error_json = COALESCE(?, error_json), "
            "version = version + 1, closed_ms = ? WHERE unit_id = ? AND status = 'waiting' AND version = ?",
            (dumps(output), dumps(error), t.now, unit_id, unit["version"]),
        )
        return "completed"

    def _drain_unit(self, t: Tx, unit_id: str) -> str:
        """Materialise every pending child whose terminal exists, then settle."""
        unit = t.one(f"{UNIT_ROW} WHERE unit_id = ?", (unit_id,))
        if unit is None or unit["status"] != "waiting":
            return unit["status"] if unit else "gone"
        pending = t.all(
            f"SELECT c.opc, c.item_index FROM item_children c JOIN terminals x ON x.opc = c.opc "
            f"WHERE c.unit_id = ? AND c.status IN {_PENDING_CHILD} ORDER BY c.item_index",
            (unit_id,),
        )
        for p in pending:
            status = self._materialize_child(t, unit, p["opc"], None)
            unit = t.one("SELECT * FROM await_units WHERE unit_id = ?", (unit_id,))
            self._record_continuation_fact(t, unit, p["item_index"], status)
        return self._settle_unit(t, unit_id)
