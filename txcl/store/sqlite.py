"""The SQLite backend for traces and the kv table (one file, RUNTIME.md §8, §5.2).

`SqliteStore` is built to be extended: a continuation mixin adds its tables by overriding
`schema_components()` (calling super) and reuses `conn()` / `write()`. One connection per
thread; every write transaction is BEGIN IMMEDIATE.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Iterable

from txcl.store.base import KvEntry, KvError, TraceRecord
from txcl.store.connection import DEFAULT_BUSY_TIMEOUT_MS, open_sqlite, resolve_db_path, transaction
from txcl.trace.packing import pack_events, pack_steps

TRACE_SCHEMA = (
    # One row per segment: steps and timeline events are packed as JSON arrays, so writing a
    # trace is one INSERT (the records of RUNTIME.md §8.1 are the array elements).
    """CREATE TABLE IF NOT EXISTS traces (
        rid TEXT PRIMARY KEY, origin_rid TEXT, run_id TEXT, src TEXT, entry_stack TEXT,
        started_ms INTEGER, finished_ms INTEGER, status TEXT, http_status INTEGER,
        fuel_used INTEGER, bytes_in INTEGER, bytes_out INTEGER, mode TEXT,
        in_json TEXT, out_json TEXT, error_json TEXT, steps_json TEXT NOT NULL DEFAULT '[]',
        events_json TEXT NOT NULL DEFAULT '[]')""",
    "CREATE INDEX IF NOT EXISTS traces_started ON traces (started_ms)",
    "CREATE INDEX IF NOT EXISTS traces_run ON traces (run_id, started_ms)",
)

KV_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS kv (
        ns TEXT NOT NULL, key TEXT NOT NULL, value_json TEXT NOT NULL, version INTEGER NOT NULL,
        updated_ms INTEGER NOT NULL, expires_ms INTEGER, PRIMARY KEY (ns, key))""",
)

STEP_FIELDS = ("seq", "stage", "stack", "scope", "name", "operation", "transport", "status",
               "started_ms", "finished_ms", "duration_ms", "input_bytes", "output_bytes", "error",
               "ack", "unit_id", "items", "passes", "stop", "rule", "input_json", "output_json", "traceback")
TRACE_COLUMNS = ("rid", "origin_rid", "run_id", "src", "entry_stack", "started_ms", "finished_ms",
                 "status", "http_status", "fuel_used", "bytes_in", "bytes_out", "mode", "in_json",
                 "out_json", "error_json")


class SqliteStore:
    """Traces and kv in one SQLite file. Thread-safe: one connection per thread."""

    def __init__(self, path: str | Path, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS):
        self.path = resolve_db_path(path)
        self.busy_timeout_ms = busy_timeout_ms
        self._local = threading.local()
        self._all: list[Any] = []
        self._lock = threading.Lock()
        self._migrate()

    # ------------------------------------------------------------ connections and schema
    def db(self):
        """The sqlite-utils Database of the calling thread."""
        db = getattr(self._local, "db", None)
        if db is None:
            db = open_sqlite(self.path, self.busy_timeout_ms)
            self._local.db = db
            with self._lock:
                self._all.append(db)
        return db

    def conn(self):
        return self.db().conn

    def write(self):
        """`with store.write() as conn:` — one BEGIN IMMEDIATE transaction."""
        return transaction(self.db())

    def schema_components(self) -> dict[str, tuple[int, Iterable[str]]]:
        """component -> (version, DDL statements). Extend in subclasses and mixins."""
        return {"traces": (2, TRACE_SCHEMA), "kv": (1, KV_SCHEMA)}

    def schema_migrations(self) -> dict[tuple[str, int], Iterable[str]]:
        """(component, from_version) -> statements run before the component's DDL."""
        return {
            # v1 kept steps and events in their own tables; v2 packs them into the row.
            ("traces", 1): (
                "DROP TABLE IF EXISTS trace_steps",
                "DROP TABLE IF EXISTS trace_events",
                "ALTER TABLE traces ADD COLUMN steps_json TEXT NOT NULL DEFAULT '[]'",
                "ALTER TABLE traces ADD COLUMN events_json TEXT NOT NULL DEFAULT '[]'",
            ),
        }

    def _migrate(self) -> None:
        with self.write() as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS txcl_schema (component TEXT PRIMARY KEY, version INTEGER NOT NULL)")
            current = dict(conn.execute("SELECT component, version FROM txcl_schema").fetchall())
            for component, (version, statements) in self.schema_components().items():
                have = current.get(component)
                if have is not None and have > version:
                    raise RuntimeError(f"{self.path}: database schema {component} v{have} is newer than this txcl (v{version})")
                migrations = getattr(self, "schema_migrations", dict)()
                while have is not None and have < version:
                    for statement in migrations.get((component, have), ()):
                        conn.execute(statement)
                    have += 1
                for statement in statements:
                    conn.execute(statement)
                conn.execute("INSERT INTO txcl_schema (component, version) VALUES (?, ?) "
                             "ON CONFLICT(component) DO UPDATE SET version = excluded.version", (component, version))

    def close(self) -> None:
        with self._lock:
            for db in self._all:
                try:
                    db.conn.close()
                except Exception:  # noqa: BLE001
                    pass
            self._all.clear()
        self._local = threading.local()

    # ------------------------------------------------------------ traces
    def write_traces(self, traces: list[TraceRecord]) -> None:
        """Write every trace (one row each) in one transaction."""
        if not traces:
            return
        columns = (*TRACE_COLUMNS, "steps_json", "events_json")
        sql = (f"INSERT OR REPLACE INTO traces ({', '.join(columns)}) "
               f"VALUES ({', '.join('?' for _ in columns)})")
        rows = []
        for trace in traces:
            req = trace.request
            rows.append((*[req.get(c) for c in TRACE_COLUMNS], pack_steps(trace.steps), pack_events(trace.events)))
        with self.write() as conn:
            conn.executemany(sql, rows)

    def get_trace(self, rid: str) -> TraceRecord | None:
        columns = (*TRACE_COLUMNS, "steps_json", "events_json")
        row = self.conn().execute(f"SELECT {', '.join(columns)} FROM traces WHERE rid = ?", (rid,)).fetchone()
        if row is None:
            return None
        request = dict(zip(TRACE_COLUMNS, row))
        steps = [{f: s.get(f) for f in STEP_FIELDS} | s for s in json.loads(row[-2])]
        events = [e if isinstance(e, dict) else {"seq": e[0], "at_ms": e[1], "kind": e[2], "data": e[3]}
                  for e in json.loads(row[-1])]
        return TraceRecord(request, steps, events)

    def last_trace_rid(self) -> str | None:
        row = self.conn().execute(
            "SELECT rid FROM traces ORDER BY started_ms DESC, rowid DESC LIMIT 1").fetchone()
        return row[0] if row else None

    def trace_rids_for_run(self, run_id: str) -> list[str]:
        rows = self.conn().execute(
            "SELECT rid FROM traces WHERE run_id = ? ORDER BY started_ms, rowid", (run_id,)).fetchall()
        return [r[0] for r in rows]

    def purge_traces(self, before_ms: int) -> int:
        with self.write() as conn:
            return conn.execute("DELETE FROM traces WHERE started_ms < ?", (before_ms,)).rowcount

    # ------------------------------------------------------------ kv
    @staticmethod
    def _live(row: Any, now_ms: int) -> bool:
        return row is not None and (row[2] is None or row[2] > now_ms)

    def _kv_row(self, conn, ns: str, key: str):
        return conn.execute("SELECT value_json, version, expires_ms FROM kv WHERE ns = ? AND key = ?",
                            (ns, key)).fetchone()

    def kv_get(self, ns: str, key: str, now_ms: int) -> KvEntry | None:
        row = self._kv_row(self.conn(), ns, key)
        if not self._live(row, now_ms):
            return None
        return KvEntry(key, _loads(row[0]), row[1])

    def _put(self, conn, ns: str, key: str, value: Any, row: Any, now_ms: int, expires_ms: int | None) -> int:
        version = row[1] + 1 if row is not None else 1  # monotonic, also across expiry
        conn.execute("INSERT INTO kv (ns, key, value_json, version, updated_ms, expires_ms) VALUES (?, ?, ?, ?, ?, ?) "
                     "ON CONFLICT(ns, key) DO UPDATE SET value_json = excluded.value_json, version = excluded.version, "
                     "updated_ms = excluded.updated_ms, expires_ms = excluded.expires_ms",
                     (ns, key, _dumps(value), version, now_ms, expires_ms))
        return version

    def kv_set(self, ns: str, key: str, value: Any, now_ms: int, expires_ms: int | None = None) -> int:
        with self.write() as conn:
            return self._put(conn, ns, key, value, self._kv_row(conn, ns, key), now_ms, expires_ms)

    def kv_delete(self, ns: str, key: str, now_ms: int) -> bool:
        with self.write() as conn:
            row = self._kv_row(conn, ns, key)
            conn.execute("DELETE FROM kv WHERE ns = ? AND key = ?", (ns, key))
            return self._live(row, now_ms)

    def kv_incr(self, ns: str, key: str, by: int, now_ms: int) -> KvEntry:
        with self.write() as conn:
            row = self._kv_row(conn, ns, key)
            current: Any = 0
            expires = None
            if self._live(row, now_ms):
                current = _loads(row[0])
                expires = row[2]
            if isinstance(current, bool) or not isinstance(current, int):
                raise KvError(f"kv/incr: value of {key!r} is not an integer")
            value = current + by
            version = self._put(conn, ns, key, value, row, now_ms, expires)
            return KvEntry(key, value, version)

    def kv_cas(self, ns: str, key: str, value: Any, expect_version: int, now_ms: int) -> tuple[bool, KvEntry | None]:
        with self.write() as conn:
            row = self._kv_row(conn, ns, key)
            live = self._live(row, now_ms)
            current_version = row[1] if live else 0
            if current_version != expect_version:
                return False, (KvEntry(key, _loads(row[0]), row[1]) if live else None)
            version = self._put(conn, ns, key, value, row, now_ms, None)
            return True, KvEntry(key, value, version)

    def kv_list(self, ns: str, prefix: str, limit: int, now_ms: int) -> tuple[list[KvEntry], bool]:
        rows = self.conn().execute(
            "SELECT key, value_json, version FROM kv WHERE ns = ? AND substr(key, 1, ?) = ? "
            "AND (expires_ms IS NULL OR expires_ms > ?) ORDER BY key LIMIT ?",
            (ns, len(prefix), prefix, now_ms, limit + 1)).fetchall()
        items = [KvEntry(r[0], _loads(r[1]), r[2]) for r in rows[:limit]]
        return items, len(rows) > limit


def _dumps(value: Any) -> str:
    from txcl.values.jsonio import dumps

    return dumps(value)


def _loads(text: str) -> Any:
    from txcl.values.jsonio import loads

    return loads(text)


def open_store(db: str | Path, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS) -> SqliteStore:
    return SqliteStore(db, busy_timeout_ms)


__all__ = ["SqliteStore", "open_store", "TRACE_SCHEMA", "KV_SCHEMA"]
