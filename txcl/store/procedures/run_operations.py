"""Operations on whole runs, built on the continuation procedures: an operator's cancel and
retry, the join-deadline pass over parked runs, and the cancellations owed to workers.

Each public method is one transaction, like the procedures it builds on (see
:mod:`txcl.store.procedures.continuations` for the lock order and the vocabulary).
"""

from __future__ import annotations

import os

from txcl.runtime_codes import RUN_CANCELLED, join_deadline_error
from txcl.store.backend import Tx
from txcl.store.procedures import read_procedure, write_procedure
from txcl.store.procedures.continuations import PASSED_OVER, ContinuationProcedures
from txcl.store.procedures.rows import unit_record
from txcl.store.records import CancelCall, JoinDeadlineResult, RetryResult, UnitRecord


class RunOperationProcedures(ContinuationProcedures):
    """Cancel and retry a run, fail or pass over joins past their deadline, deliver-side
    bookkeeping of the cancellations owed to workers."""

    @write_procedure
    def miss_join_deadline(self, t: Tx, run_id: str, *, skip_locked: bool = True) -> JoinDeadlineResult:
        """A run parked at a join whose deferred op is past its ``join_deadline`` (the
        sweeper's pass): the run fails with ``join_deadline`` — or, when every overdue op says
        ``on_join_deadline = "continue"``, they are passed over and the run is released to run
        the join scope without them."""
        run = t.lock_run(run_id, skip_locked=skip_locked)
        if run is None or run["status"] != "waiting":
            return JoinDeadlineResult("not_due")
        where = (run_id, run["cur_stage"], run["cur_visit"])
        overdue: list[UnitRecord] = []
        for m in t.all("SELECT unit_id FROM suspend_members WHERE run_id = ? AND stage = ? AND visit = ? "
                       "AND role = 'join'", where):
            if self._drain_unit(t, m["unit_id"]) != "waiting":
                continue
            unit = unit_record(t.one("SELECT * FROM await_units WHERE unit_id = ?", (m["unit_id"],)), t)
            if unit.join_deadline_ms is not None and unit.join_deadline_ms <= t.now:
                overdue.append(unit)
        if not overdue:
            claim = self._release(t, run_id)  # what the drain completed may release it
            return JoinDeadlineResult("released", claim) if claim is not None else JoinDeadlineResult("not_due")
        failing = [u for u in overdue if not u.options.pass_over_at_join_deadline]
        if failing:
            t.send("UPDATE suspends SET status = 'failed', closed_ms = ? WHERE run_id = ? AND status = 'open'",
                   (t.now, run_id))
            first = failing[0]
            self._finish(t, run, status="failed", result=None, fail_reason="join_deadline",
                         error=join_deadline_error(first.op_name, first.unit_id, first.options.join_deadline_text))
            return JoinDeadlineResult("failed")
        for unit in overdue:
            t.send("DELETE FROM suspend_members WHERE run_id = ? AND stage = ? AND visit = ? AND unit_id = ?",
                   (*where, unit.unit_id))
            self._pass_over(t, unit)
        claim = self._release(t, run_id)
        return JoinDeadlineResult("released", claim) if claim is not None else JoinDeadlineResult("waiting")

    @read_procedure
    def overdue_joins(self, t: Tx, *, limit: int = 500) -> list[str]:
        """Runs parked at a join whose deferred op is past its join deadline."""
        return [r["run_id"] for r in t.all(
            "SELECT DISTINCT u.run_id FROM await_units u JOIN runs r ON r.run_id = u.run_id "
            "JOIN suspend_members m ON m.unit_id = u.unit_id AND m.run_id = r.run_id AND m.stage = r.cur_stage "
            "AND m.visit = r.cur_visit AND m.role = 'join' "
            "WHERE u.join_deadline_ms IS NOT NULL AND u.status = 'waiting' AND u.join_deadline_ms <= ? "
            "AND r.status = 'waiting' LIMIT ?",
            (t.now, limit))]

    @write_procedure
    def claim_cancel_calls(self, t: Tx, *, limit: int = 100, lease_ms: int = 30_000) -> list[CancelCall]:
        """The cancellations due now, leased for ``lease_ms`` (another sweeper skips them
        meanwhile; a crashed deliverer's lease runs out and they are sent again)."""
        rows = t.all("SELECT * FROM cancel_calls WHERE status = 'pending' AND next_ms <= ? ORDER BY next_ms LIMIT ?",
                     (t.now, limit))
        out = []
        for r in rows:
            if t.run("UPDATE cancel_calls SET next_ms = ? WHERE opc = ? AND status = 'pending' AND next_ms = ?",
                     (t.now + lease_ms, r["opc"], r["next_ms"])) == 1:
                out.append(CancelCall(opc=r["opc"], run_id=r["run_id"], url=r["url"], token=r["token"],
                                      reason=r["reason"], attempts=r["attempts"]))
        return out

    @write_procedure
    def record_cancel_call(self, t: Tx, opc: str, *, delivered: bool, error: str | None = None,
                           max_attempts: int = 6, backoff_ms: int = 1_000) -> str:
        """The outcome of one cancellation POST: ``delivered``; else tried again after
        ``backoff_ms`` × 2^attempts (with jitter) until ``max_attempts``, then ``abandoned``.
        The token is forgotten once the call is settled. A run event records each outcome."""
        row = t.one("SELECT * FROM cancel_calls WHERE opc = ?", (opc,))
        if row is None or row["status"] != "pending":
            return row["status"] if row is not None else "unknown"
        attempts = row["attempts"] + 1
        if delivered or attempts >= max_attempts:
            status = "delivered" if delivered else "abandoned"
            t.send("UPDATE cancel_calls SET status = ?, attempts = ?, last_error = ?, done_ms = ?, token = NULL "
                   "WHERE opc = ?", (status, attempts, error, t.now, opc))
        else:
            status = "pending"
            delay = backoff_ms * (2 ** (attempts - 1))
            delay += int.from_bytes(os.urandom(2), "big") % max(1, delay // 4 + 1)  # jitter: up to a quarter more
            t.send("UPDATE cancel_calls SET attempts = ?, last_error = ?, next_ms = ? WHERE opc = ?",
                   (attempts, error, t.now + delay, opc))
        if t.one("SELECT 1 FROM runs WHERE run_id = ?", (row["run_id"],)) is not None:
            self._event(t, row["run_id"], f"cancel.{'sent' if delivered else 'failed'}",
                        f"cancel:{opc}:{attempts}", {"opc": opc, "url": row["url"], "reason": row["reason"],
                                                      "attempt": attempts, "status": status, "error": error})
        return status

    @read_procedure
    def cancel_calls_due(self, t: Tx, *, limit: int = 100) -> list[str]:
        return [r["opc"] for r in t.all(
            "SELECT opc FROM cancel_calls WHERE status = 'pending' AND next_ms <= ? ORDER BY next_ms LIMIT ?",
            (t.now, limit))]

    @read_procedure
    def list_cancel_calls(self, t: Tx, run_id: str) -> list[dict]:
        """The cancellations owed to a run's workers, oldest first (``runs show``)."""
        return [{"opc": r["opc"], "url": r["url"], "reason": r["reason"], "status": r["status"],
                 "attempts": r["attempts"], "last_error": r["last_error"], "created_ms": r["created_ms"],
                 "done_ms": r["done_ms"]}
                for r in t.all("SELECT * FROM cancel_calls WHERE run_id = ? ORDER BY created_ms, opc", (run_id,))]

    @write_procedure
    def cancel_run(self, t: Tx, run_id: str, *, reason: str | None = None) -> str:
        """An operator gives up on a run: every open interaction and unit is cancelled (late
        callbacks get 410), its suspends close, and the run fails with reason ``cancelled``.
        Returns ``cancelled``, or the state of a run already finished, or ``unknown``."""
        run = t.lock_run(run_id)
        if run is None:
            return "unknown"
        if run["status"] not in ("active", "waiting", "resuming"):
            return str(run["status"])
        t.send("UPDATE suspends SET status = 'failed', closed_ms = ? WHERE run_id = ? "
               "AND status IN ('open', 'resuming')", (t.now, run_id))
        message = RUN_CANCELLED.message() + (f": {reason}" if reason else "")
        error = RUN_CANCELLED.error(message)
        if reason:
            error["reason"] = reason
        self._finish(t, run, status="failed", result=None, error=error, fail_reason="cancelled")
        self._event(t, run_id, "run.cancelled", "cancelled", {"reason": reason})
        return "cancelled"

    @write_procedure
    def retry_run(self, t: Tx, run_id: str) -> RetryResult:
        """Give a run that failed because of its async ops another go: the units of its last
        suspend that did not complete — and deferred ops not joined yet — are reopened (only
        their calls without a completed answer: for itemized ops the failed items), those calls
        wait to be sent again at once with fresh tokens, and the run waits at that suspend as
        it did; when the answers are in it resumes from the suspend's saved envelope."""
        run = t.lock_run(run_id)
        if run is None:
            return RetryResult("unknown")
        if run["status"] not in ("failed", "expired"):
            return RetryResult(str(run["status"]))
        if run["fail_reason"] == "cancelled":
            return RetryResult("not_retryable", reason="it was cancelled by an operator")
        suspend = t.one("SELECT * FROM suspends WHERE run_id = ? AND stage = ? AND visit = ?",
                        (run_id, run["cur_stage"], run["cur_visit"])) if run["cur_stage"] else None
        if suspend is None or suspend["status"] not in ("failed", "expired"):
            return RetryResult("not_retryable", reason=(
                "it did not fail while waiting for its async ops (it failed while running, before it "
                "waited or after a resume), so there is no saved point to go on from: send the request again"))
        members = t.all(
            "SELECT u.unit_id, u.kind, u.status FROM suspend_members m JOIN await_units u ON u.unit_id = m.unit_id "
            "WHERE m.run_id = ? AND m.stage = ? AND m.visit = ?", (run_id, suspend["stage"], suspend["visit"]))
        unfinished = [m for m in members if m["status"] != "completed"]
        if not unfinished:
            return RetryResult("not_retryable", reason="its failure did not come from its async ops")
        if any(m["kind"] not in ("unary", "itemized") for m in unfinished):
            return RetryResult("not_retryable", reason="an op it waited for ran inside txcl (continuable or sync), "
                                                       "which a retry cannot send again")
        pending_joins = [r["unit_id"] for r in t.all(
            "SELECT unit_id FROM await_units u WHERE run_id = ? AND join_at_scope IS NOT NULL "
            "AND kind IN ('unary', 'itemized') AND status IN ('failed', 'timed_out', 'cancelled') "
            "AND NOT EXISTS (SELECT 1 FROM joined_markers j WHERE j.unit_id = u.unit_id AND j.segment_id = ?)",
            (run_id, PASSED_OVER))]
        units = list(dict.fromkeys([m["unit_id"] for m in unfinished] + pending_joins))
        calls, expires = 0, run["expires_ms"] or t.now
        for unit_id in units:
            reopened, budget = self._reopen_unit(t, unit_id)
            calls += reopened
            expires = max(expires, t.now + (budget or 0))
        t.send("UPDATE suspends SET status = 'open', closed_ms = NULL, resume_round = resume_round + 1 "
               "WHERE run_id = ? AND stage = ? AND visit = ?", (run_id, suspend["stage"], suspend["visit"]))
        t.send("UPDATE runs SET status = 'waiting', result_json = NULL, error_json = NULL, fail_reason = NULL, "
               "finished_ms = NULL, claim_token = NULL, segment_id = NULL, expires_ms = ?, updated_ms = ?, "
               "version = version + 1 WHERE run_id = ?", (expires, t.now, run_id))
        self._event(t, run_id, "run.retried", f"retried:{suspend['stage']}:{suspend['visit']}:"
                    f"{suspend['resume_round'] + 1}", {"units": units, "calls": calls,
                                                        "failed_reason": run["fail_reason"]})
        t.notify_run(run_id)
        return RetryResult("retried", tuple(units), calls)

    def _reopen_unit(self, t: Tx, unit_id: str) -> tuple[int, int | None]:
        """A failed, timed-out or cancelled unit back to ``waiting``: every call of it without a
        completed answer forgets its outcome and waits to be sent again now (a fresh token; an
        earlier one gets 410). Returns (calls reopened, the unit's budget)."""
        unit = t.one("SELECT * FROM await_units WHERE unit_id = ?", (unit_id,))
        rows = t.all("SELECT * FROM interactions WHERE unit_id = ? AND status != 'completed'", (unit_id,))
        for it in rows:
            index = it["item_index"]
            t.send("DELETE FROM terminals WHERE opc = ?", (it["opc"],))
            t.send("DELETE FROM item_children WHERE unit_id = ? AND item_index = ?", (unit_id, index))
            t.send("DELETE FROM continuation_facts WHERE unit_id = ? AND item_index = ?", (unit_id, index))
            # a cancellation not yet delivered must not reach the worker of the new attempt
            t.send("DELETE FROM cancel_calls WHERE opc = ?", (it["opc"],))
        retire = "CASE WHEN token_hash IS NULL THEN retired_tokens WHEN retired_tokens IS NULL THEN token_hash " \
                 "ELSE retired_tokens || ',' || token_hash END"
        t.send(f"UPDATE interactions SET status = 'queued', retired_tokens = {retire}, token_hash = NULL, "
               "retry_count = retry_count + 1, retry_at_ms = ?, deadline_ms = NULL, dispatch_owner = NULL, "
               "closed_ms = NULL, heartbeat_ms = NULL, progress_json = NULL, cancel_url = NULL, cancel_token = NULL, "
               "version = version + 1 WHERE unit_id = ? AND status != 'completed'", (t.now, unit_id))
        facts = {r["kind"]: r["n"] for r in t.all(
            "SELECT kind, COUNT(*) AS n FROM continuation_facts WHERE unit_id = ? GROUP BY kind", (unit_id,))}
        # a join deadline counts again from now, as long as it was from the dispatch
        join_deadline = (None if unit["join_deadline_ms"] is None
                         else t.now + max(0, unit["join_deadline_ms"] - unit["created_ms"]))
        t.send("UPDATE await_units SET status = 'waiting', error_json = NULL, output_json = NULL, closed_ms = NULL, "
               "provider_done = ?, continuation_done = ?, join_deadline_ms = ?, version = version + 1 "
               "WHERE unit_id = ?", (facts.get("provider", 0), facts.get("continuation", 0), join_deadline, unit_id))
        t.send("DELETE FROM joined_markers WHERE unit_id = ? AND segment_id != ?", (unit_id, PASSED_OVER))
        return len(rows), unit["budget_ms"]


__all__ = ["RunOperationProcedures"]
