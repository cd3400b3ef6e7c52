"""PostgreSQL statements through libpq directly (psycopg's ``pq`` layer), for the store's hot path.

A durable cycle runs about fifty short statements. Through psycopg's cursors each pays for
a cursor, an adapters map, the prepare manager and, in a pipeline, its generators: on these
machines more client CPU than libpq's own round trip. Here a statement is one
``PQexecParams``/``PQexecPrepared`` (which waits for the server with the GIL released), its
parameters and results converted by a small table of the types the store uses. Each
connection prepares a statement on its first use and executes it by name afterwards, so
the server parses and plans it once (as psycopg does after a statement's fifth use).

Inside a write transaction, statements whose answer nobody waits for (``BEGIN``,
``SAVEPOINT``, the ``tx.send`` statements, the rows of ``tx.many``) are queued, and go to the
server in one pipeline with the next statement that needs its answer (or the ``COMMIT``):
one round trip for all of them. An error of a queued statement is raised there, as the
server reports it; the transaction is then failed and rolled back by the caller.

Errors are psycopg's own exception classes (built from the server's result), so the
backend's retry and translation rules see what they would see from a cursor.
"""

from __future__ import annotations

import select
from decimal import Decimal
from typing import Any, Callable, Iterator

import psycopg
from psycopg import pq
from psycopg.errors import error_from_result

_TUPLES_OK = pq.ExecStatus.TUPLES_OK
_COMMAND_OK = pq.ExecStatus.COMMAND_OK
_PIPELINE_SYNC = pq.ExecStatus.PIPELINE_SYNC
_PIPELINE_ABORTED = pq.ExecStatus.PIPELINE_ABORTED
_CONNECTION_BAD = pq.ConnStatus.BAD

# Parameter type OIDs (text format), chosen as psycopg chooses them, so the server casts
# exactly as it does for psycopg's cursors: a string goes as `unknown` (0), so the server gives
# it the type its place needs; an integer as the smallest of int2, int4, int8 and numeric that
# holds it (an int8 would not do where a function takes an int4, e.g. `substr(text, int, int)`).
_UNKNOWN, _BOOL, _BYTEA, _INT2, _INT4, _INT8, _FLOAT8, _NUMERIC = 0, 16, 17, 21, 23, 20, 701, 1700


def _int_oid(value: int) -> int:
    if -0x8000 <= value <= 0x7FFF:
        return _INT2
    if -0x80000000 <= value <= 0x7FFFFFFF:
        return _INT4
    if -0x8000000000000000 <= value <= 0x7FFFFFFFFFFFFFFF:
        return _INT8
    return _NUMERIC


def adapt(params: tuple) -> tuple[list, list, list | None] | None:
    """(values, type OIDs, formats or None for all text) for ``PQexecParams``; None when
    there are no parameters."""
    if not params:
        return None
    values: list = []
    oids: list = []
    binary = False
    for value in params:
        kind = type(value)
        if kind is str:
            values.append(value.encode("utf-8"))
            oids.append(_UNKNOWN)
        elif value is None:
            values.append(None)
            oids.append(_UNKNOWN)
        elif kind is int:
            values.append(b"%d" % value)
            oids.append(_int_oid(value))
        elif kind is bool:
            values.append(b"t" if value else b"f")
            oids.append(_BOOL)
        elif kind is bytes or kind is bytearray or kind is memoryview:
            values.append(bytes(value))
            oids.append(_BYTEA)
            binary = True
        elif kind is float:
            values.append(repr(value).encode("ascii"))
            oids.append(_FLOAT8)
        else:
            raise TypeError(f"the store cannot send a parameter of type {kind.__name__}")
    # binary for bytea (the bytes as they are), text for everything else
    return values, oids, [1 if oid == _BYTEA else 0 for oid in oids] if binary else None


_NO_PARAMS: tuple[list, list, None] = ([], [], None)  # `adapt` of no parameters, unpacked


def _bytea(raw: bytes) -> bytes:
    return bytes.fromhex(raw[2:].decode("ascii"))  # text format: \x followed by hex digits


def _numeric(raw: bytes) -> Any:
    return Decimal(raw.decode("ascii"))


# Result converters by type OID (text format), called in C where they can be; anything else
# arrives as text.
_as_text = bytes.decode  # UTF-8
_CONVERTERS: dict[int, Callable[[bytes], Any]] = {
    16: b"t".__eq__, 17: _bytea, 20: int, 21: int, 23: int, 26: int, 700: float, 701: float, 1700: _numeric,
}


class Row:
    """A result row readable by column name and by position (like ``sqlite3.Row``)."""

    __slots__ = ("_values", "_index")

    def __init__(self, values: tuple, index: dict[str, int]) -> None:
        self._values = values
        self._index = index

    def __getitem__(self, key: int | str) -> Any:
        if type(key) is str:
            return self._values[self._index[key]]
        return self._values[key]

    def __len__(self) -> int:
        return len(self._values)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def keys(self) -> list[str]:
        return list(self._index)


class ResultRow(Row):
    """A row of a server result, converted column by column as it is read: a procedure reads
    a few columns of most rows it locks or checks (``SELECT *`` of a 25-column table), and
    converting every value up front was a tenth of a PostgreSQL node's interpreter time."""

    __slots__ = ("_res", "_r", "_convs")

    def __init__(self, res: Any, r: int, index: dict[str, int], convs: list[Callable[[bytes], Any]]) -> None:
        self._res = res
        self._r = r
        self._index = index
        self._convs = convs

    def __getitem__(self, key: int | str) -> Any:
        c = self._index[key] if type(key) is str else key
        if c < 0:
            c += len(self._convs)
        raw = self._res.get_value(self._r, c)
        return None if raw is None else self._convs[c](raw)

    def __len__(self) -> int:
        return len(self._convs)

    def __iter__(self) -> Iterator[Any]:
        get, r = self._res.get_value, self._r
        return iter([None if (raw := get(r, c)) is None else conv(raw) for c, conv in enumerate(self._convs)])


class Result:
    """What ``_execute`` returns: ``fetchone()``, ``fetchall()``, ``rowcount`` and
    ``description`` (the column names of a statement that returns rows, else None), like a
    cursor."""

    __slots__ = ("rows", "rowcount", "_index", "_next")

    def __init__(self, rows: list[Row], rowcount: int, index: dict[str, int] | None = None) -> None:
        self.rows = rows
        self.rowcount = rowcount
        self._index = index
        self._next = 0

    @property
    def description(self) -> tuple[str, ...] | None:
        return None if self._index is None else tuple(self._index)

    def fetchone(self) -> Row | None:
        i = self._next
        if i >= len(self.rows):
            return None
        self._next = i + 1
        return self.rows[i]

    def fetchall(self) -> list[Row]:
        i, self._next = self._next, len(self.rows)
        return self.rows[i:]


class Columns:
    """The column names of each statement's results, and the converter of each column by its
    type, kept per statement text (read again when a result's width changes: a ``SELECT *``
    after another node added a column). A name that appears twice maps to its last column,
    as psycopg's rows by name did."""

    def __init__(self) -> None:
        self._by_sql: dict[bytes, tuple[int, dict[str, int], list[Callable[[bytes], Any]]]] = {}

    def described(self, sql: bytes, res: Any) -> tuple[dict[str, int], list[Callable[[bytes], Any]]]:
        """(column index by name, converter per column) of `sql`'s result `res`."""
        known = self._by_sql.get(sql)
        nfields = res.nfields
        if known is not None and known[0] == nfields:
            return known[1], known[2]
        index = {res.fname(i).decode(): i for i in range(nfields)}
        convs = converters(res)
        if len(self._by_sql) < 4096:
            self._by_sql[sql] = (nfields, index, convs)
        return index, convs


def converters(res: Any) -> list[Callable[[bytes], Any]]:
    """The converter of each column of `res`, by its type."""
    return [_CONVERTERS.get(res.ftype(c), _as_text) for c in range(res.nfields)]


def convert(res: Any, index: dict[str, int], convs: list[Callable[[bytes], Any]] | None = None) -> list[Row]:
    """The rows of a TUPLES_OK result (`convs`: its columns' converters, when known)."""
    ntuples = res.ntuples
    if not ntuples:
        return []
    if convs is None:
        convs = converters(res)
    return [ResultRow(res, r, index, convs) for r in range(ntuples)]


def _lost(pgconn: Any) -> psycopg.OperationalError:
    message = pgconn.error_message.decode("utf-8", "replace").strip() or "the connection to the server was lost"
    return psycopg.OperationalError(message)


def _error(res: Any, pgconn: Any) -> psycopg.Error:
    if res is None or pgconn.status == _CONNECTION_BAD:
        return _lost(pgconn)
    return error_from_result(res, encoding="utf-8")


def _checked(res: Any, pgconn: Any, sql: bytes, columns: Columns) -> Result:
    status = res.status if res is not None else None
    if status == _TUPLES_OK:
        index, convs = columns.described(sql, res)
        rows = convert(res, index, convs)
        return Result(rows, len(rows), index)
    if status == _COMMAND_OK:
        count = res.command_tuples
        return Result([], -1 if count is None else count)
    raise _error(res, pgconn)


# Statements prepared per connection, at most (beyond it a statement is parsed each time).
PREPARED_MAX = 1000


class Prepared(dict):
    """One connection's prepared statements: (statement, parameter OIDs) -> the name it is
    prepared under. `generation`: the backend's plan generation when the registry was made
    (a registry of an older generation is dropped, with the server's statements, before the
    connection's next transaction)."""

    __slots__ = ("generation",)

    def __init__(self, generation: int = 0) -> None:
        super().__init__()
        self.generation = generation


# The server's answer to a prepared statement whose result columns changed since it was
# prepared (another node added or dropped a column of a table read with `SELECT *`):
# SQLSTATE 0A000 with this message. Preparing the statement again is the remedy.
STALE_PLAN_MESSAGE = "cached plan must not change result type"


def is_stale_plan(exc: BaseException) -> bool:
    """Whether `exc` is the server refusing a prepared statement that must be prepared
    again: its result changed shape under it, or the server no longer has it (SQLSTATE
    26000, after a `DEALLOCATE ALL` or `DISCARD ALL` that a pooler or an operator sent on
    the connection)."""
    state = getattr(exc, "sqlstate", None)
    return state == "26000" or (state == "0A000" and STALE_PLAN_MESSAGE in str(exc))


def _name_for(prepared: Prepared | None, preparing: dict[tuple, bytes], key: tuple) -> tuple[bytes | None, bool]:
    """(the name a statement is executed under, or None to send it unprepared; whether it
    must be prepared first). `preparing`: names given out but not yet confirmed by the
    server (a pipeline prepares before it hears back)."""
    if prepared is None:
        return None, False
    name = preparing.get(key) or prepared.get(key)
    if name is not None:
        return name, False
    count = len(prepared) + len(preparing)
    if count >= PREPARED_MAX:
        return None, False
    return b"txcl_%d" % count, True


_NOTHING_PREPARING: dict[tuple, bytes] = {}


def execute(pgconn: Any, sql: bytes, params: tuple, columns: Columns, prepared: Prepared | None = None) -> Result:
    """One statement, waited for (the GIL released while the server works). With `prepared`
    (the connection's registry), the statement is prepared on its first use and executed
    by name after that: the server parses and plans it once per connection."""
    values, oids, formats = adapt(params) or _NO_PARAMS
    key = (sql, tuple(oids))
    name, prepare = _name_for(prepared, _NOTHING_PREPARING, key)
    if prepare:
        res = pgconn.prepare(name, sql, oids)
        if res is None or res.status != _COMMAND_OK:
            raise _error(res, pgconn)
        prepared[key] = name  # type: ignore[index]
    if name is not None:
        res = pgconn.exec_prepared(name, values, formats)
    else:
        res = pgconn.exec_params(sql, values, oids, formats)
    return _checked(res, pgconn, sql, columns)


class Queue:
    """Statements of one transaction not yet sent (their answers are not needed)."""

    __slots__ = ("pending",)

    def __init__(self) -> None:
        self.pending: list[tuple[bytes, tuple]] = []

    def add(self, sql: bytes, params: tuple) -> None:
        self.pending.append((sql, params))

    def run(self, pgconn: Any, sql: bytes, params: tuple, columns: Columns,
            prepared: Prepared | None = None) -> Result:
        """Everything queued, then `sql`, in one round trip; `sql`'s result. Raises the first
        error the server reports (the rest of the pipeline is then skipped by the server)."""
        pending = self.pending
        if not pending:
            return execute(pgconn, sql, params, columns, prepared)
        self.pending = []
        pending.append((sql, params))
        return _pipelined(pgconn, pending, columns, prepared)[0]

    def run_all(self, pgconn: Any, statements: list[tuple[bytes, tuple]], columns: Columns,
                prepared: Prepared | None = None) -> list[Result]:
        """Everything queued, then `statements`, in one round trip; each statement's result."""
        pending, self.pending = self.pending, []
        return _pipelined(pgconn, pending + statements, columns, prepared, answers=len(statements))


def _wait_readable(pgconn: Any) -> None:
    poller = select.poll()
    poller.register(pgconn.socket, select.POLLIN)
    poller.poll()  # releases the GIL


def _flush(pgconn: Any) -> None:
    """Send everything libpq holds. The connection is non-blocking (psycopg makes it so):
    ``PQflush`` answers 1 while the socket cannot take more, and spinning on it would keep
    the interpreter's lock from every other thread; wait for the socket instead (reading
    what the server sent meanwhile, so it can go on reading too)."""
    while pgconn.flush():
        poller = select.poll()
        poller.register(pgconn.socket, select.POLLIN | select.POLLOUT)
        poller.poll()  # releases the GIL
        pgconn.consume_input()


def _next_result(pgconn: Any) -> Any:
    """``PQgetResult`` without blocking the interpreter: wait for the socket first."""
    while pgconn.is_busy():
        _wait_readable(pgconn)
        pgconn.consume_input()
    return pgconn.get_result()


def _pipelined(pgconn: Any, statements: list[tuple[bytes, tuple]], columns: Columns,
               prepared: Prepared | None = None, answers: int = 1) -> list[Result]:
    """`statements` in one pipeline; the results of the last `answers` of them."""
    # what comes back, in order: (statement, the registry key it prepares or None, whether
    # its result is wanted) per result
    expected: list[tuple[bytes, tuple | None, bool]] = []
    wanted_from = len(statements) - answers
    preparing: dict[tuple, bytes] = {}  # prepared in this pipeline (registered once it answers)
    pgconn.enter_pipeline_mode()
    try:
        for position, (sql, params) in enumerate(statements):
            values, oids, formats = adapt(params) or _NO_PARAMS
            key = (sql, tuple(oids))
            name, prepare = _name_for(prepared, preparing, key)
            if prepare:
                preparing[key] = name  # type: ignore[assignment]
                pgconn.send_prepare(name, sql, oids)
                expected.append((sql, key, False))
            if name is not None:
                pgconn.send_query_prepared(name, values, formats)
            else:
                pgconn.send_query_params(sql, values, oids, formats)
            expected.append((sql, None, position >= wanted_from))
        pgconn.pipeline_sync()
        _flush(pgconn)
        failure: psycopg.Error | None = None
        results: list[Result] = []
        for sql, prepares, wanted in expected:
            res = _next_result(pgconn)
            if res is None:
                raise _lost(pgconn)
            status = res.status
            if status == _PIPELINE_ABORTED or failure is not None:
                pass
            elif status == _TUPLES_OK or status == _COMMAND_OK:
                if prepares is not None:
                    prepared[prepares] = preparing[prepares]  # type: ignore[index]
                elif wanted:
                    results.append(_checked(res, pgconn, sql, columns))
            else:
                failure = _error(res, pgconn)
            end = _next_result(pgconn)  # each statement's results end with a NULL
            if end is not None and end.status != _PIPELINE_SYNC:  # pragma: no cover - one result each
                raise psycopg.InterfaceError("unexpected extra result in a pipeline")
        sync = _next_result(pgconn)
        if sync is None or sync.status != _PIPELINE_SYNC:
            if pgconn.status == _CONNECTION_BAD:
                raise _lost(pgconn)
            raise psycopg.InterfaceError("a pipeline ended without its sync")
    except BaseException:
        _abandon(pgconn)
        raise
    pgconn.exit_pipeline_mode()
    if failure is not None:
        raise failure
    return results


def _abandon(pgconn: Any) -> None:
    """After an interrupted pipeline the connection's protocol state is unknown: close it
    (the pool replaces a closed connection)."""
    try:
        pgconn.finish()
    except Exception:  # noqa: BLE001 - already gone
        pass


__all__ = ["Columns", "PREPARED_MAX", "Prepared", "Queue", "Result", "Row", "STALE_PLAN_MESSAGE", "adapt",
           "convert", "execute", "is_stale_plan"]
