"""The SQLite backend: one database file, WAL, durable commits, ``BEGIN IMMEDIATE``.

Every thread uses its own connection (WAL mode, ``synchronous=FULL``, a busy timeout, foreign
keys). Write transactions start with ``BEGIN IMMEDIATE``, which takes SQLite's write lock:
writers are serialised, which is the run lock every procedure asks for (``tx.lock_run`` is a
plain read here) and makes deadlocks impossible. Several processes on one host may share the
file. Inside one process, writers queue on a lock before ``BEGIN IMMEDIATE``: SQLite's own
busy handler polls with sleeps of 1–100 ms, far slower than the transactions themselves.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any, Callable

from txcl.datadir import make
from txcl.procid import current_pid
from txcl.store.backend import Dialect, SqlBackend
from txcl.store.errors import StoreError, StoreUnavailable

DEFAULT_BUSY_TIMEOUT_MS = 30_000

# sqlite3 binds a parameter of exactly int, float or str directly and sends every other one
# through its adaptation protocol, which for None (a NULL, common in trace and continuation
# rows) fails two attribute lookups, each raising and clearing an AttributeError: about
# 1,200 instructions per NULL. An adapter registered for None is found first, by one dict
# lookup, and binds the same NULL.
sqlite3.register_adapter(type(None), {}.get)

MIN_SQLITE = (3, 35, 0)  # INSERT … RETURNING

SQLITE = Dialect(
    name="sqlite",
    placeholder="?",
    bigint="INTEGER",
    text="TEXT",
    blob="BLOB",
    table_options=" WITHOUT ROWID",
    lock_run="",
    lock_run_skip="",
    now_sql=None,
    seq_column="",
    seq_order="rowid",
    table_exists_sql="SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
    column_exists_sql="SELECT 1 FROM pragma_table_info(?) WHERE name = ?",
    index_hint="INDEXED BY {}",
)


def sqlite_path(db: str | Path) -> Path:
    """A path, or a ``sqlite:///relative`` / ``sqlite:////absolute`` URL, as a path."""
    text = str(db)
    if text.startswith("sqlite:///"):
        text = text[len("sqlite:///") - 1 :] if text.startswith("sqlite:////") else text[len("sqlite:///") :]
    elif text.startswith("sqlite://"):
        text = text[len("sqlite://") :]
    return Path(text)


WAL_SIZE_LIMIT = 4 * 1024 * 1024  # bytes of WAL kept after a checkpoint


class SqliteBackend(SqlBackend):
    kind = "sqlite"
    dialect = SQLITE
    serialises_writers = True

    def __init__(self, path: str | Path, *, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
                 clock: Callable[[], int] | None = None, create: bool = True, durable: bool = True) -> None:
        super().__init__(clock=clock)
        # durable=False (a throwaway database: `txcl test`'s per-case stores) skips the fsyncs
        self.synchronous = "FULL" if durable else "OFF"
        if sqlite3.sqlite_version_info < MIN_SQLITE:
            raise StoreError(f"SQLite {sqlite3.sqlite_version} is too old; txcl needs 3.35 or later")
        self.path = sqlite_path(path)
        if not create and not self.path.exists():
            raise StoreUnavailable(f"no database at {self.path}")
        if create:
            make(self.path.parent)
        self.busy_timeout_ms = busy_timeout_ms
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._pid = current_pid()
        self._open_lock = threading.Lock()
        self._write_lock = threading.RLock()
        self.connection()  # open now: a bad path fails here, not at the first write

    def describe(self) -> str:
        return str(self.path)

    # ------------------------------------------------------------------ connections
    def connection(self) -> sqlite3.Connection:
        """The calling thread's connection (opened on first use; never the parent's after a fork)."""
        if self._pid != current_pid():
            self._local = threading.local()
            self._all = []
            self._pid = current_pid()
            self._write_lock = threading.RLock()
        conn = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = sqlite3.connect(str(self.path), timeout=self.busy_timeout_ms / 1000,
                                       isolation_level=None, check_same_thread=False)
                conn.row_factory = sqlite3.Row
                conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
                conn.execute("PRAGMA journal_mode = WAL" if self.synchronous == "FULL" else "PRAGMA journal_mode = MEMORY")
                conn.execute(f"PRAGMA synchronous = {self.synchronous}")
                conn.execute("PRAGMA foreign_keys = ON")
                # a database file can come from anywhere (a workspace's .txcl-data/): its
                # schema's triggers and views may not call functions with side effects
                conn.execute("PRAGMA trusted_schema = OFF")
                # after a checkpoint the WAL shrinks back to this size (it otherwise stays as
                # large as the largest transaction ever written, e.g. one with a 20 MiB body)
                conn.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")
            except sqlite3.Error as exc:
                raise StoreUnavailable(f"cannot open the database {self.path}: {exc}") from exc
            self._local.conn = conn
            with self._open_lock:
                self._all.append(conn)
        return conn

    def close(self) -> None:
        with self._open_lock:
            for conn in self._all:
                try:
                    conn.close()
                except sqlite3.Error:
                    pass
            self._all.clear()
        self._local = threading.local()

    def checkpoint(self) -> None:
        """Fold the WAL into the database and truncate it (it otherwise stays as large as
        its largest transaction)."""
        with self._write_lock:
            try:
                self.connection().execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            except sqlite3.Error as exc:
                raise self.translate(exc) or StoreError(str(exc)) from exc

    def vacuum(self) -> None:
        with self._write_lock:
            try:
                conn = self.connection()
                conn.execute("VACUUM")
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            except sqlite3.Error as exc:
                raise self.translate(exc) or StoreError(str(exc)) from exc

    # ------------------------------------------------------------------ primitives
    def _execute(self, conn: sqlite3.Connection, sql: str, params: tuple) -> Any:
        return conn.execute(sql, params)

    def _execute_many(self, conn: sqlite3.Connection, sql: str, rows: list[tuple]) -> None:
        conn.executemany(sql, rows)

    def _checkout_write(self) -> sqlite3.Connection:
        self._write_lock.acquire()
        try:
            return self.connection()
        except BaseException:
            self._write_lock.release()
            raise

    def _checkin_write(self, conn: sqlite3.Connection, healthy: bool) -> None:
        self._write_lock.release()

    def _checkout_read(self) -> sqlite3.Connection:
        return self.connection()

    def _checkin_read(self, conn: sqlite3.Connection, healthy: bool) -> None:
        pass

    def _begin(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")

    def _commit(self, conn: sqlite3.Connection) -> None:
        conn.execute("COMMIT")

    def _rollback(self, conn: sqlite3.Connection) -> None:
        conn.execute("ROLLBACK")

    def _in_transaction(self, conn: sqlite3.Connection) -> bool:
        return conn.in_transaction

    def translate(self, exc: BaseException) -> StoreError | None:
        if not isinstance(exc, sqlite3.Error):
            return None
        text = str(exc)
        if isinstance(exc, sqlite3.OperationalError) and any(
                s in text for s in ("locked", "busy", "disk I/O", "unable to open", "full")):
            return StoreUnavailable(f"the database {self.path} is unavailable: {text}")
        return StoreError(f"the database {self.path} refused an operation: {text}")


__all__ = ["SqliteBackend", "SQLITE", "sqlite_path", "DEFAULT_BUSY_TIMEOUT_MS"]
