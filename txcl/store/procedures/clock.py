"""Clock procedures: which node fires a cron tick (the store decides, keyed by the tick's
bucket, so each tick runs once however many nodes share the database)."""

from __future__ import annotations

from txcl.store.backend import Tx
from txcl.store.procedures import read_procedure, write_procedure


class ClockProcedures:
    node_id: str

    @write_procedure
    def claim_tick(self, t: Tx, job: str, bucket_ms: int, rid: str) -> bool:
        """Claim the tick `bucket_ms` of `job` for this node; False when another node (or an
        earlier start of this one) already fired it."""
        t.run("INSERT INTO cron_ticks (job, bucket_ms, node, rid, claimed_ms) VALUES (?, ?, ?, ?, ?) "
              "ON CONFLICT (job, bucket_ms) DO NOTHING", (job, bucket_ms, self.node_id, rid, t.now))
        row = t.one("SELECT rid FROM cron_ticks WHERE job = ? AND bucket_ms = ?", (job, bucket_ms))
        return row is not None and row[0] == rid

    @read_procedure
    def last_tick(self, t: Tx, job: str) -> int | None:
        """The bucket of the latest tick of `job` any node fired (None: never)."""
        row = t.one("SELECT MAX(bucket_ms) FROM cron_ticks WHERE job = ?", (job,))
        return int(row[0]) if row is not None and row[0] is not None else None

    @write_procedure
    def purge_ticks(self, t: Tx, before_ms: int) -> int:
        """Forget the ticks older than `before_ms` (they only guard against firing twice)."""
        return t.run("DELETE FROM cron_ticks WHERE bucket_ms < ?", (before_ms,))


__all__ = ["ClockProcedures"]
