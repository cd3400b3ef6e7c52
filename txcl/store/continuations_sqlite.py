"""SQLite implementation of the continuation store (CONTINUATIONS.md §5).

:class:`SqliteContinuationStore` is a mixin. The class it is mixed into provides either a
``db()`` method returning the calling thread's ``sqlite_utils.Database`` (as
:class:`txcl.store.sqlite.SqliteStore` does; mix this class in *first* so its
``schema_components`` adds the continuation tables) or a ``db_path``; it may provide ``clock``
(a callable returning ms since the epoch), ``node_id`` and ``busy_timeout_ms``. Every thread
uses its own connection opened with :func:`txcl.store.connection.open_sqlite` (WAL,
synchronous=FULL, busy timeout, foreign keys). :class:`SqliteContinuations` is a standalone
store on one file (tests, benchmarks).

Materializers run inside the P5 transaction: they must be pure (no store calls).

Every procedure is one ``BEGIN IMMEDIATE`` transaction. Coordination is by unique keys and
compare-and-swap only (``UPDATE … WHERE status = ? AND version = ?``, ``INSERT … ON CONFLICT DO
NOTHING RETURNING``); nothing depends on process memory, so several processes can share the
file. ``BEGIN IMMEDIATE`` takes SQLite's write lock, which is the "lock the run row" step of
§5.1 (it serialises every writer, so the lock order can never deadlock). Commits that a crash
test may interrupt are followed by :func:`txcl.testing.faults.fault_point`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import sqlite3
import threading
import time
import zlib
from pathlib import Path
from typing import Any, Iterable, Sequence

import sqlite_utils

from txcl.continuations import ids
from txcl.store.connection import DEFAULT_BUSY_TIMEOUT_MS, open_sqlite
from txcl.store.continuations_base import (
    CHILD_PENDING,
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
    JoinErrorBuilder,
    JoinResult,
    Materialized,
    Materializer,
    ParkBuilder,
    ParkResult,
    ReleaseResult,
    ResumeBundle,
    RunEvent,
    RunLost,
    RunRecord,
    RunSpec,
    SuspendRecord,
    TakeoverResult,
    TerminalRecord,
    TimeoutResult,
    UnitRecord,
    UnitSpec,
    UnknownRun,
    default_materialize,
    payload_sha256,
    resume_segment_id,
)
from txcl.store.schema_continuations import COMPONENT, SCHEMA_VERSION, ddl_statements, migrate
from txcl.testing.faults import enabled as faults_enabled
from txcl.testing.faults import fault_point

_OPEN = "('queued', 'dispatching', 'dispatched')"
_IN_FLIGHT = "('dispatching', 'dispatched')"
_PENDING_CHILD = "('queued', 'running')"
_DEFAULT_ROLE = {"unary": "op", "itemized": "op", "local": "promotion", "sync": "sync"}


def _dumps(value: Any) -> str | None:
    if value is None:
        return None
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _placeholders(n: int) -> str:
    return ",".join("?" * n)


# --------------------------------------------------------------------------------------------
# Row → record


def _run(r: sqlite3.Row) -> RunRecord:
    return RunRecord(
        run_id=r["run_id"], rcid=r["rcid"], origin_rid=r["origin_rid"], entry_stack=r["entry_stack"],
        src=r["src"], snapshot_id=r["snapshot_id"], status=r["status"], version=r["version"],
        cur_stage=r["cur_stage"], cur_visit=r["cur_visit"], segment_id=r["segment_id"],
        claim_token=r["claim_token"], expires_ms=r["expires_ms"], created_ms=r["created_ms"],
        updated_ms=r["updated_ms"], finished_ms=r["finished_ms"], fail_reason=r["fail_reason"],
        result=_loads(r["result_json"]), error=_loads(r["error_json"]), next_seq=r["next_seq"],
    )


def _unit_fields(r: sqlite3.Row, directives: Any, input_view: Any) -> dict[str, Any]:
    """The columns of a `units` row as UnitRecord fields (directives/input view given)."""
    return dict(
        unit_id=r["unit_id"], run_id=r["run_id"], created_seq=r["created_seq"], kind=r["kind"],
        op_name=r["op_name"], op_stack=r["op_stack"], op_scope=r["op_scope"],
        dispatch_stage=r["dispatch_stage"], dispatch_stack=r["dispatch_stack"],
        join_at_scope=r["join_at_scope"], segment_id=r["segment_id"], status=r["status"],
        version=r["version"], expected=r["expected"], dispatch_complete=bool(r["dispatch_complete"]),
        provider_done=r["provider_done"], continuation_done=r["continuation_done"],
        window=r["window_size"], on_item_error=r["on_item_error"], into=r["into_path"],
        exec_target=r["exec_target"], directives=directives, input_view=input_view,
        output=_loads(r["output_json"]), error=_loads(r["error_json"]), fuel_used=r["fuel_used"],
        budget_ms=r["budget_ms"], deadline_ms=r["deadline_ms"], created_ms=r["created_ms"],
        closed_ms=r["closed_ms"],
    )


def _unit(r: sqlite3.Row) -> UnitRecord:
    return UnitRecord(**_unit_fields(r, _loads(r["directives_json"]), _loads(r["input_view_json"])))


class _RawJson:
    """A JSON column's text handed to :class:`_LazyUnitRecord`, decoded on first access."""

    __slots__ = ("text",)

    def __init__(self, text: str | None) -> None:
        self.text = text


def _lazy_field(name: str) -> property:
    slot = "_lazy_" + name

    def get(self: Any) -> Any:
        value = getattr(self, slot)
        if isinstance(value, _RawJson):
            value = _loads(value.text)
            object.__setattr__(self, slot, value)
        return value

    def set_(self: Any, value: Any) -> None:  # the dataclass __init__ (and dataclasses.replace)
        object.__setattr__(self, slot, value)

    return property(get, set_)


class _LazyUnitRecord(UnitRecord):
    """A unit record whose ``directives`` and ``input_view`` are decoded on first access only.
    For an itemized op both hold the whole array (``each`` and the op's input), so decoding
    them for every completion made each item cost O(n). Used for the records the hot paths
    hand out (materialisers, callback checks); it reads like any ``UnitRecord``."""

    __slots__ = ("_lazy_directives", "_lazy_input_view")

    directives = _lazy_field("directives")  # type: ignore[assignment]
    input_view = _lazy_field("input_view")  # type: ignore[assignment]


def _lazy_unit(r: sqlite3.Row) -> UnitRecord:
    return _LazyUnitRecord(**_unit_fields(r, _RawJson(r["directives_json"]), _RawJson(r["input_view_json"])))


def _interaction(r: sqlite3.Row) -> InteractionRecord:
    return InteractionRecord(
        opc=r["opc"], unit_id=r["unit_id"], run_id=r["run_id"], item_index=r["item_index"],
        has_token=bool(r["token_hash"]), status=r["status"], version=r["version"],
        input=_loads(r["input_json"]), deadline_ms=r["deadline_ms"], dispatch_owner=r["dispatch_owner"],
        dispatch_ms=r["dispatch_ms"], attempts=r["attempts"], ack=_loads(r["ack_json"]),
        created_ms=r["created_ms"], closed_ms=r["closed_ms"],
    )


def _terminal(r: sqlite3.Row) -> TerminalRecord:
    return TerminalRecord(
        opc=r["opc"], status=r["status"], payload=_loads(r["payload_json"]), payload_sha256=r["payload_sha256"],
        source=r["source"], best_effort=bool(r["best_effort"]), transport=r["transport"],
        fuel_used=r["fuel_used"], recorded_ms=r["recorded_ms"],
    )


def _child(r: sqlite3.Row) -> ChildRecord:
    return ChildRecord(
        unit_id=r["unit_id"], item_index=r["item_index"], opc=r["opc"], status=r["status"],
        version=r["version"], output=_loads(r["output_json"]), error=_loads(r["error_json"]),
        lease_owner=r["lease_owner"], lease_until_ms=r["lease_until_ms"], created_ms=r["created_ms"],
        updated_ms=r["updated_ms"],
    )


def _claim(r: sqlite3.Row) -> ClaimRecord:
    return ClaimRecord(
        run_id=r["run_id"], stage=r["stage"], visit=r["visit"], claim_token=r["claim_token"], owner=r["owner"],
        segment_id=r["segment_id"], attempt=r["attempt"], claimed_ms=r["claimed_ms"], heartbeat_ms=r["heartbeat_ms"],
    )


class _Tx:
    """Small query helpers bound to one connection inside one transaction."""

    __slots__ = ("conn", "now", "fired", "next_seq", "parked")

    def __init__(self, conn: sqlite3.Connection, now: int) -> None:
        self.conn = conn
        self.now = now
        self.fired: list[str] = []  # fault points to mark after the commit
        self.next_seq = 0
        self.parked: RunRecord | None = None  # the run as a park in this transaction left it

    def all(self, sql: str, params: Iterable[Any] = ()) -> list[sqlite3.Row]:
        cur = self.conn.cursor()
        cur.row_factory = sqlite3.Row
        return cur.execute(sql, tuple(params)).fetchall()

    def one(self, sql: str, params: Iterable[Any] = ()) -> sqlite3.Row | None:
        cur = self.conn.cursor()
        cur.row_factory = sqlite3.Row
        return cur.execute(sql, tuple(params)).fetchone()

    def run(self, sql: str, params: Iterable[Any] = ()) -> int:
        return self.conn.execute(sql, tuple(params)).rowcount

    def returning(self, sql: str, params: Iterable[Any] = ()) -> list[tuple]:
        return self.conn.execute(sql, tuple(params)).fetchall()


class SqliteContinuationStore:
    """The continuation procedures of §5.4 on SQLite (mixin; see the module docstring)."""

    db_path: str | Path
    _cs_init_lock = threading.Lock()

    # ----------------------------------------------------------------------------------------
    # plumbing

    def now_ms(self) -> int:
        clock = getattr(self, "clock", None)
        return int(clock()) if clock is not None else int(time.time() * 1000)

    def _cs_node(self) -> str:
        node = getattr(self, "node_id", None)
        return node or f"{socket.gethostname()}-{os.getpid()}"

    def _cs_db(self) -> sqlite_utils.Database:
        """The calling thread's connection: the host store's own (``db()``) when it has one."""
        state = self.__dict__.get("_cs_state")
        if state is None:
            with self._cs_init_lock:
                state = self.__dict__.get("_cs_state")
                if state is None:
                    state = {"local": threading.local(), "all": [], "migrated": False, "pid": os.getpid()}
                    self.__dict__["_cs_state"] = state
        if state["pid"] != os.getpid():  # forked: never reuse the parent's connections
            state.update(local=threading.local(), all=[], pid=os.getpid())
        db = getattr(state["local"], "db", None)
        if db is None:
            host_db = getattr(self, "db", None)
            if callable(host_db):  # txcl.store.sqlite.SqliteStore: one connection per thread already
                db = host_db()
            else:
                path = getattr(self, "db_path", None) or getattr(self, "path", None)
                if path is None:
                    raise TypeError("SqliteContinuationStore needs a db_path (or path) attribute")
                busy = getattr(self, "busy_timeout_ms", DEFAULT_BUSY_TIMEOUT_MS)
                db = open_sqlite(path, busy_timeout_ms=busy)
                with self._cs_init_lock:
                    state["all"].append(db)
            state["local"].db = db
            if not state["migrated"]:
                with self._cs_init_lock:
                    if not state["migrated"]:
                        migrate(db)
                        state["migrated"] = True
        return db

    def schema_components(self) -> dict:
        """Cooperate with txcl.store.sqlite.SqliteStore's migration hook when mixed in first."""
        parent = getattr(super(), "schema_components", None)
        components = dict(parent()) if parent else {}
        components[COMPONENT] = (SCHEMA_VERSION, ddl_statements())
        return components

    def migrate_continuations(self) -> int:
        return migrate(self._cs_db())

    def close_continuations(self) -> None:
        """Close every connection this store opened (all threads)."""
        state = self.__dict__.get("_cs_state")
        if not state:
            return
        with self._cs_init_lock:
            for db in state["all"]:
                try:
                    db.conn.close()
                except sqlite3.Error:
                    pass
            state["all"].clear()
            state["local"] = threading.local()

    def _cs_directives(self, unit_id: str, text: str | None) -> Any:
        """A unit's decoded directives for its dispatches, cached per unit (they never change
        after the unit's insert; the cached text is compared, so the cache cannot go stale).
        An itemized unit's directives hold its whole `each` array: decoding them for every
        promoted item made each completion cost O(n). Dispatches share the (read-only) value."""
        cache = self.__dict__.get("_cs_directives_cache")
        if cache is None:
            cache = self.__dict__.setdefault("_cs_directives_cache", {})
        hit = cache.get(unit_id)
        if hit is not None and hit[0] == text:
            return hit[1]
        value = _loads(text)
        if len(cache) >= 64:
            cache.pop(next(iter(cache)), None)
        cache[unit_id] = (text, value)
        return value

    def _cs_tx(self):
        return _TxContext(self)

    def _cs_write_lock(self) -> threading.RLock:
        lock = self.__dict__.get("_cs_wlock")
        if lock is None:
            with self._cs_init_lock:
                lock = self.__dict__.setdefault("_cs_wlock", threading.RLock())
        return lock

    def _cs_batch(self) -> "_BatchState":
        batch = self.__dict__.get("_cs_batch_state")
        if batch is None:
            with self._cs_init_lock:
                batch = self.__dict__.setdefault("_cs_batch_state", _BatchState())
        return batch

    def commit_count(self) -> int:
        """Write transactions this store object committed so far (benchmarks)."""
        return self.__dict__.get("_cs_commits", 0)

    def _cs_committed(self) -> None:
        self.__dict__["_cs_commits"] = self.__dict__.get("_cs_commits", 0) + 1

    def run_batch(self, calls: Sequence[Any]) -> list[tuple[bool, Any]]:
        """Run several independent store calls in ONE write transaction (group commit): each
        call's procedure runs in its own savepoint (a call that raises is rolled back alone),
        one COMMIT covers them all, and only then are the calls' fault points marked. Returns
        ``(True, result)`` or ``(False, exception)`` per call, in order.

        The calls must not depend on one another's commit: nothing of a batch is visible
        outside before the common COMMIT, and callers act on a result only after it (the
        service hands results out once this returns). A call that needs its own commit before
        its next step (P4 then P5) is two batches. Should the transaction itself fail (BEGIN,
        COMMIT, or an error that makes SQLite abandon the transaction) every call is run
        again on its own, exactly as without batching."""
        if len(calls) <= 1:
            return [_call_alone(c) for c in calls]
        batch = self._cs_batch()
        if batch.conn is not None:  # already inside a batch on this thread: no nesting
            return [_call_alone(c) for c in calls]
        lock = self._cs_write_lock()
        outcomes: list[tuple[bool, Any, list[str]]] = []
        broken = False
        lock.acquire()
        try:
            conn = self._cs_db().conn
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error:
                broken = True
            if not broken:
                batch.conn = conn
                try:
                    for call in calls:
                        batch.fired = []
                        batch.broken = False
                        try:
                            outcomes.append((True, call(), batch.fired))
                        except Exception as exc:  # noqa: BLE001 - handed to the call's owner
                            outcomes.append((False, exc, []))
                        if batch.broken or not conn.in_transaction:
                            broken = True
                            break
                    if not broken:
                        conn.execute("COMMIT")
                        self._cs_committed()
                except Exception:  # noqa: BLE001 - the COMMIT failed: redo call by call
                    broken = True
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                finally:
                    batch.conn = None
                    batch.fired = None
                if broken and conn.in_transaction:
                    conn.execute("ROLLBACK")
        finally:
            lock.release()
        if broken:
            return [_call_alone(c) for c in calls]
        results: list[tuple[bool, Any]] = []
        marking = faults_enabled()  # (read once per batch, not once per call)
        for ok, value, fired in outcomes:
            if ok and marking:
                try:
                    for point in fired:
                        fault_point(point)
                except Exception as exc:  # noqa: BLE001 - FaultInjected goes to its call
                    ok, value = False, exc
            results.append((ok, value))
        return results

    def _cs_read(self) -> _Tx:
        return _Tx(self._cs_db().conn, self.now_ms())

    # ----------------------------------------------------------------------------------------
    # shared in-transaction steps

    def _lock_run(self, t: _Tx, run_id: str) -> sqlite3.Row:
        row = t.one("SELECT * FROM runs WHERE run_id = ?", (run_id,))
        if row is None:
            raise UnknownRun(run_id)
        return row

    @staticmethod
    def _check_fence(run: sqlite3.Row, fence: Fence) -> None:
        status = run["status"]
        if status == "active" and fence.claim_token is None and run["segment_id"] == fence.segment_id:
            return
        if status == "resuming" and fence.claim_token is not None and run["claim_token"] == fence.claim_token:
            return
        raise RunLost(f"segment {fence.segment_id} no longer owns run {run['run_id']} (run is {status})")

    def _event(self, t: _Tx, run_id: str, kind: str, key: str, data: Any = None) -> bool:
        rows = t.returning(
            "INSERT INTO run_events (run_id, seq, event_key, kind, at_ms, data_json) "
            "SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ?, ? FROM run_events WHERE run_id = ? "
            "ON CONFLICT DO NOTHING RETURNING seq",
            (run_id, key, kind, t.now, _dumps(data), run_id),
        )
        return bool(rows)

    def _p1(self, t: _Tx, spec: RunSpec, status: str, segment_id: str | None) -> tuple[sqlite3.Row, bool]:
        if spec.snapshot_body is not None and spec.snapshot_id:
            self._put_snapshot(t, spec.snapshot_id, spec.snapshot_body)
        run_id = ids.new_run_id(t.now)
        created = t.returning(
            "INSERT INTO runs (run_id, rcid, origin_rid, entry_stack, src, snapshot_id, status, version, "
            "segment_id, created_ms, updated_ms) VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?) "
            "ON CONFLICT(origin_rid) DO NOTHING RETURNING run_id",
            (run_id, ids.new_rcid(), spec.origin_rid, spec.entry_stack, spec.src, spec.snapshot_id, status,
             segment_id, t.now, t.now),
        )
        if created:
            self._event(t, run_id, "run.created", "created", {"origin_rid": spec.origin_rid, "status": status})
            return self._lock_run(t, run_id), True
        row = t.one("SELECT * FROM runs WHERE origin_rid = ?", (spec.origin_rid,))
        assert row is not None
        return row, False

    def _put_snapshot(self, t: _Tx, snapshot_id: str, body: bytes) -> bool:
        if t.one("SELECT 1 FROM snapshots WHERE snapshot_id = ?", (snapshot_id,)) is not None:
            return False  # content-addressed: never compress a large body twice
        return bool(
            t.returning(
                "INSERT INTO snapshots (snapshot_id, created_ms, body, bytes) VALUES (?, ?, ?, ?) "
                "ON CONFLICT DO NOTHING RETURNING snapshot_id",
                (snapshot_id, t.now, zlib.compress(body), len(body)),
            )
        )

    def _resolve_run(self, t: _Tx, run: RunSpec | str, fence: Fence, new_status: str) -> tuple[sqlite3.Row, bool]:
        if isinstance(run, RunSpec):
            row, created = self._p1(t, run, new_status, fence.segment_id)
        else:
            row, created = self._lock_run(t, run), False
        self._check_fence(row, fence)
        return row, created

    def _insert_units(
        self, t: _Tx, run: sqlite3.Row, units: Sequence[UnitSpec], segment_id: str | None, *, write_seq: bool = True
    ) -> tuple[list[str], list[Dispatch], int | None]:
        """Insert units and interactions (first window ``dispatching``); ``t.next_seq`` gets the
        run's next ``created_seq`` (written here unless the caller folds it into its own UPDATE)."""
        seq = run["next_seq"]
        node = self._cs_node()
        unit_ids: list[str] = []
        dispatches: list[Dispatch] = []
        max_deadline: int | None = None
        for spec in units:
            unit_id = "au_" + ids.base58_fixed(os.urandom(16), 22)
            failed = spec.failed_error is not None
            items = [] if failed else list(spec.items)
            window = max(1, int(spec.window)) if spec.kind == "itemized" else 1
            t.run(
                "INSERT INTO await_units (unit_id, run_id, created_seq, kind, op_name, op_stack, op_scope, "
                "dispatch_stage, dispatch_stack, join_at_scope, segment_id, status, expected, window_size, "
                "on_item_error, into_path, exec_target, directives_json, input_view_json, error_json, fuel_used, "
                "budget_ms, deadline_ms, created_ms, closed_ms) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (unit_id, run["run_id"], seq, spec.kind, spec.op_name, spec.op_stack, spec.op_scope,
                 spec.dispatch_stage, spec.dispatch_stack, spec.join_at_scope, segment_id,
                 "failed" if failed else "waiting", len(items), window, spec.on_item_error, spec.into,
                 spec.exec_target, _dumps(spec.directives), _dumps(spec.input_view), _dumps(spec.failed_error),
                 spec.fuel_used, spec.budget_ms, spec.deadline_ms, t.now, t.now if failed else None),
            )
            seq += 1
            unit_ids.append(unit_id)
            if items:
                first = len(items) if spec.kind != "itemized" else min(window, len(items))
                if spec.deadline_ms is not None:
                    deadline = spec.deadline_ms
                elif spec.budget_ms is not None:
                    deadline = t.now + spec.budget_ms
                else:
                    deadline = None
                rows = []
                for i, item in enumerate(items):
                    opc = ids.new_opc()
                    input_json = _dumps(item)
                    if i < first:  # the first window is promoted at once (§2.5)
                        token = ids.new_token() if spec.tokened else None
                        rows.append((opc, unit_id, i, run["run_id"], ids.hash_token(token) if token else None,
                                     "dispatching", 1, input_json, deadline, node, t.now, 1, t.now))
                        dispatches.append(Dispatch(
                            opc=opc, token=token, run_id=run["run_id"], unit_id=unit_id, op_name=spec.op_name,
                            op_stack=spec.op_stack, stage=spec.dispatch_stage, exec_target=spec.exec_target,
                            directives=spec.directives, item_index=i, item_count=len(items), kind=spec.kind,
                            input=item, deadline_ms=deadline, attempts=1))
                    else:
                        rows.append((opc, unit_id, i, run["run_id"], None, "queued", 0, input_json, None, None,
                                     None, 0, t.now))
                t.conn.executemany(
                    "INSERT INTO interactions (opc, unit_id, item_index, run_id, token_hash, status, version, "
                    "input_json, deadline_ms, dispatch_owner, dispatch_ms, attempts, created_ms) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
                if deadline is not None:
                    max_deadline = deadline if max_deadline is None else max(max_deadline, deadline)
        if units and write_seq:
            t.run("UPDATE runs SET next_seq = ? WHERE run_id = ?", (seq, run["run_id"]))
        t.next_seq = seq
        return unit_ids, dispatches, max_deadline

    def _promote(self, t: _Tx, unit_id: str) -> tuple[list[Dispatch], int | None]:
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
        rows = t.all(
            "SELECT * FROM interactions WHERE unit_id = ? AND status = 'queued' ORDER BY item_index LIMIT ?",
            (unit_id, free),
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
        node = self._cs_node()
        stage = unit["dispatch_stage"]
        directives = self._cs_directives(unit_id, unit["directives_json"])
        out: list[Dispatch] = []
        updates = []
        for r in rows:
            token = ids.new_token() if tokened else None
            updates.append((ids.hash_token(token) if token else None, deadline, node, t.now, r["opc"]))
            out.append(
                Dispatch(
                    opc=r["opc"], token=token, run_id=r["run_id"], unit_id=unit_id, op_name=unit["op_name"],
                    op_stack=unit["op_stack"], stage=stage, exec_target=unit["exec_target"],
                    directives=directives, item_index=r["item_index"],
                    item_count=unit["expected"], kind=unit["kind"], input=_loads(r["input_json"]),
                    deadline_ms=deadline, attempts=1,
                )
            )
        t.conn.executemany(
            "UPDATE interactions SET status = 'dispatching', token_hash = ?, deadline_ms = ?, dispatch_owner = ?, "
            "dispatch_ms = ?, attempts = 1, version = version + 1 WHERE opc = ? AND status = 'queued'",
            updates,
        )
        return out, deadline

    def _raise_expiry(self, t: _Tx, run_id: str, deadline: int | None) -> None:
        if deadline is not None:
            t.run(
                "UPDATE runs SET expires_ms = MAX(COALESCE(expires_ms, 0), ?) WHERE run_id = ?", (deadline, run_id)
            )

    def _park_in_tx(
        self,
        t: _Tx,
        run: sqlite3.Row,
        fence: Fence,
        *,
        stage: str,
        kind: str,
        envelope: Any,
        budgets: Any,
        units: Sequence[UnitSpec],
        members: Sequence[tuple[str, str]],
    ) -> tuple[int, list[str], list[Dispatch]]:
        run_id = run["run_id"]
        if run["status"] == "resuming":
            t.run(
                "UPDATE suspends SET status = 'resumed', closed_ms = ? "
                "WHERE run_id = ? AND stage = ? AND visit = ? AND status = 'resuming'",
                (t.now, run_id, run["cur_stage"], run["cur_visit"]),
            )
        visit = t.one("SELECT COALESCE(MAX(visit), 0) + 1 AS v FROM suspends WHERE run_id = ? AND stage = ?",
                      (run_id, stage))["v"]
        t.run(
            "INSERT INTO suspends (run_id, stage, visit, kind, status, envelope_json, budget_json, segment_id, "
            "dispatch_complete, suspended_ms) VALUES (?, ?, ?, ?, 'open', ?, ?, ?, 1, ?)",
            (run_id, stage, visit, kind, _dumps(envelope), _dumps(budgets), fence.segment_id, t.now),
        )
        unit_ids, dispatches, deadline = self._insert_units(t, run, units, fence.segment_id, write_seq=False)
        rows = [(run_id, stage, visit, uid, spec.role or _DEFAULT_ROLE.get(spec.kind, "op"))
                for uid, spec in zip(unit_ids, units)]
        rows += [(run_id, stage, visit, uid, role) for uid, role in members]
        t.conn.executemany(
            "INSERT INTO suspend_members (run_id, stage, visit, unit_id, role) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            rows,
        )
        # dispatch_complete = 1 is written with the suspend: every member unit and interaction is
        # inserted by this same transaction, so no reader can see the suspend without them
        if fence.claim_token is not None:
            t.run("DELETE FROM resume_claims WHERE run_id = ? AND claim_token = ?", (run_id, fence.claim_token))
        changed = t.run(
            "UPDATE runs SET status = 'waiting', cur_stage = ?, cur_visit = ?, claim_token = NULL, "
            "segment_id = NULL, version = version + 1, updated_ms = ?, next_seq = ?, "
            "expires_ms = CASE WHEN ? IS NULL THEN expires_ms ELSE MAX(COALESCE(expires_ms, 0), ?) END "
            "WHERE run_id = ? AND version = ?",
            (stage, visit, t.now, t.next_seq, deadline, deadline, run_id, run["version"]),
        )
        if changed != 1:  # cannot happen under the write lock; guard the CAS anyway
            raise RunLost(f"run {run_id} changed under the park")
        self._event(t, run_id, "stage.suspended", f"suspend:{stage}:{visit}",
                    {"stage": stage, "visit": visit, "kind": kind, "units": unit_ids})
        expires = run["expires_ms"] if deadline is None else max(run["expires_ms"] or 0, deadline)
        t.parked = dataclasses.replace(
            _run(run), status="waiting", cur_stage=stage, cur_visit=visit, claim_token=None, segment_id=None,
            version=run["version"] + 1, updated_ms=t.now, next_seq=t.next_seq, expires_ms=expires)
        return visit, unit_ids, dispatches

    def _close_units(self, t: _Tx, unit_ids: Sequence[str], interaction_status: str, unit_status: str = "cancelled") -> None:
        """Close units: open interactions → interaction_status, pending children cancelled."""
        if not unit_ids:
            return
        for chunk_start in range(0, len(unit_ids), 500):
            chunk = list(unit_ids[chunk_start:chunk_start + 500])
            ph = _placeholders(len(chunk))
            t.run(
                f"UPDATE interactions SET status = ?, closed_ms = ?, version = version + 1 "
                f"WHERE unit_id IN ({ph}) AND status IN {_OPEN}",
                (interaction_status, t.now, *chunk),
            )
            t.run(
                f"UPDATE item_children SET status = 'cancelled', version = version + 1, updated_ms = ?, "
                f"lease_owner = NULL WHERE unit_id IN ({ph}) AND status IN {_PENDING_CHILD}",
                (t.now, *chunk),
            )
            t.run(
                f"UPDATE await_units SET status = ?, version = version + 1, closed_ms = ? "
                f"WHERE unit_id IN ({ph}) AND status = 'waiting'",
                (unit_status, t.now, *chunk),
            )

    def _terminal_parent_path(self, t: _Tx, run: sqlite3.Row, *, expired: bool, keep_unjoined_deferred: bool) -> None:
        """EC-8: let go of interactions, children, units and claims of a finished run."""
        run_id = run["run_id"]
        rows = t.all(
            "SELECT unit_id, (join_at_scope IS NOT NULL AND NOT EXISTS "
            "(SELECT 1 FROM joined_markers m WHERE m.unit_id = u.unit_id)) AS unjoined "
            "FROM await_units u WHERE run_id = ? AND status = 'waiting'",
            (run_id,),
        )
        kept = [r["unit_id"] for r in rows if keep_unjoined_deferred and r["unjoined"]]
        self._close_units(t, [r["unit_id"] for r in rows if r["unit_id"] not in kept],
                          "timed_out" if expired else "cancelled")
        for start in range(0, len(kept), 500):
            # DJ-F4 survivors: what was sent stays open until its deadline; what was never sent never will be
            chunk = kept[start:start + 500]
            t.run(
                "UPDATE interactions SET status = 'cancelled', closed_ms = ?, version = version + 1 "
                f"WHERE unit_id IN ({_placeholders(len(chunk))}) AND status = 'queued'",
                (t.now, *chunk),
            )
        if run["status"] == "resuming":  # only a resuming run holds a claim
            t.run("DELETE FROM resume_claims WHERE run_id = ?", (run_id,))

    # ----------------------------------------------------------------------------------------
    # P5 building blocks

    def _materialize_child(
        self, t: _Tx, unit: sqlite3.Row, opc: str, carried_version: int | None, materialize: Materializer,
        it: sqlite3.Row | None = None,
    ) -> str | None:
        """P5 step 2 with the AU-8 reload-and-retry; returns the child's resulting status."""
        if it is None:
            it = t.one("SELECT * FROM interactions WHERE opc = ?", (opc,))
        if it is None:
            return None
        child = t.one(
            "SELECT c.status AS child_status, c.version AS child_version, x.* FROM item_children c "
            "LEFT JOIN terminals x ON x.opc = c.opc WHERE c.unit_id = ? AND c.item_index = ?",
            (unit["unit_id"], it["item_index"]),
        )
        if child is None:
            return None
        if child["child_status"] not in CHILD_PENDING:
            return child["child_status"]
        if child["opc"] is None:  # no terminal yet
            return child["child_status"]
        m: Materialized = materialize(_lazy_unit(unit), _interaction(it), _terminal(child))
        version = child["child_version"] if carried_version is None else carried_version
        for _attempt in range(2):
            changed = t.run(
                "UPDATE item_children SET status = ?, output_json = ?, error_json = ?, version = version + 1, "
                "updated_ms = ?, lease_owner = NULL, lease_until_ms = NULL "
                f"WHERE unit_id = ? AND item_index = ? AND version = ? AND status IN {_PENDING_CHILD}",
                (m.status, _dumps(m.output), _dumps(m.error), t.now, unit["unit_id"], it["item_index"], version),
            )
            if changed:
                t.fired.append("materialize")
                return m.status
            fresh = t.one("SELECT status, version FROM item_children WHERE unit_id = ? AND item_index = ?",
                          (unit["unit_id"], it["item_index"]))
            if fresh["status"] not in CHILD_PENDING:  # succeeded: idempotent; failed/cancelled: never overwritten
                return fresh["status"]
            version = fresh["version"]  # queued/running: retry once with the fresh version
        return t.one("SELECT status FROM item_children WHERE unit_id = ? AND item_index = ?",
                     (unit["unit_id"], it["item_index"]))["status"]

    def _record_continuation_fact(self, t: _Tx, unit: sqlite3.Row, item_index: int, child_status: str | None) -> None:
        """P5 step 3 (AU-7): only for a succeeded child, or a failed one under ``collect``."""
        ok = child_status == "succeeded" or (
            child_status == "failed" and (unit["on_item_error"] == "collect" or unit["kind"] == "sync")
        )
        if ok and unit["status"] == "waiting":  # the trigger raises continuation_done if inserted
            t.run(
                "INSERT INTO continuation_facts (unit_id, kind, item_index, recorded_ms) "
                "VALUES (?, 'continuation', ?, ?) ON CONFLICT DO NOTHING",
                (unit["unit_id"], item_index, t.now),
            )

    def _settle_unit(self, t: _Tx, unit_id: str, *, reconcile: bool = False) -> str:
        """P5 step 4 from a fresh read. Returns the unit's status afterwards."""
        unit = t.one("SELECT * FROM await_units WHERE unit_id = ?", (unit_id,))
        if unit is None:
            return "gone"
        if unit["status"] != "waiting":
            return unit["status"]
        kind, policy = unit["kind"], unit["on_item_error"]
        fail_fast = kind != "sync" and not (kind == "itemized" and policy == "collect")
        if fail_fast and unit["continuation_done"] < unit["expected"]:
            # (with every fact present no child can have failed: facts follow succeeded children only)
            bad = t.one(
                "SELECT item_index, error_json FROM item_children WHERE unit_id = ? AND status = 'failed' "
                "ORDER BY item_index LIMIT 1",
                (unit_id,),
            )
            if bad is not None:
                detail = _loads(bad["error_json"])
                if kind == "itemized":
                    msg = detail.get("message") if isinstance(detail, dict) else detail
                    error = {"message": f"item {bad['item_index']} failed: {msg}", "item_index": bad["item_index"],
                             "detail": detail}
                else:
                    error = detail
                t.run("UPDATE await_units SET error_json = ? WHERE unit_id = ?", (_dumps(error), unit_id))
                self._close_units(t, [unit_id], "cancelled", unit_status="failed")
                return "failed"
        expected = unit["expected"]
        done = unit["continuation_done"]
        if done < expected and (unit["provider_done"] >= expected or reconcile):
            # AU-9 / EC-4: repair missing continuation facts, only for succeeded children
            accepted = "('succeeded', 'failed')" if not fail_fast else "('succeeded')"
            repaired = t.returning(
                "INSERT INTO continuation_facts (unit_id, kind, item_index, recorded_ms) "
                f"SELECT unit_id, 'continuation', item_index, ? FROM item_children WHERE unit_id = ? "
                f"AND status IN {accepted} ON CONFLICT DO NOTHING RETURNING item_index",
                (t.now, unit_id),
            )
            if repaired:
                done += len(repaired)  # (the trigger counted them)
                self._event(t, unit["run_id"], "reconcile.facts",
                            f"reconcile.facts:{unit_id}:{done}",
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
                _loads(c["output_json"]) if c["status"] == "succeeded" else {"error": _loads(c["error_json"])}
                for c in children
            ]
        elif expected == 0:
            output = None
        else:
            c = children[0]
            output = _loads(c["output_json"]) if c["status"] == "succeeded" else None
            if c["status"] == "failed":  # a best-effort sync sibling: completed, error noted
                error = _loads(c["error_json"])
        changed = t.run(
            "UPDATE await_units SET status = 'completed', output_json = ?, error_json = COALESCE(?, error_json), "
            "version = version + 1, closed_ms = ? WHERE unit_id = ? AND status = 'waiting' AND version = ?",
            (_dumps(output), _dumps(error), t.now, unit_id, unit["version"]),
        )
        return "completed" if changed else t.one("SELECT status FROM await_units WHERE unit_id = ?", (unit_id,))["status"]

    def _try_release_in_tx(self, t: _Tx, run_id: str, segment_id: str | None = None) -> ClaimRecord | None:
        """P5 step 5: the single compare-and-swap that releases a parked run (EC-3, EC-6)."""
        run = t.one(
            "SELECT r.version, r.cur_stage, r.cur_visit, s.status AS s_status, s.dispatch_complete FROM runs r "
            "JOIN suspends s ON s.run_id = r.run_id AND s.stage = r.cur_stage AND s.visit = r.cur_visit "
            "WHERE r.run_id = ? AND r.status = 'waiting'",
            (run_id,),
        )
        if run is None or run["s_status"] != "open" or not run["dispatch_complete"]:
            return None
        stage, visit = run["cur_stage"], run["cur_visit"]
        members = t.all(
            "SELECT m.unit_id, m.role, u.status FROM suspend_members m JOIN await_units u ON u.unit_id = m.unit_id "
            "WHERE m.run_id = ? AND m.stage = ? AND m.visit = ?",
            (run_id, stage, visit),
        )
        statuses = [m["status"] for m in members]
        any_bad = any(s in UNIT_BAD for s in statuses)
        if not (any_bad or all(s in UNIT_TERMINAL for s in statuses)):
            return None
        if t.run("UPDATE suspends SET status = 'resuming' WHERE run_id = ? AND stage = ? AND visit = ? "
                 "AND status = 'open'", (run_id, stage, visit)) != 1:
            return None
        token = ids.new_claim_token()
        segment = segment_id or resume_segment_id(run_id, stage, visit, 1)
        if t.run(
            "UPDATE runs SET status = 'resuming', claim_token = ?, segment_id = ?, version = version + 1, "
            "updated_ms = ? WHERE run_id = ? AND status = 'waiting' AND version = ?",
            (token, segment, t.now, run_id, run["version"]),
        ) != 1:
            raise RunLost(f"run {run_id} changed during release")  # rolls back the suspend CAS too
        claimed = t.returning(
            "INSERT INTO resume_claims (run_id, stage, visit, claim_token, owner, segment_id, attempt, claimed_ms, "
            "heartbeat_ms) VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?) ON CONFLICT DO NOTHING RETURNING run_id",
            (run_id, stage, visit, token, self._cs_node(), segment, t.now, t.now),
        )
        if not claimed:
            raise RunLost(f"resume claim for {run_id} {stage} v{visit} already exists")
        joins = [m["unit_id"] for m in members if m["role"] == "join"]
        if joins:
            t.conn.executemany(
                "INSERT INTO joined_markers (unit_id, run_id, segment_id, joined_ms) VALUES (?, ?, ?, ?) "
                "ON CONFLICT DO NOTHING",
                [(u, run_id, segment, t.now) for u in joins],
            )
        if any_bad:  # fail-fast: the remaining open members are cancelled with the release
            self._close_units(t, [m["unit_id"] for m in members if m["status"] == "waiting"], "cancelled")
        self._event(t, run_id, "run.released", f"release:{stage}:{visit}", {"stage": stage, "visit": visit,
                                                                          "fail_fast": any_bad})
        t.fired.append("release")
        return ClaimRecord(run_id=run_id, stage=stage, visit=visit, claim_token=token, owner=self._cs_node(),
                           segment_id=segment, attempt=1, claimed_ms=t.now, heartbeat_ms=t.now)

    def _drain_unit(self, t: _Tx, unit_id: str, materialize: Materializer) -> str:
        """Materialise every queued child whose terminal exists, then settle (P6 step 1, drain)."""
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

    # ----------------------------------------------------------------------------------------
    # P1

    def create_or_reuse_run(
        self, spec: RunSpec, *, status: str = "active", fence_segment: str | None = None
    ) -> CreateRunResult:
        with self._cs_tx() as t:
            row, created = self._p1(t, spec, status, fence_segment or spec.origin_rid)
            return CreateRunResult(_run(row), created)

    def put_snapshot(self, snapshot_id: str, body: bytes) -> bool:
        with self._cs_tx() as t:
            return self._put_snapshot(t, snapshot_id, body)

    # deferred dispatch transaction
    def dispatch_deferred(self, run: RunSpec | str, fence: Fence, units: Sequence[UnitSpec]) -> DispatchResult:
        with self._cs_tx() as t:
            row, created = self._resolve_run(t, run, fence, "active")
            unit_ids, dispatches, deadline = self._insert_units(t, row, units, fence.segment_id)
            self._raise_expiry(t, row["run_id"], deadline)
            t.fired.append("deferred-dispatch")
            result_run = self._lock_run(t, row["run_id"])
        return DispatchResult(_run(result_run), created, tuple(unit_ids), tuple(dispatches))

    # P2
    def park_suspend(
        self,
        run: RunSpec | str,
        fence: Fence,
        *,
        stage: str,
        kind: str,
        envelope: Any,
        budgets: Any,
        units: Sequence[UnitSpec] = (),
        member_unit_ids: Sequence[str] = (),
    ) -> ParkResult:
        with self._cs_tx() as t:
            row, created = self._resolve_run(t, run, fence, "active")
            visit, unit_ids, dispatches = self._park_in_tx(
                t, row, fence, stage=stage, kind=kind, envelope=envelope, budgets=budgets, units=units,
                members=[(u, "join") for u in member_unit_ids],
            )
            t.fired.append("promote" if kind == "promotion" else "park")
        return ParkResult(t.parked, created, stage, visit, tuple(unit_ids), tuple(dispatches))

    # P3
    def mark_ack(self, acks: Sequence[tuple[str, Any]]) -> int:
        if not acks:
            return 0
        with self._cs_tx() as t:
            n = 0
            for opc, ack in acks:
                n += t.run(
                    "UPDATE interactions SET status = 'dispatched', ack_json = ?, version = version + 1 "
                    "WHERE opc = ? AND status = 'dispatching'",
                    (_dumps(ack if ack is not None else {}), opc),
                )
            t.fired.append("ack")
            return n

    # P4
    def check_callback(self, opc: str, token: str | None) -> CallbackTarget:
        t = self._cs_read()
        row = t.one("SELECT * FROM interactions WHERE opc = ?", (opc,))
        if row is None:
            return CallbackTarget("unknown")
        if not ids.token_matches(token, row["token_hash"]):
            return CallbackTarget("bad_token")
        unit = t.one("SELECT * FROM await_units WHERE unit_id = ?", (row["unit_id"],))
        return CallbackTarget("ok", _interaction(row), _lazy_unit(unit))

    def admit_terminal(
        self,
        opc: str,
        status: str,
        payload: Any,
        *,
        source: str,
        token: str | None = None,
        best_effort: bool = False,
        transport: str | None = None,
        fuel_used: int = 0,
    ) -> AdmitResult:
        if status not in ("completed", "failed"):
            raise ValueError(f"terminal status must be completed or failed, not {status!r}")
        sha = payload_sha256(payload)
        with self._cs_tx() as t:
            it = t.one("SELECT i.*, u.kind AS unit_kind, u.on_item_error AS unit_policy FROM interactions i "
                       "JOIN await_units u ON u.unit_id = i.unit_id WHERE i.opc = ?", (opc,))
            if it is None:
                return AdmitResult("unknown", opc)
            base = dict(opc=opc, run_id=it["run_id"], unit_id=it["unit_id"], item_index=it["item_index"])
            if source == "callback" and not ids.token_matches(token, it["token_hash"]):
                return AdmitResult("bad_token", **base)
            if it["status"] == "cancelled":
                return AdmitResult("cancelled", **base)
            if it["status"] == "timed_out":
                return AdmitResult("expired", **base)
            if it["status"] in INTERACTION_OPEN and it["deadline_ms"] is not None and it["deadline_ms"] < t.now:
                claim, _, promoted = self._p8(t, it, default_materialize)
                return AdmitResult("expired", claim=claim, dispatches=tuple(promoted), **base)
            inserted = t.returning(
                "INSERT INTO terminals (opc, status, payload_json, payload_sha256, source, best_effort, transport, "
                "fuel_used, recorded_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING opc",
                (opc, status, _dumps(payload) if payload is not None else "null", sha, source, int(best_effort),
                 transport, fuel_used, t.now),
            )
            if not inserted:
                first = t.one("SELECT * FROM terminals WHERE opc = ?", (opc,))
                same = first["status"] == status and first["payload_sha256"] == sha
                return AdmitResult("duplicate" if same else "conflict", terminal=_terminal(first), **base)
            t.run(
                f"UPDATE interactions SET status = ?, closed_ms = ?, version = version + 1 "
                f"WHERE opc = ? AND status IN {_OPEN}",
                (status, t.now, opc),
            )
            unit_id, index = it["unit_id"], it["item_index"]
            t.run(  # provider_done is raised by the trigger only when the fact is new (EC-1)
                "INSERT INTO continuation_facts (unit_id, kind, item_index, recorded_ms) VALUES (?, 'provider', ?, ?) "
                "ON CONFLICT DO NOTHING",
                (unit_id, index, t.now),
            )
            made = t.returning(
                "INSERT INTO item_children (unit_id, item_index, opc, status, version, created_ms, updated_ms) "
                "VALUES (?, ?, ?, 'queued', 0, ?, ?) ON CONFLICT DO NOTHING RETURNING version",
                (unit_id, index, opc, t.now, t.now),
            )
            child_version = made[0][0] if made else t.one(
                "SELECT version FROM item_children WHERE unit_id = ? AND item_index = ?", (unit_id, index))["version"]
            dispatches: list[Dispatch] = []
            if it["unit_kind"] == "itemized" and (status == "completed" or it["unit_policy"] == "collect"):
                # a failed item under fail-fast is about to fail the unit: promote nothing to send
                dispatches, deadline = self._promote(t, unit_id)
                self._raise_expiry(t, it["run_id"], deadline)
            term = TerminalRecord(opc=opc, status=status, payload=payload, payload_sha256=sha, source=source,
                                  best_effort=bool(best_effort), transport=transport, fuel_used=fuel_used,
                                  recorded_ms=t.now)
            t.fired.append("admit")
            return AdmitResult("admitted", child_version=child_version, dispatches=tuple(dispatches),
                               terminal=term, **base)

    # P5
    def continue_release(
        self, opc: str, *, child_version: int | None = None, materialize: Materializer | None = None
    ) -> ReleaseResult:
        materialize = materialize or default_materialize
        with self._cs_tx() as t:
            it = t.one("SELECT * FROM interactions WHERE opc = ?", (opc,))
            if it is None:
                return ReleaseResult("recorded")
            unit = t.one("SELECT * FROM await_units WHERE unit_id = ?", (it["unit_id"],))
            status = self._materialize_child(t, unit, opc, child_version, materialize, it)
            self._record_continuation_fact(t, unit, it["item_index"], status)  # materialising leaves the unit row
            unit_status = self._settle_unit(t, it["unit_id"])
            claim = self._try_release_in_tx(t, it["run_id"])
            return ReleaseResult("resumed" if claim else "recorded", it["run_id"], unit_status, claim,
                                 materialized="materialize" in t.fired)

    def try_release(self, run_id: str, *, materialize: Materializer | None = None,
                    reconcile: bool = False, segment_id: str | None = None) -> ReleaseResult:
        """The drain (§2.2 step 4) and the sweeper's release check: P5 steps 4–5 for a suspend.

        Only stored progress counts: each member unit is settled from its facts and children
        (repairing facts of succeeded children, AU-9) and the run released if that makes it
        releasable. Children are *not* materialised here: a completion admitted (P4) whose P5 is
        still on its way keeps its own release (it answers ``resumed``); one whose P5 never
        comes is materialised by the sweeper's stuck-children pass after ``--reconcile-after``.
        (``materialize`` is accepted for symmetry with the other P5 entry points.)

        ``reconcile=True`` (the sweeper) records a ``reconcile.release`` event when it wins: a
        parked run that nobody released is a repair; the drain is part of the healthy path.
        ``segment_id`` names the segment that will hold the claim when it is not a background
        resume — a request that drains its own suspend continues inline as ``<rid>/v<visit>``
        (see :func:`inline_segment_id`)."""
        with self._cs_tx() as t:
            run = t.one("SELECT * FROM runs WHERE run_id = ?", (run_id,))
            if run is None or run["status"] != "waiting":
                return ReleaseResult("recorded", run_id)
            for m in t.all("SELECT unit_id FROM suspend_members WHERE run_id = ? AND stage = ? AND visit = ?",
                           (run_id, run["cur_stage"], run["cur_visit"])):
                self._settle_unit(t, m["unit_id"])
            claim = self._try_release_in_tx(t, run_id, segment_id)
            if claim is not None and reconcile:
                self._event(t, run_id, "reconcile.release", f"reconcile.release:{claim.stage}:{claim.visit}",
                            {"run_id": run_id})
            return ReleaseResult("resumed" if claim else "recorded", run_id, None, claim,
                                 materialized="materialize" in t.fired)

    def settle_and_release(self, unit_id: str, *, materialize: Materializer | None = None) -> ReleaseResult:
        """P5 steps 4–5 for one unit from stored records only (reconciliation, §5.9): repair
        missing facts of succeeded children, settle, release. Children still ``queued`` are left
        to the stuck-children pass (claimed with a lease, then materialised), so a live P5 on its
        way is never overtaken. (``materialize`` is accepted for symmetry.)"""
        with self._cs_tx() as t:
            unit = t.one("SELECT * FROM await_units WHERE unit_id = ?", (unit_id,))
            if unit is None:
                return ReleaseResult("recorded")
            before = unit["continuation_done"]
            status = self._settle_unit(t, unit_id, reconcile=True)
            claim = self._try_release_in_tx(t, unit["run_id"])
            if claim is not None:
                self._event(t, unit["run_id"], "reconcile.release", f"reconcile.release:{claim.stage}:{claim.visit}",
                            {"unit_id": unit_id})
            elif status != unit["status"] or t.one("SELECT continuation_done FROM await_units WHERE unit_id = ?",
                                                    (unit_id,))["continuation_done"] != before:
                self._event(t, unit["run_id"], "reconcile.settle", f"reconcile.settle:{unit_id}:{status}",
                            {"unit_id": unit_id, "status": status})
            return ReleaseResult("resumed" if claim else "recorded", unit["run_id"], status, claim,
                                 materialized="materialize" in t.fired)

    # P6
    def join_check(
        self,
        run_id: str,
        fence: Fence,
        *,
        stage: str,
        stack: str,
        scope: int,
        build_park: ParkBuilder | None = None,
        materialize: Materializer | None = None,
        join_error: JoinErrorBuilder | None = None,
    ) -> JoinResult:
        materialize = materialize or default_materialize
        with self._cs_tx() as t:
            run = self._lock_run(t, run_id)
            self._check_fence(run, fence)
            due = t.all(
                "SELECT unit_id FROM await_units u WHERE run_id = ? AND join_at_scope IS NOT NULL "
                "AND status != 'cancelled' AND NOT EXISTS (SELECT 1 FROM joined_markers m WHERE m.unit_id = u.unit_id) "
                "AND (dispatch_stack IS NOT ? OR join_at_scope <= ?) ORDER BY op_name, created_seq",
                (run_id, stack, scope),
            )
            if not due:
                return JoinResult("proceed")
            merged: list[UnitRecord] = []
            waiting: list[str] = []
            for d in due:
                status = self._drain_unit(t, d["unit_id"], materialize)
                unit = _unit(t.one("SELECT * FROM await_units WHERE unit_id = ?", (d["unit_id"],)))
                if status in UNIT_BAD:
                    self._insert_marker(t, unit.unit_id, run_id, fence.segment_id)
                    error = (join_error or _default_join_error)(unit)
                    self._finish_in_tx(t, run, fence, status="failed", result=None, error=error,
                                       fail_reason="join_failed")
                    return JoinResult("failed", tuple(merged), unit, None, error)
                if status == "completed":
                    self._insert_marker(t, unit.unit_id, run_id, fence.segment_id)
                    merged.append(unit)
                else:
                    waiting.append(unit.unit_id)
            if not waiting:
                return JoinResult("proceed", tuple(merged))
            if build_park is None:
                raise ValueError("join_check needs build_park when a due unit is still waiting")
            envelope, budgets = build_park(tuple(merged))
            visit, _, _ = self._park_in_tx(t, run, fence, stage=stage, kind="join", envelope=envelope,
                                           budgets=budgets, units=(), members=[(u, "join") for u in waiting])
            t.fired.append("park")
            park = ParkResult(t.parked, False, stage, visit, (), ())
            return JoinResult("parked", tuple(merged), None, park)

    def _insert_marker(self, t: _Tx, unit_id: str, run_id: str, segment_id: str) -> bool:
        return bool(t.returning(
            "INSERT INTO joined_markers (unit_id, run_id, segment_id, joined_ms) VALUES (?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING RETURNING unit_id",
            (unit_id, run_id, segment_id, t.now),
        ))

    def record_join(self, unit_id: str, fence: Fence) -> bool:
        """Insert a joined marker for a segment that owns the run; True only for the inserter."""
        with self._cs_tx() as t:
            unit = t.one("SELECT run_id FROM await_units WHERE unit_id = ?", (unit_id,))
            if unit is None:
                return False
            self._check_fence(self._lock_run(t, unit["run_id"]), fence)
            return self._insert_marker(t, unit_id, unit["run_id"], fence.segment_id)

    # resume side
    def claim_resume(self, run_id: str, claim_token: str) -> ResumeBundle:
        """Load a released suspend for the claim holder. A read: the release (or takeover) that
        created the claim stamped its heartbeat, and every later write of the segment is fenced."""
        t = self._cs_read()
        # No read transaction is needed: while the claim is current only its holder writes the
        # run, its suspend and its (terminal) member units; the check below is repeated by
        # every fenced write the segment makes later.
        run = self._lock_run(t, run_id)
        if run["status"] != "resuming" or run["claim_token"] != claim_token:
            raise RunLost(f"claim on run {run_id} is not current")
        claim = t.one("SELECT * FROM resume_claims WHERE run_id = ? AND claim_token = ?", (run_id, claim_token))
        if claim is None:
            raise RunLost(f"claim on run {run_id} is not current")
        rows = t.all(
            "SELECT u.*, m.role AS member_role FROM suspend_members m JOIN await_units u ON u.unit_id = m.unit_id "
            "WHERE m.run_id = ? AND m.stage = ? AND m.visit = ? ORDER BY u.op_name, u.created_seq",
            (run_id, run["cur_stage"], run["cur_visit"]),
        )
        susp = self._suspend(t, run_id, run["cur_stage"], run["cur_visit"], members=tuple(
            (r["unit_id"], r["member_role"]) for r in sorted(rows, key=lambda r: r["created_seq"])))
        return ResumeBundle(_run(run), susp, _claim(claim), tuple(_unit(r) for r in rows))

    # P7
    def finish_segment(
        self, run_id: str, fence: Fence, *, status: str, result: Any = None, error: Any = None,
        fail_reason: str | None = None,
    ) -> RunRecord:
        if status not in ("completed", "failed"):
            raise ValueError("finish status must be completed or failed")
        with self._cs_tx() as t:
            run = self._lock_run(t, run_id)
            self._check_fence(run, fence)
            self._finish_in_tx(t, run, fence, status=status, result=result, error=error, fail_reason=fail_reason)
            t.fired.append("finish")
            return dataclasses.replace(
                _run(run), status=status, result=result, error=error, fail_reason=fail_reason, finished_ms=t.now,
                updated_ms=t.now, claim_token=None, segment_id=None, version=run["version"] + 1)

    def _finish_in_tx(self, t: _Tx, run: sqlite3.Row, fence: Fence, *, status: str, result: Any, error: Any,
                      fail_reason: str | None) -> None:
        run_id = run["run_id"]
        if run["status"] == "resuming":
            t.run(
                "UPDATE suspends SET status = ?, closed_ms = ? WHERE run_id = ? AND stage = ? AND visit = ? "
                "AND status = 'resuming'",
                ("resumed" if status == "completed" else "failed", t.now, run_id, run["cur_stage"], run["cur_visit"]),
            )
        changed = t.run(
            "UPDATE runs SET status = ?, result_json = ?, error_json = ?, fail_reason = ?, finished_ms = ?, "
            "updated_ms = ?, claim_token = NULL, segment_id = NULL, version = version + 1 "
            "WHERE run_id = ? AND version = ?",
            (status, _dumps(result), _dumps(error), fail_reason, t.now, t.now, run_id, run["version"]),
        )
        if changed != 1:
            raise RunLost(f"run {run_id} changed under finish")
        self._terminal_parent_path(t, run, expired=False, keep_unjoined_deferred=(status == "completed"))
        self._event(t, run_id, f"run.{status}", f"finish:{status}", {"fail_reason": fail_reason})

    # P8
    def time_out_interaction(self, opc: str, *, materialize: Materializer | None = None) -> TimeoutResult:
        """P8 for one interaction whose deadline has passed (the sweeper's timeout pass)."""
        with self._cs_tx() as t:
            it = t.one("SELECT * FROM interactions WHERE opc = ?", (opc,))
            if it is None:
                return TimeoutResult("unknown")
            if it["status"] not in INTERACTION_OPEN:
                return TimeoutResult(it["status"])
            if it["deadline_ms"] is None or it["deadline_ms"] >= t.now:
                return TimeoutResult("not_due")
            claim, expired, promoted = self._p8(t, it, materialize or default_materialize)
            return TimeoutResult("timed_out", claim, expired, tuple(promoted))

    def _p8(self, t: _Tx, it: sqlite3.Row, materialize: Materializer
            ) -> tuple[ClaimRecord | None, bool, list[Dispatch]]:
        """Returns (the release claim if a collect timeout completed the unit, whether the run
        expired, the items promoted into the freed window slot under collect)."""
        opc, unit_id, index, run_id = it["opc"], it["unit_id"], it["item_index"], it["run_id"]
        if t.run(f"UPDATE interactions SET status = 'timed_out', closed_ms = ?, version = version + 1 "
                 f"WHERE opc = ? AND status IN {_OPEN}", (t.now, opc)) != 1:
            return None, False, []
        unit = t.one("SELECT * FROM await_units WHERE unit_id = ?", (unit_id,))
        if unit["status"] != "waiting":
            return None, False, []
        error = {"message": f"item {index} timed out" if unit["kind"] == "itemized" else "timed out",
                 "timeout": True}
        if unit["kind"] == "itemized" and unit["on_item_error"] == "collect":
            t.run(
                "INSERT INTO item_children (unit_id, item_index, opc, status, version, error_json, created_ms, "
                "updated_ms) VALUES (?, ?, ?, 'failed', 1, ?, ?, ?) ON CONFLICT(unit_id, item_index) DO UPDATE SET "
                "status = 'failed', error_json = excluded.error_json, version = version + 1, updated_ms = "
                "excluded.updated_ms WHERE status IN ('queued', 'running')",
                (unit_id, index, opc, _dumps(error), t.now, t.now),
            )
            self._record_continuation_fact(t, unit, index, "failed")
            # the timed-out item has its outcome: its window slot goes to the next queued item,
            # exactly as after an admitted completion (§2.5), raising the run's expiry with it
            promoted, deadline = self._promote(t, unit_id)
            self._raise_expiry(t, run_id, deadline)
            self._settle_unit(t, unit_id)
            return self._try_release_in_tx(t, run_id), False, promoted
        t.run("UPDATE await_units SET error_json = ? WHERE unit_id = ?", (_dumps(error), unit_id))
        self._close_units(t, [unit_id], "cancelled", unit_status="timed_out")
        run = t.one("SELECT * FROM runs WHERE run_id = ?", (run_id,))
        member = t.one(
            "SELECT 1 FROM suspend_members m JOIN suspends s ON s.run_id = m.run_id AND s.stage = m.stage "
            "AND s.visit = m.visit WHERE m.run_id = ? AND m.stage = ? AND m.visit = ? AND m.unit_id = ? "
            "AND s.status = 'open'",
            (run_id, run["cur_stage"], run["cur_visit"], unit_id),
        )
        if run["status"] == "waiting" and member is not None:
            self._expire_in_tx(t, run, reason="timed_out", detail={"unit_id": unit_id, "opc": opc})
            return None, True, []
        return None, False, []

    # P9
    def expire_run(self, run_id: str, *, materialize: Materializer | None = None) -> ExpireResult:
        with self._cs_tx() as t:
            run = t.one("SELECT * FROM runs WHERE run_id = ?", (run_id,))
            if run is None or run["status"] not in ("active", "waiting"):
                return ExpireResult(False)
            if run["expires_ms"] is None or run["expires_ms"] >= t.now:
                return ExpireResult(False)
            if run["status"] == "waiting":
                # everything admitted before the deadline counts: finish the store's own pending
                # work (children not yet materialised) before deciding the run is late
                for m in t.all("SELECT unit_id FROM suspend_members WHERE run_id = ? AND stage = ? AND visit = ?",
                               (run_id, run["cur_stage"], run["cur_visit"])):
                    self._drain_unit(t, m["unit_id"], materialize or default_materialize)
                claim = self._try_release_in_tx(t, run_id)
                if claim is not None:
                    self._event(t, run_id, "reconcile.release", f"reconcile.release:{claim.stage}:{claim.visit}",
                                {"run_id": run_id, "at_expiry": True})
                    return ExpireResult(False, claim)
            self._expire_in_tx(t, run, reason="expired", detail=None)
            return ExpireResult(True)

    def _expire_in_tx(self, t: _Tx, run: sqlite3.Row, *, reason: str, detail: Any) -> None:
        run_id = run["run_id"]
        t.run("UPDATE suspends SET status = 'expired', closed_ms = ? WHERE run_id = ? AND status = 'open'",
              (t.now, run_id))
        error = {"code": "txcl_run_expired", "message": "the run expired before it finished"}
        if detail:
            error.update(detail)
        t.run(
            "UPDATE runs SET status = 'expired', fail_reason = ?, error_json = ?, finished_ms = ?, updated_ms = ?, "
            "claim_token = NULL, segment_id = NULL, version = version + 1 WHERE run_id = ?",
            (reason, _dumps(error), t.now, t.now, run_id),
        )
        self._terminal_parent_path(t, run, expired=True, keep_unjoined_deferred=False)
        self._event(t, run_id, "run.expired", "expired", {"reason": reason})

    # P10
    def take_over_claim(
        self, run_id: str, *, stale_after_ms: int, max_attempts: int, owner: str | None = None
    ) -> TakeoverResult:
        with self._cs_tx() as t:
            run = t.one("SELECT * FROM runs WHERE run_id = ?", (run_id,))
            if run is None or run["status"] != "resuming":
                return TakeoverResult("gone")
            claim = t.one("SELECT * FROM resume_claims WHERE run_id = ? AND claim_token = ?",
                          (run_id, run["claim_token"]))
            if claim is None:
                return TakeoverResult("gone")
            if t.now - claim["heartbeat_ms"] <= stale_after_ms:
                return TakeoverResult("not_stale", _claim(claim))
            stage, visit, old_segment = claim["stage"], claim["visit"], claim["segment_id"]
            if claim["attempt"] >= max_attempts:
                error = {"code": "txcl_run_lost", "message": f"the resume failed {claim['attempt']} times"}
                fence = Fence(run["segment_id"] or old_segment, run["claim_token"])
                self._finish_in_tx(t, run, fence, status="failed", result=None, error=error,
                                   fail_reason="resumer-stale")
                return TakeoverResult("failed")
            attempt = claim["attempt"] + 1
            token = ids.new_claim_token()
            segment = resume_segment_id(run_id, stage, visit, attempt)
            node = owner or self._cs_node()
            t.run(
                "UPDATE resume_claims SET claim_token = ?, owner = ?, segment_id = ?, attempt = ?, claimed_ms = ?, "
                "heartbeat_ms = ? WHERE run_id = ? AND stage = ? AND visit = ? AND claim_token = ?",
                (token, node, segment, attempt, t.now, t.now, run_id, stage, visit, claim["claim_token"]),
            )
            t.run("UPDATE runs SET claim_token = ?, segment_id = ?, version = version + 1, updated_ms = ? "
                  "WHERE run_id = ? AND version = ?", (token, segment, t.now, run_id, run["version"]))
            dead_units = [r["unit_id"] for r in t.all(
                "SELECT unit_id FROM await_units WHERE run_id = ? AND segment_id = ? AND status = 'waiting'",
                (run_id, old_segment))]
            self._close_units(t, dead_units, "cancelled")
            t.run("DELETE FROM joined_markers WHERE run_id = ? AND segment_id = ?", (run_id, old_segment))
            joins = [r["unit_id"] for r in t.all(
                "SELECT unit_id FROM suspend_members WHERE run_id = ? AND stage = ? AND visit = ? AND role = 'join'",
                (run_id, stage, visit))]
            t.conn.executemany(
                "INSERT INTO joined_markers (unit_id, run_id, segment_id, joined_ms) VALUES (?, ?, ?, ?) "
                "ON CONFLICT DO NOTHING", [(u, run_id, segment, t.now) for u in joins])
            self._event(t, run_id, "claim.takeover", f"takeover:{stage}:{visit}:{attempt}",
                        {"attempt": attempt, "owner": node, "previous_owner": claim["owner"]})
            return TakeoverResult("taken", ClaimRecord(run_id, stage, visit, token, node, segment, attempt, t.now, t.now))

    # P11
    def heartbeat(self, run_id: str, claim_token: str) -> None:
        with self._cs_tx() as t:
            changed = t.run(
                "UPDATE resume_claims SET heartbeat_ms = ? WHERE run_id = ? AND claim_token = ? AND EXISTS "
                "(SELECT 1 FROM runs r WHERE r.run_id = ? AND r.status = 'resuming' AND r.claim_token = ?)",
                (t.now, run_id, claim_token, run_id, claim_token),
            )
            if changed != 1:
                raise RunLost(f"claim on run {run_id} is not current")

    # P12
    def purge_run(self, run_id: str, *, retention_ms: int) -> bool:
        with self._cs_tx() as t:
            return bool(t.run(
                "DELETE FROM runs WHERE run_id = ? AND status IN ('completed', 'failed', 'expired') "
                "AND ? > MAX(COALESCE(finished_ms, 0), COALESCE(expires_ms, 0)) + ?",
                (run_id, t.now, retention_ms),
            ))

    def purge_snapshots(self) -> int:
        with self._cs_tx() as t:
            return t.run("DELETE FROM snapshots WHERE NOT EXISTS "
                         "(SELECT 1 FROM runs r WHERE r.snapshot_id = snapshots.snapshot_id)")

    # reconciliation actions (§5.9)
    def resend_dispatch(self, opc: str, *, older_than_ms: int) -> Dispatch | None:
        """A ``dispatching`` interaction never acked: new token (old ones stay valid), attempts+1."""
        with self._cs_tx() as t:
            it = t.one("SELECT * FROM interactions WHERE opc = ?", (opc,))
            if it is None or it["status"] != "dispatching" or (it["dispatch_ms"] or 0) > t.now - older_than_ms:
                return None
            unit = t.one("SELECT * FROM await_units WHERE unit_id = ?", (it["unit_id"],))
            if unit["status"] != "waiting":
                return None
            token = ids.new_token() if unit["kind"] in ("unary", "itemized") else None
            hashes = ",".join(h for h in ((it["token_hash"] or ""), ids.hash_token(token) if token else "") if h)
            attempts = it["attempts"] + 1
            t.run("UPDATE interactions SET token_hash = ?, attempts = ?, dispatch_ms = ?, dispatch_owner = ?, "
                  "version = version + 1 WHERE opc = ? AND status = 'dispatching'",
                  (hashes or None, attempts, t.now, self._cs_node(), opc))
            self._event(t, it["run_id"], "reconcile.resend", f"reconcile.resend:{opc}:{attempts}",
                        {"opc": opc, "attempts": attempts})
            return Dispatch(opc=opc, token=token, run_id=it["run_id"], unit_id=unit["unit_id"],
                            op_name=unit["op_name"], op_stack=unit["op_stack"], stage=unit["dispatch_stage"],
                            exec_target=unit["exec_target"],
                            directives=self._cs_directives(unit["unit_id"], unit["directives_json"]),
                            item_index=it["item_index"], item_count=unit["expected"], kind=unit["kind"],
                            input=_loads(it["input_json"]), deadline_ms=it["deadline_ms"], attempts=attempts)

    def promote_window(self, unit_id: str) -> tuple[Dispatch, ...]:
        with self._cs_tx() as t:
            dispatches, deadline = self._promote(t, unit_id)
            if dispatches:
                run_id = dispatches[0].run_id
                self._raise_expiry(t, run_id, deadline)
                self._event(t, run_id, "reconcile.promote",
                            f"reconcile.promote:{unit_id}:{dispatches[0].item_index}",
                            {"unit_id": unit_id, "items": [d.item_index for d in dispatches]})
            return tuple(dispatches)

    def claim_child(self, unit_id: str, item_index: int, *, older_than_ms: int, lease_ms: int,
                    owner: str | None = None) -> int | None:
        """CAS a stuck child to ``running`` with a lease (version+1); returns the new version."""
        with self._cs_tx() as t:
            rows = t.returning(
                "UPDATE item_children SET status = 'running', lease_owner = ?, lease_until_ms = ?, "
                "version = version + 1, updated_ms = ? WHERE unit_id = ? AND item_index = ? AND ("
                "(status = 'queued' AND updated_ms <= ?) OR (status = 'running' AND lease_until_ms < ?)) "
                "RETURNING version",
                (owner or self._cs_node(), t.now + lease_ms, t.now, unit_id, item_index, t.now - older_than_ms, t.now),
            )
            if not rows:
                return None
            run = t.one("SELECT run_id FROM await_units WHERE unit_id = ?", (unit_id,))
            self._event(t, run["run_id"], "reconcile.child", f"reconcile.child:{unit_id}:{item_index}:{rows[0][0]}",
                        {"unit_id": unit_id, "item_index": item_index})
            return rows[0][0]

    # ----------------------------------------------------------------------------------------
    # reads

    def _suspend(self, t: _Tx, run_id: str, stage: str, visit: int,
                 members: tuple[tuple[str, str], ...] | None = None) -> SuspendRecord | None:
        r = t.one("SELECT * FROM suspends WHERE run_id = ? AND stage = ? AND visit = ?", (run_id, stage, visit))
        if r is None:
            return None
        members = members if members is not None else tuple(
            (m["unit_id"], m["role"]) for m in t.all(
                "SELECT m.unit_id, m.role FROM suspend_members m JOIN await_units u ON u.unit_id = m.unit_id "
                "WHERE m.run_id = ? AND m.stage = ? AND m.visit = ? ORDER BY u.created_seq", (run_id, stage, visit))
        )
        return SuspendRecord(
            run_id=r["run_id"], stage=r["stage"], visit=r["visit"], kind=r["kind"], status=r["status"],
            envelope=_loads(r["envelope_json"]), budgets=_loads(r["budget_json"]), segment_id=r["segment_id"],
            dispatch_complete=bool(r["dispatch_complete"]), suspended_ms=r["suspended_ms"], closed_ms=r["closed_ms"],
            members=members,
        )

    def get_run(self, run_id: str) -> RunRecord | None:
        r = self._cs_read().one("SELECT * FROM runs WHERE run_id = ?", (run_id,))
        return _run(r) if r else None

    def get_run_by_rcid(self, rcid: str) -> RunRecord | None:
        r = self._cs_read().one("SELECT * FROM runs WHERE rcid = ?", (rcid,))
        return _run(r) if r else None

    def get_run_by_origin(self, origin_rid: str) -> RunRecord | None:
        r = self._cs_read().one("SELECT * FROM runs WHERE origin_rid = ?", (origin_rid,))
        return _run(r) if r else None

    def list_runs(self, *, status: str | None = None, limit: int = 100) -> list[RunRecord]:
        t = self._cs_read()
        if status:
            rows = t.all("SELECT * FROM runs WHERE status = ? ORDER BY created_ms DESC, run_id DESC LIMIT ?",
                         (status, limit))
        else:
            rows = t.all("SELECT * FROM runs ORDER BY created_ms DESC, run_id DESC LIMIT ?", (limit,))
        return [_run(r) for r in rows]

    def get_suspend(self, run_id: str, stage: str, visit: int) -> SuspendRecord | None:
        return self._suspend(self._cs_read(), run_id, stage, visit)

    def list_suspends(self, run_id: str) -> list[SuspendRecord]:
        t = self._cs_read()
        rows = t.all("SELECT stage, visit FROM suspends WHERE run_id = ? ORDER BY suspended_ms, stage, visit",
                     (run_id,))
        return [self._suspend(t, run_id, r["stage"], r["visit"]) for r in rows]

    def get_unit(self, unit_id: str) -> UnitRecord | None:
        r = self._cs_read().one("SELECT * FROM await_units WHERE unit_id = ?", (unit_id,))
        return _unit(r) if r else None

    def list_units(self, run_id: str) -> list[UnitRecord]:
        rows = self._cs_read().all("SELECT * FROM await_units WHERE run_id = ? ORDER BY created_seq", (run_id,))
        return [_unit(r) for r in rows]

    def get_interaction(self, opc: str) -> InteractionRecord | None:
        r = self._cs_read().one("SELECT * FROM interactions WHERE opc = ?", (opc,))
        return _interaction(r) if r else None

    def find_interaction(self, run_id: str, op_name: str | None = None, item_index: int = 0) -> InteractionRecord | None:
        """The newest interaction of a run (optionally of one op) at an item index (``txcl complete``)."""
        sql = ("SELECT i.* FROM interactions i JOIN await_units u ON u.unit_id = i.unit_id "
               "WHERE i.run_id = ? AND i.item_index = ?")
        params: list[Any] = [run_id, item_index]
        if op_name is not None:
            sql += " AND u.op_name = ?"
            params.append(op_name)
        r = self._cs_read().one(sql + " ORDER BY u.created_seq DESC LIMIT 1", params)
        return _interaction(r) if r else None

    def list_interactions(self, unit_id: str) -> list[InteractionRecord]:
        rows = self._cs_read().all("SELECT * FROM interactions WHERE unit_id = ? ORDER BY item_index", (unit_id,))
        return [_interaction(r) for r in rows]

    def get_terminal(self, opc: str) -> TerminalRecord | None:
        r = self._cs_read().one("SELECT * FROM terminals WHERE opc = ?", (opc,))
        return _terminal(r) if r else None

    def list_children(self, unit_id: str) -> list[ChildRecord]:
        rows = self._cs_read().all("SELECT * FROM item_children WHERE unit_id = ? ORDER BY item_index", (unit_id,))
        return [_child(r) for r in rows]

    def list_facts(self, unit_id: str) -> list[tuple[str, int]]:
        rows = self._cs_read().all(
            "SELECT kind, item_index FROM continuation_facts WHERE unit_id = ? ORDER BY kind, item_index", (unit_id,))
        return [(r["kind"], r["item_index"]) for r in rows]

    def get_joined_marker(self, unit_id: str) -> JoinedMarker | None:
        r = self._cs_read().one("SELECT * FROM joined_markers WHERE unit_id = ?", (unit_id,))
        return JoinedMarker(r["unit_id"], r["run_id"], r["segment_id"], r["joined_ms"]) if r else None

    def get_claim(self, run_id: str) -> ClaimRecord | None:
        r = self._cs_read().one("SELECT * FROM resume_claims WHERE run_id = ? ORDER BY claimed_ms DESC LIMIT 1",
                                (run_id,))
        return _claim(r) if r else None

    def list_run_events(self, run_id: str) -> list[RunEvent]:
        rows = self._cs_read().all("SELECT * FROM run_events WHERE run_id = ? ORDER BY seq", (run_id,))
        return [RunEvent(r["run_id"], r["seq"], r["event_key"], r["kind"], r["at_ms"], _loads(r["data_json"]))
                for r in rows]

    def get_snapshot(self, snapshot_id: str) -> bytes | None:
        r = self._cs_read().one("SELECT body FROM snapshots WHERE snapshot_id = ?", (snapshot_id,))
        return zlib.decompress(r["body"]) if r else None

    # sweeper candidates --------------------------------------------------------------------

    def due_interactions(self, *, limit: int = 500) -> list[str]:
        t = self._cs_read()
        return [r["opc"] for r in t.all(
            f"SELECT opc FROM interactions WHERE status IN {_OPEN} AND deadline_ms < ? ORDER BY deadline_ms LIMIT ?",
            (t.now, limit))]

    def expirable_runs(self, *, limit: int = 500) -> list[str]:
        t = self._cs_read()
        return [r["run_id"] for r in t.all(
            "SELECT run_id FROM runs WHERE status IN ('active', 'waiting') AND expires_ms < ? LIMIT ?",
            (t.now, limit))]

    def stale_claims(self, *, stale_after_ms: int, limit: int = 500) -> list[str]:
        t = self._cs_read()
        return [r["run_id"] for r in t.all(
            "SELECT c.run_id FROM resume_claims c JOIN runs r ON r.run_id = c.run_id AND r.claim_token = c.claim_token "
            "WHERE r.status = 'resuming' AND c.heartbeat_ms < ? LIMIT ?", (t.now - stale_after_ms, limit))]

    def stuck_dispatches(self, *, older_than_ms: int, limit: int = 500) -> list[str]:
        t = self._cs_read()
        return [r["opc"] for r in t.all(
            "SELECT i.opc FROM interactions i JOIN await_units u ON u.unit_id = i.unit_id "
            "WHERE i.status = 'dispatching' AND i.dispatch_ms <= ? AND u.status = 'waiting' "
            "AND u.kind IN ('unary', 'itemized') LIMIT ?",
            (t.now - older_than_ms, limit))]

    def promotable_units(self, *, limit: int = 500) -> list[str]:
        t = self._cs_read()
        return [r["unit_id"] for r in t.all(
            "SELECT u.unit_id FROM await_units u WHERE u.status = 'waiting' AND u.kind = 'itemized' "
            "AND EXISTS (SELECT 1 FROM interactions i WHERE i.unit_id = u.unit_id AND i.status = 'queued') "
            f"AND (SELECT COUNT(*) FROM interactions i WHERE i.unit_id = u.unit_id AND i.status IN {_IN_FLIGHT}) "
            "< u.window_size LIMIT ?", (limit,))]

    def stuck_children(self, *, older_than_ms: int, limit: int = 500) -> list[tuple[str, int, str]]:
        t = self._cs_read()
        return [(r["unit_id"], r["item_index"], r["opc"]) for r in t.all(
            "SELECT unit_id, item_index, opc FROM item_children WHERE (status = 'queued' AND updated_ms <= ?) "
            "OR (status = 'running' AND lease_until_ms < ?) LIMIT ?", (t.now - older_than_ms, t.now, limit))]

    def unsettled_units(self, *, limit: int = 500) -> list[str]:
        """Waiting units whose facts or counters are short of their children, or that could settle."""
        t = self._cs_read()
        return [r["unit_id"] for r in t.all(
            "SELECT u.unit_id FROM await_units u WHERE u.status = 'waiting' AND ("
            "u.continuation_done >= u.expected OR "
            "(SELECT COUNT(*) FROM item_children c WHERE c.unit_id = u.unit_id AND c.status IN ('succeeded', 'failed')) "
            "> u.continuation_done) LIMIT ?", (limit,))]

    def releasable_runs(self, *, limit: int = 500) -> list[str]:
        t = self._cs_read()
        return [r["run_id"] for r in t.all(
            "SELECT r.run_id FROM runs r JOIN suspends s ON s.run_id = r.run_id AND s.stage = r.cur_stage "
            "AND s.visit = r.cur_visit WHERE r.status = 'waiting' AND s.status = 'open' AND s.dispatch_complete = 1 "
            "AND (NOT EXISTS (SELECT 1 FROM suspend_members m JOIN await_units u ON u.unit_id = m.unit_id "
            "WHERE m.run_id = s.run_id AND m.stage = s.stage AND m.visit = s.visit AND u.status = 'waiting') "
            "OR EXISTS (SELECT 1 FROM suspend_members m JOIN await_units u ON u.unit_id = m.unit_id "
            "WHERE m.run_id = s.run_id AND m.stage = s.stage AND m.visit = s.visit "
            "AND u.status IN ('failed', 'timed_out', 'cancelled'))) LIMIT ?", (limit,))]

    def unrecorded_sync_members(self, *, older_than_ms: int, limit: int = 500) -> list[str]:
        t = self._cs_read()
        return [r["opc"] for r in t.all(
            "SELECT i.opc FROM interactions i JOIN await_units u ON u.unit_id = i.unit_id "
            f"WHERE u.kind = 'sync' AND u.status = 'waiting' AND i.status IN {_OPEN} AND i.created_ms <= ? "
            "AND NOT EXISTS (SELECT 1 FROM terminals x WHERE x.opc = i.opc) LIMIT ?", (t.now - older_than_ms, limit))]

    def purgeable_runs(self, *, retention_ms: int, limit: int = 500) -> list[str]:
        t = self._cs_read()
        return [r["run_id"] for r in t.all(
            "SELECT run_id FROM runs WHERE status IN ('completed', 'failed', 'expired') "
            "AND ? > MAX(COALESCE(finished_ms, 0), COALESCE(expires_ms, 0)) + ? LIMIT ?",
            (t.now, retention_ms, limit))]


def _default_join_error(unit: UnitRecord) -> Any:
    return {"code": "txcl_join_failed", "message": f"deferred op {unit.op_name} {unit.status.replace('_', ' ')}",
            "unit_id": unit.unit_id, "detail": unit.error}


def _call_alone(call: Any) -> tuple[bool, Any]:
    try:
        return True, call()
    except Exception as exc:  # noqa: BLE001 - handed to the call's owner
        return False, exc


class _BatchState(threading.local):
    """The batch transaction open on this thread (see ``run_batch``)."""

    conn: sqlite3.Connection | None = None
    fired: list[str] | None = None  # fault points of the running call, marked after the COMMIT
    broken = False  # a savepoint could not be rolled back: the whole batch is redone call by call


class _TxContext:
    """``with store._cs_tx() as t``: BEGIN IMMEDIATE … COMMIT, then the fault points. Inside
    a batch (``run_batch``) the procedure is a savepoint of the batch's transaction instead.

    Writers of one store object in this process queue on an in-process lock before BEGIN
    IMMEDIATE: SQLite's own busy handler polls with sleeps of 1–100 ms, which serialised the
    store's worker threads far more slowly than the transactions themselves take. Other
    processes still meet at SQLite's write lock (busy timeout), as before."""

    __slots__ = ("store", "lock", "conn", "tx", "batch")

    def __init__(self, store: SqliteContinuationStore) -> None:
        self.store = store

    def __enter__(self) -> _Tx:
        store = self.store
        batch = store.__dict__.get("_cs_batch_state")
        if batch is not None and batch.conn is not None:
            self.batch = batch
            self.conn = batch.conn
            self.conn.execute("SAVEPOINT txcl_call")
            self.tx = _Tx(self.conn, store.now_ms())
            return self.tx
        self.batch = None
        lock = store._cs_write_lock()
        lock.acquire()
        try:
            conn = store._cs_db().conn
            conn.execute("BEGIN IMMEDIATE")
        except BaseException:
            lock.release()
            raise
        self.lock = lock
        self.conn = conn
        self.tx = _Tx(conn, store.now_ms())
        return self.tx

    def __exit__(self, exc_type, exc, tb) -> bool:
        conn = self.conn
        batch = self.batch
        if batch is not None:
            if exc_type is None:
                conn.execute("RELEASE txcl_call")
                if batch.fired is not None:
                    batch.fired.extend(self.tx.fired)
                return False
            try:
                if conn.in_transaction:
                    conn.execute("ROLLBACK TO txcl_call")
                    conn.execute("RELEASE txcl_call")
                else:
                    batch.broken = True
            except sqlite3.Error:
                batch.broken = True
            return False
        try:
            if exc_type is None:
                try:
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                self.store._cs_committed()
            elif conn.in_transaction:
                conn.execute("ROLLBACK")
        finally:
            self.lock.release()
        if exc_type is None:
            for point in self.tx.fired:
                fault_point(point)
        return False


class SqliteContinuations(SqliteContinuationStore):
    """A standalone continuation store on one SQLite file (tests, benchmarks, tools)."""

    def __init__(self, db_path: str | Path, *, clock=None, node_id: str | None = None,
                 busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS) -> None:
        self.db_path = db_path
        self.clock = clock
        self.node_id = node_id
        self.busy_timeout_ms = busy_timeout_ms
        self._cs_db()  # open and migrate now

    def close(self) -> None:
        self.close_continuations()
