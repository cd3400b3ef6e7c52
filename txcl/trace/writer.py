"""Writing finished traces to the store: directly, or in group commits.

Each trace is still written whole inside one transaction; a batching
writer puts several segments' traces into the same transaction so a busy server pays one
durable commit per batch instead of one per request. A batch is written when it holds
`max_batch` traces, when its oldest trace is `max_delay_s` old (checked at each submit),
and on `flush()` / `close()`.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from txcl.trace.format import TraceRecord
from txcl.trace.packing import pack_trace


class ThreadedTraceWriter:
    """Group-commit writer over a TraceStore (thread-safe)."""

    packs_records = True  # each record is packed as it is submitted (see TraceRecord.pack)

    def __init__(self, store: Any, max_batch: int = 1, max_delay_s: float = 0.05):
        self.store = store
        self.max_batch = max(1, max_batch)
        self.max_delay_s = max_delay_s
        self._buffer: list[TraceRecord] = []
        self._oldest = 0.0
        self._lock = threading.Lock()

    def submit(self, record: TraceRecord) -> None:
        record.pack(pack_trace)  # waits as two texts, not as lists the collector rescans
        with self._lock:
            if not self._buffer:
                self._oldest = time.monotonic()
            self._buffer.append(record)
            due = len(self._buffer) >= self.max_batch or time.monotonic() - self._oldest >= self.max_delay_s
            batch = self._take() if due else None
        if batch:
            self.store.write_traces(batch)

    def _take(self) -> list[TraceRecord]:
        batch, self._buffer = self._buffer, []
        return batch

    def flush(self) -> None:
        with self._lock:
            batch = self._take()
        if batch:
            self.store.write_traces(batch)

    def pending(self) -> int:
        return len(self._buffer)

    close = flush
