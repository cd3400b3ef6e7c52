"""The continuation procedures, written once for every backend.

Each public method is one transaction (see :mod:`txcl.store.procedures`). Every write to a
run's records first locks the run (``tx.lock_run``), then touches suspends → units →
interactions → children → facts, markers and claims, so work on one run is serialised and the
lock order never deadlocks. Coordination is by unique keys and compare-and-swap only
(``UPDATE … WHERE status = ? AND version = ?``, ``INSERT … ON CONFLICT DO NOTHING
RETURNING``): nothing depends on process memory, so any number of processes — on one host
with SQLite, on several nodes with PostgreSQL — may share the database.

The procedures record facts; the few decisions and texts that are not the store's to make
(how a worker's answer becomes an item's outcome, which failures fail a unit at once, the
errors it writes) come from the :class:`~txcl.store.protocol.StorePolicy` the continuations
layer gives the store. Sweeper procedures take ``skip_locked=True``: a run another node is
working on right now is left to it (the answer says ``busy``/``recorded``), and the next pass
sees it again.

Vocabulary: a *fence* proves that a segment still owns the run it writes (the origin request
while the run is ``active``, a resume by its claim token while it is ``resuming``; a failed
fence raises :class:`RunLost`). A *provider fact* says a worker's terminal was recorded for an
item, a *continuation fact* that its child outcome was materialised; a unit is complete when
it holds a continuation fact per item. The *release* is the one compare-and-swap that moves a
parked run to ``resuming`` and creates its resume claim.
"""

from __future__ import annotations

import zlib
from typing import Callable, Sequence, TypeVar

from txcl.ids import hash_token, new_claim_token, new_opc, new_rcid, new_run_id, new_token, random_base58, token_matches
from txcl.store.backend import SqlBackend, Tx
from txcl.store.blobs import pack
from txcl.store.errors import RunLost, StoreError, UnknownRun
from txcl.store.procedures import read_procedure, write_procedure
from txcl.store.procedures.rows import (
    Row,
    child_record,
    claim_record,
    columns,
    dumps,
    interaction_record,
    lazy_unit_record,
    load_doc,
    loads,
    placeholders,
    write_blobs,
    run_record,
    terminal_record,
    unit_record,
)
from txcl.store.protocol import StorePolicy
from txcl.store.records import (
    CHILD_PENDING,
    DEFAULT_ROLE,
    INTERACTION_IN_FLIGHT,
    INTERACTION_OPEN,
    UNIT_BAD,
    UNIT_TERMINAL,
    AdmitResult,
    CallbackTarget,
    ChildRecord,
    ClaimRecord,
    CreateRunResult,
    Dispatch,
    DispatchResult,
    ExpireResult,
    Fence,
    InteractionRecord,
    JoinedMarker,
    JoinResult,
    JsonValue,
    Materialized,
    Materializer,
    ParkBuilder,
    ParkResult,
    ReleaseResult,
    ResumeBundle,
    RunEvent,
    RunRecord,
    RunSpec,
    SuspendRecord,
    TakeoverResult,
    TerminalRecord,
    TimeoutResult,
    UnitRecord,
    UnitSpec,
    evolve,
    payload_sha256,
    resume_segment_id,
)

_OPEN = "('queued', 'dispatching', 'dispatched')"
_IN_FLIGHT = "('dispatching', 'dispatched')"
_PENDING_CHILD = "('queued', 'running')"
_FINISHED = "('completed', 'failed', 'expired')"

T = TypeVar("T")

JoinErrorBuilder = Callable[[UnitRecord], JsonValue]

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
    "SELECT c.status AS child_status, c.version AS child_version, x.* FROM interactions i "
    "JOIN item_children c ON c.unit_id = i.unit_id AND c.item_index = i.item_index "
    "LEFT JOIN terminals x ON x.opc = c.opc WHERE i.opc = ?")
_UNREAD = object()  # an argument the caller did not read


class ContinuationProcedures:
    """Durable runs: every procedure of the continuation store (see the module docstring)."""

    backend: SqlBackend
    node_id: str
    policy: StorePolicy | None

    def _policy(self) -> StorePolicy:
        if self.policy is None:
            raise StoreError("this store was opened without a continuation policy")
        return self.policy

    def _materializer(self, override: Materializer | None) -> Materializer:
        return override or self._policy().materialize

    def now_ms(self) -> int:
        return self.backend.now_ms()

    def commit_count(self) -> int:
        return self.backend.commit_count()

    def run_batch(self, calls: Sequence) -> list:
        return self.backend.run_batch(calls)

    def run_together(self, fn: Callable[[], T]) -> T:
        """``fn``'s store calls in one write transaction (one commit; see ``SqlBackend.run_together``)."""
        return self.backend.run_together(fn)

    def admit_and_continue(self, opc: str, status: str, payload: JsonValue, *, source: str,
                           token: str | None = None, best_effort: bool = False, transport: str | None = None,
                           retryable: bool = False, materialize: Materializer | None = None,
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
                return admit, self.continue_release(opc, child_version=version, materialize=materialize)
            except Exception as exc:  # noqa: BLE001 - the admission stands; the caller sees this
                return admit, exc

        return self.backend.run_together(both)

    def _directives(self, unit_id: str, text: str | None) -> JsonValue:
        """A unit's decoded directives for its dispatches, cached per unit (they never change
        after the unit's insert; the cached text is compared, so the cache cannot go stale).
        An itemized unit's directives hold its whole ``each`` array: decoding them for every
        promoted item made each completion cost O(n). Dispatches share the read-only value."""
        cache = self._directives_cache
        hit = cache.get(unit_id)
        if hit is not None and hit[0] == text:
            return hit[1]
        value = loads(text)
        if len(cache) >= 64:
            cache.pop(next(iter(cache)), None)
        cache[unit_id] = (text, value)
        return value

    # ----------------------------------------------------------------------------------------
    # shared in-transaction steps

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

    def _insert_run(self, t: Tx, spec: RunSpec, created_as: str, **columns: object) -> Row | None:
        """Insert the request's run (its snapshot first) with `columns` besides those every new
        run has, and its `run.created` event (the run was created `created_as`). The new row
        comes back whole: inserted by this transaction, it is already locked by it. None when
        the request's run exists already."""
        if spec.snapshot_body is not None and spec.snapshot_id:
            self._put_snapshot(t, spec.snapshot_id, spec.snapshot_body)
        run_id = new_run_id(t.now)
        values = dict(run_id=run_id, rcid=new_rcid(), origin_rid=spec.origin_rid, entry_stack=spec.entry_stack,
                      src=spec.src, snapshot_id=spec.snapshot_id, created_ms=t.now, updated_ms=t.now, **columns)
        created = t.returning(
            f"INSERT INTO runs ({', '.join(values)}) VALUES ({placeholders(len(values))}) "
            "ON CONFLICT (origin_rid) DO NOTHING RETURNING *", tuple(values.values()))
        if not created:
            return None
        self._event(t, run_id, "run.created", "created", {"origin_rid": spec.origin_rid, "status": created_as}, seq=1)
        return created[0]

    def _create_run(self, t: Tx, spec: RunSpec, status: str, segment_id: str | None) -> tuple[Row, bool]:
        created = self._insert_run(t, spec, status, status=status, version=0, segment_id=segment_id)
        if created is not None:
            return created, True
        row = t.one("SELECT run_id FROM runs WHERE origin_rid = ?", (spec.origin_rid,))
        if row is None:  # the other request's run was purged in between
            raise UnknownRun(spec.origin_rid)
        return self._lock(t, row["run_id"]), False

    @staticmethod
    def _put_snapshot(t: Tx, snapshot_id: str, body: bytes) -> bool:
        if t.one("SELECT 1 FROM snapshots WHERE snapshot_id = ?", (snapshot_id,)) is not None:
            return False  # content-addressed: never compress a large body twice
        return bool(
            t.returning(
                "INSERT INTO snapshots (snapshot_id, created_ms, body, bytes) VALUES (?, ?, ?, ?) "
                "ON CONFLICT DO NOTHING RETURNING snapshot_id",
                (snapshot_id, t.now, zlib.compress(body), len(body)),
            )
        )

    def _resolve_run(self, t: Tx, run: RunSpec | str, fence: Fence, new_status: str) -> tuple[Row, bool]:
        if isinstance(run, RunSpec):
            row, created = self._create_run(t, run, new_status, fence.segment_id)
        else:
            row, created = self._lock(t, run), False
        self._check_fence(row, fence)
        return row, created

    def _insert_units(self, t: Tx, run_id: str, seq: int, units: Sequence[UnitSpec], segment_id: str | None,
                      blobs: dict[str, str] | None = None) -> tuple[list[str], list[Dispatch], int | None, int]:
        """Insert units and interactions (the first window ``dispatching``), numbered from
        ``seq`` (the run's ``next_seq``). Returns the unit ids, the dispatches, the latest
        deadline (:func:`_units_deadline`) and the run's next ``created_seq``."""
        node = self.node_id
        own_blobs = blobs if blobs is not None else {}
        unit_ids: list[str] = []
        dispatches: list[Dispatch] = []
        max_deadline: int | None = None
        for spec in units:
            unit_id = "au_" + random_base58()
            failed = spec.failed_error is not None
            items = [] if failed else list(spec.items)
            window = max(1, int(spec.window)) if spec.kind == "itemized" else 1
            t.send(
                "INSERT INTO await_units (unit_id, run_id, created_seq, kind, op_name, op_stack, op_scope, "
                "dispatch_stage, dispatch_stack, join_at_scope, segment_id, status, expected, window_size, "
                "on_item_error, into_path, exec_target, directives_json, input_view_json, error_json, fuel_used, "
                "budget_ms, deadline_ms, join_deadline_ms, created_ms, closed_ms) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (unit_id, run_id, seq, spec.kind, spec.op_name, spec.op_stack, spec.op_scope,
                 spec.dispatch_stage, spec.dispatch_stack, spec.join_at_scope, segment_id,
                 "failed" if failed else "waiting", len(items), window, spec.on_item_error, spec.into,
                 spec.exec_target, dumps(spec.directives), pack(spec.input_view, own_blobs), dumps(spec.failed_error),
                 spec.fuel_used, spec.budget_ms, spec.deadline_ms,
                 t.now + spec.join_deadline_ms if spec.join_deadline_ms is not None and not failed else None,
                 t.now, t.now if failed else None),
            )
            seq += 1
            unit_ids.append(unit_id)
            if not items:
                continue
            first = len(items) if spec.kind != "itemized" else min(window, len(items))
            deadline = _unit_deadline(spec, t.now)
            every = self._policy().heartbeat_every_ms(spec.directives) if spec.tokened else None
            due = _next_beat(deadline, every, t.now)
            cancel_url = spec.cancel_url if spec.tokened else None
            rows = []
            for i, item in enumerate(items):
                opc = new_opc()
                input_json = pack(item, own_blobs)
                if i < first:  # the first window is promoted at once
                    token = new_token() if spec.tokened else None
                    rows.append((opc, unit_id, i, run_id, hash_token(token) if token else None,
                                 "dispatching", 1, input_json, due, node, t.now, 1, t.now, cancel_url,
                                 token if cancel_url else None))
                    dispatches.append(Dispatch(
                        opc=opc, token=token, run_id=run_id, unit_id=unit_id, op_name=spec.op_name,
                        op_stack=spec.op_stack, stage=spec.dispatch_stage, exec_target=spec.exec_target,
                        directives=spec.directives, item_index=i, item_count=len(items), kind=spec.kind,
                        input=item, deadline_ms=deadline, attempts=1))
                else:
                    rows.append((opc, unit_id, i, run_id, None, "queued", 0, input_json, None, None,
                                 None, 0, t.now, None, None))
            t.many(
                "INSERT INTO interactions (opc, unit_id, item_index, run_id, token_hash, status, version, "
                "input_json, deadline_ms, dispatch_owner, dispatch_ms, attempts, created_ms, cancel_url, "
                "cancel_token) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            if deadline is not None:
                max_deadline = deadline if max_deadline is None else max(max_deadline, deadline)
        if blobs is None:  # (a caller that passes `blobs` writes them with its own documents)
            write_blobs(t, run_id, own_blobs)
        return unit_ids, dispatches, max_deadline, seq

    def _promote(self, t: Tx, unit_id: str) -> tuple[list[Dispatch], int | None]:
        """Move queued interactions to ``dispatching`` while in-flight < window (item order)."""
        unit = t.one("SELECT * FROM await_units WHERE unit_id = ?", (unit_id,))
        if unit is None or unit["status"] != "waiting":
            return [], None
        in_flight = t.one(
            f"SELECT COUNT(*) AS n FROM interactions WHERE unit_id = ? AND status IN {_IN_FLIGHT}", (unit_id,)
        )["n"]
        free = unit["window_size"] - in_flight
        if free <= 0:
            return [], None
        rows = t.all(  # (a call waiting to be retried goes out once its time has come)
            "SELECT * FROM interactions WHERE unit_id = ? AND status = 'queued' "
            "AND (retry_at_ms IS NULL OR retry_at_ms <= ?) ORDER BY item_index LIMIT ?",
            (unit_id, t.now, free),
        )
        if not rows:
            return [], None
        tokened = unit["kind"] in ("unary", "itemized")
        if unit["deadline_ms"] is not None:
            deadline = unit["deadline_ms"]
        elif unit["budget_ms"] is not None:
            deadline = t.now + unit["budget_ms"]
        else:
            deadline = None
        stage = unit["dispatch_stage"]
        directives = self._directives(unit_id, unit["directives_json"])
        every = self._policy().heartbeat_every_ms(directives)
        # with WITH heartbeat the interaction times out one period after its last sign of life
        # (the dispatch, then each heartbeat), never later than its deadline
        due = _next_beat(deadline, every, t.now)
        cancel_url = self._policy().cancel_url_of(directives) if tokened else None
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
                    directives=directives, item_index=r["item_index"],
                    item_count=unit["expected"], kind=unit["kind"], input=load_doc(r["input_json"], t, r["run_id"]),
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
    def _raise_expiry(t: Tx, run_id: str, deadline: int | None) -> None:
        """A run's expiry is raised by later deadlines, never lowered."""
        if deadline is not None:
            t.send("UPDATE runs SET expires_ms = ? WHERE run_id = ? AND (expires_ms IS NULL OR expires_ms < ?)",
                  (deadline, run_id, deadline))

    def _park(self, t: Tx, run: Row, fence: Fence, *, stage: str, kind: str, envelope: JsonValue,
              budgets: JsonValue, units: Sequence[UnitSpec], members: Sequence[tuple[str, str]],
              fresh: bool = False) -> tuple[int, list[str], list[Dispatch], RunRecord]:
        """Write a suspend with its member units and move the run to ``waiting``. Returns the
        visit, the new unit ids, the dispatches to send and the run as the park left it.
        `fresh`: the run was created by this transaction (it has no suspend yet: visit 1)."""
        run_id = run["run_id"]
        if run["status"] == "resuming":
            t.send(
                "UPDATE suspends SET status = 'resumed', closed_ms = ? "
                "WHERE run_id = ? AND stage = ? AND visit = ? AND status = 'resuming'",
                (t.now, run_id, run["cur_stage"], run["cur_visit"]),
            )
        visit = 1 if fresh else t.one(
            "SELECT COALESCE(MAX(visit), 0) + 1 AS v FROM suspends WHERE run_id = ? AND stage = ?", (run_id, stage))["v"]
        unit_ids, dispatches, deadline, next_seq = self._write_suspend(
            t, run_id, run["next_seq"], fence, stage=stage, visit=visit, kind=kind, envelope=envelope,
            budgets=budgets, units=units, members=members)
        if fence.claim_token is not None:
            t.send("DELETE FROM resume_claims WHERE run_id = ? AND claim_token = ?", (run_id, fence.claim_token))
        expires = run["expires_ms"] if deadline is None else max(run["expires_ms"] or 0, deadline)
        changed = t.run(
            "UPDATE runs SET status = 'waiting', cur_stage = ?, cur_visit = ?, claim_token = NULL, "
            "segment_id = NULL, version = version + 1, updated_ms = ?, next_seq = ?, expires_ms = ? "
            "WHERE run_id = ? AND version = ?",
            (stage, visit, t.now, next_seq, expires, run_id, run["version"]),
        )
        if changed != 1:  # cannot happen under the run lock; guard the CAS anyway
            raise RunLost(f"run {run_id} changed under the park")
        self._event(t, run_id, "stage.suspended", f"suspend:{stage}:{visit}",
                    {"stage": stage, "visit": visit, "kind": kind, "units": unit_ids})
        t.notify_run(run_id)
        parked = evolve(
            run_record(run, t), status="waiting", cur_stage=stage, cur_visit=visit, claim_token=None, segment_id=None,
            version=run["version"] + 1, updated_ms=t.now, next_seq=next_seq, expires_ms=expires)
        return visit, unit_ids, dispatches, parked

    def _park_new_run(self, t: Tx, spec: RunSpec, fence: Fence, *, stage: str, kind: str, envelope: JsonValue,
                      budgets: JsonValue, units: Sequence[UnitSpec], members: Sequence[tuple[str, str]]
                      ) -> tuple[list[str], list[Dispatch], RunRecord] | None:
        """A request's first park when it creates its run: the run row is inserted already
        parked (``waiting`` at visit 1, version 1), the same rows and events as creating it
        ``active`` and then parking it, in one statement fewer. None when the request's run
        exists already (another node's retry of the same request created it): the caller
        parks that one the usual way."""
        expires = _units_deadline(units, t.now)
        after = 1 + len(units)  # the run's next created_seq once its units are in
        created = self._insert_run(t, spec, "active", status="waiting", version=1, cur_stage=stage, cur_visit=1,
                                   expires_ms=expires, next_seq=after)
        if created is None:
            return None
        run_id = created["run_id"]
        unit_ids, dispatches, deadline, next_seq = self._write_suspend(
            t, run_id, 1, fence, stage=stage, visit=1, kind=kind, envelope=envelope, budgets=budgets, units=units,
            members=members)
        if (deadline, next_seq) != (expires, after):  # the run row was written from these in advance
            raise StoreError(f"run {run_id}: its units' deadline or count changed while they were written")
        self._event(t, run_id, "stage.suspended", f"suspend:{stage}:1",
                    {"stage": stage, "visit": 1, "kind": kind, "units": unit_ids}, seq=2)
        t.notify_run(run_id)
        return unit_ids, dispatches, run_record(created, t)

    def _write_suspend(self, t: Tx, run_id: str, seq: int, fence: Fence, *, stage: str, visit: int, kind: str,
                       envelope: JsonValue, budgets: JsonValue, units: Sequence[UnitSpec],
                       members: Sequence[tuple[str, str]]) -> tuple[list[str], list[Dispatch], int | None, int]:
        """The suspend row, its new units (numbered from `seq`) and their interactions, and its
        members. Returns what :meth:`_insert_units` returns."""
        blobs: dict[str, str] = {}  # big strings of the documents below, stored once (txcl.store.blobs)
        # dispatch_complete = 1 is written with the suspend: every member unit and interaction is
        # inserted by this same transaction, so no reader can see the suspend without them
        t.send(
            "INSERT INTO suspends (run_id, stage, visit, kind, status, envelope_json, budget_json, segment_id, "
            "dispatch_complete, suspended_ms) VALUES (?, ?, ?, ?, 'open', ?, ?, ?, 1, ?)",
            (run_id, stage, visit, kind, pack(envelope, blobs), pack(budgets, blobs), fence.segment_id, t.now),
        )
        unit_ids, dispatches, deadline, next_seq = self._insert_units(t, run_id, seq, units, fence.segment_id, blobs)
        write_blobs(t, run_id, blobs)
        rows = [(run_id, stage, visit, uid, spec.role or DEFAULT_ROLE.get(spec.kind, "op"))
                for uid, spec in zip(unit_ids, units)]
        rows += [(run_id, stage, visit, uid, role) for uid, role in members]
        t.many(
            "INSERT INTO suspend_members (run_id, stage, visit, unit_id, role) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            rows,
        )
        return unit_ids, dispatches, deadline, next_seq

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

    def _let_go(self, t: Tx, run: Row, *, expired: bool, keep_unjoined_deferred: bool, reason: str) -> None:
        """A finished run lets go of its interactions, children, units and claims. After a
        completion, a deferred op that was never joined (or was passed over at its join
        deadline) keeps what was already sent open until its deadline (its worker may still
        answer; the answer is recorded, never merged), and what was never sent never will be.
        Every worker with a cancel URL is told the flow gave up (``reason``)."""
        run_id = run["run_id"]
        rows = t.all(
            "SELECT unit_id, (join_at_scope IS NOT NULL AND NOT EXISTS "
            "(SELECT 1 FROM joined_markers m WHERE m.unit_id = u.unit_id AND m.segment_id != ?)) AS unjoined "
            "FROM await_units u WHERE run_id = ? AND status = 'waiting'",
            (PASSED_OVER, run_id),
        )
        kept = [r["unit_id"] for r in rows if keep_unjoined_deferred and r["unjoined"]]
        self._close_units(t, [r["unit_id"] for r in rows if r["unit_id"] not in kept],
                          "timed_out" if expired else "cancelled", reason=reason)
        for start in range(0, len(kept), 500):
            chunk = kept[start:start + 500]
            self._owe_cancels(t, f"unit_id IN ({placeholders(len(chunk))})", tuple(chunk), reason)
            t.send(
                "UPDATE interactions SET status = 'cancelled', closed_ms = ?, version = version + 1 "
                f"WHERE unit_id IN ({placeholders(len(chunk))}) AND status = 'queued'",
                (t.now, *chunk),
            )
        if run["status"] == "resuming":  # only a resuming run holds a claim
            t.send("DELETE FROM resume_claims WHERE run_id = ?", (run_id,))

    # ----------------------------------------------------------------------------------------
    # the steps of a completion: materialise the child, record the fact, settle, release

    def _materialize_child(self, t: Tx, unit: Row, opc: str, carried_version: int | None,
                           materialize: Materializer, it: Row | None = None,
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
        m: Materialized = materialize(lazy_unit_record(unit, t), interaction_record(it, t), terminal_record(child))
        version = child["child_version"] if carried_version is None else carried_version
        for _attempt in range(2):
            changed = t.run(
                "UPDATE item_children SET status = ?, output_json = ?, error_json = ?, version = version + 1, "
                "updated_ms = ?, lease_owner = NULL, lease_until_ms = NULL "
                f"WHERE unit_id = ? AND item_index = ? AND version = ? AND status IN {_PENDING_CHILD}",
                (m.status, dumps(m.output), dumps(m.error), t.now, unit["unit_id"], it["item_index"], version),
            )
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

    def _record_continuation_fact(self, t: Tx, unit: Row, item_index: int, child_status: str | None) -> Row:
        """Only a succeeded child counts — or a failed one of a unit that does not fail fast.
        Returns the unit's row as it now stands (`unit` with its continuation count raised
        when the fact was new): nothing else writes the unit meanwhile, under the run lock."""
        ok = child_status == "succeeded" or (
            child_status == "failed" and not self._policy().fails_fast(unit["kind"], unit["on_item_error"]))
        if ok and unit["status"] == "waiting" and self._fact(t, unit["unit_id"], "continuation", item_index,
                                                              counted=True):
            unit = {**columns(unit), "continuation_done": unit["continuation_done"] + 1}
        return unit

    def _settle_unit(self, t: Tx, unit_id: str, *, reconcile: bool = False, unit: Row | None = None) -> str:
        """Complete (or fail) a unit from its stored facts and children. Returns its status.
        `unit`: its current row, when the caller has it (else it is read)."""
        if unit is None:
            unit = t.one("SELECT * FROM await_units WHERE unit_id = ?", (unit_id,))
        if unit is None:
            return "gone"
        if unit["status"] != "waiting":
            return unit["status"]
        policy = self._policy()
        kind = unit["kind"]
        fail_fast = policy.fails_fast(kind, unit["on_item_error"])
        # through the partial index of failed children: cost flat in the unit's size (a scan of
        # every child per completion made a large itemized await quadratic)
        failed_index = t.backend.dialect.using_index("item_children_failed")
        bound = policy.tolerated(unit["on_item_error"], unit["expected"]) if kind == "itemized" else None
        if bound is not None:
            failed = t.one(f"SELECT COUNT(*) AS n, MIN(item_index) AS first FROM item_children {failed_index} "
                           "WHERE unit_id = ? AND status = 'failed'", (unit_id,))
            if failed["n"] > bound:  # more than tolerated: the unit fails now, as a fail-fast one would
                first = t.one("SELECT error_json FROM item_children WHERE unit_id = ? AND item_index = ?",
                              (unit_id, failed["first"]))
                error = policy.too_many_failures_error(failed["n"], unit["expected"], unit["on_item_error"],
                                                       failed["first"], loads(first["error_json"]))
                t.send("UPDATE await_units SET error_json = ? WHERE unit_id = ?", (dumps(error), unit_id))
                self._close_units(t, [unit_id], "cancelled", unit_status="failed", reason="item_failed")
                return "failed"
        if fail_fast and unit["continuation_done"] < unit["expected"]:
            # (with every fact present no child can have failed: facts follow succeeded children only)
            bad = t.one(
                f"SELECT item_index, error_json FROM item_children {failed_index} WHERE unit_id = ? "
                "AND status = 'failed' ORDER BY item_index LIMIT 1",
                (unit_id,),
            )
            if bad is not None:
                error = policy.unit_failed_error(kind, bad["item_index"], loads(bad["error_json"]))
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
        changed = t.run(
            "UPDATE await_units SET status = 'completed', output_json = ?, error_json = COALESCE(?, error_json), "
            "version = version + 1, closed_ms = ? WHERE unit_id = ? AND status = 'waiting' AND version = ?",
            (dumps(output), dumps(error), t.now, unit_id, unit["version"]),
        )
        return "completed" if changed else t.one("SELECT status FROM await_units WHERE unit_id = ?",
                                                 (unit_id,))["status"]

    def _release(self, t: Tx, run_id: str, segment_id: str | None = None) -> ClaimRecord | None:
        """The single compare-and-swap that releases a parked run: only when its current suspend
        is open, was written completely, and every member is terminal (or one failed — then the
        open members are cancelled with the release)."""
        # the run's current suspend and its members, read together (one round trip on PostgreSQL)
        runs, members = t.read_many(
            ("SELECT r.version, r.cur_stage, r.cur_visit, s.status AS s_status, s.dispatch_complete, "
             "s.resume_round FROM runs r "
             "JOIN suspends s ON s.run_id = r.run_id AND s.stage = r.cur_stage AND s.visit = r.cur_visit "
             "WHERE r.run_id = ? AND r.status = 'waiting'", (run_id,)),
            ("SELECT m.unit_id, m.role, u.status FROM runs r "
             "JOIN suspend_members m ON m.run_id = r.run_id AND m.stage = r.cur_stage AND m.visit = r.cur_visit "
             "JOIN await_units u ON u.unit_id = m.unit_id WHERE r.run_id = ?", (run_id,)),
        )
        run = runs[0] if runs else None
        if run is None or run["s_status"] != "open" or not run["dispatch_complete"]:
            return None
        stage, visit = run["cur_stage"], run["cur_visit"]
        statuses = [m["status"] for m in members]
        any_bad = any(s in UNIT_BAD for s in statuses)
        if not (any_bad or all(s in UNIT_TERMINAL for s in statuses)):
            return None
        if t.run("UPDATE suspends SET status = 'resuming' WHERE run_id = ? AND stage = ? AND visit = ? "
                 "AND status = 'open'", (run_id, stage, visit)) != 1:
            return None
        token = new_claim_token()
        segment = segment_id or resume_segment_id(run_id, stage, visit, 1, run["resume_round"] or 1)
        if t.run(
            "UPDATE runs SET status = 'resuming', claim_token = ?, segment_id = ?, version = version + 1, "
            "updated_ms = ? WHERE run_id = ? AND status = 'waiting' AND version = ?",
            (token, segment, t.now, run_id, run["version"]),
        ) != 1:
            raise RunLost(f"run {run_id} changed during release")  # rolls back the suspend CAS too
        claimed = t.returning(
            "INSERT INTO resume_claims (run_id, stage, visit, claim_token, owner, segment_id, attempt, claimed_ms, "
            "heartbeat_ms) VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?) ON CONFLICT DO NOTHING RETURNING run_id",
            (run_id, stage, visit, token, self.node_id, segment, t.now, t.now),
        )
        if not claimed:
            raise RunLost(f"resume claim for {run_id} {stage} v{visit} already exists")
        joins = [m["unit_id"] for m in members if m["role"] == "join"]
        t.many(
            "INSERT INTO joined_markers (unit_id, run_id, segment_id, joined_ms) VALUES (?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            [(u, run_id, segment, t.now) for u in joins],
        )
        if any_bad:  # fail-fast: the remaining open members are cancelled with the release
            self._close_units(t, [m["unit_id"] for m in members if m["status"] == "waiting"], "cancelled",
                              reason="sibling_failed")
        self._event(t, run_id, "run.released", f"release:{stage}:{visit}", {"stage": stage, "visit": visit,
                                                                          "fail_fast": any_bad})
        t.notify_run(run_id)
        t.fault("release")
        return ClaimRecord(run_id=run_id, stage=stage, visit=visit, claim_token=token, owner=self.node_id,
                           segment_id=segment, attempt=1, claimed_ms=t.now, heartbeat_ms=t.now)

    def _drain_unit(self, t: Tx, unit_id: str, materialize: Materializer) -> str:
        """Materialise every pending child whose terminal exists, then settle."""
        unit = t.one("SELECT * FROM await_units WHERE unit_id = ?", (unit_id,))
        if unit is None or unit["status"] != "waiting":
            return unit["status"] if unit else "gone"
        pending = t.all(
            f"SELECT c.opc, c.item_index FROM item_children c JOIN terminals x ON x.opc = c.opc "
            f"WHERE c.unit_id = ? AND c.status IN {_PENDING_CHILD} ORDER BY c.item_index",
            (unit_id,),
        )
        for p in pending:
            status = self._materialize_child(t, unit, p["opc"], None, materialize)
            unit = t.one("SELECT * FROM await_units WHERE unit_id = ?", (unit_id,))
            self._record_continuation_fact(t, unit, p["item_index"], status)
        return self._settle_unit(t, unit_id)

    def _current_members(self, t: Tx, run: Row) -> list[str]:
        return [m["unit_id"] for m in t.all(
            "SELECT unit_id FROM suspend_members WHERE run_id = ? AND stage = ? AND visit = ?",
            (run["run_id"], run["cur_stage"], run["cur_visit"]))]

    # ----------------------------------------------------------------------------------------
    # runs, dispatch and parks

    @write_procedure
    def create_or_reuse_run(self, t: Tx, spec: RunSpec, *, status: str = "active",
                            fence_segment: str | None = None) -> CreateRunResult:
        """Create the request's run (or find it: one run per origin request)."""
        row, created = self._create_run(t, spec, status, fence_segment or spec.origin_rid)
        return CreateRunResult(run_record(row, t), created)

    @write_procedure
    def put_snapshot(self, t: Tx, snapshot_id: str, body: bytes) -> bool:
        return self._put_snapshot(t, snapshot_id, body)

    @write_procedure
    def dispatch_deferred(self, t: Tx, run: RunSpec | str, fence: Fence, units: Sequence[UnitSpec]) -> DispatchResult:
        """A deferred op's dispatch: create or reuse the run, insert the units (first window
        ``dispatching``), raise the run's expiry — the flow goes on without waiting."""
        row, created = self._resolve_run(t, run, fence, "active")
        unit_ids, dispatches, deadline, next_seq = self._insert_units(t, row["run_id"], row["next_seq"], units,
                                                                      fence.segment_id)
        if units:
            t.send("UPDATE runs SET next_seq = ? WHERE run_id = ?", (next_seq, row["run_id"]))
        self._raise_expiry(t, row["run_id"], deadline)
        t.fault("deferred-dispatch")
        result_run = t.one("SELECT * FROM runs WHERE run_id = ?", (row["run_id"],))
        return DispatchResult(run_record(result_run, t), created, tuple(unit_ids), tuple(dispatches))

    @write_procedure
    def park_suspend(self, t: Tx, run: RunSpec | str, fence: Fence, *, stage: str, kind: str,
                     envelope: JsonValue, budgets: JsonValue, units: Sequence[UnitSpec] = (),
                     member_unit_ids: Sequence[str] = ()) -> ParkResult:
        """Park the flow: the suspend, its units and interactions, the run ``waiting`` — all
        committed before anything is sent."""
        members = [(u, "join") for u in member_unit_ids]
        if isinstance(run, RunSpec) and fence.claim_token is None:
            new = self._park_new_run(t, run, fence, stage=stage, kind=kind, envelope=envelope, budgets=budgets,
                                     units=units, members=members)
            if new is not None:
                unit_ids, dispatches, parked = new
                t.fault("promote" if kind == "promotion" else "park")
                return ParkResult(parked, True, stage, 1, tuple(unit_ids), tuple(dispatches))
        row, created = self._resolve_run(t, run, fence, "active")
        visit, unit_ids, dispatches, parked = self._park(
            t, row, fence, stage=stage, kind=kind, envelope=envelope, budgets=budgets, units=units,
            members=members, fresh=created,
        )
        t.fault("promote" if kind == "promotion" else "park")
        return ParkResult(parked, created, stage, visit, tuple(unit_ids), tuple(dispatches))

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

    # ----------------------------------------------------------------------------------------
    # completions

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
            self._time_out(t, it, self._policy().materialize)
            return "expired"
        unit = t.one("SELECT * FROM await_units WHERE unit_id = ?", (it["unit_id"],))
        every = self._policy().heartbeat_every_ms(self._directives(unit["unit_id"], unit["directives_json"]))
        deadline = it["deadline_ms"]
        if every is not None:
            deadline = _next_beat(_full_deadline(unit, it, t.now), every, t.now)
        t.send("UPDATE interactions SET heartbeat_ms = ?, progress_json = ?, deadline_ms = ?, "
               "version = version + 1 WHERE opc = ?",
               (t.now, dumps(progress) if progress is not None else it["progress_json"], deadline, opc))
        return "alive"

    @read_procedure
    def check_callback(self, t: Tx, opc: str, token: str | None) -> CallbackTarget:
        row = t.one("SELECT * FROM interactions WHERE opc = ?", (opc,))
        if row is None:
            return CallbackTarget("unknown")
        problem = _token_problem(token, row)
        if problem is not None:
            return CallbackTarget(problem)
        unit = t.one("SELECT * FROM await_units WHERE unit_id = ?", (row["unit_id"],))
        return CallbackTarget("ok", interaction_record(row, t), lazy_unit_record(unit, t))

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
        run, (found,) = t.lock_run_of_reading("interactions", "opc", opc, (
            "SELECT i.*, u.kind AS unit_kind, u.on_item_error AS unit_policy FROM interactions i "
            "JOIN await_units u ON u.unit_id = i.unit_id WHERE i.opc = ?", (opc,)))
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
            claim, _, promoted = self._time_out(t, it, self._policy().materialize)
            return AdmitResult("expired", claim=claim, dispatches=tuple(promoted), **base)
        if status == "failed" and retryable and it["status"] in INTERACTION_IN_FLIGHT:
            held_ack_first()
            retry = self._schedule_retry(t, it, payload)
            if retry is not None:
                return AdmitResult("retrying", dispatches=tuple(retry), **base)
        sha = payload_sha256(payload)
        inserted = t.returning(
            "INSERT INTO terminals (opc, status, payload_json, payload_sha256, source, best_effort, transport, "
            "fuel_used, recorded_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING opc",
            (opc, status, dumps(payload) if payload is not None else "null", sha, source, int(best_effort),
             transport, fuel_used, t.now),
        )
        if not inserted:
            held_ack_first()
            first = t.one("SELECT * FROM terminals WHERE opc = ?", (opc,))
            same = first["status"] == status and first["payload_sha256"] == sha
            return AdmitResult("duplicate" if same else "conflict", terminal=terminal_record(first), **base)
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
        unit_id, index = it["unit_id"], it["item_index"]
        self._fact(t, unit_id, "provider", index)
        made = t.returning(
            "INSERT INTO item_children (unit_id, item_index, opc, status, version, created_ms, updated_ms) "
            "VALUES (?, ?, ?, 'queued', 0, ?, ?) ON CONFLICT DO NOTHING RETURNING version",
            (unit_id, index, opc, t.now, t.now),
        )
        child_version = made[0][0] if made else t.one(
            "SELECT version FROM item_children WHERE unit_id = ? AND item_index = ?", (unit_id, index))["version"]
        dispatches: list[Dispatch] = []
        if it["unit_kind"] == "itemized" and (
                status == "completed" or not self._policy().fails_fast("itemized", it["unit_policy"])):
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
        unit = t.one("SELECT * FROM await_units WHERE unit_id = ?", (it["unit_id"],))
        if unit is None or unit["status"] != "waiting":
            return None
        policy = self._policy()
        allowed, backoff = policy.retries_of(self._directives(unit["unit_id"], unit["directives_json"]))
        done = it["retry_count"] or 0
        if done >= allowed:
            return None
        at = t.now + policy.retry_delay_ms(backoff, done)
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

    @read_procedure
    def due_retries(self, t: Tx, *, limit: int = 500) -> list[str]:
        """Units holding a call whose retry is due (``promote_window`` sends it)."""
        return [r["unit_id"] for r in t.all(
            "SELECT DISTINCT unit_id FROM interactions WHERE status = 'queued' AND retry_at_ms IS NOT NULL "
            "AND retry_at_ms <= ? LIMIT ?", (t.now, limit))]

    @write_procedure
    def continue_release(self, t: Tx, opc: str, *, child_version: int | None = None,
                         materialize: Materializer | None = None) -> ReleaseResult:
        """After an admitted terminal committed: materialise the item's child, record its
        continuation fact, settle the unit and try the release."""
        run, (its, units, children) = t.lock_run_of_reading(
            "interactions", "opc", opc,
            ("SELECT * FROM interactions WHERE opc = ?", (opc,)),
            ("SELECT * FROM await_units WHERE unit_id = (SELECT unit_id FROM interactions WHERE opc = ?)", (opc,)),
            (_CHILD_OF_OPC, (opc,)))
        if run is None:
            return ReleaseResult("recorded")
        run_id = run["run_id"]
        it, unit = its[0], units[0]
        status = self._materialize_child(t, unit, opc, child_version, self._materializer(materialize), it,
                                         children[0] if children else None)
        unit = self._record_continuation_fact(t, unit, it["item_index"], status)
        unit_status = self._settle_unit(t, it["unit_id"], unit=unit)
        # a unit still waiting keeps its suspend parked: only a member's end can release it
        # (and each member's end tries), so the check is skipped for every item but the last
        claim = self._release(t, run_id) if unit_status != "waiting" else None
        return ReleaseResult("resumed" if claim else "recorded", run_id, unit_status, claim,
                             materialized="materialize" in t.fired)

    @write_procedure
    def try_release(self, t: Tx, run_id: str, *, materialize: Materializer | None = None,
                    reconcile: bool = False, segment_id: str | None = None) -> ReleaseResult:
        """The drain and the sweeper's release check: settle each member of the run's current
        suspend from its stored facts and children, and release the run if that makes it
        releasable.

        Children are *not* materialised here: a completion admitted whose materialisation is
        still on its way keeps its own release (it answers ``resumed``); one whose never comes
        is materialised by the sweeper's stuck-children pass after ``--reconcile-after``.
        (``materialize`` is accepted for symmetry with the other release paths.)

        ``reconcile=True`` (the sweeper) skips a run another node holds and records a
        ``reconcile.release`` event when it wins: a parked run nobody released is a repair.
        ``segment_id`` names the segment that will hold the claim when it is not a background
        resume — a request that drains its own suspend continues inline as ``<rid>/v<visit>``."""
        run = t.lock_run(run_id, skip_locked=reconcile)
        if run is None or run["status"] != "waiting":
            return ReleaseResult("recorded", run_id)
        for unit_id in self._current_members(t, run):
            self._settle_unit(t, unit_id)
        claim = self._release(t, run_id, segment_id)
        if claim is not None and reconcile:
            self._event(t, run_id, "reconcile.release", f"reconcile.release:{claim.stage}:{claim.visit}",
                        {"run_id": run_id})
        return ReleaseResult("resumed" if claim else "recorded", run_id, None, claim)

    @write_procedure
    def settle_and_release(self, t: Tx, unit_id: str, *, materialize: Materializer | None = None,
                           skip_locked: bool = True) -> ReleaseResult:
        """Reconciliation of one unit from stored records only: repair missing continuation
        facts of settled children, settle, release. Children still ``queued`` are left to the
        stuck-children pass (claimed with a lease, then materialised), so a live completion on
        its way is never overtaken. (``materialize`` is accepted for symmetry.)"""
        run = t.lock_run_of("await_units", "unit_id", unit_id, skip_locked=skip_locked)
        if run is None:
            return ReleaseResult("recorded")
        run_id = run["run_id"]
        unit = t.one("SELECT * FROM await_units WHERE unit_id = ?", (unit_id,))
        before = unit["continuation_done"]
        status = self._settle_unit(t, unit_id, reconcile=True)
        claim = self._release(t, run_id)
        if claim is not None:
            self._event(t, run_id, "reconcile.release", f"reconcile.release:{claim.stage}:{claim.visit}",
                        {"unit_id": unit_id})
        elif status != unit["status"] or t.one("SELECT continuation_done FROM await_units WHERE unit_id = ?",
                                                (unit_id,))["continuation_done"] != before:
            self._event(t, run_id, "reconcile.settle", f"reconcile.settle:{unit_id}:{status}",
                        {"unit_id": unit_id, "status": status})
        return ReleaseResult("resumed" if claim else "recorded", run_id, status, claim)

    # ----------------------------------------------------------------------------------------
    # deferred joins

    @write_procedure
    def join_check(self, t: Tx, run_id: str, fence: Fence, *, unit_ids: Sequence[str], stage: str,
                   build_park: ParkBuilder | None = None, materialize: Materializer | None = None,
                   join_error: JoinErrorBuilder | None = None) -> JoinResult:
        """The join of the deferred units ``unit_ids`` (the caller's floor rule says they are
        due at this frame), under the run lock: merge what has arrived (``proceed``, with the
        units to merge, each marked joined exactly once), fail the run when a due unit failed
        (``failed``: the run is failed in this same transaction), or park the flow here as a
        ``join`` suspend (``parked``; ``build_park`` gives the envelope and state to park, with
        the units merged so far already in it). Units already joined or cancelled are skipped.

        A unit still waiting past its ``join_deadline`` fails the run (``join_deadline``), or
        under ``on_join_deadline = "continue"`` is passed over: marked joined by no segment
        (``passed_over``), its late answer recorded but never merged."""
        materializer = self._materializer(materialize)
        policy = self._policy()
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
        merged: list[UnitRecord] = []
        waiting: list[str] = []
        passed: list[UnitRecord] = []
        for d in due:
            status = self._drain_unit(t, d["unit_id"], materializer)
            unit = unit_record(t.one("SELECT * FROM await_units WHERE unit_id = ?", (d["unit_id"],)), t)
            if status in UNIT_BAD:
                self._insert_marker(t, unit.unit_id, run_id, fence.segment_id)
                error = (join_error or policy.join_failed_error)(unit)
                self._finish(t, run, status="failed", result=None, error=error, fail_reason="join_failed")
                return JoinResult("failed", tuple(merged), unit, None, error, tuple(passed))
            if status == "completed":
                self._insert_marker(t, unit.unit_id, run_id, fence.segment_id)
                merged.append(unit)
            elif unit.join_deadline_ms is not None and unit.join_deadline_ms <= t.now:
                if not policy.passes_over_at_join_deadline(unit.directives):
                    error = policy.join_deadline_error(unit)
                    self._finish(t, run, status="failed", result=None, error=error, fail_reason="join_deadline")
                    return JoinResult("failed", tuple(merged), unit, None, error, tuple(passed))
                self._pass_over(t, unit)
                passed.append(unit)
            else:
                waiting.append(unit.unit_id)
        if not waiting:
            return JoinResult("proceed", tuple(merged), passed_over=tuple(passed))
        if build_park is None:
            raise ValueError("join_check needs build_park when a due unit is still waiting")
        envelope, budgets = build_park(tuple(merged))
        visit, _, _, parked = self._park(t, run, fence, stage=stage, kind="join", envelope=envelope,
                                         budgets=budgets, units=(), members=[(u, "join") for u in waiting])
        t.fault("park")
        return JoinResult("parked", tuple(merged), None, ParkResult(parked, False, stage, visit, (), ()),
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

    # ----------------------------------------------------------------------------------------
    # resumes and the end of a segment

    @read_procedure
    def claim_resume(self, t: Tx, run_id: str, claim_token: str) -> ResumeBundle:
        """Load a released suspend for the claim holder. A read: the release (or takeover) that
        created the claim stamped its heartbeat; while the claim is current only its holder
        writes the run, and every later write of the segment is fenced."""
        # Four reads sent together (one round trip on PostgreSQL): the suspend and its members
        # are those of the stage and visit the run row names as it is read by each of them.
        runs, claims, rows, suspends = t.read_many(
            ("SELECT * FROM runs WHERE run_id = ?", (run_id,)),
            ("SELECT * FROM resume_claims WHERE run_id = ? AND claim_token = ?", (run_id, claim_token)),
            ("SELECT u.*, m.role AS member_role FROM runs r "
             "JOIN suspend_members m ON m.run_id = r.run_id AND m.stage = r.cur_stage AND m.visit = r.cur_visit "
             "JOIN await_units u ON u.unit_id = m.unit_id "
             "WHERE r.run_id = ? ORDER BY u.op_name, u.created_seq", (run_id,)),
            ("SELECT s.* FROM runs r JOIN suspends s "
             "ON s.run_id = r.run_id AND s.stage = r.cur_stage AND s.visit = r.cur_visit WHERE r.run_id = ?", (run_id,)),
        )
        if not runs:
            raise UnknownRun(run_id)
        run = runs[0]
        if run["status"] != "resuming" or run["claim_token"] != claim_token or not claims:
            raise RunLost(f"claim on run {run_id} is not current")
        members = tuple((r["unit_id"], r["member_role"]) for r in sorted(rows, key=lambda r: r["created_seq"]))
        susp = self._suspend_of(t, suspends[0], members) if suspends else None
        if susp is not None and (susp.stage, susp.visit) != (run["cur_stage"], run["cur_visit"]):
            # the run moved between the reads: whoever moved it holds it now
            raise RunLost(f"claim on run {run_id} is not current")
        return ResumeBundle(run_record(run, t), susp, claim_record(claims[0]), tuple(unit_record(r, t) for r in rows))

    @write_procedure
    def finish_segment(self, t: Tx, run_id: str, fence: Fence, *, status: str, result: JsonValue = None,
                       error: JsonValue = None, fail_reason: str | None = None) -> RunRecord:
        """The run ends (``completed`` or ``failed``) with the segment that owns it."""
        if status not in ("completed", "failed"):
            raise ValueError("finish status must be completed or failed")
        run = self._lock(t, run_id)
        self._check_fence(run, fence)
        self._finish(t, run, status=status, result=result, error=error, fail_reason=fail_reason)
        t.fault("finish")
        return evolve(
            run_record(run, t), status=status, result=result, error=error, fail_reason=fail_reason, finished_ms=t.now,
            updated_ms=t.now, claim_token=None, segment_id=None, version=run["version"] + 1)

    def _finish(self, t: Tx, run: Row, *, status: str, result: JsonValue, error: JsonValue,
                fail_reason: str | None) -> None:
        run_id = run["run_id"]
        if run["status"] == "resuming":
            t.send(
                "UPDATE suspends SET status = ?, closed_ms = ? WHERE run_id = ? AND stage = ? AND visit = ? "
                "AND status = 'resuming'",
                ("resumed" if status == "completed" else "failed", t.now, run_id, run["cur_stage"], run["cur_visit"]),
            )
        blobs: dict[str, str] = {}
        changed = t.run(
            "UPDATE runs SET status = ?, result_json = ?, error_json = ?, fail_reason = ?, finished_ms = ?, "
            "updated_ms = ?, claim_token = NULL, segment_id = NULL, version = version + 1 "
            "WHERE run_id = ? AND version = ?",
            (status, pack(result, blobs), dumps(error), fail_reason, t.now, t.now, run_id, run["version"]),
        )
        write_blobs(t, run_id, blobs)
        if changed != 1:
            raise RunLost(f"run {run_id} changed under finish")
        self._let_go(t, run, expired=False, keep_unjoined_deferred=(status == "completed"),
                     reason=fail_reason or ("run_finished" if status == "completed" else "run_failed"))
        self._event(t, run_id, f"run.{status}", f"finish:{status}", {"fail_reason": fail_reason})
        t.notify_run(run_id)

    # ----------------------------------------------------------------------------------------
    # timeouts and expiry

    @write_procedure
    def time_out_interaction(self, t: Tx, opc: str, *, materialize: Materializer | None = None,
                             skip_locked: bool = True) -> TimeoutResult:
        """Time out one interaction whose deadline has passed (the sweeper's timeout pass)."""
        if t.lock_run_of("interactions", "opc", opc, skip_locked=skip_locked) is None:
            known = t.one("SELECT 1 FROM interactions WHERE opc = ?", (opc,)) is not None
            return TimeoutResult("busy" if known else "unknown")
        it = t.one("SELECT * FROM interactions WHERE opc = ?", (opc,))
        if it["status"] not in INTERACTION_OPEN:
            return TimeoutResult(it["status"])
        if it["deadline_ms"] is None or it["deadline_ms"] >= t.now:
            return TimeoutResult("not_due")
        claim, expired, promoted = self._time_out(t, it, self._materializer(materialize))
        return TimeoutResult("timed_out", claim, expired, tuple(promoted))

    def _time_out(self, t: Tx, it: Row, materialize: Materializer
                  ) -> tuple[ClaimRecord | None, bool, list[Dispatch]]:
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
        policy = self._policy()
        error = policy.timeout_error(unit["kind"], index)
        every = policy.heartbeat_every_ms(self._directives(unit_id, unit["directives_json"]))
        full = _full_deadline(unit, it, 0)
        lapsed = every is not None and it["deadline_ms"] is not None and (full is None or it["deadline_ms"] < full)
        if lapsed:
            error = policy.heartbeat_missed_error(unit["kind"], index, every)
        if unit["kind"] == "itemized" and not policy.fails_fast("itemized", unit["on_item_error"]):
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
    def expire_run(self, t: Tx, run_id: str, *, materialize: Materializer | None = None,
                   skip_locked: bool = True) -> ExpireResult:
        """Expire a run past its ``expires_ms`` — unless everything it waits for was admitted
        in time and only the store's own work (children not yet materialised) is missing: then
        that work is done and the run released instead."""
        run = t.lock_run(run_id, skip_locked=skip_locked)
        if run is None or run["status"] not in ("active", "waiting"):
            return ExpireResult(False)
        if run["expires_ms"] is None or run["expires_ms"] >= t.now:
            return ExpireResult(False)
        if run["status"] == "waiting":
            materializer = self._materializer(materialize)
            for unit_id in self._current_members(t, run):
                self._drain_unit(t, unit_id, materializer)
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
        error = self._policy().expiry_error(reason, detail)
        t.send(
            "UPDATE runs SET status = 'expired', fail_reason = ?, error_json = ?, finished_ms = ?, updated_ms = ?, "
            "claim_token = NULL, segment_id = NULL, version = version + 1 WHERE run_id = ?",
            (reason, dumps(error), t.now, t.now, run_id),
        )
        self._let_go(t, run, expired=True, keep_unjoined_deferred=False, reason=reason)
        self._event(t, run_id, "run.expired", "expired", {"reason": reason})
        t.notify_run(run_id)

    # ----------------------------------------------------------------------------------------
    # claims

    @write_procedure
    def take_over_claim(self, t: Tx, run_id: str, *, stale_after_ms: int, max_attempts: int,
                        owner: str | None = None, skip_locked: bool = True) -> TakeoverResult:
        """A resume claim whose heartbeat is older than ``stale_after_ms`` goes to a new owner
        (attempt + 1, a new segment id); after ``max_attempts`` the run fails instead."""
        run = t.lock_run(run_id, skip_locked=skip_locked)
        if run is None or run["status"] != "resuming":
            return TakeoverResult("gone")
        claim = t.one("SELECT * FROM resume_claims WHERE run_id = ? AND claim_token = ?",
                      (run_id, run["claim_token"]))
        if claim is None:
            return TakeoverResult("gone")
        if t.now - claim["heartbeat_ms"] <= stale_after_ms:
            return TakeoverResult("not_stale", claim_record(claim))
        stage, visit, old_segment = claim["stage"], claim["visit"], claim["segment_id"]
        if claim["attempt"] >= max_attempts:
            error = self._policy().resume_exhausted_error(claim["attempt"])
            self._finish(t, run, status="failed", result=None, error=error, fail_reason="resumer-stale")
            return TakeoverResult("failed")
        attempt = claim["attempt"] + 1
        token = new_claim_token()
        resume_round = t.one("SELECT resume_round FROM suspends WHERE run_id = ? AND stage = ? AND visit = ?",
                             (run_id, stage, visit))
        segment = resume_segment_id(run_id, stage, visit, attempt, resume_round["resume_round"] if resume_round else 1)
        node = owner or self.node_id
        t.send(
            "UPDATE resume_claims SET claim_token = ?, owner = ?, segment_id = ?, attempt = ?, claimed_ms = ?, "
            "heartbeat_ms = ? WHERE run_id = ? AND stage = ? AND visit = ? AND claim_token = ?",
            (token, node, segment, attempt, t.now, t.now, run_id, stage, visit, claim["claim_token"]),
        )
        t.send("UPDATE runs SET claim_token = ?, segment_id = ?, version = version + 1, updated_ms = ? "
              "WHERE run_id = ? AND version = ?", (token, segment, t.now, run_id, run["version"]))
        dead_units = [r["unit_id"] for r in t.all(
            "SELECT unit_id FROM await_units WHERE run_id = ? AND segment_id = ? AND status = 'waiting'",
            (run_id, old_segment))]
        self._close_units(t, dead_units, "cancelled", reason="resume_lost")
        t.send("DELETE FROM joined_markers WHERE run_id = ? AND segment_id = ?", (run_id, old_segment))
        joins = [r["unit_id"] for r in t.all(
            "SELECT unit_id FROM suspend_members WHERE run_id = ? AND stage = ? AND visit = ? AND role = 'join'",
            (run_id, stage, visit))]
        t.many(
            "INSERT INTO joined_markers (unit_id, run_id, segment_id, joined_ms) VALUES (?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING", [(u, run_id, segment, t.now) for u in joins])
        self._event(t, run_id, "claim.takeover", f"takeover:{stage}:{visit}:{attempt}",
                    {"attempt": attempt, "owner": node, "previous_owner": claim["owner"]})
        return TakeoverResult("taken", ClaimRecord(run_id, stage, visit, token, node, segment, attempt, t.now, t.now))

    @write_procedure
    def heartbeat(self, t: Tx, run_id: str, claim_token: str) -> None:
        """The claim holder is alive. One compare-and-swap on the claim row (a takeover that
        replaced the token makes it match nothing)."""
        changed = t.run(
            "UPDATE resume_claims SET heartbeat_ms = ? WHERE run_id = ? AND claim_token = ? AND EXISTS "
            "(SELECT 1 FROM runs r WHERE r.run_id = ? AND r.status = 'resuming' AND r.claim_token = ?)",
            (t.now, run_id, claim_token, run_id, claim_token),
        )
        if changed != 1:
            raise RunLost(f"claim on run {run_id} is not current")

    # ----------------------------------------------------------------------------------------
    # purge and reconciliation

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
        return Dispatch(opc=opc, token=token, run_id=it["run_id"], unit_id=unit["unit_id"],
                        op_name=unit["op_name"], op_stack=unit["op_stack"], stage=unit["dispatch_stage"],
                        exec_target=unit["exec_target"],
                        directives=self._directives(unit["unit_id"], unit["directives_json"]),
                        item_index=it["item_index"], item_count=unit["expected"], kind=unit["kind"],
                        input=load_doc(it["input_json"], t, it["run_id"]), deadline_ms=it["deadline_ms"],
                        attempts=attempts, retry=it["retry_count"] or 0)

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

    # ----------------------------------------------------------------------------------------
    # reads

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
        return ContinuationProcedures._suspend_of(t, r, members)

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

    # sweeper candidates (bounded batches; each is re-checked by its procedure) --------------

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
            "AND u.kind IN ('unary', 'itemized') LIMIT ?",
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




__all__ = ["ContinuationProcedures"]
