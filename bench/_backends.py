"""The store backends a benchmark runs on, with the raw commit rate of each as its baseline.

    with Backends(["sqlite", "postgresql"]) as backends:
        for name, fresh_db in backends:
            db = fresh_db()                  # a new SQLite file or a new PostgreSQL database
            raw = raw_commits(name, fresh_db(), 500)

SQLite: files in a temp dir, WAL, synchronous=FULL (as txcl opens them). PostgreSQL: a
throwaway server of this run (txcl.testing.postgres) with fsync on and synchronous_commit = on,
so a commit costs what it costs in production; or the server of $TXCL_BENCH_PG_URL.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import tempfile
import time
import uuid
from pathlib import Path
from typing import Callable, Iterator


class Backends:
    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.tmp = tempfile.TemporaryDirectory()
        self.server = None
        self.pg_url = os.environ.get("TXCL_BENCH_PG_URL")
        self.numbers = itertools.count()

    def __enter__(self) -> "Backends":
        if "postgresql" in self.names and not self.pg_url:
            from txcl.testing.postgres import TempPostgres

            self.server = TempPostgres.start(durable=True)
            self.pg_url = self.server.url
        return self

    def __exit__(self, *exc: object) -> None:
        if self.server is not None:
            self.server.stop()
        self.tmp.cleanup()

    def fresh(self, name: str) -> str:
        if name == "sqlite":
            return str(Path(self.tmp.name) / f"db{next(self.numbers)}.db")
        from txcl.testing.postgres import create_database, database_url

        database = "bench_" + uuid.uuid4().hex[:12]
        create_database(self.pg_url, database)
        return database_url(self.pg_url, database)

    def __iter__(self) -> Iterator[tuple[str, Callable[[], str]]]:
        for name in self.names:
            yield name, (lambda n=name: self.fresh(n))


def raw_commits(name: str, db: str, n: int) -> float:
    """Bare single-row durable commits per second on this backend (the yardstick)."""
    if name == "sqlite":
        conn = sqlite3.connect(db, isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v TEXT)")
        t0 = time.perf_counter()
        for i in range(n):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO t (v) VALUES (?)", (f"row-{i}",))
            conn.execute("COMMIT")
        elapsed = time.perf_counter() - t0
        conn.close()
        return n / elapsed
    import psycopg

    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = on")
        conn.execute("CREATE TABLE IF NOT EXISTS t (id BIGSERIAL PRIMARY KEY, v TEXT)")
        t0 = time.perf_counter()
        for i in range(n):
            conn.execute("INSERT INTO t (v) VALUES (%s)", (f"row-{i}",))
        elapsed = time.perf_counter() - t0
    return n / elapsed
