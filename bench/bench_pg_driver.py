"""Which PostgreSQL driver for the store, and which shape of transaction: the client and
server CPU of one itemized item's settle transaction through txcl's own path (libpq through
psycopg's `pq` layer, statements prepared once per connection, the statements nobody waits
for pipelined with the next one), through psycopg's cursors (prepared; and in pipeline mode),
and through asyncpg. And, on txcl's path, other shapes of the same work: every statement and
the COMMIT sent in one round trip (what a transaction whose statements need no answer before
the next could be sent as); its writes as one PL/pgSQL function (the same statements, grouped:
a form a procedure written once for both backends could take); and the whole transaction, its
reads included, as one function called in one round trip (the form that needs a procedure's
logic written a second time, in PL/pgSQL). Measured in the same run, on the same server, one
connection each.

    python bench/bench_pg_driver.py [--n 2000] [--rounds 5]

The transaction is the shape the store's per-item path runs (see docs/performance.md): lock
the run's row, record a fact (ON CONFLICT DO NOTHING), count it on the unit, settle the child,
read the unit's state back, commit. Client CPU is this process's (one thread, nothing else
running); server CPU is the backend processes' of the benchmark's database, read from
/proc/<pid>/stat. Medians of the rounds; ratios against txcl's path. asyncpg is measured when
it is installed (`pip install asyncpg`); it is not a dependency of txcl.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from _backends import Backends  # noqa: E402
from _timing import headline  # noqa: E402

SCHEMA = [
    "CREATE TABLE runs (run_id TEXT PRIMARY KEY, status TEXT NOT NULL, version BIGINT NOT NULL, "
    "updated_ms BIGINT NOT NULL)",
    "CREATE TABLE units (unit_id TEXT PRIMARY KEY, run_id TEXT NOT NULL, done BIGINT NOT NULL, "
    "window_size BIGINT NOT NULL, status TEXT NOT NULL)",
    "CREATE TABLE children (unit_id TEXT NOT NULL, item_index BIGINT NOT NULL, status TEXT NOT NULL, "
    "output_json TEXT, version BIGINT NOT NULL, PRIMARY KEY (unit_id, item_index))",
    "CREATE TABLE facts (unit_id TEXT NOT NULL, kind TEXT NOT NULL, item_index BIGINT NOT NULL, "
    "recorded_ms BIGINT NOT NULL, PRIMARY KEY (unit_id, kind, item_index))",
    # the writes of the transaction, grouped: the same three statements
    "CREATE FUNCTION settle_writes(p_unit TEXT, p_kind TEXT, p_index BIGINT, p_at BIGINT, p_status TEXT, "
    "p_output TEXT) RETURNS void LANGUAGE plpgsql AS $f$ BEGIN "
    "INSERT INTO facts (unit_id, kind, item_index, recorded_ms) VALUES (p_unit, p_kind, p_index, p_at) "
    "ON CONFLICT DO NOTHING; "
    "UPDATE units SET done = done + 1 WHERE unit_id = p_unit; "
    "UPDATE children SET status = p_status, output_json = p_output, version = version + 1 "
    "WHERE unit_id = p_unit AND item_index = p_index; END $f$",
    # the whole transaction: lock, writes, the state read back
    "CREATE FUNCTION settle_item(p_run TEXT, p_unit TEXT, p_kind TEXT, p_index BIGINT, p_at BIGINT, "
    "p_status TEXT, p_output TEXT) RETURNS TABLE (o_status TEXT, o_done BIGINT, o_window BIGINT) "
    "LANGUAGE plpgsql AS $f$ BEGIN "
    "PERFORM 1 FROM runs WHERE run_id = p_run FOR UPDATE; "
    "PERFORM settle_writes(p_unit, p_kind, p_index, p_at, p_status, p_output); "
    "RETURN QUERY SELECT u.status, u.done, u.window_size FROM units u WHERE u.unit_id = p_unit; END $f$",
]
WRITES = "SELECT settle_writes($1, $2, $3, $4, $5, $6)"
WHOLE = "SELECT * FROM settle_item($1, $2, $3, $4, $5, $6, $7)"
LOCK = "SELECT run_id, status, version FROM runs WHERE run_id = $1 FOR UPDATE"
FACT = "INSERT INTO facts (unit_id, kind, item_index, recorded_ms) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING"
COUNT = "UPDATE units SET done = done + 1 WHERE unit_id = $1"
SETTLE = "UPDATE children SET status = $1, output_json = $2, version = version + 1 WHERE unit_id = $3 AND item_index = $4"
STATE = "SELECT status, done, window_size FROM units WHERE unit_id = $1"


def _qmark(sql: str) -> str:
    """The statement as the store writes it (`?` placeholders; its dialect table renumbers)."""
    import re

    return re.sub(r"\$\d+", "?", sql)


def _pyformat(sql: str) -> str:
    import re

    return re.sub(r"\$\d+", "%s", sql)


def prepare_database(url: str, items: int) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for statement in SCHEMA:
            conn.execute(statement)
        conn.execute("INSERT INTO runs VALUES ('run-1', 'waiting', 1, 0)")
        conn.execute("INSERT INTO units VALUES ('unit-1', 'run-1', 0, 16, 'open')")
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO children VALUES ('unit-1', %s, 'in_flight', NULL, 1)",
                            [(i,) for i in range(items)])


def backend_pids(url: str) -> list[int]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return [row[0] for row in conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")]


def cpu_of(pids: list[int]) -> float:
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / ticks


# ---------------------------------------------------------------------- the drivers
# Each: open(url) -> a handle, run(handle, n, offset), close(handle). One connection each.

class Txcl:
    """`shape`: "statements" (as the store runs it: three round trips — the lock with BEGIN, the
    writes with the read, the COMMIT), "one pipeline" (the same statements, BEGIN and COMMIT
    included, in one round trip), "grouped writes" (the three writes as one function call),
    "whole" (one function call, outside a BEGIN … COMMIT: one round trip)."""

    def __init__(self, shape: str = "statements") -> None:
        self.shape = shape

    def open(self, url):
        from txcl.store import open_backend

        return open_backend(url, create=False, pool_max=1)

    def run(self, backend, n: int, offset: int) -> None:
        def settle(t, i):
            t.one(_qmark(LOCK), ("run-1",))
            if self.shape == "grouped writes":
                t.send(_qmark(WRITES), ("unit-1", "provider", i, i, "done", '{"ok":true}'))
            else:
                t.send(_qmark(FACT), ("unit-1", "provider", i, i))
                t.send(_qmark(COUNT), ("unit-1",))
                t.send(_qmark(SETTLE), ("done", '{"ok":true}', "unit-1", i))
            return t.one(_qmark(STATE), ("unit-1",))

        for i in range(offset, offset + n):
            if self.shape == "one pipeline":
                self.one_pipeline(backend, i)
            elif self.shape == "whole":
                backend.read(lambda t, i=i: t.one(_qmark(WHOLE), ("run-1", "unit-1", "provider", i, i, "done",
                                                                   '{"ok":true}')))
            else:
                backend.transact(lambda t, i=i: settle(t, i))

    @staticmethod
    def one_pipeline(backend, i: int) -> None:
        """The transaction sent in one round trip through the store's own pipeline (a shape
        the store does not use: its procedures look at answers before they go on)."""
        from txcl.store.backends import pq_exec

        statements = [(b"BEGIN", ()), (backend.sql(_qmark(LOCK)), ("run-1",)),
                      (backend.sql(_qmark(FACT)), ("unit-1", "provider", i, i)),
                      (backend.sql(_qmark(COUNT)), ("unit-1",)),
                      (backend.sql(_qmark(SETTLE)), ("done", '{"ok":true}', "unit-1", i)),
                      (backend.sql(_qmark(STATE)), ("unit-1",)), (b"COMMIT", ())]
        conn = backend._checkout()
        try:
            pq_exec.Queue().run_all(conn.pgconn, statements, backend._columns, backend._prepared_on(conn))
        finally:
            backend._checkin(conn, True)

    def close(self, backend) -> None:
        backend.close()


class Psycopg:
    def __init__(self, pipeline: bool) -> None:
        self.pipeline = pipeline

    def open(self, url):
        import psycopg

        conn = psycopg.connect(url, autocommit=True)
        conn.prepare_threshold = 0  # prepared from the first use, as txcl's path does
        return conn

    def run(self, conn, n: int, offset: int) -> None:
        for i in range(offset, offset + n):
            if self.pipeline:
                with conn.pipeline(), conn.transaction(), conn.cursor() as cur:
                    cur.execute(_pyformat(LOCK), ("run-1",))
                    cur.execute(_pyformat(FACT), ("unit-1", "provider", i, i))
                    cur.execute(_pyformat(COUNT), ("unit-1",))
                    cur.execute(_pyformat(SETTLE), ("done", '{"ok":true}', "unit-1", i))
                    cur.execute(_pyformat(STATE), ("unit-1",))
                    cur.fetchone()
            else:
                with conn.transaction(), conn.cursor() as cur:
                    cur.execute(_pyformat(LOCK), ("run-1",))
                    cur.fetchone()
                    cur.execute(_pyformat(FACT), ("unit-1", "provider", i, i))
                    cur.execute(_pyformat(COUNT), ("unit-1",))
                    cur.execute(_pyformat(SETTLE), ("done", '{"ok":true}', "unit-1", i))
                    cur.execute(_pyformat(STATE), ("unit-1",))
                    cur.fetchone()

    def close(self, conn) -> None:
        conn.close()


class Asyncpg:
    def open(self, url):
        import asyncpg

        loop = asyncio.new_event_loop()
        return loop, loop.run_until_complete(asyncpg.connect(url))

    def run(self, handle, n: int, offset: int) -> None:
        loop, conn = handle

        async def batch() -> None:
            for i in range(offset, offset + n):
                async with conn.transaction():
                    await conn.fetchrow(LOCK, "run-1")
                    await conn.execute(FACT, "unit-1", "provider", i, i)
                    await conn.execute(COUNT, "unit-1")
                    await conn.execute(SETTLE, "done", '{"ok":true}', "unit-1", i)
                    await conn.fetchrow(STATE, "unit-1")

        loop.run_until_complete(batch())

    def close(self, handle) -> None:
        loop, conn = handle
        loop.run_until_complete(conn.close())
        loop.close()


def drivers() -> dict:
    found = {
        "txcl (libpq, prepared, pipelined sends)": Txcl(),
        "psycopg cursors, prepared": Psycopg(pipeline=False),
        "psycopg cursors, pipeline mode": Psycopg(pipeline=True),
        "txcl, one round trip with COMMIT": Txcl("one pipeline"),
        "txcl, the writes as one function": Txcl("grouped writes"),
        "txcl, the whole as one function": Txcl("whole"),
    }
    try:
        import asyncpg  # noqa: F401
    except ImportError:
        print("asyncpg is not installed: measured without it (pip install asyncpg)")
    else:
        found["asyncpg"] = Asyncpg()
    return found


def measure(driver, url: str, n: int) -> tuple[float, float, float]:
    """(client CPU ms, server CPU ms, wall ms) per transaction."""
    handle = driver.open(url)
    try:
        driver.run(handle, 50, 0)  # warm: prepared statements
        pids = backend_pids(url)
        before_server = cpu_of(pids)
        c0, w0 = time.process_time(), time.perf_counter()
        driver.run(handle, n, 50)
        c1, w1 = time.process_time(), time.perf_counter()
        server = cpu_of(pids) - before_server
    finally:
        driver.close(handle)
    return (c1 - c0) / n * 1000, server / n * 1000, (w1 - w0) / n * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    found = drivers()
    results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in found}
    with Backends(["postgresql"]) as backends:
        for _ in range(args.rounds):
            for name, driver in found.items():
                url = backends.fresh("postgresql")
                prepare_database(url, args.n + 100)
                results[name].append(measure(driver, url, args.n))
    base = list(found)[0]
    medians = {name: tuple(statistics.median(r[k] for r in rows) for k in range(3)) for name, rows in results.items()}
    print(f"one settle transaction (5 statements), {args.n} per round, {args.rounds} rounds, medians")
    print(f"{'driver / shape':<42} {'client ms':>10} {'server ms':>10} {'wall ms':>8} {'client vs txcl':>15} "
          f"{'server vs txcl':>15}")
    for name, (client, server, wall) in medians.items():
        print(f"{name:<42} {client:>10.3f} {server:>10.3f} {wall:>8.3f} {client / medians[base][0]:>15.2f} "
              f"{server / medians[base][1]:>15.2f}")
    for name in list(found)[1:]:
        headline(f"client CPU per settle transaction, {name}", medians[name][0], "ms",
                 baseline="txcl's own libpq path, same run", ratio=medians[name][0] / medians[base][0],
                 goal="informative: txcl keeps the cheaper")
        if name.startswith("txcl, "):
            headline(f"server CPU per settle transaction, {name}", medians[name][1], "ms",
                     baseline="txcl's own libpq path, same run", ratio=medians[name][1] / medians[base][1],
                     goal="informative: what a server-side function saves the database")


if __name__ == "__main__":
    main()
