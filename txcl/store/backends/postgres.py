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
- Statements go through libpq directly (``txcl.store.backends.pq_exec``), not psycopg's
  cursors, and are prepared once per connection. Inside a write transaction, statements
  whose result is not needed (``BEGIN``, savepoints, ``tx.send``, ``tx.many``) are queued and
  travel in one pipeline with the next statement that waits, which saves most round trips.
- A deadlock, a serialization failure, or a connection lost before ``COMMIT`` was sent is
  retried from the start (nothing was applied); a connection lost *during* ``COMMIT`` is
  reported as :class:`StoreUnavailable` (the change may have been applied; every procedure
  is safe to repeat). A server that cannot be reached is :class:`StoreUnavailable` too.
- A prepared statement the server refuses because it must be prepared again (another
  node's migration changed its result, or the server lost it) makes the call repeat and
  every connection prepare its statements again.
- Each pooled connection ends a transaction left idle for a minute (a node stopped with rows
  locked), uses TCP keepalives and a user timeout (a vanished server is noticed within about
  a minute), and is refused when its server accepts no writes (a standby after a failover)
  unless the backend was opened on such a server, to read from it.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from typing import Any, Callable, Sequence
from urllib.parse import urlsplit

import psycopg  # the 'postgres' extra: txcl.store.open_backend reports it missing
import psycopg_pool

from txcl.store.backend import Dialect, SqlBackend, Tx
from txcl.store.backends import pq_exec
from txcl.store.errors import StoreError, StoreUnavailable

log = logging.getLogger("txcl.store")
# the pool logs every failed reconnection attempt; an outage is reported once per failed call
logging.getLogger("psycopg.pool").setLevel(logging.ERROR)

CHANNEL = "txcl_runs"

POSTGRES = Dialect(
    name="postgresql",
    placeholder="$n",
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


def _read_only(conn: Any) -> bool:
    """Whether the server of `conn` refuses writes (a hot standby, or read-only by default),
    as libpq's `target_session_attrs=read-write` tells."""
    return conn.execute("SHOW transaction_read_only").fetchone()[0] == "on"


def redact_url(url: str) -> str:
    """``host:port/database`` of a URL, without user or password."""
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    port = parts.port or 5432
    return f"{host}:{port}{parts.path or '/'}"


# How long a node may keep a write transaction open without sending anything. txcl's own
# transactions take milliseconds: one idle this long belongs to a node that stopped with its
# runs' rows locked (its process frozen, its machine cut off from the database), and the
# server ends that session so the other nodes' work on those runs goes on.
IDLE_IN_TRANSACTION_TIMEOUT_S = 60.0

# libpq's TCP settings: a server that vanished (its machine gone, the network cut) is noticed
# within about a minute — keepalives on an idle connection, `tcp_user_timeout` on a statement
# sent but never acknowledged — instead of after the system's default of many minutes, during
# which a node's store calls would hang.
TCP_SETTINGS: dict[str, int] = {"keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10,
                                "keepalives_count": 3}
if psycopg.pq.version() >= 120000:  # libpq 12 or later knows it (an older one refuses to connect)
    TCP_SETTINGS["tcp_user_timeout"] = 60_000


class PostgresBackend(SqlBackend):
    kind = "postgresql"
    dialect = POSTGRES

    def __init__(self, url: str, *, clock: Callable[[], int] | None = None, min_size: int = 1,
                 max_size: int = 10, connect_timeout_s: float = 5.0, pool_timeout_s: float = 3.0,
                 idle_in_transaction_timeout_s: float = IDLE_IN_TRANSACTION_TIMEOUT_S) -> None:
        """`idle_in_transaction_timeout_s`: see `IDLE_IN_TRANSACTION_TIMEOUT_S` (0: the
        server's own setting)."""
        super().__init__(clock=clock)
        ConnectionPool = psycopg_pool.ConnectionPool

        self.url = url
        self.connect_timeout_s = connect_timeout_s
        self.pool_timeout_s = pool_timeout_s
        self.idle_in_transaction_timeout_s = idle_in_transaction_timeout_s
        self._sql_cache: dict[str, bytes] = {}  # `?` statement -> its `$n` bytes
        self._columns = pq_exec.Columns()
        # each connection's prepared statements, forgotten with the connection
        self._prepared: weakref.WeakKeyDictionary[Any, pq_exec.Prepared] = weakref.WeakKeyDictionary()
        # Moved on each time the server refuses a prepared statement that must be prepared
        # again (another node's migration changed its result, or the server lost it): every
        # connection then drops its prepared statements before its next transaction or
        # read, and prepares them again as they are used.
        self._plans_generation = 0
        self._plans_warned_at = float("-inf")  # time.monotonic() of the last warning about it
        self._read_only_warned_at = float("-inf")
        self.started_read_only = False
        self._checking = False
        self._checking_lock = threading.Lock()
        self._queues: dict[int, pq_exec.Queue] = {}  # connection id -> statements not yet sent, while writing
        self._offset_ms = 0.0  # the server's clock minus this node's, in ms
        self._offset_at = float("-inf")  # time.monotonic() of the last measurement
        self._listen_thread: threading.Thread | None = None
        self._listen_stop = threading.Event()
        self._listen_conn: Any = None
        # last: the pool starts connecting (and calling `_configure`) at once
        self._check_reachable()
        self.pool = ConnectionPool(
            url, min_size=min_size, max_size=max_size, timeout=pool_timeout_s, open=True,
            kwargs={"autocommit": True, "connect_timeout": max(1, int(connect_timeout_s)),
                    "application_name": "txcl", **TCP_SETTINGS},
            configure=self._configure,
            reconnect_timeout=0,  # keep trying while the server is away; never give the pool up
            name="txcl",
        )

    def describe(self) -> str:
        return redact_url(self.url)

    def _configure(self, conn: Any) -> None:
        """Session settings of a new pooled connection. A connection to a server that accepts
        no writes (after a failover the address may still lead to the old primary, now a
        standby) is refused, so the pool keeps trying until it reaches one that does — unless
        the backend was opened on such a server (`started_read_only`)."""
        if not self.started_read_only and _read_only(conn):
            now = time.monotonic()
            if now - self._read_only_warned_at >= self.WARNING_INTERVAL_S:
                self._read_only_warned_at = now
                log.warning("txcl: %s; waiting for a writable server", self._read_only_message())
            raise psycopg.OperationalError(self._read_only_message())
        if self.idle_in_transaction_timeout_s > 0:
            ms = max(1, int(self.idle_in_transaction_timeout_s * 1000))
            conn.execute(f"SET idle_in_transaction_session_timeout = {ms}")

    def _check_reachable(self) -> None:
        """One direct connection first, so a server that is down or refuses us is reported with
        its own reason instead of a pool timeout."""
        try:
            with psycopg.connect(self.url, connect_timeout=max(1, int(self.connect_timeout_s)), autocommit=True) as conn:
                read_only = _read_only(conn)
        except psycopg.Error as exc:
            reason = " ".join(str(exc).split()) or type(exc).__name__
            raise StoreUnavailable(f"cannot connect to PostgreSQL at {self.describe()}: {reason}") from exc
        # A server that accepts no writes at the start is taken as meant (a standby, to read
        # from): reads work and a write is refused with the reason. One that turns read-only
        # later is a failover, and the pool waits for a writable server (`_configure`).
        self.started_read_only = read_only

    def _read_only_message(self) -> str:
        return (f"PostgreSQL at {self.describe()} accepts no writes (a standby, or default_transaction_read_only "
                f"is on): txcl needs a server it can write to — the primary, or several hosts in the URL with "
                f"target_session_attrs=read-write")

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
    def sql(self, text: str) -> bytes:  # type: ignore[override]
        """``?`` placeholders numbered ``$1, $2, …``, as the bytes libpq takes (cached)."""
        cached = self._sql_cache.get(text)
        if cached is None:
            first, *rest = text.split("?")
            cached = (first + "".join(f"${i}{part}" for i, part in enumerate(rest, 1))).encode("utf-8")
            if len(self._sql_cache) < 4096:
                self._sql_cache[text] = cached
        return cached

    def _execute(self, conn: Any, sql: Any, params: tuple) -> pq_exec.Result:
        if type(sql) is not bytes:
            sql = self.sql(sql)
        prepared = self._prepared_on(conn)
        queue = self._queues.get(id(conn))
        if queue is not None:
            return queue.run(conn.pgconn, sql, params, self._columns, prepared)
        return pq_exec.execute(conn.pgconn, sql, params, self._columns, prepared)

    def _execute_all(self, conn: Any, statements: list[tuple[Any, tuple]]) -> list[list[Any]]:
        queue = self._queues.get(id(conn)) or pq_exec.Queue()  # a read: a queue of its own
        return [result.rows for result in queue.run_all(conn.pgconn, statements, self._columns,
                                                        self._prepared_on(conn))]

    def _prepared_on(self, conn: Any) -> pq_exec.Prepared:
        """The statements prepared on `conn` so far (a registry made at its first use). One
        of an older plan generation is dropped first, unless a transaction is under way on
        `conn` (its statements may already be queued under their names)."""
        prepared = self._prepared.get(conn)
        if prepared is None:
            prepared = self._prepared[conn] = pq_exec.Prepared(self._plans_generation)
        elif prepared.generation != self._plans_generation and id(conn) not in self._queues:
            prepared = self._forget_plans(conn)
        return prepared

    def _forget_plans(self, conn: Any) -> pq_exec.Prepared:
        """Drop every statement prepared on `conn` (on the server too: the names are reused)."""
        generation = self._plans_generation
        pq_exec.execute(conn.pgconn, b"DEALLOCATE ALL", (), self._columns)
        prepared = self._prepared[conn] = pq_exec.Prepared(generation)
        return prepared

    def _send(self, conn: Any, sql: Any, params: tuple) -> None:
        if type(sql) is not bytes:
            sql = self.sql(sql)
        queue = self._queues.get(id(conn))
        if queue is not None:
            queue.add(sql, params)
        else:
            self._execute(conn, sql, params)

    def _execute_many(self, conn: Any, sql: Any, rows: list[tuple]) -> None:
        for row in rows:
            self._send(conn, sql, row)

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
        self._prepared_on(conn)  # statements of an older plan generation dropped before the queue starts
        queue = self._queues[id(conn)] = pq_exec.Queue()
        queue.add(b"BEGIN", ())  # sent with the transaction's first statement that waits

    # How long a batch's statement waits for a lock another transaction holds. A call of
    # another node holds a run's row for a few milliseconds; a batch still waiting after this
    # long is most likely waiting for a batch that waits for it (and the node's store lane
    # waits with it).
    BATCH_LOCK_WAIT_MS = 50

    def _lock_runs_in_order(self, conn: Any, run_ids: Sequence[str]) -> None:
        # sent with the next statement; waiting here cannot be part of a circle with another
        # batch that locks its runs the same way, so it happens before the lock timeout is set.
        # One statement per run, in the order of the column's "C" collation (code points, as
        # Python sorts strings): a statement for them all (`run_id = ANY(…)`) kept the plan
        # made while the table was new and small — a scan of the whole table, which costs more
        # than the rest of a batch's statements as the table grows until it is analyzed.
        for run_id in sorted(set(run_ids)):
            self._send(conn, "SELECT 1 FROM runs WHERE run_id = ?" + self.dialect.lock_run, (run_id,))

    def _limit_lock_waits(self, conn: Any) -> None:
        self._send(conn, f"SET LOCAL lock_timeout = {int(self.BATCH_LOCK_WAIT_MS)}", ())  # ms; sent with the next statement

    def _before_commit(self, conn: Any) -> None:
        # statements still queued go now, waited for: should the connection be gone (killed
        # after the last statement that waited), it shows here rather than at the COMMIT
        queue = self._queues.get(id(conn))
        if queue is not None and queue.pending:
            queue.run_all(conn.pgconn, [], self._columns, self._prepared_on(conn))

    def _commit(self, conn: Any) -> None:
        queue = self._queues.pop(id(conn), None)
        if queue is None:  # pragma: no cover - commit without begin
            raise psycopg.InterfaceError("COMMIT outside a transaction")
        queue.run(conn.pgconn, b"COMMIT", (), self._columns, self._prepared_on(conn))  # with everything still queued

    def _rollback(self, conn: Any) -> None:
        self._queues.pop(id(conn), None)  # never sent: nothing to undo on the server
        if not conn.closed and self._server_in_transaction(conn):
            pq_exec.execute(conn.pgconn, b"ROLLBACK", (), self._columns)

    def _in_transaction(self, conn: Any) -> bool:
        return id(conn) in self._queues or self._server_in_transaction(conn)

    @staticmethod
    def _server_in_transaction(conn: Any) -> bool:
        from psycopg.pq import TransactionStatus

        return conn.pgconn.transaction_status in (TransactionStatus.INTRANS, TransactionStatus.INERROR)

    def _usable(self, conn: Any) -> bool:
        from psycopg.pq import TransactionStatus

        return not conn.closed and conn.info.transaction_status == TransactionStatus.IDLE

    def translate(self, exc: BaseException) -> StoreError | None:
        if not isinstance(exc, psycopg.Error):
            return None
        reason = " ".join(str(exc).split()) or type(exc).__name__
        if getattr(exc, "sqlstate", None) == "25006":  # read_only_sql_transaction: a write on a standby
            return StoreUnavailable(self._read_only_message())
        if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)) or self._transient(exc):
            return StoreUnavailable(f"PostgreSQL at {self.describe()} is unavailable: {reason}")
        return StoreError(f"PostgreSQL at {self.describe()} refused an operation: {reason}")

    def retryable(self, exc: BaseException) -> bool:
        """A transient failure, or a prepared statement the server refused because it must be
        prepared again (another node's migration added or dropped a column it reads, or the
        server no longer has it): then every connection prepares its statements again, and
        the call is repeated."""
        if pq_exec.is_stale_plan(exc):
            self._plans_generation += 1
            self._warn_stale_plans(exc)
            return True
        return self._transient(exc)

    def refused_before_commit(self, exc: BaseException) -> bool:
        # queued statements go with the COMMIT in one pipeline: one the server refused for a
        # plan to prepare again ended the pipeline there, before the COMMIT ran
        return pq_exec.is_stale_plan(exc)

    WARNING_INTERVAL_S = 60.0

    def _warn_stale_plans(self, exc: BaseException) -> None:
        """Log the refusal (at most once a minute): once after a migration is expected; again
        and again means something keeps dropping the connections' prepared statements, such as
        a pooler in transaction mode without prepared-statement support."""
        now = time.monotonic()
        if now - self._plans_warned_at < self.WARNING_INTERVAL_S:
            return
        self._plans_warned_at = now
        reason = " ".join(str(exc).split()) or type(exc).__name__
        log.warning("txcl: PostgreSQL at %s refused a prepared statement (%s); preparing the statements "
                    "again. Expected once after a migration; if it repeats, see 'Sizing' in the deploy docs "
                    "(PgBouncer).", self.describe(), reason)

    @staticmethod
    def _transient(exc: BaseException) -> bool:
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
        """Deliver other nodes' notices; each time LISTEN takes hold, announce ``None``."""
        while not self._listen_stop.is_set():
            try:
                conn = psycopg.connect(self.url, autocommit=True, connect_timeout=max(1, int(self.connect_timeout_s)),
                                       **TCP_SETTINGS)
            except psycopg.Error:
                self._listen_stop.wait(1.0)
                continue
            self._listen_conn = conn
            try:
                conn.execute(f"LISTEN {CHANNEL}")
                # anything may have changed before we listened (the first time too: a waiter
                # that subscribed a moment ago must not miss a commit made while we connected)
                self._announce([None])
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

