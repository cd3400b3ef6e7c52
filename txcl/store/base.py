"""The store protocols the runtime talks to (nothing here knows rules).

Split by concern so a backend can be assembled from parts: `TraceStore` (RUNTIME.md §8),
`KvStore` (the `txco://kv/*` builtins, §5.2). The continuation procedures of
CONTINUATIONS.md §5.4 live in their own protocol beside these.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import attrs


class StoreError(Exception):
    """The store cannot be reached or refused an operation (`txcl_store_unavailable`)."""


class KvError(Exception):
    """A kv operation failed for a reason the op should report (e.g. non-integer incr)."""


@attrs.define
class TraceRecord:
    """One segment's trace, written in one transaction (§8.1)."""

    request: dict[str, Any]  # rid, origin_rid, run_id, src, entry_stack, started_ms, finished_ms, status, …
    steps: list[dict[str, Any]] = attrs.Factory(list)
    # Events are {"seq", "at_ms", "kind", "data"} dicts, or (seq, at_ms, kind, data) tuples
    # as the recorder makes them; the store reads them back as dicts.
    events: list[Any] = attrs.Factory(list)


@runtime_checkable
class TraceStore(Protocol):
    def write_traces(self, traces: list[TraceRecord]) -> None:
        """Write every record (request row, steps, events) in one transaction."""

    def get_trace(self, rid: str) -> TraceRecord | None: ...

    def last_trace_rid(self) -> str | None: ...

    def trace_rids_for_run(self, run_id: str) -> list[str]: ...

    def purge_traces(self, before_ms: int) -> int: ...


@attrs.frozen
class KvEntry:
    key: str
    value: Any
    version: int


@runtime_checkable
class KvStore(Protocol):
    def kv_get(self, ns: str, key: str, now_ms: int) -> KvEntry | None: ...

    def kv_set(self, ns: str, key: str, value: Any, now_ms: int, expires_ms: int | None = None) -> int:
        """Store `value`; returns the new version."""

    def kv_delete(self, ns: str, key: str, now_ms: int) -> bool: ...

    def kv_incr(self, ns: str, key: str, by: int, now_ms: int) -> KvEntry:
        """Atomic add; a missing key counts as 0; raises KvError on a non-integer value."""

    def kv_cas(self, ns: str, key: str, value: Any, expect_version: int, now_ms: int) -> tuple[bool, KvEntry | None]:
        """Atomic compare-and-swap; expect_version 0 means "must not exist"."""

    def kv_list(self, ns: str, prefix: str, limit: int, now_ms: int) -> tuple[list[KvEntry], bool]: ...


class Store(TraceStore, KvStore, Protocol):
    """What the interpreter needs from a backend (traces and kv)."""

    def close(self) -> None: ...
