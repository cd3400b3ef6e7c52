"""Clock procedures: which node fires a cron tick (the store decides, keyed by the tick's
bucket, so each tick runs once however many nodes share the database), and the scheduled
events of `EXEC "txco://schedule"` (a row per idempotency key; a node claims a due row before
firing it, so an event fires once across nodes)."""

from __future__ import annotations

import secrets
from typing import Any

import attrs

from txcl.store.jsoncols import dumps as json_dumps, loads as json_loads
from txcl.store.backend import Tx
from txcl.store.procedures import read_procedure, write_procedure
from txcl.store.states.machine import sql_in
from txcl.store.states.scheduled_events import MACHINE as EVENTS

EVENT_STATUSES = EVENTS.states

OPEN = sql_in(EVENTS.group("open"))
_EVENT_COLUMNS = ("idempotency_key, event_id, status, schedule_at_ms, payload_json, origin_stack, origin_rid, "
                  "created_ms, updated_ms, claimed_by, claimed_ms, attempts, fired_ms, rid, error")


@attrs.frozen
class ScheduledEvent:
    idempotency_key: str
    event_id: str
    status: str
    schedule_at_ms: int
    payload: Any
    origin_stack: str | None
    origin_rid: str | None
    created_ms: int
    updated_ms: int
    claimed_by: str | None
    claimed_ms: int | None
    attempts: int
    fired_ms: int | None
    rid: str | None
    error: str | None

    def as_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.frozen
class ScheduleResult:
    status: str  # scheduled | rescheduled | spent (the key fired already: nothing changed)
    event: ScheduledEvent


def _event(row: Any) -> ScheduledEvent:
    values = list(row)
    values[4] = json_loads(values[4])
    return ScheduledEvent(*values)


def new_event_id() -> str:
    return "sev_" + secrets.token_hex(10)


class ClockProcedures:
    node_id: str

    # ------------------------------------------------------------------ cron ticks
    @write_procedure
    def claim_tick(self, t: Tx, job: str, bucket_ms: int, rid: str) -> bool:
        """Claim the tick `bucket_ms` of `job` for this node; False when another node (or an
        earlier start of this one) already fired it."""
        t.run("INSERT INTO cron_ticks (job, bucket_ms, node, rid, claimed_ms) VALUES (?, ?, ?, ?, ?) "
              "ON CONFLICT (job, bucket_ms) DO NOTHING", (job, bucket_ms, self.node_id, rid, t.now))
        row = t.one("SELECT rid FROM cron_ticks WHERE job = ? AND bucket_ms = ?", (job, bucket_ms))
        return row is not None and row[0] == rid

    @read_procedure
    def last_tick(self, t: Tx, job: str) -> int | None:
        """The bucket of the latest tick of `job` any node fired (None: never)."""
        row = t.one("SELECT MAX(bucket_ms) FROM cron_ticks WHERE job = ?", (job,))
        return int(row[0]) if row is not None and row[0] is not None else None

    @write_procedure
    def purge_ticks(self, t: Tx, before_ms: int) -> int:
        """Forget the ticks older than `before_ms` (they only guard against firing twice)."""
        return t.run("DELETE FROM cron_ticks WHERE bucket_ms < ?", (before_ms,))

    # ------------------------------------------------------------------ scheduled events
    @staticmethod
    def _get_event(t: Tx, key: str) -> ScheduledEvent | None:
        row = t.one(f"SELECT {_EVENT_COLUMNS} FROM scheduled_events WHERE idempotency_key = ?", (key,))
        return _event(row) if row is not None else None

    @write_procedure
    def schedule_event(self, t: Tx, key: str, at_ms: int, payload: Any, *, origin_stack: str | None = None,
                       origin_rid: str | None = None) -> ScheduleResult:
        """Schedule the event `key` to fire not before `at_ms`. A pending (or cancelled) key is
        rescheduled in place with the new time and payload; a key that fired is spent."""
        t.lock_key(f"scheduled:{key}")
        current = self._get_event(t, key)
        text = json_dumps(payload)
        if current is None:
            t.run(f"INSERT INTO scheduled_events ({_EVENT_COLUMNS}) VALUES "
                  "(?, ?, 'pending', ?, ?, ?, ?, ?, ?, NULL, NULL, 0, NULL, NULL, NULL)",
                  (key, new_event_id(), at_ms, text, origin_stack, origin_rid, t.now, t.now))
            status = "scheduled"
        elif current.status in ("pending", "cancelled"):
            t.run("UPDATE scheduled_events SET status = 'pending', schedule_at_ms = ?, payload_json = ?, "
                  "origin_stack = ?, origin_rid = ?, updated_ms = ?, error = NULL WHERE idempotency_key = ?",
                  (at_ms, text, origin_stack, origin_rid, t.now, key))
            status = "rescheduled"
        else:
            return ScheduleResult("spent", current)
        event = self._get_event(t, key)
        assert event is not None
        return ScheduleResult(status, event)

    @write_procedure
    def cancel_event(self, t: Tx, key: str) -> tuple[str, ScheduledEvent | None]:
        """Cancel the pending event `key`: (`cancelled` | `not_found` | its status when it is
        no longer pending, event)."""
        current = self._get_event(t, key)
        if current is None:
            return "not_found", None
        if current.status != "pending":
            return current.status, current
        t.run("UPDATE scheduled_events SET status = 'cancelled', updated_ms = ? "
              "WHERE idempotency_key = ? AND status = 'pending'", (t.now, key))
        return "cancelled", self._get_event(t, key)

    @write_procedure
    def claim_due_events(self, t: Tx, *, limit: int, stale_after_ms: int) -> list[ScheduledEvent]:
        """Claim for this node up to `limit` events due by the database clock, and the claims
        another node left longer than `stale_after_ms` ago (it stopped while firing them).
        Each claim is a conditional update, so two nodes never claim the same event."""
        rows = t.all("SELECT idempotency_key, status, claimed_ms FROM scheduled_events "
                     "WHERE (status = 'pending' AND schedule_at_ms <= ?) OR (status = 'claimed' AND claimed_ms < ?) "
                     "ORDER BY schedule_at_ms LIMIT ?", (t.now, t.now - stale_after_ms, limit))
        claimed = []
        for key, status, claimed_ms in rows:
            if status == "pending":
                won = t.run("UPDATE scheduled_events SET status = 'claimed', claimed_by = ?, claimed_ms = ?, "
                            "attempts = attempts + 1, updated_ms = ? WHERE idempotency_key = ? AND status = 'pending'",
                            (self.node_id, t.now, t.now, key))
            else:
                won = t.run("UPDATE scheduled_events SET claimed_by = ?, claimed_ms = ?, attempts = attempts + 1, "
                            "updated_ms = ? WHERE idempotency_key = ? AND status = 'claimed' AND claimed_ms = ?",
                            (self.node_id, t.now, t.now, key, claimed_ms))
            if won:
                event = self._get_event(t, key)
                if event is not None:
                    claimed.append(event)
        return claimed

    @write_procedure
    def finish_event(self, t: Tx, key: str, event_id: str, *, status: str, rid: str | None,
                     error: str | None = None) -> bool:
        """Record that this node fired (or failed to fire) its claimed event; False when the
        claim is no longer this node's."""
        assert status in ("fired", "failed")
        return bool(t.run("UPDATE scheduled_events SET status = ?, fired_ms = ?, rid = ?, error = ?, updated_ms = ? "
                          "WHERE idempotency_key = ? AND event_id = ? AND status = 'claimed' AND claimed_by = ?",
                          (status, t.now, rid, error, t.now, key, event_id, self.node_id)))

    @read_procedure
    def get_event(self, t: Tx, key_or_id: str) -> ScheduledEvent | None:
        """The event with this idempotency key (or event id)."""
        row = t.one(f"SELECT {_EVENT_COLUMNS} FROM scheduled_events WHERE idempotency_key = ? OR event_id = ?",
                    (key_or_id, key_or_id))
        return _event(row) if row is not None else None

    @read_procedure
    def list_events(self, t: Tx, *, status: str | None = None, limit: int = 100) -> list[ScheduledEvent]:
        """Events, soonest first (pending and claimed), then the rest by when they last changed."""
        where, params = ("WHERE status = ?", (status,)) if status else ("", ())
        rows = t.all(f"SELECT {_EVENT_COLUMNS} FROM scheduled_events {where} "
                     f"ORDER BY CASE WHEN status IN {OPEN} THEN 0 ELSE 1 END, "
                     f"CASE WHEN status IN {OPEN} THEN schedule_at_ms ELSE -updated_ms END "
                     "LIMIT ?", (*params, limit))
        return [_event(r) for r in rows]

    @read_procedure
    def count_events(self, t: Tx) -> dict[str, int]:
        return {r[0]: int(r[1]) for r in t.all("SELECT status, COUNT(*) FROM scheduled_events GROUP BY status")}

    @write_procedure
    def purge_events(self, t: Tx, before_ms: int) -> int:
        """Forget the fired, failed and cancelled events that last changed before `before_ms`
        (a spent key becomes usable again once forgotten)."""
        return t.run(f"DELETE FROM scheduled_events WHERE status IN {sql_in(EVENTS.group('terminal'))} "
                     "AND updated_ms < ?", (before_ms,))


__all__ = ["ClockProcedures", "ScheduledEvent", "ScheduleResult", "EVENT_STATUSES"]
