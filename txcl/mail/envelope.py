"""The envelope a stack receives for one delivered message (the part of its recipients that
routed to that stack)."""

from __future__ import annotations

from typing import Any


def mail_envelope(*, msg: dict[str, Any], mail_from: str, size: int, rcpt: list[str],
                  transaction_rcpt: list[str], listener: str = "", client_ip: str = "",
                  helo: str = "") -> dict[str, Any]:
    return {"_txc": {"lmtp": {"listener": listener, "client": {"ip": client_ip, "helo": helo},
                              "mail": {"from": mail_from, "size": size}, "rcpt": list(rcpt),
                              "transaction_rcpt": list(transaction_rcpt), "msg": msg}}}


__all__ = ["mail_envelope"]
