"""Worker acks waiting for their write: one commit fewer per suspend → callback → resume cycle.

A worker's 202 moves its interaction from ``dispatching`` to ``dispatched`` and keeps the ack's
body (the job id). Nothing waits on that write: a completion is admitted from ``dispatching``
as well, and the only reader that cares is the sweeper, which resends a dispatch still
``dispatching`` after ``--reconcile-after`` (30 s). So the write is held back for
``--ack-write-delay`` (20 ms) and then made for every ack that came in meanwhile, in one
commit shared with the other store calls queued at that moment. When the interaction's
callback reaches this process first — a fast worker — its ack is written in the admitting
transaction instead (by the statement that closes the call), and the cycle commits three
times (park, admission with release, finish) instead of four.

What a crash can cost: acks held back when the process dies are never written, so those
interactions stay ``dispatching`` and the sweeper sends them again after ``--reconcile-after``
(the worker gets the same ``Idempotency-Key``). A crash between the worker's 202 and the ack's
commit could always do that; holding the write back only widens the window by the delay. An
ack that names a ``cancel_url`` is written at once (a cancellation needs it), as is every ack
of a one-shot command and every ack when the delay is 0.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any, Callable

log = logging.getLogger("txcl.continuations")

AckRow = tuple  # (opc, ack body) or (opc, ack body, token), as ``store.mark_ack`` takes them


class PendingAcks:
    """Acks received and not yet written, by op continuation id, in arrival order.

    ``add`` runs on the event loop; ``take`` may run on the store lane's thread (a callback
    admission folds its own interaction's ack into its transaction), hence the lock."""

    def __init__(self, delay_ms: int, write: Callable[[list[AckRow]], Any]) -> None:
        self.delay_s = max(0, delay_ms) / 1000
        self._write = write  # async: writes the given acks (one batched store call)
        self._rows: dict[str, AckRow] = {}
        # acks whose write has started but not committed: a callback admitted meanwhile
        # writes its own again in its transaction (whichever commits first wins, the other
        # finds the row moved on), so the ack body is never lost to that race
        self._writing: dict[str, AckRow] = {}
        self._lock = threading.Lock()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_loop: asyncio.AbstractEventLoop | None = None
        self._writes: set[asyncio.Task] = set()

    def __len__(self) -> int:
        return len(self._rows)

    def add(self, rows: list[AckRow]) -> None:
        """Hold these acks back; a write of everything held is due after the delay."""
        with self._lock:
            for row in rows:
                self._rows[row[0]] = row
        loop = asyncio.get_running_loop()
        if self._timer is None or self._timer_loop is not loop:  # none yet, or on a loop now gone
            self._timer = loop.call_later(self.delay_s, self._due)
            self._timer_loop = loop

    def take(self, opc: str) -> AckRow | None:
        """The held-back ack of one interaction, now the caller's to write (None: none held)."""
        with self._lock:
            row = self._rows.pop(opc, None)
            return row if row is not None else self._writing.get(opc)

    def take_all(self) -> list[AckRow]:
        """Every ack held back, now being written by the caller."""
        with self._lock:
            rows = list(self._rows.values())
            self._rows.clear()
            self._writing.update((row[0], row) for row in rows)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        return rows

    def _due(self) -> None:
        self._timer = None
        rows = self.take_all()
        if rows:
            task = asyncio.get_running_loop().create_task(self._write_logged(rows))
            self._writes.add(task)
            task.add_done_callback(self._writes.discard)

    async def _write_logged(self, rows: list[AckRow]) -> None:
        try:
            await self._write(rows)
        except Exception as exc:  # noqa: BLE001 - the sweeper resends what stayed `dispatching`
            log.warning("txcl: %d worker ack(s) could not be written (%s); those dispatches are sent "
                        "again after --reconcile-after", len(rows), exc)
        finally:
            with self._lock:
                for row in rows:
                    self._writing.pop(row[0], None)

    async def flush(self) -> None:
        """Write everything held back now, and wait for writes already started (shutdown)."""
        rows = self.take_all()
        if rows:
            await self._write_logged(rows)
        if self._writes:
            await asyncio.gather(*list(self._writes), return_exceptions=True)


def mark_then(ack: AckRow | None, admit: Callable[..., Any]) -> Any:
    """``admit()`` (``store.admit_and_continue`` with its arguments bound: one write
    transaction) with the interaction's held-back ack written in the same transaction, by
    the admission itself (``admit(ack=ack)``; without one, just ``admit()``)."""
    if ack is None:
        return admit()
    return admit(ack=ack)


__all__ = ["PendingAcks", "mark_then"]
