"""The PostgreSQL backend's statements through libpq (txcl.store.backends.pq_exec), on a real
server: parameters and results of every type the store uses, what a queued statement's error
does, and a connection left usable — or closed — afterwards."""

from __future__ import annotations

import threading
import time
from decimal import Decimal

import psycopg
import pytest
from psycopg import errors

from txcl.store.backends import pq_exec
from txcl.store.backends.postgres import PostgresBackend
from txcl.store.errors import StoreError

pytestmark = pytest.mark.postgres


@pytest.fixture
def conn(new_pg_database):
    with psycopg.connect(new_pg_database(), autocommit=True) as made:
        yield made


@pytest.fixture
def backend(new_pg_database):
    url = new_pg_database()
    with psycopg.connect(url, autocommit=True) as setup:
        setup.execute("CREATE TABLE t (k TEXT PRIMARY KEY, n BIGINT NOT NULL, body BYTEA)")
    made = PostgresBackend(url)
    yield made
    made.close()


def test_parameters_and_results_of_every_type_the_store_uses(conn):
    columns = pq_exec.Columns()
    values = (2**40, -7, 70_000, "héllo ✓", b"\x00\xff\x10", None, True, False, 1.25)
    result = pq_exec.execute(
        conn.pgconn,
        b"SELECT $1::bigint AS big, $2::int AS small, $3::int AS mid, $4 AS text, $5::bytea AS blob, "
        b"$6::text AS nothing, $7::bool AS yes, $8::bool AS no, $9::float8 AS real, 2.5::numeric AS dec, "
        b"'' AS empty, count(*) AS counted",
        values, columns)
    row = result.fetchone()
    assert list(row) == [2**40, -7, 70_000, "héllo ✓", b"\x00\xff\x10", None, True, False, 1.25,
                         Decimal("2.5"), "", 1]
    assert row["text"] == "héllo ✓" and row["blob"] == b"\x00\xff\x10" and row[0] == 2**40
    assert result.rowcount == 1 and result.description[:2] == ("big", "small")
    assert result.fetchone() is None and result.fetchall() == []


def test_a_row_converts_the_columns_it_is_asked_for_each_time_it_is_asked(conn, monkeypatch):
    """A result row keeps the server's text and converts a column when it is read (a
    procedure reads a few columns of the wide rows it locks); read whole, by name, by
    position or from the end, it gives what converting everything up front gave. The
    converters of a statement's columns are looked up once, not per result."""
    columns = pq_exec.Columns()
    sql = b"SELECT $1::bigint AS n, $2 AS t, $3::bytea AS b, $4::text AS nothing"
    calls: list[bytes] = []
    real_int = pq_exec._CONVERTERS[20]
    monkeypatch.setitem(pq_exec._CONVERTERS, 20, lambda raw: (calls.append(raw), real_int(raw))[1])
    first = pq_exec.execute(conn.pgconn, sql, (5, "é", b"\x01", None), columns).fetchone()
    assert calls == []  # nothing converted until read
    assert first["t"] == "é" and first[-2] == b"\x01" and first["nothing"] is None and calls == []
    assert first["n"] == 5 and first[0] == 5 and calls == [b"5", b"5"]
    assert list(first) == [5, "é", b"\x01", None] and len(first) == 4
    assert columns_of_row(first) == {"n": 5, "t": "é", "b": b"\x01", "nothing": None}
    again = pq_exec.execute(conn.pgconn, sql, (6, "x", b"", "y"), columns).fetchone()
    assert again._convs is first._convs  # looked up with the statement's first result
    assert list(again) == [6, "x", b"", "y"]


def columns_of_row(row):
    from txcl.store.procedures.rows import columns

    return columns(row)


def test_parameters_are_typed_as_psycopg_types_them(conn):
    values, oids, formats = pq_exec.adapt((1, 40_000, -(2**63), 2**70, True, "x", None, 0.5))
    assert oids == [21, 23, 20, 1700, 16, 0, 0, 701]  # int2, int4, int8, numeric, bool (not an int), unknown…
    assert values == [b"1", b"40000", b"-9223372036854775808", b"1180591620717411303424", b"t", b"x", None,
                      b"0.5"]
    assert formats is None  # all text
    values, _oids, formats = pq_exec.adapt((b"ab", bytearray(b"c"), "x", None))
    assert values == [b"ab", b"c", b"x", None] and formats == [1, 1, 0, 0]  # bytea in binary
    # a small integer goes where a function takes an int4 (an int8 would find no function)
    row = pq_exec.execute(conn.pgconn, b"SELECT substr($1, 1, $2) AS head", ("abcdef", 3), pq_exec.Columns()).fetchone()
    assert row["head"] == "abc"
    assert pq_exec.adapt(()) is None
    with pytest.raises(TypeError, match="cannot send a parameter of type dict"):
        pq_exec.adapt(({"a": 1},))


def test_a_wider_result_of_the_same_statement_is_read_with_its_new_columns(conn):
    columns = pq_exec.Columns()
    conn.execute("CREATE TABLE w (a INT)")
    conn.execute("INSERT INTO w VALUES (1)")
    assert pq_exec.execute(conn.pgconn, b"SELECT * FROM w", (), columns).fetchone().keys() == ["a"]
    conn.execute("ALTER TABLE w ADD COLUMN b TEXT DEFAULT 'x'")  # as another node's migration would
    row = pq_exec.execute(conn.pgconn, b"SELECT * FROM w", (), columns).fetchone()
    assert row["b"] == "x" and row.keys() == ["a", "b"]


def test_queued_statements_go_with_the_next_that_waits_and_their_error_surfaces_there(conn):
    columns = pq_exec.Columns()
    conn.execute("CREATE TABLE q (x INT)")
    queue = pq_exec.Queue()
    queue.add(b"BEGIN", ())
    queue.add(b"INSERT INTO q VALUES ($1)", (5,))
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE  # nothing sent yet
    assert queue.run(conn.pgconn, b"SELECT count(*) AS n FROM q", (), columns).fetchone()["n"] == 1
    queue.add(b"INSERT INTO q VALUES ($1)", ("not a number",))
    queue.add(b"INSERT INTO q VALUES ($1)", (6,))
    with pytest.raises(errors.InvalidTextRepresentation):
        queue.run(conn.pgconn, b"SELECT count(*) FROM q", (), columns)
    # the server failed the transaction; the connection itself is fine and rolls it back
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR and not conn.closed
    pq_exec.execute(conn.pgconn, b"ROLLBACK", (), columns)
    assert pq_exec.execute(conn.pgconn, b"SELECT count(*) AS n FROM q", (), columns).fetchone()["n"] == 0


def _server_prepared(conn) -> list[str]:
    """The prepared statements the server holds for this connection's session."""
    return sorted(r[0] for r in conn.execute("SELECT name FROM pg_prepared_statements").fetchall())


def test_statements_are_prepared_once_per_connection(conn):
    """A statement is parsed and planned by the server once per connection: prepared on its
    first use (directly or inside a pipeline, once even when it comes twice in one), executed
    by name afterwards, per parameter types; one that fails to prepare is not remembered."""
    columns = pq_exec.Columns()
    prepared: pq_exec.Prepared = {}
    conn.execute("CREATE TABLE p (x BIGINT)")
    for value in (1, 2):
        pq_exec.execute(conn.pgconn, b"INSERT INTO p VALUES ($1)", (value,), columns, prepared)
    assert list(prepared.values()) == [b"txcl_0"]
    queue = pq_exec.Queue()
    queue.add(b"INSERT INTO p VALUES ($1)", (3,))  # prepared already
    queue.add(b"DELETE FROM p WHERE x = $1", (1,))  # prepared in the pipeline, used twice in it
    queue.add(b"DELETE FROM p WHERE x = $1", (2,))
    result = queue.run(conn.pgconn, b"SELECT x FROM p ORDER BY x", (), columns, prepared)
    assert [row["x"] for row in result.fetchall()] == [3]
    assert sorted(prepared.values()) == [b"txcl_0", b"txcl_1", b"txcl_2"]
    assert pq_exec.execute(conn.pgconn, b"SELECT x FROM p WHERE x = $1", (2**70,), columns, prepared).rows == []
    assert len(prepared) == 4  # the same text with a numeric parameter is another statement
    with pytest.raises(errors.UndefinedTable):
        pq_exec.execute(conn.pgconn, b"SELECT * FROM missing", (), columns, prepared)
    assert len(prepared) == 4
    assert _server_prepared(conn) == ["txcl_0", "txcl_1", "txcl_2", "txcl_3"]


def test_a_server_error_is_psycopgs_class_for_its_sqlstate(conn):
    columns = pq_exec.Columns()
    conn.execute("CREATE TABLE u (k INT PRIMARY KEY)")
    pq_exec.execute(conn.pgconn, b"INSERT INTO u VALUES (1)", (), columns)
    with pytest.raises(errors.UniqueViolation) as caught:
        pq_exec.execute(conn.pgconn, b"INSERT INTO u VALUES (1)", (), columns)
    assert caught.value.sqlstate == "23505"
    assert pq_exec.execute(conn.pgconn, b"UPDATE u SET k = 2 WHERE k = 1", (), columns).rowcount == 1


def test_a_statement_waits_with_the_interpreter_free(conn):
    """Other threads (the event loop) run while a statement waits for the server."""
    ticks = 0
    stop = threading.Event()

    def tick() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0.001)

    ticker = threading.Thread(target=tick)
    ticker.start()
    try:
        start = ticks
        pq_exec.execute(conn.pgconn, b"SELECT pg_sleep(0.3)", (), pq_exec.Columns())
        direct = ticks - start
        queue = pq_exec.Queue()
        queue.add(b"SELECT 1", ())
        start = ticks
        queue.run(conn.pgconn, b"SELECT pg_sleep(0.3)", (), pq_exec.Columns())
        pipelined = ticks - start
    finally:
        stop.set()
        ticker.join()
    assert direct > 30 and pipelined > 30, (direct, pipelined)


def test_a_pipeline_the_server_cannot_take_yet_is_sent_without_spinning(conn, new_pg_database):
    """A pipeline larger than the socket's buffers, whose first statement waits 0.6 s for a
    lock: the server reads nothing more meanwhile, so libpq cannot send the rest. The
    sending thread waits for the socket (it used to call PQflush in a loop: 0.6 s of CPU
    with the interpreter's lock held), and everything arrives once the lock is free."""
    conn.execute("CREATE TABLE big (k INT PRIMARY KEY, body TEXT)")
    conn.execute("INSERT INTO big VALUES (1, '')")
    holder = psycopg.connect(conn.info.dsn, autocommit=False)
    holder.execute("SELECT k FROM big WHERE k = 1 FOR UPDATE")
    releaser = threading.Timer(0.6, holder.commit)
    body = "x" * (4 << 20)  # far beyond the socket buffers
    queue = pq_exec.Queue()
    queue.add(b"UPDATE big SET body = 'waited' WHERE k = 1", ())  # waits for the holder's lock
    for k in range(2, 6):
        queue.add(b"INSERT INTO big VALUES ($1, $2)", (k, body))
    releaser.start()
    try:
        cpu = time.thread_time()
        result = queue.run(conn.pgconn, b"SELECT count(*) AS n, sum(length(body)) AS size FROM big", (),
                           pq_exec.Columns())
        cpu = time.thread_time() - cpu
    finally:
        releaser.join()
        holder.close()
    row = result.fetchone()
    assert row["n"] == 5 and row["size"] == 4 * len(body) + len("waited")
    assert cpu < 0.3, f"the sending thread spent {cpu:.2f} s of CPU while the server could not read"


def test_an_interrupted_pipeline_closes_its_connection(conn, monkeypatch):
    """When waiting for a pipeline's answers is cut short, the connection's protocol state is
    unknown: it is closed (the pool then replaces it), never handed out again half-read."""
    queue = pq_exec.Queue()
    queue.add(b"SELECT 1", ())

    def interrupted(pgconn):
        raise KeyboardInterrupt

    monkeypatch.setattr(pq_exec, "_wait_readable", interrupted)
    with pytest.raises(KeyboardInterrupt):
        queue.run(conn.pgconn, b"SELECT pg_sleep(0.2)", (), pq_exec.Columns())
    assert conn.closed


def test_a_transaction_sends_its_statements_in_few_round_trips(backend):
    """BEGIN, sends and many-row inserts wait for the next statement that needs an answer;
    the whole transaction commits, and a failing one leaves nothing behind."""
    waits: list[bytes] = []
    real = pq_exec.execute

    def counting(pgconn, sql, *rest):
        waits.append(sql)
        return real(pgconn, sql, *rest)

    pipelines: list[int] = []
    real_pipelined = pq_exec._pipelined

    def counting_pipelines(pgconn, statements, *rest):
        pipelines.append(len(statements))
        return real_pipelined(pgconn, statements, *rest)

    backend.transact(lambda t: t.one("SELECT 1 AS one"))  # reads the server's clock (every few seconds)
    pq_exec_execute, pq_exec_pipelined = pq_exec.execute, pq_exec._pipelined
    pq_exec.execute, pq_exec._pipelined = counting, counting_pipelines
    try:
        def body(t):
            t.send("INSERT INTO t (k, n, body) VALUES (?, ?, ?)", ("a", 1, b"\x01"))
            t.many("INSERT INTO t (k, n) VALUES (?, ?)", [("b", 2), ("c", 3)])
            return t.one("SELECT count(*) AS n FROM t")["n"]

        assert backend.transact(body) == 3
    finally:
        pq_exec.execute, pq_exec._pipelined = pq_exec_execute, pq_exec_pipelined
    # BEGIN + three inserts + the count in one pipeline, then the COMMIT: two round trips
    assert pipelines == [5] and waits == [b"COMMIT"]
    assert backend.execute_for_tests("SELECT body FROM t WHERE k = ?", ("a",))[0]["body"] == b"\x01"

    def failing(t):
        t.send("INSERT INTO t (k, n) VALUES (?, ?)", ("d", 4))
        t.send("INSERT INTO t (k, n) VALUES (?, ?)", ("a", 5))  # the key exists: fails at the next wait
        return t.one("SELECT 1 AS one")

    with pytest.raises(StoreError, match="duplicate key"):
        backend.transact(failing)
    assert [r["k"] for r in backend.execute_for_tests("SELECT k FROM t ORDER BY k")] == ["a", "b", "c"]
    assert backend.transact(lambda t: t.run("UPDATE t SET n = n + 1 WHERE k = ?", ("b",))) == 1


def test_reads_sent_together_take_one_round_trip(backend, monkeypatch):
    backend.transact(lambda t: t.many("INSERT INTO t (k, n) VALUES (?, ?)", [("a", 1), ("b", 2)]))
    backend.read(lambda t: t.one("SELECT 1 AS one"))  # reads the server's clock (every few seconds)
    pipelines: list[int] = []
    waits: list[bytes] = []
    real_pipelined, real_execute = pq_exec._pipelined, pq_exec.execute
    monkeypatch.setattr(pq_exec, "_pipelined", lambda pgconn, statements, *rest, **kw: (
        pipelines.append(len(statements)), real_pipelined(pgconn, statements, *rest, **kw))[1])
    monkeypatch.setattr(pq_exec, "execute", lambda pgconn, sql, *rest: (
        waits.append(sql), real_execute(pgconn, sql, *rest))[1])
    found = backend.read(lambda t: t.read_many(
        ("SELECT n FROM t WHERE k = ?", ("a",)), ("SELECT n FROM t WHERE k = ?", ("b",)),
        ("SELECT n FROM t WHERE k = ?", ("zz",))))
    assert [[r["n"] for r in rows] for rows in found] == [[1], [2], []]
    assert pipelines == [3] and waits == []

    def inside(t):
        t.send("UPDATE t SET n = n + 10 WHERE k = ?", ("a",))
        return t.read_many(("SELECT n FROM t WHERE k = ?", ("a",)), ("SELECT count(*) AS c FROM t", ()))

    pipelines.clear()
    rows = backend.transact(inside)
    assert [rows[0][0]["n"], rows[1][0]["c"]] == [11, 2]
    assert pipelines == [4] and waits == [b"COMMIT"]  # BEGIN, the update and both reads; the COMMIT


def test_statements_prepared_before_another_nodes_migration_are_prepared_again(new_pg_database):
    """A rolling upgrade: while this node runs, another adds a column to a table this node
    reads with `SELECT *` (prepared on its pooled connections). The server then refuses
    those prepared statements ("cached plan must not change result type"); the backend
    retries the call, and every connection prepares its statements again — no caller sees
    the error, and the new column is read."""
    url = new_pg_database()
    with psycopg.connect(url, autocommit=True) as setup:
        setup.execute("CREATE TABLE w (k TEXT PRIMARY KEY, n BIGINT NOT NULL)")
        setup.execute("INSERT INTO w VALUES ('a', 1)")
    backend = PostgresBackend(url, min_size=2, max_size=2)
    try:
        held = [backend._checkout() for _ in range(2)]  # both pooled connections prepare the read
        for conn in held:
            assert list(backend._execute(conn, "SELECT * FROM w WHERE k = ?", ("a",)).fetchone()) == ["a", 1]
            backend._execute(conn, "SELECT * FROM w WHERE k = ?", ("a",))
        for conn in held:
            backend._checkin(conn, True)
        with psycopg.connect(url, autocommit=True) as other_node:
            other_node.execute("ALTER TABLE w ADD COLUMN extra TEXT DEFAULT 'x'")

        def read(t):
            return dict(t.one("SELECT * FROM w WHERE k = ?", ("a",)))

        retries = backend.retry_count()
        for _ in range(4):  # reads and writes, on whichever connection the pool gives
            assert backend.read(read) == {"k": "a", "n": 1, "extra": "x"}
            assert backend.transact(read) == {"k": "a", "n": 1, "extra": "x"}
        # one call met the refusal and was repeated; the other connection dropped its
        # statements before its next use instead of failing too
        assert backend.retry_count() - retries == 1
        both = [backend._checkout() for _ in range(2)]  # each pooled connection, used directly
        assert {id(c) for c in both} == {id(c) for c in held}
        for conn in both:
            row = backend._execute(conn, "SELECT * FROM w WHERE k = ?", ("a",)).fetchone()
            assert list(row) == ["a", 1, "x"]
            assert backend._prepared_on(conn).generation == backend._plans_generation == 1
        for conn in both:
            backend._checkin(conn, True)
    finally:
        backend.close()


def test_statements_the_server_forgot_are_prepared_again(new_pg_database, caplog):
    """A pooler's reset (`DISCARD ALL`) or an operator's `DEALLOCATE ALL` on the connection
    drops its prepared statements behind the backend's back: the next call meets "prepared
    statement does not exist", is repeated, and the statements are prepared again — also
    when the refused statement was queued and went to the server with the COMMIT."""
    url = new_pg_database()
    with psycopg.connect(url, autocommit=True) as setup:
        setup.execute("CREATE TABLE t (k TEXT PRIMARY KEY, n BIGINT NOT NULL)")
    backend = PostgresBackend(url, min_size=1, max_size=1)  # one connection: the one reset
    try:
        def count(t):
            return t.one("SELECT count(*) AS c FROM t WHERE n > ?", (0,))["c"]

        def insert(key):  # queued: the only statement that waits is the COMMIT
            return lambda t: t.send("INSERT INTO t (k, n) VALUES (?, ?)", (key, 1))

        backend.transact(insert("a"))
        assert backend.read(count) == 1 and backend.transact(count) == 1
        for reset in (b"DISCARD ALL", b"DEALLOCATE ALL"):
            conn = backend._checkout()
            assert backend._prepared_on(conn)
            pq_exec.execute(conn.pgconn, reset, (), pq_exec.Columns())  # unknown to the backend
            backend._checkin(conn, True)
            retries = backend.retry_count()
            backend.transact(insert(reset.decode()))  # refused at the COMMIT, repeated
            assert backend.retry_count() - retries == 1
            assert backend.read(count) == backend.transact(count)
        assert backend.read(count) == 3
        warnings = [r.getMessage() for r in caplog.records if "refused a prepared statement" in r.getMessage()]
        assert len(warnings) == 1 and "does not exist" in warnings[0] and "PgBouncer" in warnings[0]
    finally:
        backend.close()


def test_a_node_stopped_inside_a_transaction_does_not_hold_the_others_back(new_pg_database):
    """A node whose process froze (or whose machine was cut off) in the middle of a write
    transaction keeps its rows locked; the server ends its session once it has been idle in
    the transaction for the backend's limit, so another node waiting for the same row goes
    on, and the stopped node's call is repeated on a fresh connection when it wakes."""
    url = new_pg_database()
    with psycopg.connect(url, autocommit=True) as setup:
        setup.execute("CREATE TABLE r (k TEXT PRIMARY KEY, n BIGINT NOT NULL)")
        setup.execute("INSERT INTO r VALUES ('x', 0)")
    stopped = PostgresBackend(url, idle_in_transaction_timeout_s=1.0)
    other = PostgresBackend(url)
    try:
        locked = threading.Event()
        attempts = []

        def freeze_once(t):
            t.one("SELECT n FROM r WHERE k = ? FOR UPDATE", ("x",))
            attempts.append(time.monotonic())
            if len(attempts) == 1:
                locked.set()
                time.sleep(4.0)  # frozen, the row locked, sending nothing
            return t.run("UPDATE r SET n = n + 1 WHERE k = ?", ("x",))

        frozen = threading.Thread(target=lambda: stopped.transact(freeze_once))
        frozen.start()
        assert locked.wait(10)
        started = time.monotonic()
        assert other.transact(lambda t: t.run("UPDATE r SET n = n + 10 WHERE k = ?", ("x",))) == 1
        waited = time.monotonic() - started
        frozen.join(20)
        assert not frozen.is_alive()
        assert waited < 3.0  # released by the server after ~1 s, not when the frozen node woke (4 s)
        assert len(attempts) == 2  # the frozen call lost its session and was repeated
        assert other.execute_for_tests("SELECT n FROM r")[0]["n"] == 11
        conn = other._checkout()  # a pooled connection of the default settings
        try:
            assert conn.execute("SHOW idle_in_transaction_session_timeout").fetchone()[0] == "1min"
            dsn = conn.info.dsn  # libpq notices a vanished server within about a minute
            assert "keepalives_idle=30" in dsn and "tcp_user_timeout=60000" in dsn
        finally:
            other._checkin(conn, True)
    finally:
        stopped.close()
        other.close()


def test_a_server_that_accepts_no_writes_is_refused_with_its_reason(new_pg_database):
    """Opened on a standby (or a database read-only by default), the store reads, and a write
    is refused with the reason and what to do; after a failover that leaves the address of a
    writable server on a read-only one, the pool keeps trying until it reaches a writable one
    again."""
    url = new_pg_database()
    name = url.rsplit("/", 1)[1].split("?")[0]
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("CREATE TABLE t (k TEXT PRIMARY KEY, n BIGINT NOT NULL)")
        admin.execute(f"ALTER DATABASE {name} SET default_transaction_read_only = on")
        standby = PostgresBackend(url)
        try:
            assert standby.read(lambda t: t.one("SELECT count(*) AS c FROM t")["c"]) == 0
            with pytest.raises(StoreError, match="accepts no writes .*target_session_attrs=read-write"):
                standby.transact(lambda t: t.run("INSERT INTO t (k, n) VALUES (?, ?)", ("z", 0)))
        finally:
            standby.close()
        admin.execute(f"ALTER DATABASE {name} RESET default_transaction_read_only")
        backend = PostgresBackend(url, pool_timeout_s=1.0)
        try:
            backend.transact(lambda t: t.send("INSERT INTO t (k, n) VALUES (?, ?)", ("a", 1)))
            # a failover: the address now leads to a server that accepts no writes
            admin.execute(f"ALTER DATABASE {name} SET default_transaction_read_only = on")
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                          "WHERE datname = %s AND application_name = 'txcl'", (name,))
            with pytest.raises(StoreError, match="unavailable"):
                backend.transact(lambda t: t.send("INSERT INTO t (k, n) VALUES (?, ?)", ("b", 2)))
            admin.execute(f"ALTER DATABASE {name} RESET default_transaction_read_only")
            deadline = time.monotonic() + 30
            while True:  # the pool reconnects by itself, with its own backoff
                try:
                    backend.transact(lambda t: t.send("INSERT INTO t (k, n) VALUES (?, ?)", ("b", 2)))
                    break
                except StoreError:
                    assert time.monotonic() < deadline
                    time.sleep(0.2)
            assert [r["k"] for r in backend.execute_for_tests("SELECT k FROM t ORDER BY k")] == ["a", "b"]
        finally:
            backend.close()
