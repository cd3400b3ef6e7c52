"""Which PostgreSQL driver for the store: the client and server CPU of one itemized item's
settle transaction through txcl's own path (libpq through psycopg's `pq` layer, statements
prepared once per connection, the statements nobody waits for pipelined with the next one),
through psycopg's cursors (prepared; and in pipeline mode), and through asyncpg — measured
in the same run, on the same server, one connection each.

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
]
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
    def open(self, url):
        from txcl.store import open_backend

        return open_backend(url, create=False, pool_max=1)

    def run(self, backend, n: int, offset: int) -> None:
        def settle(t, i):
            t.one(_qmark(LOCK), ("run-1",))
            t.send(_qmark(FACT), ("unit-1", "provider", i, i))
            t.send(_qmark(COUNT), ("unit-1",))
            t.send(_qmark(SETTLE), ("done", '{"ok":true}', "unit-1", i))
            return t.one(_qmark(STATE), ("unit-1",))

        for i in range(offset, offset + n):
            backend.transact(lambda t, i=i: settle(t, i))

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
    print(f"{'driver':<42} {'client ms':>10} {'server ms':>10} {'wall ms':>8} {'client vs txcl':>15}")
    for name, (client, server, wall) in medians.items():
        print(f"{name:<42} {client:>10.3f} {server:>10.3f} {wall:>8.3f} {client / medians[base][0]:>15.2f}")
    for name in list(found)[1:]:
        headline(f"client CPU per settle transaction, {name}", medians[name][0], "ms",
                 baseline="txcl's own libpq path, same run", ratio=medians[name][0] / medians[base][0],
                 goal="informative: txcl keeps the cheaper")


if __name__ == "__main__":
    main()
