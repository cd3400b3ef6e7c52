"""Trace writing off the request path: the interpreter's trace sink queues each record, and
the event loop writes what accumulated every LINGER_S in one transaction.

Why on the loop and not in a writer thread: sqlite3 releases the GIL around every statement,
and each time a writer thread takes it back from the busy request loop costs both threads
CPU — more than the loop's own pause while a batch commits, which MAX_BATCH bounds (the
measurements are on the performance page, docs/performance.md, "Why the code is shaped this
way"). The threaded writer for one-shot commands is txcl.trace.writer.ThreadedTraceWriter.

Records that arrive from another thread are handed to the loop, or written at once when no
loop is running. `flush()` writes everything queued (tests, shutdown). Traces still queued
when the process is killed are lost: they are diagnostics, not state.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from txcl.trace.format import TraceRecord
from txcl.trace.packing import pack_trace

log = logging.getLogger("txcl.serve")

LINGER_S = 0.05
MAX_BATCH = 500


class AsyncTraceWriter:
    packs_records = True  # each record is packed as it is queued (see TraceRecord.pack)

    def __init__(self, store: Any, linger_s: float = LINGER_S, max_batch: int = MAX_BATCH):
        self.store = store
        self.linger_s = linger_s
        self.max_batch = max_batch
        self._pending: list[Any] = []
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self.written = 0

    def __call__(self, record: Any) -> None:
        """The interpreter's `trace_sink`."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        owner = self._loop
        if loop is owner and loop is not None:  # the common case: a request on the serving loop
            self._queue(record, loop)
            return
        if owner is not None and loop is not None and loop is not owner and (
                owner.is_closed() or not owner.is_running()):
            owner = None  # the previous loop is gone: adopt this one (its timer never fires)
            if self._timer is not None:
                self._timer = None
            self._loop = None
        if loop is None or (owner is not None and loop is not owner):
            if owner is not None and owner.is_running() and not owner.is_closed():
                owner.call_soon_threadsafe(self._queue, record, owner)
            else:
                self._write([record])
            return
        self._queue(record, loop)

    def _queue(self, record: Any, loop: asyncio.AbstractEventLoop) -> None:
        if isinstance(record, TraceRecord):
            record.pack(pack_trace)  # waits as two texts, not as lists the collector rescans
        self._loop = loop
        self._pending.append(record)
        if len(self._pending) >= self.max_batch:
            self._flush_pending()
        elif self._timer is None:
            self._timer = loop.call_later(self.linger_s, self._flush_pending)

    def _flush_pending(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._pending = self._pending, []
        self._write(batch)

    def _write(self, batch: list[Any]) -> None:
        if not batch:
            return
        try:
            with self._lock:
                self.store.write_traces(batch)
            self.written += len(batch)
        except Exception as exc:  # noqa: BLE001 - a trace failure never stops serving
            log.warning("txcl: could not write %d trace(s): %s", len(batch), exc)

    def flush(self, timeout: float | None = None) -> None:
        """Write everything queued so far; from another thread, waits for the loop to do it."""
        loop = self._loop
        if loop is not None and loop.is_running() and not loop.is_closed():
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is not loop:
                done = threading.Event()

                def run() -> None:
                    try:
                        self._flush_pending()
                    finally:
                        done.set()

                loop.call_soon_threadsafe(run)
                done.wait(timeout)
                return
        self._flush_pending()

    def close(self, timeout: float | None = None) -> None:
        self._flush_pending()
