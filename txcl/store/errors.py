"""The store's errors. Backends translate their driver's exceptions into these, so nothing
outside ``txcl/store/`` ever catches a ``sqlite3`` or ``psycopg`` exception."""

from __future__ import annotations

from txcl import runtime_codes as rc


class StoreError(Exception):
    """The store refused an operation (a bug, a broken database file, a constraint)."""


class StoreUnavailable(StoreError):
    """The database cannot be reached right now (server down, file locked too long, a lost
    connection). Nothing was changed, or the change is unknown and safe to retry: answer 503
    with ``Retry-After`` and let the caller try again (``txcl_store_unavailable``)."""

    code = rc.STORE_UNAVAILABLE.code


class SchemaTooNew(StoreError):
    """The database was written by a newer version of txcl."""


class SchemaOutdated(StoreError):
    """The database needs ``txcl db upgrade`` before this command can use it."""


class RunLost(StoreError):
    """The fence failed: the segment no longer owns the run (``txcl_run_lost``)."""


class UnknownRun(StoreError):
    """No run with that id."""


class KvError(StoreError):
    """A kv operation failed for a reason the op should report (e.g. non-integer incr)."""


__all__ = ["StoreError", "StoreUnavailable", "SchemaTooNew", "SchemaOutdated", "RunLost", "UnknownRun", "KvError"]
