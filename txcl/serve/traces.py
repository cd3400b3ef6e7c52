"""Trace writing off the request path: records are queued and written in batches by one
thread, so a request never waits for a durable SQLite commit of its own trace.

`flush()` waits until everything queued so far is written (tests, shutdown). If the process
dies, the traces still queued are lost; traces are diagnostics, not state.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Any

log = logging.getLogger("txcl.serve")

_STOP = object()
MAX_BATCH = 2000
LINGER_S = 0.1  # collect for this long after the first record: fewer, larger commits


class TraceWriter:
    def __init__(self, store: Any, linger_s: float = LINGER_S):
        self.store = store
        self.linger_s = linger_s
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="txcl-traces", daemon=True)
        self._thread.start()

    def __call__(self, record: Any) -> None:
        """The interpreter's `trace_sink`."""
        self._queue.put(record)

    def flush(self, timeout: float | None = None) -> None:
        done = threading.Event()
        self._queue.put(done)
        done.wait(timeout)

    def close(self, timeout: float | None = 10.0) -> None:
        if self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join(timeout)

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            if self.linger_s and not isinstance(item, threading.Event) and item is not _STOP:
                time.sleep(self.linger_s)  # sleeping releases the GIL: the requests go on
            batch: list[Any] = []
            signals: list[threading.Event] = []
            stop = False
            while True:
                if item is _STOP:
                    stop = True
                elif isinstance(item, threading.Event):
                    signals.append(item)
                else:
                    batch.append(item)
                if len(batch) >= MAX_BATCH:
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            if batch:
                try:
                    self.store.write_traces(batch)
                except Exception as exc:  # noqa: BLE001 - a trace failure never stops serving
                    log.warning("txcl: could not write %d trace(s): %s", len(batch), exc)
            for signal in signals:
                signal.set()
            if stop:
                return
