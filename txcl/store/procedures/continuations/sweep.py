"""Sweeping and repair: the sweeper's bounded candidate lists and the repairs it asks for (resend,
promote, reclaim children, purge)."""

from __future__ import annotations

from txcl.ids import hash_token, new_token
from txcl.store.backend import Tx
from txcl.store.procedures import read_procedure, write_procedure
from txcl.store.procedures.continuations.base import _FINISHED, _IN_FLIGHT, _OPEN, ProcedureBase
from txcl.store.records import Dispatch


class SweepProcedures(ProcedureBase):
    @read_procedure
    def due_retries(self, t: Tx, *, limit: int = 500) -> list[str]:
        """Units holding a call whose retry is due (``promote_window`` sends it)."""
        return [r["unit_id"] for r in t.all(
            "SELECT DISTINCT unit_id FROM interactions WHERE status = 'queued' AND retry_at_ms IS NOT NULL "
            "AND retry_at_ms <= ? LIMIT ?", (t.now, limit))]

    @write_procedure
    def purge_finished(self, t: Tx, *, retention_ms: int, limit: int = 500) -> list[str]:
        """Delete up to `limit` runs that finished more than `retention_ms` ago (and, by
        cascade, everything of them) in one transaction; their ids."""
        deleted = t.returning(
            "DELETE FROM runs WHERE run_id IN (SELECT run_id FROM runs WHERE status IN "
            f"{_FINISHED} AND finished_ms < ? ORDER BY finished_ms LIMIT ?) RETURNING run_id, finished_ms",
            (t.now - retention_ms, limit),
        )
        # RETURNING has no order of its own (PostgreSQL returns rows as it deletes them).
        return [r[0] for r in sorted(deleted, key=lambda r: (r[1], r[0]))]

    @write_procedure
    def purge_snapshots(self, t: Tx) -> int:
        return t.run("DELETE FROM snapshots WHERE NOT EXISTS "
                     "(SELECT 1 FROM runs r WHERE r.snapshot_id = snapshots.snapshot_id)")

    @write_procedure
    def resend_dispatch(self, t: Tx, opc: str, *, older_than_ms: int, skip_locked: bool = True) -> Dispatch | None:
        """A ``dispatching`` interaction never acked (its sender may have died): a new token
        (earlier ones stay valid), attempts + 1, to send again."""
        if t.lock_run_of("interactions", "opc", opc, skip_locked=skip_locked) is None:
            return None
        it = t.one("SELECT * FROM interactions WHERE opc = ?", (opc,))
        if it["status"] != "dispatching" or (it["dispatch_ms"] or 0) > t.now - older_than_ms:
            return None
        unit = t.one("SELECT * FROM await_units WHERE unit_id = ?", (it["unit_id"],))
        if unit["status"] != "waiting":
            return None
        token = new_token() if unit["kind"] in ("unary", "itemized") else None
        hashes = ",".join(h for h in ((it["token_hash"] or ""), hash_token(token) if token else "") if h)
        attempts = it["attempts"] + 1
        t.send("UPDATE interactions SET token_hash = ?, attempts = ?, dispatch_ms = ?, dispatch_owner = ?, "
              "version = version + 1 WHERE opc = ? AND status = 'dispatching'",
              (hashes or None, attempts, t.now, self.node_id, opc))
        self._event(t, it["run_id"], "reconcile.resend", f"reconcile.resend:{opc}:{attempts}",
                    {"opc": opc, "attempts": attempts})
        return self._dispatch_of(t, it, unit, token, attempts)

    @write_procedure
    def promote_window(self, t: Tx, unit_id: str, *, skip_locked: bool = True) -> tuple[Dispatch, ...]:
        """Fill an itemized unit's free window slots with its queued items."""
        run = t.lock_run_of("await_units", "unit_id", unit_id, skip_locked=skip_locked)
        if run is None:
            return ()
        run_id = run["run_id"]
        dispatches, deadline = self._promote(t, unit_id)
        if dispatches:
            self._raise_expiry(t, run_id, deadline)
            self._event(t, run_id, "reconcile.promote",
                        f"reconcile.promote:{unit_id}:{dispatches[0].item_index}:{dispatches[0].attempts}",
                        {"unit_id": unit_id, "items": [d.item_index for d in dispatches]})
        return tuple(dispatches)

    @write_procedure
    def claim_child(self, t: Tx, unit_id: str, item_index: int, *, older_than_ms: int, lease_ms: int,
                    owner: str | None = None, skip_locked: bool = True) -> int | None:
        """Claim a stuck child for reconciliation: ``running`` with a lease, version + 1 (the
        new version, or None when it is not stuck or another node holds the run)."""
        run = t.lock_run_of("await_units", "unit_id", unit_id, skip_locked=skip_locked)
        if run is None:
            return None
        run_id = run["run_id"]
        rows = t.returning(
            "UPDATE item_children SET status = 'running', lease_owner = ?, lease_until_ms = ?, "
            "version = version + 1, updated_ms = ? WHERE unit_id = ? AND item_index = ? AND ("
            "(status = 'queued' AND updated_ms <= ?) OR (status = 'running' AND lease_until_ms < ?)) "
            "RETURNING version",
            (owner or self.node_id, t.now + lease_ms, t.now, unit_id, item_index, t.now - older_than_ms, t.now),
        )
        if not rows:
            return None
        self._event(t, run_id, "reconcile.child", f"reconcile.child:{unit_id}:{item_index}:{rows[0][0]}",
                    {"unit_id": unit_id, "item_index": item_index})
        return rows[0][0]

    @read_procedure
    def due_interactions(self, t: Tx, *, limit: int = 500) -> list[str]:
        return [r["opc"] for r in t.all(
            f"SELECT opc FROM interactions WHERE status IN {_OPEN} AND deadline_ms < ? ORDER BY deadline_ms LIMIT ?",
            (t.now, limit))]

    @read_procedure
    def expirable_runs(self, t: Tx, *, limit: int = 500) -> list[str]:
        return [r["run_id"] for r in t.all(
            "SELECT run_id FROM runs WHERE status IN ('active', 'waiting') AND expires_ms < ? LIMIT ?",
            (t.now, limit))]

    @read_procedure
    def stale_claims(self, t: Tx, *, stale_after_ms: int, limit: int = 500) -> list[str]:
        return [r["run_id"] for r in t.all(
            "SELECT c.run_id FROM resume_claims c JOIN runs r ON r.run_id = c.run_id AND r.claim_token = c.claim_token "
            "WHERE r.status = 'resuming' AND c.heartbeat_ms < ? LIMIT ?", (t.now - stale_after_ms, limit))]

    @read_procedure
    def stuck_dispatches(self, t: Tx, *, older_than_ms: int, limit: int = 500) -> list[str]:
        return [r["opc"] for r in t.all(
            "SELECT i.opc FROM interactions i JOIN await_units u ON u.unit_id = i.unit_id "
            "WHERE i.status = 'dispatching' AND i.dispatch_ms <= ? AND u.status = 'waiting' "
            "AND u.kind IN ('unary', 'itemized') "
            # a call waiting in its pull queue for a worker to claim it is not stuck
            "AND NOT EXISTS (SELECT 1 FROM queue_jobs q WHERE q.opc = i.opc AND q.status = 'ready') LIMIT ?",
            (t.now - older_than_ms, limit))]

    @read_procedure
    def promotable_units(self, t: Tx, *, limit: int = 500) -> list[str]:
        return [r["unit_id"] for r in t.all(
            "SELECT u.unit_id FROM await_units u WHERE u.status = 'waiting' AND u.kind = 'itemized' "
            "AND EXISTS (SELECT 1 FROM interactions i WHERE i.unit_id = u.unit_id AND i.status = 'queued') "
            f"AND (SELECT COUNT(*) FROM interactions i WHERE i.unit_id = u.unit_id AND i.status IN {_IN_FLIGHT}) "
            "< u.window_size LIMIT ?", (limit,))]

    @read_procedure
    def stuck_children(self, t: Tx, *, older_than_ms: int, limit: int = 500) -> list[tuple[str, int, str]]:
        return [(r["unit_id"], r["item_index"], r["opc"]) for r in t.all(
            "SELECT unit_id, item_index, opc FROM item_children WHERE (status = 'queued' AND updated_ms <= ?) "
            "OR (status = 'running' AND lease_until_ms < ?) LIMIT ?", (t.now - older_than_ms, t.now, limit))]

    @read_procedure
    def unsettled_units(self, t: Tx, *, limit: int = 500) -> list[str]:
        """Waiting units whose facts or counters are short of their children, or that could settle."""
        return [r["unit_id"] for r in t.all(
            "SELECT u.unit_id FROM await_units u WHERE u.status = 'waiting' AND ("
            "u.continuation_done >= u.expected OR "
            "(SELECT COUNT(*) FROM item_children c WHERE c.unit_id = u.unit_id AND c.status IN ('succeeded', 'failed')) "
            "> u.continuation_done) LIMIT ?", (limit,))]

    @read_procedure
    def releasable_runs(self, t: Tx, *, older_than_ms: int = 0, limit: int = 500) -> list[str]:
        """Parked runs whose suspend could be released, parked at least `older_than_ms` ago
        (a fresh park belongs to the request that made it: its drain decides)."""
        return [r["run_id"] for r in t.all(
            "SELECT r.run_id FROM runs r JOIN suspends s ON s.run_id = r.run_id AND s.stage = r.cur_stage "
            "AND s.visit = r.cur_visit WHERE r.status = 'waiting' AND s.status = 'open' AND s.dispatch_complete = 1 "
            "AND s.suspended_ms <= ? "
            "AND (NOT EXISTS (SELECT 1 FROM suspend_members m JOIN await_units u ON u.unit_id = m.unit_id "
            "WHERE m.run_id = s.run_id AND m.stage = s.stage AND m.visit = s.visit AND u.status = 'waiting') "
            "OR EXISTS (SELECT 1 FROM suspend_members m JOIN await_units u ON u.unit_id = m.unit_id "
            "WHERE m.run_id = s.run_id AND m.stage = s.stage AND m.visit = s.visit "
            "AND u.status IN ('failed', 'timed_out', 'cancelled'))) LIMIT ?", (t.now - older_than_ms, limit))]

    @read_procedure
    def unrecorded_sync_members(self, t: Tx, *, older_than_ms: int, limit: int = 500) -> list[str]:
        return [r["opc"] for r in t.all(
            "SELECT i.opc FROM interactions i JOIN await_units u ON u.unit_id = i.unit_id "
            f"WHERE u.kind = 'sync' AND u.status = 'waiting' AND i.status IN {_OPEN} AND i.created_ms <= ? "
            "AND NOT EXISTS (SELECT 1 FROM terminals x WHERE x.opc = i.opc) LIMIT ?", (t.now - older_than_ms, limit))]
