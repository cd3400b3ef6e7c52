"""Joins and deadlines: the deferred join check, joined markers, passing over at a join deadline,
interaction timeouts and run expiry."""

from __future__ import annotations

from typing import Sequence

from txcl.runtime_codes import (
    expiry_error,
    heartbeat_missed_error,
    join_deadline_error,
    join_failed_error,
    timeout_error,
)
from txcl.store.backend import Tx
from txcl.store.procedures import write_procedure
from txcl.store.procedures.continuations.base import _OPEN, PASSED_OVER, ProcedureBase, _full_deadline
from txcl.store.procedures.rows import Row, dumps, placeholders, unit_record
from txcl.store.records import (
    INTERACTION_OPEN,
    UNIT_BAD,
    ClaimRecord,
    Dispatch,
    ExpireResult,
    Fence,
    JoinResult,
    JsonValue,
    ParkResult,
    TimeoutResult,
    UnitRecord,
)


class JoinProcedures(ProcedureBase):
    @write_procedure
    def join_check(self, t: Tx, run_id: str, fence: Fence, *, unit_ids: Sequence[str], stage: str,
                   park_envelope: JsonValue = None, park_state: JsonValue = None) -> JoinResult:
        """The join of the deferred units ``unit_ids`` (the caller's floor rule says they are
        due at this frame), under the run lock: merge what has arrived when nothing due is
        still waiting (``proceed``, with the units to merge, each marked joined exactly once),
        fail the run when a due unit failed (``failed``: the run is failed in this same
        transaction), or park the flow here as a ``join`` suspend (``parked``) with the
        caller's envelope and state as they are. A parked join waits for every due unit, those
        that arrived already included: none is merged in the request, and the resume merges
        them all in merge order. Units already joined or cancelled are skipped.

        A unit still waiting past its ``join_deadline`` fails the run (``join_deadline``), or
        under ``on_join_deadline = "continue"`` is passed over: marked joined by no segment
        (``passed_over``), its late answer recorded but never merged."""
        run = self._lock(t, run_id)
        self._check_fence(run, fence)
        if not unit_ids:
            return JoinResult("proceed")
        due = t.all(
            f"SELECT unit_id FROM await_units u WHERE run_id = ? AND unit_id IN ({placeholders(len(unit_ids))}) "
            "AND join_at_scope IS NOT NULL AND status != 'cancelled' "
            "AND NOT EXISTS (SELECT 1 FROM joined_markers m WHERE m.unit_id = u.unit_id) "
            "ORDER BY op_name, created_seq",
            (run_id, *unit_ids),
        )
        if not due:
            return JoinResult("proceed")
        arrived: list[UnitRecord] = []
        waiting: list[str] = []
        passed: list[UnitRecord] = []

        def fail(unit: UnitRecord, error: JsonValue, reason: str) -> JoinResult:
            for done in arrived:  # (as joined by this segment: the failed run merges nothing more)
                self._insert_marker(t, done.unit_id, run_id, fence.segment_id)
            self._finish(t, run, status="failed", result=None, error=error, fail_reason=reason)
            return JoinResult("failed", tuple(arrived), unit, None, error, tuple(passed))

        for d in due:
            status = self._drain_unit(t, d["unit_id"])
            unit = unit_record(t.one("SELECT * FROM await_units WHERE unit_id = ?", (d["unit_id"],)), t)
            if status in UNIT_BAD:
                self._insert_marker(t, unit.unit_id, run_id, fence.segment_id)
                return fail(unit, join_failed_error(unit.op_name, unit.unit_id, unit.status, unit.error),
                            "join_failed")
            if status == "completed":
                arrived.append(unit)
            elif unit.join_deadline_ms is not None and unit.join_deadline_ms <= t.now:
                if not unit.options.pass_over_at_join_deadline:
                    return fail(unit, join_deadline_error(unit.op_name, unit.unit_id, unit.options.join_deadline_text),
                                "join_deadline")
                self._pass_over(t, unit)
                passed.append(unit)
            else:
                waiting.append(unit.unit_id)
        if not waiting:
            for unit in arrived:
                self._insert_marker(t, unit.unit_id, run_id, fence.segment_id)
            return JoinResult("proceed", tuple(arrived), passed_over=tuple(passed))
        if park_envelope is None:
            raise ValueError("join_check needs the envelope to park when a due unit is still waiting")
        members = [(u.unit_id, "join") for u in arrived] + [(u, "join") for u in waiting]
        visit, _, _, parked = self._park(t, run, fence, stage=stage, kind="join", envelope=park_envelope,
                                         budgets=park_state, units=(), members=members)
        t.fault("park")
        return JoinResult("parked", (), None, ParkResult(parked, False, stage, visit, (), ()),
                          passed_over=tuple(passed))

    def _pass_over(self, t: Tx, unit: UnitRecord) -> None:
        """A deferred op not ready by its join deadline under ``on_join_deadline = "continue"``:
        its marker names no segment, so nobody merges it; its calls stay open (a late answer
        is recorded) until their own deadline."""
        t.send("INSERT INTO joined_markers (unit_id, run_id, segment_id, joined_ms) VALUES (?, ?, ?, ?) "
               "ON CONFLICT DO NOTHING", (unit.unit_id, unit.run_id, PASSED_OVER, t.now))
        self._event(t, unit.run_id, "join.passed_over", f"passed_over:{unit.unit_id}",
                    {"unit_id": unit.unit_id, "op": unit.op_name})

    @staticmethod
    def _insert_marker(t: Tx, unit_id: str, run_id: str, segment_id: str) -> bool:
        return bool(t.returning(
            "INSERT INTO joined_markers (unit_id, run_id, segment_id, joined_ms) VALUES (?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING RETURNING unit_id",
            (unit_id, run_id, segment_id, t.now),
        ))

    @write_procedure
    def record_join(self, t: Tx, unit_id: str, fence: Fence) -> bool:
        """Insert a joined marker for a segment that owns the run; True only for the inserter."""
        run = t.lock_run_of("await_units", "unit_id", unit_id)
        if run is None:
            return False
        run_id = run["run_id"]
        self._check_fence(run, fence)
        return self._insert_marker(t, unit_id, run_id, fence.segment_id)

    @write_procedure
    def time_out_interaction(self, t: Tx, opc: str, *, skip_locked: bool = True) -> TimeoutResult:
        """Time out one interaction whose deadline has passed (the sweeper's timeout pass)."""
        if t.lock_run_of("interactions", "opc", opc, skip_locked=skip_locked) is None:
            known = t.one("SELECT 1 FROM interactions WHERE opc = ?", (opc,)) is not None
            return TimeoutResult("busy" if known else "unknown")
        it = t.one("SELECT * FROM interactions WHERE opc = ?", (opc,))
        if it["status"] not in INTERACTION_OPEN:
            return TimeoutResult(it["status"])
        if it["deadline_ms"] is None or it["deadline_ms"] >= t.now:
            return TimeoutResult("not_due")
        claim, expired, promoted = self._time_out(t, it)
        return TimeoutResult("timed_out", claim, expired, tuple(promoted))

    def _time_out(self, t: Tx, it: Row) -> tuple[ClaimRecord | None, bool, list[Dispatch]]:
        """Returns (the release claim if a collect timeout completed the unit, whether the run
        expired, the items promoted into the freed window slot under collect)."""
        opc, unit_id, index, run_id = it["opc"], it["unit_id"], it["item_index"], it["run_id"]
        self._owe_cancels(t, "opc = ?", (opc,), "timed_out")
        if t.run(f"UPDATE interactions SET status = 'timed_out', closed_ms = ?, version = version + 1 "
                 f"WHERE opc = ? AND status IN {_OPEN}", (t.now, opc)) != 1:
            return None, False, []
        unit = t.one("SELECT * FROM await_units WHERE unit_id = ?", (unit_id,))
        if unit["status"] != "waiting":
            return None, False, []
        options = self._options(unit)
        itemized = unit["kind"] == "itemized"
        error = timeout_error(itemized, index)
        every = options.heartbeat_ms
        full = _full_deadline(unit, it, 0)
        lapsed = every is not None and it["deadline_ms"] is not None and (full is None or it["deadline_ms"] < full)
        if lapsed:
            error = heartbeat_missed_error(itemized, index, every)
        if itemized and not options.fails_fast:
            t.send(
                "INSERT INTO item_children (unit_id, item_index, opc, status, version, error_json, created_ms, "
                "updated_ms) VALUES (?, ?, ?, 'failed', 1, ?, ?, ?) ON CONFLICT (unit_id, item_index) DO UPDATE SET "
                "status = 'failed', error_json = excluded.error_json, version = item_children.version + 1, "
                "updated_ms = excluded.updated_ms WHERE item_children.status IN ('queued', 'running')",
                (unit_id, index, opc, dumps(error), t.now, t.now),
            )
            self._record_continuation_fact(t, unit, index, "failed")
            # the timed-out item has its outcome: its window slot goes to the next queued item,
            # exactly as after an admitted completion, raising the run's expiry with it
            promoted, deadline = self._promote(t, unit_id)
            self._raise_expiry(t, run_id, deadline)
            self._settle_unit(t, unit_id)
            return self._release(t, run_id), False, promoted
        t.send("UPDATE await_units SET error_json = ? WHERE unit_id = ?", (dumps(error), unit_id))
        self._close_units(t, [unit_id], "cancelled", unit_status="timed_out",
                          reason="heartbeat_missed" if lapsed else "timed_out")
        run = t.one("SELECT * FROM runs WHERE run_id = ?", (run_id,))
        member = t.one(
            "SELECT 1 FROM suspend_members m JOIN suspends s ON s.run_id = m.run_id AND s.stage = m.stage "
            "AND s.visit = m.visit WHERE m.run_id = ? AND m.stage = ? AND m.visit = ? AND m.unit_id = ? "
            "AND s.status = 'open'",
            (run_id, run["cur_stage"], run["cur_visit"], unit_id),
        )
        if run["status"] == "waiting" and member is not None:
            if lapsed:
                self._expire(t, run, reason="heartbeat_missed", detail={"unit_id": unit_id, "opc": opc,
                                                                        "error": error})
            else:
                self._expire(t, run, reason="timed_out", detail={"unit_id": unit_id, "opc": opc})
            return None, True, []
        return None, False, []

    @write_procedure
    def expire_run(self, t: Tx, run_id: str, *, skip_locked: bool = True) -> ExpireResult:
        """Expire a run past its ``expires_ms`` — unless everything it waits for was admitted
        in time and only the store's own work (children not yet materialised) is missing: then
        that work is done and the run released instead."""
        run = t.lock_run(run_id, skip_locked=skip_locked)
        if run is None or run["status"] not in ("active", "waiting"):
            return ExpireResult(False)
        if run["expires_ms"] is None or run["expires_ms"] >= t.now:
            return ExpireResult(False)
        if run["status"] == "waiting":
            for unit_id in self._current_members(t, run):
                self._drain_unit(t, unit_id)
            claim = self._release(t, run_id)
            if claim is not None:
                self._event(t, run_id, "reconcile.release", f"reconcile.release:{claim.stage}:{claim.visit}",
                            {"run_id": run_id, "at_expiry": True})
                return ExpireResult(False, claim)
        self._expire(t, run, reason="expired", detail=None)
        return ExpireResult(True)

    def _expire(self, t: Tx, run: Row, *, reason: str, detail: JsonValue) -> None:
        run_id = run["run_id"]
        t.send("UPDATE suspends SET status = 'expired', closed_ms = ? WHERE run_id = ? AND status = 'open'",
              (t.now, run_id))
        error = expiry_error(reason, detail)
        t.send(
            "UPDATE runs SET status = 'expired', fail_reason = ?, error_json = ?, finished_ms = ?, updated_ms = ?, "
            "claim_token = NULL, segment_id = NULL, version = version + 1 WHERE run_id = ?",
            (reason, dumps(error), t.now, t.now, run_id),
        )
        self._let_go(t, run, expired=True, keep_unjoined_deferred=False, reason=reason)
        self._event(t, run_id, "run.expired", "expired", {"reason": reason})
        t.notify_run(run_id)
