"""The port the store's procedures are written against, and what every backend shares.

Every procedure of the store (continuations, traces, kv) is written once as a function of a
:class:`Tx`: one transaction on one connection, with a handful of query helpers, the
database clock (``tx.now``), the run lock (``tx.lock_run``), a key lock, run-change notices
and fault points. A backend is a subclass of :class:`SqlBackend` that supplies connections,
``BEGIN``/``COMMIT``, the clock and the translation of its driver's errors; the shared code
here turns those into

- ``transact(fn)``: one write transaction running ``fn(tx)``, retried from the start when
  the database says the attempt was harmless to repeat (a deadlock, a serialization failure,
  a connection lost before ``COMMIT`` was sent); fault points and notices only after the
  commit;
- ``run_batch(calls)``: several independent procedures in one transaction (group commit). A
  call that raises is rolled back alone; should the transaction itself break, every call is
  run again on its own, exactly as without batching. The calls first run without savepoints
  (a savepoint makes the database keep a copy of every page the call changes: 5–10 % of a
  durable cycle's CPU): should one raise, the transaction is rolled back and the batch run
  again with a savepoint per call. Where writers run in parallel
  (PostgreSQL), a batch first locks the runs its calls name, in run id order
  (``lock_first``), so two batches that name their runs never wait for each other in a
  circle; after that it waits for a row lock only briefly (``_limit_lock_waits``): a call
  that names no run may lock rows in any order, and two nodes' batches could each wait for
  the other (the server would find the deadlock only after a second); a wait cut short
  breaks the batch and its calls run on their own;
- ``read(fn)``: statements outside any write transaction.

SQL is written once with ``?`` placeholders; :class:`Dialect` holds the few spellings that
differ between SQLite and PostgreSQL (placeholders, column types, the row-lock clauses).
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence, TypeVar

from txcl import metrics as _metrics
from txcl.store.errors import StoreError, StoreUnavailable
from txcl.testing.faults import enabled as faults_enabled
from txcl.testing.faults import fault_point

T = TypeVar("T")
Params = Sequence[Any]
RunListener = Callable[["str | None"], None]  # a run id, or None: "anything may have changed"


@dataclass(frozen=True)
class Dialect:
    """The SQL spellings that differ between backends."""

    name: str
    placeholder: str  # what ``?`` becomes
    bigint: str  # a 64-bit integer column
    text: str  # a text column that compares and sorts byte by byte (as Python sorts str)
    blob: str  # a byte string column
    table_options: str  # after a CREATE TABLE's closing parenthesis
    lock_run: str  # appended to ``SELECT * FROM runs WHERE run_id = ?``
    lock_run_skip: str  # the same, skipping a row another transaction holds
    now_sql: str | None  # the database clock in ms (None: the local clock is the database's)
    seq_column: str  # an insertion-order column a table declares ("" where every row has one)
    seq_order: str  # how to order rows by insertion
    table_exists_sql: str  # one row when the table named by the parameter exists
    column_exists_sql: str  # one row when the table (first parameter) has the column (second)
    index_hint: str = ""  # after a table name: make the planner use index {} (SQLite's planner needs it
    # for partial indexes it would pass over for the primary key)

    def using_index(self, name: str) -> str:
        """The hint that makes a query read a table through index `name` ("" where the planner
        finds it alone)."""
        return self.index_hint.format(name) if self.index_hint else ""

    def ddl(self, text: str) -> str:
        """A DDL statement with ``{bigint}``, ``{blob}``, ``{seq}`` and ``{table}`` filled in, and
        every ``TEXT`` column in the dialect's byte-order spelling."""
        filled = text.format(bigint=self.bigint, blob=self.blob, seq=self.seq_column, table=self.table_options)
        return re.sub(r"\bTEXT\b", self.text, filled) if self.text != "TEXT" else filled


class Tx:
    """One transaction (or savepoint, or read) on one connection."""

    __slots__ = ("backend", "conn", "now", "fired", "notices")

    def __init__(self, backend: "SqlBackend", conn: Any, now: int) -> None:
        self.backend = backend
        self.conn = conn
        self.now = now
        self.fired: list[str] = []  # fault points reached, marked after the commit
        self.notices: list[str] = []  # runs whose state changed, announced after the commit

    def all(self, sql: str, params: Params = ()) -> list[Any]:
        return self.backend.execute(self.conn, sql, params).fetchall()

    def one(self, sql: str, params: Params = ()) -> Any:
        return self.backend.execute(self.conn, sql, params).fetchone()

    def run(self, sql: str, params: Params = ()) -> int:
        """Execute; the number of rows changed."""
        return self.backend.execute(self.conn, sql, params).rowcount

    def send(self, sql: str, params: Params = ()) -> None:
        """Execute a statement whose result is not needed. A backend may send it without
        waiting for the answer (PostgreSQL pipelines it with the next statement); its error,
        if any, surfaces at the next statement that waits, inside the same transaction."""
        self.backend.send(self.conn, sql, params)

    def read_many(self, *statements: tuple[str, Params]) -> list[list[Any]]:
        """The rows of each of several reads that do not depend on one another's answers,
        in order. A backend may send them together (PostgreSQL: one round trip)."""
        return self.backend.execute_all(self.conn, list(statements))

    def returning(self, sql: str, params: Params = ()) -> list[Any]:
        """Execute an ``INSERT/UPDATE … RETURNING``; the returned rows."""
        return self.backend.execute(self.conn, sql, params).fetchall()

    def many(self, sql: str, rows: Iterable[Params]) -> None:
        rows = list(rows)
        if rows:
            self.backend.execute_many(self.conn, sql, rows)

    def lock_run(self, run_id: str, *, skip_locked: bool = False) -> Any:
        """The run's row, locked for the rest of the transaction (every write to a run's
        records takes this lock first, so work on one run is serialised and the lock order is
        always the same). None when there is no such run — or, with ``skip_locked``, when
        another transaction holds it (the sweeper leaves such a run to its holder)."""
        dialect = self.backend.dialect
        suffix = dialect.lock_run_skip if skip_locked else dialect.lock_run
        return self.one("SELECT * FROM runs WHERE run_id = ?" + suffix, (run_id,))

    def lock_run_reading(self, run_id: str, *reads: tuple[str, Params]) -> tuple[Any, list[list[Any]]]:
        """``lock_run``, and `reads` made after the lock is held, sent together with it (one
        round trip on PostgreSQL): (the run's row or None, each read's rows)."""
        found = self.read_many(("SELECT * FROM runs WHERE run_id = ?" + self.backend.dialect.lock_run, (run_id,)),
                               *reads)
        return (found[0][0] if found[0] else None), found[1:]

    def lock_run_of(self, table: str, key: str, value: str, *, skip_locked: bool = False) -> Any:
        """``lock_run`` for the run that owns a row of `table` (an interaction by ``opc``, a unit
        by ``unit_id``), found and locked in one statement."""
        return self.one(self._run_of(table, key, skip_locked), (value,))

    def _run_of(self, table: str, key: str, skip_locked: bool = False) -> str:
        """The statement that locks the run owning a row of `table`."""
        dialect = self.backend.dialect
        suffix = dialect.lock_run_skip if skip_locked else dialect.lock_run
        return f"SELECT * FROM runs WHERE run_id = (SELECT run_id FROM {table} WHERE {key} = ?)" + suffix

    def lock_run_of_reading(self, table: str, key: str, value: str,
                            *reads: tuple[str, Params]) -> tuple[Any, list[list[Any]]]:
        """``lock_run_of``, and `reads` made after the lock is held, sent together with it
        (one round trip on PostgreSQL): (the run's row or None, each read's rows). The reads
        must not depend on the run's row (they name what they read by `value`)."""
        found = self.read_many((self._run_of(table, key), (value,)), *reads)
        return (found[0][0] if found[0] else None), found[1:]

    def lock_key(self, key: str) -> None:
        """Serialise transactions on an arbitrary key (kv read-modify-writes)."""
        self.backend.lock_key(self, key)

    def notify_run(self, run_id: str) -> None:
        """Announce after the commit that the run changed (long polls wake up, on every node)."""
        if run_id not in self.notices:
            self.notices.append(run_id)
            self.backend.notify_in_tx(self, run_id)

    def fault(self, point: str) -> None:
        """A fault point reached by this transaction (marked once it has committed)."""
        self.fired.append(point)


class _Batch(threading.local):
    """The batch transaction open on this thread (see ``SqlBackend.run_batch``)."""

    conn: Any = None
    fired: list[str] | None = None
    notices: list[str] | None = None
    broken = False
    bare = False  # calls run without savepoints (see ``SqlBackend.run_batch``)
    redo = False  # a call raised while bare: run the batch again, a savepoint per call


@dataclass
class _Counters:
    commits: int = 0
    retries: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class SqlBackend:
    """What every backend shares (see the module docstring). Subclasses implement the
    primitives below the line."""

    dialect: Dialect
    kind: str = "sql"
    serialises_writers = False  # one write transaction at a time for the whole database
    max_attempts = 4  # of one transaction, when the database says a retry is safe

    def __init__(self, *, clock: Callable[[], int] | None = None) -> None:
        self.clock = clock
        self._batch = _Batch()
        self._counters = _Counters()
        self._batch_broken_at = float("-inf")  # time.monotonic() a batch of several calls last broke
        self._listeners: list[RunListener] = []

    # ------------------------------------------------------------------ SQL
    def sql(self, text: str) -> Any:
        """A statement as the driver takes it. SQL is written with ``?`` placeholders, which
        SQLite takes as they are; a backend whose driver spells them otherwise overrides
        this (PostgreSQL: ``$1, $2, …``, as bytes)."""
        return text

    # execute and send run for every statement (about fifty per durable cycle): the
    # placeholder rewrite and the error translation are written out in each instead of going
    # through sql() and _translating(), two calls fewer per statement.
    def execute(self, conn: Any, sql: str, params: Params = ()) -> Any:
        if self.dialect.placeholder != "?":
            sql = self.sql(sql)
        try:
            return self._execute(conn, sql, params if type(params) is tuple else tuple(params))
        except StoreError:
            raise
        except Exception as exc:  # noqa: BLE001 - a driver error, translated
            self._raise_translated(exc)
            raise

    def send(self, conn: Any, sql: str, params: Params = ()) -> None:
        if self.dialect.placeholder != "?":
            sql = self.sql(sql)
        try:
            self._send(conn, sql, params if type(params) is tuple else tuple(params))
        except StoreError:
            raise
        except Exception as exc:  # noqa: BLE001 - a driver error, translated
            self._raise_translated(exc)
            raise

    def execute_all(self, conn: Any, statements: list[tuple[str, Params]]) -> list[list[Any]]:
        """Each statement's rows (see ``Tx.read_many``)."""
        prepared = [(self.sql(sql), tuple(params)) for sql, params in statements]
        return self._translating(self._execute_all, conn, prepared)

    def _execute_all(self, conn: Any, statements: list[tuple[Any, tuple]]) -> list[list[Any]]:
        """Default: one after another."""
        return [self._execute(conn, sql, params).fetchall() for sql, params in statements]

    def execute_many(self, conn: Any, sql: str, rows: list[Params]) -> None:
        self._translating(self._execute_many, conn, self.sql(sql), [tuple(r) for r in rows])

    def _translating(self, call: Callable[..., T], *args: Any) -> T:
        """`call(*args)` with the driver's exceptions turned into store errors."""
        try:
            return call(*args)
        except StoreError:
            raise
        except Exception as exc:  # noqa: BLE001 - a driver error, translated
            self._raise_translated(exc)
            raise

    def _raise_translated(self, exc: Exception) -> None:
        """Raise the store error a driver's exception stands for (returns when there is none:
        the caller re-raises the original)."""
        translated = self.translate(exc)
        if translated is not None:
            raise translated from exc

    # ------------------------------------------------------------------ clock
    def now_ms(self) -> int:
        """The database clock in ms since the epoch (or the injected test clock)."""
        if self.clock is not None:
            return int(self.clock())
        if self.dialect.now_sql is None:
            return int(time.time() * 1000)
        return self.read(lambda t: t.now)

    def _tx_now(self, conn: Any) -> int:
        if self.clock is not None:
            return int(self.clock())
        if self.dialect.now_sql is None:
            return int(time.time() * 1000)
        return int(self._execute(conn, self.dialect.now_sql, ()).fetchone()[0])

    # ------------------------------------------------------------------ transactions
    def transact(self, fn: Callable[[Tx], T]) -> T:
        """Run ``fn`` in one write transaction and commit (inside a batch: in the batch's)."""
        batch = self._batch
        if batch.conn is not None:
            return self._in_batch(batch, fn)
        attempt = 0
        recorder = _metrics.current
        while True:
            attempt += 1
            conn = self._checkout_write()
            committing = False
            healthy = True
            try:
                try:
                    started = time.perf_counter() if recorder.enabled else 0.0
                    self._begin(conn)
                    tx = Tx(self, conn, self._tx_now(conn))
                    result = fn(tx)
                    self._before_commit(conn)
                    committing = True
                    self._commit(conn)
                except BaseException as exc:
                    healthy = self._rollback_quietly(conn)
                    driver, translated = self._driver_error(exc)
                    if driver is not None and (not committing or self.refused_before_commit(driver)) \
                            and attempt < self.max_attempts and self.retryable(driver):
                        self._count_retry()
                        time.sleep(min(0.2, 0.005 * 2 ** attempt))
                        continue
                    if committing and isinstance(translated, StoreUnavailable):
                        raise StoreUnavailable(
                            f"{translated} (the connection was lost while committing: the change may or may "
                            f"not have been applied; repeating it is safe)") from exc
                    if translated is not None and translated is not exc:
                        raise translated from exc
                    raise
            finally:
                self._checkin_write(conn, healthy)
            if started:
                recorder.commit(time.perf_counter() - started)
            self._committed(tx.fired, tx.notices)
            return result

    def refused_before_commit(self, exc: BaseException) -> bool:
        """Whether `exc`, raised while committing, shows that nothing was applied: the server
        refused a statement sent along with the COMMIT, before the COMMIT ran, so the
        transaction may be repeated. (A connection lost while committing may have committed.)"""
        return False

    def _in_batch(self, batch: _Batch, fn: Callable[[Tx], T]) -> T:
        """A call of the batch open on this thread. Bare (``batch.bare``), it runs without a
        savepoint: should it raise, what it wrote cannot be undone alone, so the batch is marked
        to be run again with savepoints. Otherwise it runs in a savepoint of its own, rolled back
        alone when it raises. After a retryable driver error the batch is redone call by call,
        where the retry policy applies."""
        bare = batch.bare
        if bare and batch.redo:  # an earlier call raised and `fn` caught it: this attempt is given up
            raise _GivenUp("the batch runs again with savepoints")
        conn = batch.conn
        if not bare:
            # SAVEPOINT and RELEASE return nothing: sent without waiting for the answer where the
            # backend can (PostgreSQL pipelines them: two round trips fewer per call of a batch)
            self._send(conn, "SAVEPOINT txcl_call", ())
        tx = Tx(self, conn, self._tx_now(conn))
        try:
            result = fn(tx)
        except BaseException as exc:
            driver, _ = self._driver_error(exc)
            if driver is not None and self.retryable(driver):
                batch.broken = True
            if bare:
                batch.redo = True
                raise
            try:
                if self._in_transaction(conn):
                    self._execute(conn, "ROLLBACK TO SAVEPOINT txcl_call", ())
                    self._execute(conn, "RELEASE SAVEPOINT txcl_call", ())
                else:
                    batch.broken = True
            except Exception:  # noqa: BLE001 - the transaction is gone: redo call by call
                batch.broken = True
            raise
        if not bare:
            self._send(conn, "RELEASE SAVEPOINT txcl_call", ())
        if batch.fired is not None:
            batch.fired.extend(tx.fired)
        if batch.notices is not None:
            batch.notices.extend(tx.notices)
        return result

    def run_together(self, fn: Callable[[], T]) -> T:
        """Run `fn`, which makes several store calls in a row (each may use what the one before
        wrote), in ONE write transaction with one COMMIT. A call that raises rolls back its own
        writes only, so `fn` may catch it and the calls before it still commit (`fn` then runs
        again with a savepoint per call: see ``run_batch``). Inside a batch it simply joins the
        batch. When the transaction cannot be used (a retryable driver error, a lost
        connection), `fn` runs again with each call committing on its own, as if it were not
        grouped."""
        if self._batch.conn is not None:
            return fn()
        ok, value = self.run_batch([fn], together=True)[0]
        if not ok:
            raise value
        return value

    def run_batch(self, calls: Sequence[Callable[[], Any]], *, together: bool = False,
                  lock_first: Sequence[str] = ()) -> list[tuple[bool, Any]]:
        """Run independent store calls in ONE write transaction (see the module docstring);
        ``(True, result)`` or ``(False, exception)`` per call, in order. `lock_first`: the
        runs the calls write, locked before the first call in run id order (where writers
        run in parallel), so two batches that name their runs never wait for each other in
        a circle.

        The calls must not depend on one another's commit: nothing of a batch is visible
        outside before the common COMMIT, and callers act on a result only after it. Like a
        batch whose transaction breaks, a batch run again must find each call still free to
        run: nothing of the first attempt stays, in the database or in the arguments.
        `together`: a single call gets a transaction of its own too (``run_together``)."""
        if (len(calls) <= 1 and not together) or not calls or self._batch.conn is not None:
            return [_call_alone(c) for c in calls]
        several = len(calls) > 1 and not together  # a group commit (not one caller's calls)
        outcomes = self._batch_attempt(calls, several, bare=True, lock_first=lock_first)
        if outcomes is _REDO:  # a call raised: again, each call in a savepoint of its own
            outcomes = self._batch_attempt(calls, several, bare=False, lock_first=lock_first)
        if outcomes is _BROKEN:
            if several:
                self._batch_broken_at = time.monotonic()
            return [_call_alone(c) for c in calls]
        results: list[tuple[bool, Any]] = []
        marking = faults_enabled()
        for ok, value, fired in outcomes:
            if ok and marking:
                try:
                    for point in fired:
                        fault_point(point)
                except Exception as exc:  # noqa: BLE001 - FaultInjected goes to its call
                    ok, value = False, exc
            results.append((ok, value))
        return results

    def _batch_attempt(self, calls: Sequence[Callable[[], Any]], several: bool, *, bare: bool,
                       lock_first: Sequence[str] = ()) -> Any:
        """One transaction running every call (`bare`: without savepoints), committed: the
        outcomes ``(ok, result or exception, fault points)``; or ``_REDO`` (bare, and a call
        raised: rolled back), or ``_BROKEN`` (the transaction could not be used: rolled back)."""
        batch = self._batch
        outcomes: list[tuple[bool, Any, list[str]]] = []
        notices: list[str] = []
        failed = None
        conn = self._checkout_write()
        healthy = True
        recorder = _metrics.current
        started = time.perf_counter() if recorder.enabled else 0.0
        try:
            try:
                self._begin(conn)
                if lock_first:
                    self._lock_runs_in_order(conn, lock_first)
                if several:
                    self._limit_lock_waits(conn)
            except Exception:  # noqa: BLE001 - could not start: run the calls one by one
                failed = _BROKEN
            if failed is None:
                batch.conn, batch.bare = conn, bare
                try:
                    for call in calls:
                        batch.fired, batch.notices, batch.broken, batch.redo = [], notices, False, False
                        try:
                            outcomes.append((True, call(), batch.fired))
                        except Exception as exc:  # noqa: BLE001 - handed to the call's owner
                            outcomes.append((False, exc, []))
                        if batch.broken or not self._in_transaction(conn):
                            failed = _BROKEN
                            break
                        if batch.redo:
                            failed = _REDO
                            break
                    if failed is None:
                        self._commit(conn)
                except Exception:  # noqa: BLE001 - the COMMIT failed: redo call by call
                    failed = _BROKEN
                except BaseException:
                    healthy = self._rollback_quietly(conn)
                    raise
                finally:
                    batch.conn = batch.fired = batch.notices = None
                    batch.bare = batch.redo = False
                if failed is not None:
                    healthy = self._rollback_quietly(conn)
        finally:
            self._checkin_write(conn, healthy)
        if failed is not None:
            return failed
        if started:
            recorder.commit(time.perf_counter() - started)
        self._committed([], notices)
        return outcomes

    def read(self, fn: Callable[[Tx], T]) -> T:
        """Run ``fn`` outside any write transaction (each statement sees committed data)."""
        attempt = 0
        while True:
            attempt += 1
            conn = self._checkout_read()
            healthy = True
            try:
                return fn(Tx(self, conn, self._tx_now(conn)))
            except BaseException as exc:
                healthy = self._rollback_quietly(conn)
                driver, translated = self._driver_error(exc)
                if driver is not None and attempt < self.max_attempts and self.retryable(driver):
                    self._count_retry()
                    time.sleep(min(0.2, 0.005 * 2 ** attempt))
                    continue
                if translated is not None and translated is not exc:
                    raise translated from exc
                raise
            finally:
                self._checkin_read(conn, healthy)

    def _driver_error(self, exc: BaseException) -> tuple[BaseException | None, BaseException | None]:
        """(the driver's exception behind `exc`, the store error to raise for it)."""
        if isinstance(exc, StoreError):
            cause = exc.__cause__
            return (cause if cause is not None and self.translate(cause) is not None else None), exc
        translated = self.translate(exc)
        return (exc if translated is not None else None), translated

    def _rollback_quietly(self, conn: Any) -> bool:
        """Roll back whatever is open; False when the connection is unusable."""
        try:
            if self._in_transaction(conn):
                self._rollback(conn)
            return self._usable(conn)
        except Exception:  # noqa: BLE001 - a dead connection: the backend discards it
            return False

    def _committed(self, fired: list[str], notices: list[str]) -> None:
        with self._counters.lock:
            self._counters.commits += 1
        for point in fired:
            fault_point(point)
        if notices:
            self._announce(notices)

    def _count_retry(self) -> None:
        with self._counters.lock:
            self._counters.retries += 1
        recorder = _metrics.current
        if recorder.enabled:  # (the Prometheus endpoint reads the counter above instead)
            recorder.store_retry()

    def commit_count(self) -> int:
        """Write transactions committed through this backend so far (benchmarks)."""
        return self._counters.commits

    def retry_count(self) -> int:
        return self._counters.retries

    # ------------------------------------------------------------------ run-change notices
    def subscribe(self, listener: RunListener) -> None:
        """Call ``listener(run_id)`` (from any thread) after a commit changed a run, on this
        process or — where the backend can tell — on any other node sharing the database."""
        self._listeners.append(listener)

    def unsubscribe(self, listener: RunListener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def _announce(self, run_ids: Iterable[str | None]) -> None:
        for listener in list(self._listeners):
            for run_id in run_ids:
                try:
                    listener(run_id)
                except Exception:  # noqa: BLE001 - a listener's problem is not the commit's
                    pass

    # ------------------------------------------------------------------ test hook
    def execute_for_tests(self, sql: str, params: Params = ()) -> list[Any]:
        """Run one statement in its own transaction and return its rows (tests simulate
        crashes and corruption with it; nothing in txcl calls it)."""

        def body(t: Tx) -> list[Any]:
            cursor = self.execute(t.conn, sql, params)
            return cursor.fetchall() if cursor.description else []

        return self.transact(body)

    # ------------------------------------------------------------------ primitives
    def describe(self) -> str:
        """Where the data lives, for messages (a path, or host:port/db without the password)."""
        raise NotImplementedError

    def _execute(self, conn: Any, sql: str, params: tuple) -> Any:
        raise NotImplementedError

    def _execute_many(self, conn: Any, sql: str, rows: list[tuple]) -> None:
        raise NotImplementedError

    def _send(self, conn: Any, sql: str, params: tuple) -> None:
        """Default: an ordinary execution."""
        self._execute(conn, sql, params)

    def _checkout_write(self) -> Any:
        raise NotImplementedError

    def _checkin_write(self, conn: Any, healthy: bool) -> None:
        raise NotImplementedError

    def _checkout_read(self) -> Any:
        raise NotImplementedError

    def _checkin_read(self, conn: Any, healthy: bool) -> None:
        raise NotImplementedError

    def _begin(self, conn: Any) -> None:
        raise NotImplementedError

    # After a batch of several calls broke where writers run in parallel — most often a lock
    # wait cut short: another node is writing the same runs — calls are not batched for this
    # long, so two nodes busy with the same runs do not keep abandoning each other's batches.
    BATCH_PAUSE_S = 5.0

    def batching_paused(self) -> bool:
        """Whether independent calls should run one by one for now (see BATCH_PAUSE_S)."""
        return not self.serialises_writers and time.monotonic() - self._batch_broken_at < self.BATCH_PAUSE_S

    def _lock_runs_in_order(self, conn: Any, run_ids: Sequence[str]) -> None:
        """In a batch's transaction, just begun: lock these runs' rows in run id order.
        Nothing where writers are serialised."""

    def _limit_lock_waits(self, conn: Any) -> None:
        """In a batch's transaction, just begun: make a lock wait fail soon (a retryable error)
        instead of lasting until a deadlock is detected. Nothing where writers are
        serialised (no other transaction holds a lock to wait for)."""

    def _before_commit(self, conn: Any) -> None:
        """A transaction of its own, about to commit: make sure the connection still works
        (default: nothing). A connection lost here is lost before the COMMIT was sent, so
        the transaction is repeated instead of reported as perhaps applied."""

    def _commit(self, conn: Any) -> None:
        raise NotImplementedError

    def _rollback(self, conn: Any) -> None:
        raise NotImplementedError

    def _in_transaction(self, conn: Any) -> bool:
        raise NotImplementedError

    def _usable(self, conn: Any) -> bool:
        return True

    def translate(self, exc: BaseException) -> StoreError | None:
        """The store error for a driver exception (None: not the driver's)."""
        raise NotImplementedError

    def retryable(self, exc: BaseException) -> bool:
        """Whether a failed attempt can be repeated from the start."""
        return False

    def lock_key(self, tx: Tx, key: str) -> None:
        """Default: nothing (a backend whose write transactions are serialised)."""

    def notify_in_tx(self, tx: Tx, run_id: str) -> None:
        """Default: nothing beyond the in-process announcement after the commit."""

    def checkpoint(self) -> None:
        """Return the space of a write-ahead log to the file system, where the backend keeps
        one on our side (default: nothing)."""

    def vacuum(self) -> None:
        """Return the space of deleted rows (after a purge) to the file system."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class _GivenUp(Exception):
    """A store call made after another call of the same bare batch attempt raised: its
    transaction holds what the failed call half wrote, so nothing more runs in it."""


_REDO = object()  # a bare batch attempt to run again with savepoints (``SqlBackend._batch_attempt``)
_BROKEN = object()  # a batch attempt whose transaction could not be used


def _call_alone(call: Callable[[], Any]) -> tuple[bool, Any]:
    try:
        return True, call()
    except Exception as exc:  # noqa: BLE001 - handed to the call's owner
        return False, exc


__all__ = ["Dialect", "Tx", "SqlBackend", "RunListener"]
