"""Mail procedures: what the LMTP inlet remembers of each delivery, so that a delivery the MTA
repeats — after a 4xx, or after the connection was lost before it read the verdict — is
recognised by its Message-ID and recipient and answered without a second walk."""

from __future__ import annotations

from typing import Sequence

from txcl.store.backend import Tx
from txcl.store.procedures import write_procedure


class MailProcedures:
    node_id: str

    @write_procedure
    def begin_deliveries(self, t: Tx, keys: Sequence[str], rid: str,
                         stale_after_ms: int) -> dict[str, tuple[str, int | None, str | None]]:
        """For each delivery key: ("new", None, None) — this delivery walks; ("done", code,
        message) — answered before, give the same verdict; ("busy", None, None) — another
        session is walking it now. A walk whose session stopped more than `stale_after_ms`
        ago without a verdict is taken over ("new")."""
        answers: dict[str, tuple[str, int | None, str | None]] = {}
        for key in keys:
            inserted = t.run("INSERT INTO lmtp_deliveries (delivery_key, status, rid, node, created_ms, updated_ms) "
                             "VALUES (?, 'walking', ?, ?, ?, ?) ON CONFLICT (delivery_key) DO NOTHING",
                             (key, rid, self.node_id, t.now, t.now))
            if inserted:
                answers[key] = ("new", None, None)
                continue
            status, code, message, updated = t.one("SELECT status, code, message, updated_ms FROM lmtp_deliveries "
                                                   "WHERE delivery_key = ?", (key,))
            if status == "done":
                answers[key] = ("done", int(code), message)
            elif updated < t.now - stale_after_ms:
                t.run("UPDATE lmtp_deliveries SET rid = ?, node = ?, updated_ms = ? WHERE delivery_key = ?",
                      (rid, self.node_id, t.now, key))
                answers[key] = ("new", None, None)
            else:
                answers[key] = ("busy", None, None)
        return answers

    @write_procedure
    def finish_deliveries(self, t: Tx, verdicts: Sequence[tuple[str, int, str]], rid: str) -> None:
        """Record the final verdicts (2xx, 5xx) of this session's walks; forget the keys answered
        4xx, so that the MTA's next attempt walks again."""
        for key, code, message in verdicts:
            if 400 <= code < 500:
                t.run("DELETE FROM lmtp_deliveries WHERE delivery_key = ? AND rid = ?", (key, rid))
            else:
                t.run("UPDATE lmtp_deliveries SET status = 'done', code = ?, message = ?, updated_ms = ? "
                      "WHERE delivery_key = ? AND rid = ?", (code, message, t.now, key, rid))

    @write_procedure
    def purge_deliveries(self, t: Tx, before_ms: int) -> int:
        """Forget deliveries older than `before_ms` (an MTA gives up long before)."""
        return t.run("DELETE FROM lmtp_deliveries WHERE updated_ms < ?", (before_ms,))


__all__ = ["MailProcedures"]
