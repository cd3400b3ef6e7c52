"""Admit callbacks: a worker's ack, heartbeats, the token check, and a terminal answer (with a
retry when the unit's options ask for one)."""

from __future__ import annotations

from typing import Sequence

from txcl.store.backend import Tx
from txcl.store.procedures import read_procedure, write_procedure
from txcl.store.procedures.continuations.base import (
    _IN_FLIGHT,
    _OPEN,
    ProcedureBase,
    _ack_cancel_url,
    _full_deadline,
    _next_beat,
    _token_problem,
)
from txcl.store.procedures.continuations.queues import extend_lease, queue_of
from txcl.store.procedures.rows import (
    UNIT_ROW,
    UNIT_ROW_FOR_RECORD,
    Row,
    dumps,
    interaction_record,
    lazy_unit_record,
    terminal_record,
)
from txcl.store.records import (
    INTERACTION_IN_FLIGHT,
    INTERACTION_OPEN,
    AdmitResult,
    CallbackTarget,
    Dispatch,
    JsonValue,
    ReleaseResult,
    TerminalRecord,
    payload_sha256,
)


class AdmitProcedures(ProcedureBase):
    def admit_and_continue(self, opc: str, status: str, payload: JsonValue, *, source: str,
                           token: str | None = None, best_effort: bool = False, transport: str | None = None,
                           retryable: bool = False,
                           ack: tuple | None = None) -> tuple[AdmitResult, ReleaseResult | Exception | None]:
        """``admit_terminal`` and, when it admits (or finds the same outcome already in),
        ``continue_release``, in one write transaction: one commit where there were two. The
        admission never depends on the continuation: when continuing fails, what it wrote
        alone is rolled back, the admission commits, and the exception is returned in place
        of the release (the caller handles it as if the continuation had failed on its own).
        ``ack``: the call's held-back worker ack, written with the admission (see
        ``admit_terminal``)."""
        def both() -> tuple[AdmitResult, ReleaseResult | Exception | None]:
            admit = self.admit_terminal(opc, status, payload, source=source, token=token,
                                        best_effort=best_effort, transport=transport, retryable=retryable, ack=ack)
            if admit.outcome not in ("admitted", "duplicate"):
                return admit, None
            version = admit.child_version if admit.outcome == "admitted" else None
            try:
                return admit, self.continue_release(opc, child_version=version)
            except Exception as exc:  # noqa: BLE001 - the admission stands; the caller sees this
                return admit, exc

        return self.backend.run_together(both)

    @write_procedure
    def mark_ack(self, t: Tx, acks: Sequence[tuple[str, JsonValue] | tuple[str, JsonValue, str | None]]) -> int:
        """Workers acknowledged these dispatches (``dispatching`` → ``dispatched``). A single
        compare-and-swap per row: no run lock is needed. An ack that names a ``cancel_url``
        keeps it with the call's token (the third element), which a cancellation presents."""
        n = sum(self._write_ack(t, ack) for ack in acks)
        if acks:
            t.fault("ack")
        return n

    @staticmethod
    def _write_ack(t: Tx, row: tuple) -> int:
        """One ack of `mark_ack` (1: the call moved to ``dispatched``)."""
        opc, ack, *rest = row
        url = _ack_cancel_url(ack)
        if url is not None:
            token = rest[0] if rest else None
            changed = t.run(
                "UPDATE interactions SET status = 'dispatched', ack_json = ?, cancel_url = ?, cancel_token = ?, "
                "version = version + 1 WHERE opc = ? AND status = 'dispatching'",
                (dumps(ack), url, token, opc),
            )
            if not changed:  # the flow gave up before the ack arrived: the worker is told at once
                t.send("INSERT INTO cancel_calls (opc, run_id, url, token, reason, status, attempts, next_ms, "
                       "created_ms) SELECT opc, run_id, ?, ?, 'cancelled', 'pending', 0, ?, ? FROM interactions "
                       "WHERE opc = ? AND status IN ('cancelled', 'timed_out') ON CONFLICT DO NOTHING",
                       (url, token, t.now, t.now, opc))
            return changed
        return t.run(
            "UPDATE interactions SET status = 'dispatched', ack_json = ?, version = version + 1 "
            "WHERE opc = ? AND status = 'dispatching'",
            (dumps(ack if ack is not None else {}), opc),
        )

    @write_procedure
    def touch_dispatches(self, t: Tx, opcs: Sequence[str]) -> int:
        """This node is still running these in-process calls (``mcp+`` units): their
        ``dispatch_ms`` moves to now, so reconciliation leaves them alone. A call whose node
        died stops being touched and is sent again once it is older than --reconcile-after."""
        n = 0
        for start in range(0, len(opcs), 500):
            chunk = list(opcs[start:start + 500])
            ph = ", ".join("?" for _ in chunk)
            n += t.run(f"UPDATE interactions SET dispatch_ms = ?, dispatch_owner = ? "
                       f"WHERE opc IN ({ph}) AND status = 'dispatching'", (t.now, self.node_id, *chunk))
        return n

    @write_procedure
    def record_heartbeat(self, t: Tx, opc: str, token: str | None, progress: JsonValue = None) -> str:
        """A worker says it is still at work (a callback with `"status": "running"`): its time
        and `progress` are kept; under WITH heartbeat its deadline moves one period on (never
        past the full deadline). Never a completion. Returns ``alive``, ``cancelled`` (the flow
        gave up: the worker may stop), ``closed`` (already answered), ``expired``, ``unknown``
        or ``bad_token``."""
        run, (found,) = t.lock_run_of_reading("interactions", "opc", opc,
                                              ("SELECT * FROM interactions WHERE opc = ?", (opc,)))
        if run is None or not found:
            return "unknown"
        it = found[0]
        problem = _token_problem(token, it)
        if problem is not None:
            return problem
        if it["status"] == "cancelled":
            return "cancelled"
        if it["status"] == "timed_out":
            return "expired"
        if it["status"] not in INTERACTION_OPEN:
            return "closed"
        if it["deadline_ms"] is not None and it["deadline_ms"] < t.now:
            self._time_out(t, it)
            return "expired"
        unit = t.one(f"{UNIT_ROW} WHERE unit_id = ?", (it["unit_id"],))
        every = self._options(unit).heartbeat_ms
        deadline = it["deadline_ms"]
        if every is not None:
            deadline = _next_beat(_full_deadline(unit, it, t.now), every, t.now)
        t.send("UPDATE interactions SET heartbeat_ms = ?, progress_json = ?, deadline_ms = ?, "
               "version = version + 1 WHERE opc = ?",
               (t.now, dumps(progress) if progress is not None else it["progress_json"], deadline, opc))
        if queue_of(unit["exec_target"]) is not None:  # a job claimed from a pull queue: its lease moves on
            extend_lease(t, opc)
        return "alive"

    @read_procedure
    def check_callback(self, t: Tx, opc: str, token: str | None) -> CallbackTarget:
        # the call and its unit read together (one round trip on PostgreSQL); the unit without
        # its input view: a callback's check reads its kind, `into` and target
        rows, units = t.read_many(
            ("SELECT * FROM interactions WHERE opc = ?", (opc,)),
            (f"{UNIT_ROW_FOR_RECORD} WHERE unit_id = (SELECT unit_id FROM interactions WHERE opc = ?)", (opc,)))
        if not rows:
            return CallbackTarget("unknown")
        row = rows[0]
        problem = _token_problem(token, row)
        if problem is not None:
            return CallbackTarget(problem)
        return CallbackTarget("ok", interaction_record(row, t), lazy_unit_record(units[0], t))

    @write_procedure
    def admit_terminal(self, t: Tx, opc: str, status: str, payload: JsonValue, *, source: str,
                       token: str | None = None, best_effort: bool = False, transport: str | None = None,
                       fuel_used: int = 0, retryable: bool = False, ack: tuple | None = None) -> AdmitResult:
        """Record an interaction's terminal outcome, first write wins: a repeat of the same
        outcome is a ``duplicate``, a different one a ``conflict``; the item's provider fact
        and its queued child are written with it, and (itemized) the next queued items are
        promoted into the freed window slot.

        A ``retryable`` failure of a call in flight whose op has ``WITH retries`` left is no
        terminal: the call waits to be sent again (``retrying``) with a fresh token.

        ``ack``: the worker's ack of this call, held back until now (a row as ``mark_ack``
        takes it), written by this transaction exactly as ``mark_ack`` would write it first;
        when the outcome is admitted, by the statement that closes the call (one statement
        fewer per callback)."""
        if status not in ("completed", "failed"):
            raise ValueError(f"terminal status must be completed or failed, not {status!r}")
        if ack is not None and ack[0] != opc:
            raise ValueError(f"the ack of {ack[0]} cannot be written with the outcome of {opc}")
        # read once the run is locked (every writer of a run's records locks it first), so
        # whether the call has its terminal and its item child yet stays true until the commit:
        # both are then written without waiting for an answer
        run, (found,) = t.lock_run_of_reading("interactions", "opc", opc, (
            "SELECT i.*, u.kind AS unit_kind, u.options_json AS unit_options, u.exec_target AS unit_target, "
            "(SELECT 1 FROM terminals x WHERE x.opc = i.opc) AS has_terminal, c.version AS child_version_now "
            "FROM interactions i JOIN await_units u ON u.unit_id = i.unit_id "
            "LEFT JOIN item_children c ON c.unit_id = i.unit_id AND c.item_index = i.item_index "
            "WHERE i.opc = ?", (opc,)))
        held = ack
        if held is not None:
            t.fault("ack")  # (reached as mark_ack reaches it, whichever statement writes the ack)
            if run is None or not found or _ack_cancel_url(held[1]) is not None:
                # no call to close, or an ack naming a cancel URL (with its own cases): written now
                self._write_ack(t, held)
                held = None
            elif found[0]["status"] != "dispatching":
                held = None  # `mark_ack` would change nothing (the ack moves only a call being dispatched)
        if run is None or not found:
            return AdmitResult("unknown", opc)
        it = found[0]

        def held_ack_first() -> None:
            """An outcome other than admitted: the held ack goes in first, on its own. (The
            row read above stays good for what follows: the ack moves the call from
            ``dispatching`` to ``dispatched``, which every check below treats alike.)"""
            nonlocal held
            if held is not None:
                self._write_ack(t, held)
                held = None

        base = dict(opc=opc, run_id=it["run_id"], unit_id=it["unit_id"], item_index=it["item_index"])
        if source == "callback":
            problem = _token_problem(token, it)
            if problem is not None:
                held_ack_first()
                return AdmitResult(problem, **base)
        if it["status"] == "cancelled":
            return AdmitResult("cancelled", **base)
        if it["status"] == "timed_out":
            return AdmitResult("expired", **base)
        if it["status"] in INTERACTION_OPEN and it["deadline_ms"] is not None and it["deadline_ms"] < t.now:
            held_ack_first()
            claim, _, promoted = self._time_out(t, it)
            return AdmitResult("expired", claim=claim, dispatches=tuple(promoted), **base)
        if status == "failed" and retryable and it["status"] in INTERACTION_IN_FLIGHT:
            held_ack_first()
            retry = self._schedule_retry(t, it, payload)
            if retry is not None:
                return AdmitResult("retrying", dispatches=tuple(retry), **base)
        sha = payload_sha256(payload)
        if it["has_terminal"]:
            held_ack_first()
            first = t.one("SELECT * FROM terminals WHERE opc = ?", (opc,))
            same = first["status"] == status and first["payload_sha256"] == sha
            return AdmitResult("duplicate" if same else "conflict", terminal=terminal_record(first), **base)
        t.send(
            "INSERT INTO terminals (opc, status, payload_json, payload_sha256, source, best_effort, transport, "
            "fuel_used, recorded_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (opc, status, dumps(payload) if payload is not None else "null", sha, source, int(best_effort),
             transport, fuel_used, t.now),
        )
        if held is not None:
            # the ack and the close in one statement: the ack applies while the call is still
            # being dispatched (as mark_ack's compare-and-swap), each change counts a version
            t.send(
                "UPDATE interactions SET ack_json = CASE WHEN status = 'dispatching' THEN ? ELSE ack_json END, "
                "version = version + CASE WHEN status = 'dispatching' THEN 2 ELSE 1 END, status = ?, closed_ms = ? "
                f"WHERE opc = ? AND status IN {_OPEN}",
                (dumps(held[1] if held[1] is not None else {}), status, t.now, opc),
            )
        else:
            t.send(
                f"UPDATE interactions SET status = ?, closed_ms = ?, version = version + 1 "
                f"WHERE opc = ? AND status IN {_OPEN}",
                (status, t.now, opc),
            )
        if queue_of(it["unit_target"]) is not None:  # a pull queue's job is done with its call
            t.send("DELETE FROM queue_jobs WHERE opc = ?", (opc,))
        unit_id, index = it["unit_id"], it["item_index"]
        self._fact(t, unit_id, "provider", index)
        child_version = it["child_version_now"]
        if child_version is None:
            t.send("INSERT INTO item_children (unit_id, item_index, opc, status, version, created_ms, updated_ms) "
                   "VALUES (?, ?, ?, 'queued', 0, ?, ?)", (unit_id, index, opc, t.now, t.now))
            child_version = 0
        dispatches: list[Dispatch] = []
        if it["unit_kind"] == "itemized" and (
                status == "completed" or not self._options(it, "unit_options").fails_fast):
            # a failed item under fail-fast is about to fail the unit: promote nothing to send
            dispatches, deadline = self._promote(t, unit_id)
            self._raise_expiry(t, it["run_id"], deadline)
        term = TerminalRecord(opc=opc, status=status, payload=payload, payload_sha256=sha, source=source,
                              best_effort=bool(best_effort), transport=transport, fuel_used=fuel_used,
                              recorded_ms=t.now)
        t.fault("admit")
        return AdmitResult("admitted", child_version=child_version, dispatches=tuple(dispatches),
                           terminal=term, **base)

    def _schedule_retry(self, t: Tx, it: Row, error: JsonValue) -> list[Dispatch] | None:
        """Put a failed call back in the queue to be sent again after its backoff, when its
        op's ``WITH retries`` allows one more (None: it does not — the failure stands). Its
        token is retired (a late answer with it gets 410). Returns what the freed window
        slot lets out now (an itemized op's next items)."""
        unit = t.one(f"{UNIT_ROW} WHERE unit_id = ?", (it["unit_id"],))
        if unit is None or unit["status"] != "waiting":
            return None
        delays = self._options(unit).retry_delays_ms
        allowed = len(delays)
        done = it["retry_count"] or 0
        if done >= allowed:
            return None
        at = t.now + delays[done]
        retired = ",".join(h for h in ((it["retired_tokens"] or ""), it["token_hash"] or "") if h)
        if t.run(
            "UPDATE interactions SET status = 'queued', token_hash = NULL, retired_tokens = ?, "
            "retry_count = retry_count + 1, retry_at_ms = ?, deadline_ms = NULL, dispatch_owner = NULL, "
            "heartbeat_ms = NULL, cancel_url = NULL, cancel_token = NULL, version = version + 1 "
            f"WHERE opc = ? AND status IN {_IN_FLIGHT}",
            (retired or None, at, it["opc"]),
        ) != 1:
            return None
        self._event(t, it["run_id"], "interaction.retry", f"retry:{it['opc']}:{done + 1}",
                    {"opc": it["opc"], "item_index": it["item_index"], "op": unit["op_name"], "retry": done + 1,
                     "of": allowed, "attempt": it["attempts"], "error": error, "retry_at_ms": at})
        if unit["budget_ms"] is not None:  # the run waits for the retry too
            self._raise_expiry(t, it["run_id"], at + unit["budget_ms"])
        promoted, deadline = self._promote(t, unit["unit_id"])
        self._raise_expiry(t, it["run_id"], deadline)
        return promoted
