"""The PostgreSQL backend: several txcl nodes on one database.

- Connections come from a ``psycopg_pool.ConnectionPool`` (autocommit connections; a write
  transaction is an explicit ``BEGIN … COMMIT`` at READ COMMITTED).
- Every write to a run's records first locks the run's row (``SELECT … FOR UPDATE``), so work
  on one run is serialised across nodes exactly as SQLite's single writer serialises it. The
  sweeper's procedures lock with ``FOR UPDATE SKIP LOCKED`` and leave a run another node is
  working on to that node; compare-and-swap conditions make any overlap harmless.
- ``tx.now`` is the database's clock, so deadlines do not move with a node's clock skew: the
  offset of this node's clock from the server's is measured on a connection every few
  seconds (to within half a round trip), which saves a query per transaction.
- A committed change to a run sends ``NOTIFY txcl_runs, '<run id>'``; every node listens on a
  connection of its own and wakes its long polls (``subscribe``).
- Inside a write transaction the connection is in pipeline mode: statements whose result is
  not needed (``tx.send``) travel with the next one that waits, which saves most round trips;
  every statement that returns something waits for its answer (and for everything before it).
- A deadlock, a serialization failure, or a connection lost before ``COMMIT`` was sent is
  retried from the start (nothing was applied); a connection lost *during* ``COMMIT`` is
  reported as :class:`StoreUnavailable` (the change may have been applied; every procedure
  is safe to repeat). A server that cannot be reached is :class:`StoreUnavailable` too.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable
from urllib.parse import urlsplit

import psycopg  # the 'postgres' extra: txcl.store.open_backend reports it missing
import psycopg_pool

from txcl.store.backend import Dialect, SqlBackend, Tx
from txcl.store.errors import StoreError, StoreUnavailable

log = logging.getLogger("txcl.store")
# the pool logs every failed reconnection attempt; an outage is reported once per failed call
logging.getLogger("psycopg.pool").setLevel(logging.ERROR)

CHANNEL = "txcl_runs"

POSTGRES = Dialect(
    name="postgresql",
    placeholder="%s",
    bigint="BIGINT",
    text='TEXT COLLATE "C"',
    blob="BYTEA",
    table_options="",
    lock_run=" FOR UPDATE",
    lock_run_skip=" FOR UPDATE SKIP LOCKED",
    now_sql="SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint",
    seq_column="seq BIGSERIAL, ",
    seq_order="seq",
    table_exists_sql=("SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema() "
                      "AND table_name = ?"),
    column_exists_sql=("SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
                       "AND table_name = ? AND column_name = ?"),
)


def redact_url(url: str) -> str:
    """``host:port/database`` of a URL, without user or password."""
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    port = parts.port or 5432
    return f"{host}:{port}{parts.path or '/'}"


class _Row:
    """A result row readable by column name and by position (like ``sqlite3.Row``)."""

    __slots__ = ("_values", "_index")

    def __init__(self, values: tuple, index: dict[str, int]) -> None:
        self._values = values
        self._index = index

    def __getitem__(self, key: int | str) -> Any:
        if isinstance(key, str):
            value = self._values[self._index[key]]
        else:
            value = self._values[key]
        return bytes(value) if isinstance(value, memoryview) else value

    def __len__(self) -> int:
        return len(self._values)

    def __iter__(self):
        return iter(self[i] for i in range(len(self._values)))

    def keys(self) -> list[str]:
        return list(self._index)


class _RowFactory:
    """Rows of one statement: the column index is read from the first result and kept (a
    statement's columns never change), saving psycopg's per-result column objects."""

    __slots__ = ("index",)

    def __init__(self) -> None:
        self.index: dict[str, int] | None = None

    def __call__(self, cursor: Any) -> Callable[[tuple], _Row]:
        index = self.index
        if index is None:
            result = cursor.pgresult
            index = self.index = ({result.fname(i).decode(): i for i in range(result.nfields)}
                                  if result is not None else {})
        return lambda values: _Row(values, index)


class PostgresBackend(SqlBackend):
    kind = "postgresql"
    dialect = POSTGRES

    def __init__(self, url: str, *, clock: Callable[[], int] | None = None, min_size: int = 1,
                 max_size: int = 10, connect_timeout_s: float = 5.0, pool_timeout_s: float = 3.0) -> None:
        super().__init__(clock=clock)
        ConnectionPool = psycopg_pool.ConnectionPool

        self.url = url
        self.connect_timeout_s = connect_timeout_s
        self.pool_timeout_s = pool_timeout_s
        self._check_reachable()
        self.pool = ConnectionPool(
            url, min_size=min_size, max_size=max_size, timeout=pool_timeout_s, open=True,
            kwargs={"autocommit": True, "connect_timeout": max(1, int(connect_timeout_s)),
                    "application_name": "txcl"},
            reconnect_timeout=0,  # keep trying while the server is away; never give the pool up
            name="txcl",
        )
        self._factories: dict[str, _RowFactory] = {}
        self._checking = False
        self._checking_lock = threading.Lock()
        self._pipelines: dict[int, tuple[Any, Any]] = {}  # connection id -> (context, pipeline) while writing
        self._offset_ms = 0.0  # the server's clock minus this node's, in ms
        self._offset_at = float("-inf")  # time.monotonic() of the last measurement
        self._listen_thread: threading.Thread | None = None
        self._listen_stop = threading.Event()
        self._listen_conn: Any = None

    def describe(self) -> str:
        return redact_url(self.url)

    def _check_reachable(self) -> None:
        """One direct connection first, so a server that is down or refuses us is reported with
        its own reason instead of a pool timeout."""
        import psycopg

        try:
            with psycopg.connect(self.url, connect_timeout=max(1, int(self.connect_timeout_s)), autocommit=True):
                pass
        except psycopg.Error as exc:
            reason = " ".join(str(exc).split()) or type(exc).__name__
            raise StoreUnavailable(f"cannot connect to PostgreSQL at {self.describe()}: {reason}") from exc

    # ------------------------------------------------------------------ the database clock
    CLOCK_REFRESH_S = 5.0

    def _tx_now(self, conn: Any) -> int:
        if self.clock is not None:
            return int(self.clock())
        if time.monotonic() - self._offset_at > self.CLOCK_REFRESH_S:
            before = time.time()
            server_ms = self._execute(conn, POSTGRES.now_sql or "", ()).fetchone()[0]
            after = time.time()
            self._offset_ms = server_ms - (before + after) * 500.0
            self._offset_at = time.monotonic()
        return int(time.time() * 1000 + self._offset_ms)

    # ------------------------------------------------------------------ primitives
    def _execute(self, conn: Any, sql: str, params: tuple) -> Any:
        factory = self._factories.get(sql)
        if factory is None:
            factory = self._factories.setdefault(sql, _RowFactory())
        cursor = conn.cursor(row_factory=factory)
        cursor.execute(sql, params)
        open_pipeline = self._pipelines.get(id(conn))
        if open_pipeline is not None:
            open_pipeline[1].sync()  # its answer (and the errors of everything sent before it) now
        return cursor

    def _send(self, conn: Any, sql: str, params: tuple) -> None:
        conn.execute(sql, params)

    def _execute_many(self, conn: Any, sql: str, rows: list[tuple]) -> None:
        with conn.cursor() as cursor:
            cursor.executemany(sql, rows)

    def _checkout(self) -> Any:
        from psycopg_pool import PoolTimeout

        try:
            return self.pool.getconn()
        except PoolTimeout as exc:
            raise StoreUnavailable(f"PostgreSQL at {self.describe()} is unavailable: no connection "
                                   f"within {self.pool_timeout_s:g} s") from exc

    def _checkin(self, conn: Any, healthy: bool) -> None:
        if not healthy and not conn.closed:
            try:
                conn.close()
            except Exception:  # noqa: BLE001
                pass
        self.pool.putconn(conn)
        if conn.closed:  # the server went away (or restarted): its other idle connections are dead too
            self._replace_idle_connections()

    def _replace_idle_connections(self) -> None:
        """Check the pool's idle connections in the background (never on the caller's time:
        with the server away, reconnecting waits for the connect timeout)."""
        with self._checking_lock:
            if self._checking:
                return
            self._checking = True

        def check() -> None:
            try:
                self.pool.check()
            except Exception:  # noqa: BLE001 - the pool keeps reconnecting on its own
                pass
            finally:
                with self._checking_lock:
                    self._checking = False

        threading.Thread(target=check, name="txcl-pg-check", daemon=True).start()

    _checkout_write = _checkout
    _checkout_read = _checkout
    _checkin_write = _checkin
    _checkin_read = _checkin

    def _begin(self, conn: Any) -> None:
        context = conn.pipeline()
        self._pipelines[id(conn)] = (context, context.__enter__())
        conn.execute("BEGIN")

    # How long a batch's statement waits for a lock another transaction holds. A call of
    # another node holds a run's row for a few milliseconds; a batch still waiting after this
    # long is most likely waiting for a batch that waits for it (and the node's store lane
    # waits with it).
    BATCH_LOCK_WAIT_MS = 50

    def _limit_lock_waits(self, conn: Any) -> None:
        conn.execute(f"SET LOCAL lock_timeout = {int(self.BATCH_LOCK_WAIT_MS)}")  # ms; sent with the next statement

    def _end_pipeline(self, conn: Any, *, quiet: bool) -> None:
        open_pipeline = self._pipelines.pop(id(conn), None)
        if open_pipeline is None:
            return
        try:
            open_pipeline[0].__exit__(None, None, None)  # sends what is queued and waits for it
        except Exception:  # noqa: BLE001
            if not quiet:
                raise

    def _commit(self, conn: Any) -> None:
        conn.execute("COMMIT")
        self._end_pipeline(conn, quiet=False)

    def _rollback(self, conn: Any) -> None:
        self._end_pipeline(conn, quiet=True)
        if self._in_transaction(conn):
            conn.execute("ROLLBACK")

    def _in_transaction(self, conn: Any) -> bool:
        from psycopg.pq import TransactionStatus

        if id(conn) in self._pipelines:
            return True
        return conn.info.transaction_status in (TransactionStatus.INTRANS, TransactionStatus.INERROR)

    def _usable(self, conn: Any) -> bool:
        from psycopg.pq import TransactionStatus

        return not conn.closed and conn.info.transaction_status == TransactionStatus.IDLE

    def translate(self, exc: BaseException) -> StoreError | None:
        import psycopg

        if not isinstance(exc, psycopg.Error):
            return None
        reason = " ".join(str(exc).split()) or type(exc).__name__
        if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)) or self.retryable(exc):
            return StoreUnavailable(f"PostgreSQL at {self.describe()} is unavailable: {reason}")
        return StoreError(f"PostgreSQL at {self.describe()} refused an operation: {reason}")

    def retryable(self, exc: BaseException) -> bool:
        import psycopg
        from psycopg import errors

        if isinstance(exc, (errors.SerializationFailure, errors.DeadlockDetected, errors.LockNotAvailable)):
            return True
        # a lost connection (server restart, pg_terminate_backend, network): nothing of an
        # uncommitted transaction survives it; transact() never retries a failed COMMIT
        return isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError))

    def lock_key(self, tx: Tx, key: str) -> None:
        tx.one("SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", (key,))

    def notify_in_tx(self, tx: Tx, run_id: str) -> None:
        tx.send("SELECT pg_notify(?, ?)", (CHANNEL, run_id))  # delivered at the commit; no answer needed

    def vacuum(self) -> None:
        conn = self._checkout()
        healthy = True
        try:
            conn.execute("VACUUM (ANALYZE)")
        except psycopg.Error as exc:
            healthy = self._usable(conn)
            raise self.translate(exc) or StoreError(str(exc)) from exc
        finally:
            self._checkin(conn, healthy)

    # ------------------------------------------------------------------ LISTEN
    def subscribe(self, listener: Any) -> None:
        super().subscribe(listener)
        if self._listen_thread is None:
            self._listen_stop.clear()
            self._listen_thread = threading.Thread(target=self._listen, name="txcl-pg-listen", daemon=True)
            self._listen_thread.start()

    def _listen(self) -> None:
        """Deliver other nodes' notices; after a reconnect, announce ``None`` (anything may
        have changed while we were not listening)."""
        import psycopg

        first = True
        while not self._listen_stop.is_set():
            try:
                conn = psycopg.connect(self.url, autocommit=True, connect_timeout=max(1, int(self.connect_timeout_s)))
            except psycopg.Error:
                self._listen_stop.wait(1.0)
                continue
            self._listen_conn = conn
            try:
                conn.execute(f"LISTEN {CHANNEL}")
                if not first:
                    self._announce([None])
                first = False
                while not self._listen_stop.is_set():
                    for notice in conn.notifies(timeout=1.0):
                        self._announce([notice.payload or None])
            except psycopg.Error:
                if not self._listen_stop.is_set():
                    log.info("txcl: lost the PostgreSQL notification connection; reconnecting")
                    time.sleep(0.2)
            finally:
                self._listen_conn = None
                try:
                    conn.close()
                except Exception:  # noqa: BLE001
                    pass

    def close(self) -> None:
        self._listen_stop.set()
        thread, self._listen_thread = self._listen_thread, None
        if thread is not None:
            thread.join(timeout=3)
        try:
            self.pool.close()
        except Exception:  # noqa: BLE001
            pass


__all__ = ["PostgresBackend", "POSTGRES", "redact_url"]
