"""The one store class: every procedure (continuations, traces, kv) over one backend."""

from __future__ import annotations

import os
import socket
from typing import Callable

from txcl.store.backend import SqlBackend
from txcl.store.procedures.clock import ClockProcedures
from txcl.store.procedures.mail import MailProcedures
from txcl.store.procedures.run_operations import RunOperationProcedures
from txcl.store.procedures.traces_kv import KvProcedures, TraceProcedures


def default_node_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class DatabaseStore(RunOperationProcedures, TraceProcedures, KvProcedures, ClockProcedures, MailProcedures):
    """Traces, kv, durable runs, cron ticks, scheduled events and mail deliveries in one database (open it with :func:`txcl.store.open_store`)."""

    def __init__(self, backend: SqlBackend, *, node_id: str | None = None) -> None:
        self.backend = backend
        self.node_id = node_id or default_node_id()

    @property
    def kind(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self.backend.kind

    def describe(self) -> str:
        return self.backend.describe()

    def batching_paused(self) -> bool:
        """Whether batches are paused for now: one broke lately because another node writes
        the same runs (PostgreSQL; never on SQLite)."""
        return self.backend.batching_paused()

    @property
    def serialises_writers(self) -> bool:
        """Whether the database takes one write transaction at a time (SQLite): then queuing
        writes on one thread costs nothing in parallelism."""
        return self.backend.serialises_writers

    def subscribe(self, listener: Callable[[str | None], None]) -> None:
        self.backend.subscribe(listener)

    def unsubscribe(self, listener: Callable[[str | None], None]) -> None:
        self.backend.unsubscribe(listener)

    def vacuum(self) -> None:
        """Give the space of purged rows back to the file system (`txcl db vacuum`)."""
        self.backend.vacuum()

    def close(self) -> None:
        self.backend.close()


__all__ = ["DatabaseStore", "default_node_id"]
