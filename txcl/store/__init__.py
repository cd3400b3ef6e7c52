"""The store: traces, kv and durable runs in one database.

    store = open_store(".txcl-data/txcl.db")                      # SQLite (a path or sqlite:///path)
    store = open_store("postgresql://user@db.internal/txcl")  # PostgreSQL (several nodes)

Only this module names a backend. Everything else talks to the protocols of
:mod:`txcl.store.protocol` and catches the errors of :mod:`txcl.store.errors`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from txcl.store.errors import StoreError, StoreUnavailable
from txcl.store.store import DatabaseStore

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
DEFAULT_BUSY_TIMEOUT_MS = 30_000


def is_postgres_url(db: str | Path) -> bool:
    return str(db).startswith(POSTGRES_SCHEMES)


def backend_kind(db: str | Path) -> str:
    """``postgresql`` or ``sqlite`` for a ``--db`` value; StoreError for another URL scheme."""
    text = str(db)
    if is_postgres_url(text):
        return "postgresql"
    if "://" in text and not text.startswith("sqlite:"):
        scheme = text.split("://", 1)[0]
        raise StoreError(f"unknown database URL scheme {scheme!r} (use a file path, sqlite:///path or "
                         f"postgresql://…)")
    return "sqlite"


def sqlite_file(db: str | Path) -> Path | None:
    """The database file of a SQLite ``--db`` value (None for PostgreSQL)."""
    if backend_kind(db) != "sqlite":
        return None
    from txcl.store.backends.sqlite import sqlite_path

    return sqlite_path(db)


def open_backend(db: str | Path, *, clock: Callable[[], int] | None = None,
                 busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS, create: bool = True, pool_max: int = 10,
                 durable: bool = True):
    if backend_kind(db) == "postgresql":
        try:
            from txcl.store.backends.postgres import PostgresBackend
        except ImportError as exc:
            from txcl.install import install_command

            raise StoreError(f"PostgreSQL needs the 'postgres' extra, which is not installed ({exc.name}): "
                             f"{install_command('postgres')}") from None

        return PostgresBackend(str(db), clock=clock, max_size=pool_max)
    from txcl.store.backends.sqlite import SqliteBackend

    return SqliteBackend(db, busy_timeout_ms=busy_timeout_ms, clock=clock, create=create, durable=durable)


def open_store(db: str | Path, *, clock: Callable[[], int] | None = None, node_id: str | None = None,
               busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
               migrate: bool = True, create: bool = True, pool_max: int = 10, durable: bool = True) -> DatabaseStore:
    """Open the database named by ``db`` (a path, ``sqlite:///path`` or ``postgresql://…``).

    ``migrate`` creates and upgrades the schema (the default); otherwise the schema must be
    current (``txcl db upgrade``). ``create=False`` refuses to create a SQLite file that does
    not exist (read-only commands). Raises :class:`StoreUnavailable` when the database cannot
    be reached, :class:`StoreError` (or a subclass) for anything else. ``durable=False`` is for
    throwaway SQLite files (no fsync at commit)."""
    from txcl.store import schema

    backend = open_backend(db, clock=clock, busy_timeout_ms=busy_timeout_ms, create=create, pool_max=pool_max,
                           durable=durable)
    try:
        if migrate:
            schema.migrate(backend)
        else:
            schema.check_current(backend)
    except BaseException:
        backend.close()
        raise
    return DatabaseStore(backend, node_id=node_id)


__all__ = ["open_store", "open_backend", "backend_kind", "sqlite_file", "is_postgres_url", "DatabaseStore", "StoreError",
           "StoreUnavailable"]
