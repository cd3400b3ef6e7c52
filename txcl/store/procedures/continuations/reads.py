"""Reads: records of runs, suspends, units, interactions and their history, and the dashboard's
pages and counts."""

from __future__ import annotations

import zlib
from typing import Sequence

from txcl.store.backend import Tx
from txcl.store.procedures import read_procedure
from txcl.store.procedures.continuations.base import _OPEN, ProcedureBase
from txcl.store.states import interactions as interaction_states
from txcl.store.states import runs as run_states
from txcl.store.states.machine import sql_in
from txcl.store.procedures.rows import (
    Row,
    child_record,
    claim_record,
    interaction_record,
    load_doc,
    loads,
    placeholders,
    run_record,
    terminal_record,
    unit_record,
)
from txcl.store.records import (
    ChildRecord,
    ClaimRecord,
    InteractionRecord,
    JoinedMarker,
    RunEvent,
    RunRecord,
    SuspendRecord,
    TerminalRecord,
    UnitRecord,
)


_RUN_OPEN = sql_in(run_states.OPEN)
_UNIT_OPEN = sql_in(("waiting",))  # a unit not yet settled
_CALL_OPEN = sql_in(interaction_states.OPEN)


class ReadProcedures(ProcedureBase):
    @staticmethod
    def _suspend(t: Tx, run_id: str, stage: str, visit: int,
                 members: tuple[tuple[str, str], ...] | None = None) -> SuspendRecord | None:
        r = t.one("SELECT * FROM suspends WHERE run_id = ? AND stage = ? AND visit = ?", (run_id, stage, visit))
        if r is None:
            return None
        if members is None:
            members = tuple((m["unit_id"], m["role"]) for m in t.all(
                "SELECT m.unit_id, m.role FROM suspend_members m JOIN await_units u ON u.unit_id = m.unit_id "
                "WHERE m.run_id = ? AND m.stage = ? AND m.visit = ? ORDER BY u.created_seq", (run_id, stage, visit)))
        return ReadProcedures._suspend_of(t, r, members)

    @staticmethod
    def _suspend_of(t: Tx, r: Row, members: tuple[tuple[str, str], ...]) -> SuspendRecord:
        """The record of a suspend's row, with its members."""
        run_id = r["run_id"]
        return SuspendRecord(
            run_id=r["run_id"], stage=r["stage"], visit=r["visit"], kind=r["kind"], status=r["status"],
            envelope=load_doc(r["envelope_json"], t, run_id), budgets=load_doc(r["budget_json"], t, run_id),
            segment_id=r["segment_id"],
            dispatch_complete=bool(r["dispatch_complete"]), suspended_ms=r["suspended_ms"], closed_ms=r["closed_ms"],
            members=members,
        )

    @read_procedure
    def get_run(self, t: Tx, run_id: str) -> RunRecord | None:
        r = t.one("SELECT * FROM runs WHERE run_id = ?", (run_id,))
        return run_record(r, t) if r else None

    @read_procedure
    def get_run_by_rcid(self, t: Tx, rcid: str) -> RunRecord | None:
        r = t.one("SELECT * FROM runs WHERE rcid = ?", (rcid,))
        return run_record(r, t) if r else None

    @read_procedure
    def get_run_by_origin(self, t: Tx, origin_rid: str) -> RunRecord | None:
        r = t.one("SELECT * FROM runs WHERE origin_rid = ?", (origin_rid,))
        return run_record(r, t) if r else None

    @read_procedure
    def list_runs(self, t: Tx, *, status: str | Sequence[str] | None = None, limit: int = 100) -> list[RunRecord]:
        """The newest runs first; `status` one state or several."""
        if status:
            statuses = [status] if isinstance(status, str) else list(status)
            rows = t.all(f"SELECT * FROM runs WHERE status IN ({placeholders(len(statuses))}) "
                         "ORDER BY created_ms DESC, run_id DESC LIMIT ?", (*statuses, limit))
        else:
            rows = t.all("SELECT * FROM runs ORDER BY created_ms DESC, run_id DESC LIMIT ?", (limit,))
        return [run_record(r, t) for r in rows]

    @read_procedure
    def run_page(self, t: Tx, *, status: str | None = None, stack: str | None = None, text: str | None = None,
                 before: tuple[int, str] | None = None, limit: int = 50) -> list[dict]:
        """One page of runs for a listing, newest first, without their documents: run id,
        continuation id, state, stack, stage, times, resume attempts. `before` is the
        (created_ms, run_id) of the last row of the previous page (keyset paging on the
        runs_created index); `text` matches the start of a run id, continuation id or
        request id, or is a stack's name."""
        where, args = [], []
        if status:
            where.append("status = ?")
            args.append(status)
        if stack:
            where.append("entry_stack = ?")
            args.append(stack)
        if text:
            # the start of an id, as a range each id's index answers; or a stack by its name
            end = text[:-1] + chr(ord(text[-1]) + 1)
            where.append("((run_id >= ? AND run_id < ?) OR (rcid >= ? AND rcid < ?) "
                         "OR (origin_rid >= ? AND origin_rid < ?) OR entry_stack = ?)")
            args.extend([text, end, text, end, text, end, text])
        if before is not None:
            where.append("(created_ms < ? OR (created_ms = ? AND run_id < ?))")
            args.extend([before[0], before[0], before[1]])
        clause = (" WHERE " + " AND ".join(where)) if where else ""
        rows = t.all(
            "SELECT run_id, rcid, origin_rid, status, entry_stack, cur_stage, cur_visit, created_ms, updated_ms, "
            "expires_ms, finished_ms, fail_reason, "
            "(SELECT MAX(attempt) FROM resume_claims c WHERE c.run_id = runs.run_id) AS attempts "
            f"FROM runs{clause} ORDER BY created_ms DESC, run_id DESC LIMIT ?", (*args, limit))
        names = ("run_id", "rcid", "origin_rid", "status", "stack", "stage", "visit", "created_ms", "updated_ms",
                 "expires_ms", "finished_ms", "fail_reason", "attempts")
        return [dict(zip(names, r)) for r in rows]

    @read_procedure
    def run_progress(self, t: Tx, run_id: str, limit: int = 50) -> list[dict]:
        """The progress the workers of a run's open interactions reported in their heartbeats:
        `{"op", "item_index", "progress", "at_ms"}`, in dispatch order."""
        rows = t.all(
            "SELECT u.op_stack, u.op_name, u.kind, i.item_index, i.progress_json, i.heartbeat_ms FROM interactions i "
            "JOIN await_units u ON u.unit_id = i.unit_id WHERE i.run_id = ? AND i.progress_json IS NOT NULL "
            f"AND i.status IN {_OPEN} ORDER BY u.created_seq, i.item_index LIMIT ?", (run_id, limit))
        return [{"op": f"{r['op_stack']}/{r['op_name']}",
                 "item_index": r["item_index"] if r["kind"] == "itemized" else None,
                 "progress": loads(r["progress_json"]), "at_ms": r["heartbeat_ms"]} for r in rows]

    @read_procedure
    def run_counts(self, t: Tx) -> dict[str, int]:
        """How many runs are in each state."""
        return {r[0]: r[1] for r in t.all("SELECT status, COUNT(*) FROM runs GROUP BY status")}

    @read_procedure
    def open_work(self, t: Tx, now_ms: int, unit_limit: int = 100) -> dict:
        """What the metrics endpoint shows of open work, read through indexes only (runs by
        status and expiry, items by their pending-status index): open runs by state, parked runs
        by how long they have waited, items queued and in flight per itemized unit, and the jobs
        of each pull queue."""
        runs = {r[0]: r[1] for r in t.all(f"SELECT status, COUNT(*) FROM runs WHERE status IN {_RUN_OPEN} "
                                          "GROUP BY status")}
        ages = {r[0]: r[1] for r in t.all(
            "SELECT CASE WHEN updated_ms > ? THEN '1m' WHEN updated_ms > ? THEN '10m' WHEN updated_ms > ? THEN '1h' "
            "WHEN updated_ms > ? THEN '1d' ELSE 'older' END AS age, COUNT(*) FROM runs WHERE status = 'waiting' "
            "GROUP BY age", (now_ms - 60_000, now_ms - 600_000, now_ms - 3_600_000, now_ms - 86_400_000))}
        oldest = t.one("SELECT MIN(updated_ms) FROM runs WHERE status = 'waiting'")
        open_units = t.all(f"SELECT unit_id, op_stack, op_name FROM await_units WHERE status IN {_UNIT_OPEN} "
                           "AND kind = 'itemized' ORDER BY unit_id LIMIT ?", (unit_limit,))
        units: dict[str, dict] = {}
        if open_units:
            for r in open_units:
                units[r["unit_id"]] = {"op": f"{r['op_stack']}/{r['op_name']}" if r["op_stack"] else r["op_name"],
                                       "queued": 0, "in_flight": 0}
            for r in t.all(f"SELECT unit_id, status, COUNT(*) AS n FROM interactions WHERE unit_id IN "
                           f"({placeholders(len(units))}) AND status IN {_CALL_OPEN} GROUP BY unit_id, status",
                           tuple(units)):
                units[r["unit_id"]]["queued" if r["status"] == "queued" else "in_flight"] += r["n"]
        oldest_ms = oldest[0] if oldest is not None and oldest[0] is not None else None
        queues = {q["queue"]: {"ready": q["ready"], "leased": q["leased"],
                               "oldest_ready_s": (now_ms - q["oldest_ready_ms"]) / 1000.0
                               if q["oldest_ready_ms"] is not None else 0.0}
                  for q in self._queue_depths(t)}
        return {"runs": runs, "parked_by_age": ages, "oldest_parked_s": (now_ms - oldest_ms) / 1000.0
                if oldest_ms is not None else 0.0, "units": units, "queues": queues}

    @read_procedure
    def open_units_of(self, t: Tx, target_prefix: str, *, older_than_ms: int = 0, limit: int = 500) -> list[str]:
        """Waiting units whose EXEC target starts with `target_prefix` (a scheme such as
        ``nats://``), created at least `older_than_ms` ago."""
        return [r[0] for r in t.all(
            "SELECT unit_id FROM await_units WHERE status = 'waiting' AND substr(exec_target, 1, ?) = ? "
            "AND created_ms <= ? ORDER BY created_ms LIMIT ?",
            (len(target_prefix), target_prefix, t.now - older_than_ms, limit))]

    @read_procedure
    def run_stacks(self, t: Tx, limit: int = 200) -> list[str]:
        """The stacks that runs started in (for a filter's choices)."""
        return [r[0] for r in t.all("SELECT DISTINCT entry_stack FROM runs ORDER BY entry_stack LIMIT ?", (limit,))]

    @read_procedure
    def get_suspend(self, t: Tx, run_id: str, stage: str, visit: int) -> SuspendRecord | None:
        return self._suspend(t, run_id, stage, visit)

    @read_procedure
    def list_suspends(self, t: Tx, run_id: str) -> list[SuspendRecord]:
        rows = t.all("SELECT stage, visit FROM suspends WHERE run_id = ? ORDER BY suspended_ms, stage, visit",
                     (run_id,))
        return [self._suspend(t, run_id, r["stage"], r["visit"]) for r in rows]

    @read_procedure
    def get_unit(self, t: Tx, unit_id: str) -> UnitRecord | None:
        r = t.one("SELECT * FROM await_units WHERE unit_id = ?", (unit_id,))
        return unit_record(r, t) if r else None

    @read_procedure
    def list_units(self, t: Tx, run_id: str) -> list[UnitRecord]:
        return [unit_record(r, t) for r in t.all("SELECT * FROM await_units WHERE run_id = ? ORDER BY created_seq",
                                              (run_id,))]

    @read_procedure
    def get_interaction(self, t: Tx, opc: str) -> InteractionRecord | None:
        r = t.one("SELECT * FROM interactions WHERE opc = ?", (opc,))
        return interaction_record(r, t) if r else None

    @read_procedure
    def find_interaction(self, t: Tx, run_id: str, op_name: str | None = None, item_index: int = 0
                         ) -> InteractionRecord | None:
        """The newest interaction of a run (optionally of one op) at an item index (``txcl complete``)."""
        sql = ("SELECT i.* FROM interactions i JOIN await_units u ON u.unit_id = i.unit_id "
               "WHERE i.run_id = ? AND i.item_index = ?")
        params: list[object] = [run_id, item_index]
        if op_name is not None:
            sql += " AND u.op_name = ?"
            params.append(op_name)
        r = t.one(sql + " ORDER BY u.created_seq DESC LIMIT 1", params)
        return interaction_record(r, t) if r else None

    @read_procedure
    def list_interactions(self, t: Tx, unit_id: str) -> list[InteractionRecord]:
        return [interaction_record(r, t) for r in t.all(
            "SELECT * FROM interactions WHERE unit_id = ? ORDER BY item_index", (unit_id,))]

    @read_procedure
    def get_terminal(self, t: Tx, opc: str) -> TerminalRecord | None:
        r = t.one("SELECT * FROM terminals WHERE opc = ?", (opc,))
        return terminal_record(r) if r else None

    @read_procedure
    def list_children(self, t: Tx, unit_id: str) -> list[ChildRecord]:
        return [child_record(r) for r in t.all(
            "SELECT * FROM item_children WHERE unit_id = ? ORDER BY item_index", (unit_id,))]

    @read_procedure
    def list_facts(self, t: Tx, unit_id: str) -> list[tuple[str, int]]:
        rows = t.all("SELECT kind, item_index FROM continuation_facts WHERE unit_id = ? ORDER BY kind, item_index",
                     (unit_id,))
        return [(r["kind"], r["item_index"]) for r in rows]

    @read_procedure
    def get_joined_marker(self, t: Tx, unit_id: str) -> JoinedMarker | None:
        r = t.one("SELECT * FROM joined_markers WHERE unit_id = ?", (unit_id,))
        return JoinedMarker(r["unit_id"], r["run_id"], r["segment_id"], r["joined_ms"]) if r else None

    @read_procedure
    def get_claim(self, t: Tx, run_id: str) -> ClaimRecord | None:
        r = t.one("SELECT * FROM resume_claims WHERE run_id = ? ORDER BY claimed_ms DESC LIMIT 1", (run_id,))
        return claim_record(r) if r else None

    @read_procedure
    def list_run_events(self, t: Tx, run_id: str) -> list[RunEvent]:
        return [RunEvent(r["run_id"], r["seq"], r["event_key"], r["kind"], r["at_ms"], loads(r["data_json"]))
                for r in t.all("SELECT * FROM run_events WHERE run_id = ? ORDER BY seq", (run_id,))]

    @read_procedure
    def get_snapshot(self, t: Tx, snapshot_id: str) -> bytes | None:
        r = t.one("SELECT body FROM snapshots WHERE snapshot_id = ?", (snapshot_id,))
        return zlib.decompress(bytes(r["body"])) if r else None
