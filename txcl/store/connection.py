"""Opening the project's SQLite database.

One file holds traces, the kv builtin's data and continuations. Every process that opens it
gets WAL mode, durable commits (synchronous=FULL), a busy timeout and foreign keys. Write
transactions start with BEGIN IMMEDIATE so two processes never deadlock on an upgrade.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Iterator

import sqlite_utils

DEFAULT_BUSY_TIMEOUT_MS = 30_000


def resolve_db_path(db: str | Path) -> Path:
    """Accept a path or a `sqlite:///path` URL; create the parent directory."""
    text = str(db)
    if text.startswith("sqlite:///"):
        text = text[len("sqlite:///") - 1 :] if text.startswith("sqlite:////") else text[len("sqlite:///") :]
    path = Path(text)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def open_sqlite(db: str | Path, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS) -> sqlite_utils.Database:
    """Open (creating if needed) the database file with the project's pragmas."""
    path = resolve_db_path(db)
    conn = sqlite3.connect(
        str(path),
        timeout=busy_timeout_ms / 1000,
        isolation_level=None,  # autocommit; transactions are explicit
        check_same_thread=False,
    )
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA foreign_keys = ON")
    return sqlite_utils.Database(conn)


@contextlib.contextmanager
def transaction(db: sqlite_utils.Database) -> Iterator[sqlite3.Connection]:
    """One write transaction (BEGIN IMMEDIATE … COMMIT, ROLLBACK on error)."""
    conn = db.conn
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    else:
        conn.execute("COMMIT")
