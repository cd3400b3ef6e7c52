"""Pull queues: the calls of ``queue://`` ops wait in ``queue_jobs`` until a worker claims them.

A claim is a dispatch and its ack in one transaction: the call gets a fresh token (earlier ones
stay valid, as for a resent dispatch), moves to ``dispatched``, and its job to ``leased`` until
``lease_until_ms``; the worker's heartbeats move the lease on, its answer goes through the
callback like any worker's. A lease that runs out is a retryable failure of the call (retried
under ``WITH retries``, else the op fails), recorded in the same transaction that lapses the
job, so two nodes never both act on it. Candidates are read with ``FOR UPDATE SKIP LOCKED`` on
PostgreSQL and each run is locked with ``skip_locked``: claimers on several nodes pass over
each other's rows instead of waiting, and no job is handed out twice.
"""

from __future__ import annotations

from typing import Sequence

from txcl.ids import hash_token, new_token
from txcl.runtime_codes import lease_expired_error
from txcl.store.backend import Tx
from txcl.store.procedures import read_procedure, write_procedure
from txcl.store.procedures.continuations.base import _IN_FLIGHT, ProcedureBase
from txcl.store.procedures.rows import dumps
from txcl.store.records import AdmitResult, Dispatch, ReleaseResult

QUEUE_PREFIX = "queue://"


def queue_of(exec_target: str | None) -> str | None:
    """The queue a call's EXEC target names (None: not a queue:// op)."""
    if exec_target and exec_target[:len(QUEUE_PREFIX)].lower() == QUEUE_PREFIX:
        return exec_target[len(QUEUE_PREFIX):]
    return None


def extend_lease(t: Tx, opc: str) -> None:
    """A heartbeat of a claimed job (in the heartbeat's transaction): its lease runs one lease
    period from now."""
    t.send("UPDATE queue_jobs SET lease_until_ms = ? + lease_ms, updated_ms = ? WHERE opc = ? AND status = 'leased'",
           (t.now, t.now, opc))


class QueueProcedures(ProcedureBase):
    @write_procedure
    def enqueue_jobs(self, t: Tx, jobs: Sequence[tuple[str, str]]) -> int:
        """Put calls in their queues: ``(opc, queue)`` each, for calls being dispatched (a call
        sent again after a retry is ready again). Returns how many are waiting now."""
        return self._enqueue(t, jobs)

    @staticmethod
    def _enqueue(t: Tx, jobs: Sequence[tuple[str, str]]) -> int:
        n = 0
        for opc, queue in jobs:
            n += t.run(
                "INSERT INTO queue_jobs (opc, queue, run_id, status, enqueued_ms, updated_ms) "
                "SELECT opc, ?, run_id, 'ready', ?, ? FROM interactions WHERE opc = ? AND status = 'dispatching' "
                "ON CONFLICT (opc) DO UPDATE SET status = 'ready', queue = excluded.queue, "
                "enqueued_ms = excluded.enqueued_ms, lease_until_ms = NULL, claimed_by = NULL, "
                "updated_ms = excluded.updated_ms",
                (queue, t.now, t.now, opc))
        return n

    @write_procedure
    def hand_over_jobs(self, t: Tx, jobs: Sequence[tuple[str, str]],
                       claims: Sequence[tuple[str, int, str, int]]) -> list[list[tuple[Dispatch, int]]]:
        """``enqueue_jobs``, then the new jobs leased at once to claims that were waiting for
        them — ``(queue, lease_ms, claimant, limit)`` each, served in order — in the same
        transaction: what each claim got (a job nobody took stays ready)."""
        self._enqueue(t, jobs)
        left: dict[str, list[str]] = {}
        for opc, queue in jobs:
            left.setdefault(queue, []).append(opc)
        got: list[list[tuple[Dispatch, int]]] = []
        for queue, lease_ms, claimant, limit in claims:
            offered = left.get(queue, [])
            taken = self._lease(t, offered[:limit], lease_ms, claimant, limit)
            left[queue] = offered[limit:]
            got.append(taken)
        return got

    @write_procedure
    def claim_jobs(self, t: Tx, queue: str, *, lease_ms: int, claimant: str,
                   limit: int = 1) -> list[tuple[Dispatch, int]]:
        """Up to `limit` ready jobs of `queue`, oldest first, each leased to `claimant` for
        `lease_ms`: (the dispatch a push worker would have been sent, with its fresh token; the
        lease's end). Jobs whose call has closed meanwhile are removed on the way."""
        skip = self.backend.dialect.lock_run_skip
        candidates = [r["opc"] for r in t.all(
            "SELECT opc FROM queue_jobs WHERE queue = ? AND status = 'ready' ORDER BY enqueued_ms, opc LIMIT ?"
            + skip, (queue, max(limit * 4, 8)))]
        return self._lease(t, candidates, lease_ms, claimant, limit)

    def _lease(self, t: Tx, candidates: Sequence[str], lease_ms: int, claimant: str,
               limit: int) -> list[tuple[Dispatch, int]]:
        """Lease up to `limit` of these jobs (those still ready, their run not held by another
        transaction) to `claimant`."""
        claimed: list[tuple[Dispatch, int]] = []
        for opc in candidates:
            if len(claimed) >= limit:
                break
            if t.lock_run_of("interactions", "opc", opc, skip_locked=True) is None:
                continue  # another transaction holds the run: its next claim will see this job
            row = t.one("SELECT i.*, u.status AS unit_status, u.op_name, u.op_stack, u.dispatch_stage, u.exec_target, "
                        "u.options_json, u.expected, u.kind, q.status AS job_status, q.queue FROM interactions i "
                        "JOIN await_units u ON u.unit_id = i.unit_id JOIN queue_jobs q ON q.opc = i.opc "
                        "WHERE i.opc = ?", (opc,))
            if row is None or row["job_status"] != "ready":
                continue
            if row["status"] != "dispatching" or row["unit_status"] != "waiting":
                t.send("DELETE FROM queue_jobs WHERE opc = ?", (opc,))
                continue
            token = new_token()
            hashes = ",".join(h for h in (row["token_hash"] or "", hash_token(token)) if h)
            until = t.now + lease_ms
            t.send("UPDATE interactions SET status = 'dispatched', token_hash = ?, ack_json = ?, dispatch_ms = ?, "
                   "dispatch_owner = ?, version = version + 1 WHERE opc = ? AND status = 'dispatching'",
                   (hashes, dumps({"queue": row["queue"], "claimed_by": claimant, "lease_until_ms": until}), t.now,
                    claimant, opc))
            t.send("UPDATE queue_jobs SET status = 'leased', lease_ms = ?, lease_until_ms = ?, claimed_by = ?, "
                   "claims = claims + 1, updated_ms = ? WHERE opc = ? AND status = 'ready'",
                   (lease_ms, until, claimant, t.now, opc))
            # (the row holds the unit's columns the dispatch needs; who claimed it is in the call's ack)
            claimed.append((self._dispatch_of(t, row, row, token, row["attempts"]), until))
        return claimed

    @read_procedure
    def lapsed_leases(self, t: Tx, *, queue: str | None = None, limit: int = 100) -> list[str]:
        """Claimed jobs whose lease has run out (of one queue, or of all), oldest first."""
        where, params = ("", (t.now,)) if queue is None else (" AND queue = ?", (t.now, queue))
        return [r["opc"] for r in t.all(
            f"SELECT opc FROM queue_jobs WHERE status = 'leased' AND lease_until_ms < ?{where} "
            "ORDER BY lease_until_ms LIMIT ?", (*params, limit))]

    @read_procedure
    def unrecorded_lapses(self, t: Tx, *, limit: int = 100) -> list[str]:
        """Jobs lapsed whose call is still with its worker: a lapse whose failure was not recorded
        with it (the sweeper records it)."""
        return [r["opc"] for r in t.all(
            "SELECT q.opc FROM queue_jobs q JOIN interactions i ON i.opc = q.opc AND i.status = 'dispatched' "
            "WHERE q.status = 'lapsed' LIMIT ?", (limit,))]

    @write_procedure
    def lapse_lease(self, t: Tx, opc: str) -> tuple[str, int] | None:
        """Mark a claimed job whose lease ran out ``lapsed``: (its queue, its lease) when its call
        is still with the worker and so must now fail or be retried; None when the lease is not
        out or another transaction holds the run. A job whose call was answered, closed or sent
        again meanwhile is removed (a call sent again is queued afresh)."""
        if t.lock_run_of("interactions", "opc", opc, skip_locked=True) is None:
            return None
        if t.one("SELECT 1 FROM interactions WHERE opc = ? AND status = 'dispatched'", (opc,)) is None:
            t.send("DELETE FROM queue_jobs WHERE opc = ? AND status IN ('leased', 'lapsed')", (opc,))
            return None
        rows = t.returning("UPDATE queue_jobs SET status = 'lapsed', updated_ms = ? WHERE opc = ? "
                           "AND ((status = 'leased' AND lease_until_ms < ?) OR status = 'lapsed') "
                           "RETURNING queue, lease_ms", (t.now, opc, t.now))
        return (rows[0][0], int(rows[0][1])) if rows else None

    def lapse_and_continue(self, opc: str) -> tuple[AdmitResult, ReleaseResult | Exception | None] | None:
        """``lapse_lease`` and, when the call must answer for it, the retryable failure
        ``txcl_lease_expired`` admitted and continued (``admit_and_continue``), all in one
        transaction. None: nothing to do."""
        def both() -> tuple[AdmitResult, ReleaseResult | Exception | None] | None:
            lapsed = self.lapse_lease(opc)
            if lapsed is None:
                return None
            return self.admit_and_continue(opc, "failed", lease_expired_error(*lapsed), source="lease",
                                           transport="queue", retryable=True)

        return self.backend.run_together(both)

    @read_procedure
    def queue_depths(self, t: Tx) -> list[dict]:
        """Per queue: jobs ready to claim, jobs leased, and when the oldest ready job was queued."""
        return self._queue_depths(t)

    @staticmethod
    def _queue_depths(t: Tx) -> list[dict]:
        rows = t.all(
            "SELECT q.queue, q.status, COUNT(*) AS n, MIN(q.enqueued_ms) AS oldest FROM queue_jobs q "
            "JOIN interactions i ON i.opc = q.opc WHERE q.status IN ('ready', 'leased') "
            f"AND i.status IN {_IN_FLIGHT} GROUP BY q.queue, q.status", ())
        out: dict[str, dict] = {}
        for r in rows:
            entry = out.setdefault(r["queue"], {"queue": r["queue"], "ready": 0, "leased": 0, "oldest_ready_ms": None})
            entry[r["status"]] = int(r["n"])
            if r["status"] == "ready":
                entry["oldest_ready_ms"] = r["oldest"]
        return [out[k] for k in sorted(out)]


__all__ = ["QueueProcedures", "queue_of", "extend_lease", "QUEUE_PREFIX"]
