"""A small LMTP client for the tests, on Python's smtplib.LMTP: smtplib reads one reply after
DATA, LMTP sends one per accepted recipient — the others are read here."""

from __future__ import annotations

import smtplib


def deliver(where: str, mail_from: str, recipients: list[str], message: bytes,
            timeout: float = 30.0) -> tuple[dict[str, tuple[int, str]], list[tuple[int, str]]]:
    """(reply of each RCPT TO, replies after DATA in the order of the accepted recipients).
    `where` is `host:port` or a Unix socket path."""
    if where.startswith("/"):
        client = smtplib.LMTP(where, timeout=timeout)
    else:
        host, _, port = where.rpartition(":")
        client = smtplib.LMTP(host, int(port), timeout=timeout)
    try:
        client.ehlo("test.client")
        code, text = client.mail(mail_from)
        assert code == 250, (code, text)
        at_rcpt = {}
        for rcpt in recipients:
            code, text = client.rcpt(rcpt)
            at_rcpt[rcpt] = (code, text.decode())
        accepted = [r for r in recipients if at_rcpt[r][0] == 250]
        if not accepted:
            return at_rcpt, []
        client.putcmd("data")
        code, text = client.getreply()
        assert code == 354, (code, text)
        body = message.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
        body = b"\r\n".join(b"." + line if line.startswith(b".") else line for line in body.split(b"\r\n"))
        client.send(body + (b"" if body.endswith(b"\r\n") else b"\r\n") + b".\r\n")
        after = []
        for _ in accepted:
            code, text = client.getreply()
            after.append((code, text.decode()))
        client.quit()
        return at_rcpt, after
    finally:
        client.close()


def message(subject: str = "wifi keeps dropping", *, message_id: str | None = "<m1@example.com>",
            to: str = "support@mail.test", body: str = "Hi support,\n\nMy wifi drops.\n", extra: str = "") -> bytes:
    head = f"From: Alice <alice@example.com>\nTo: {to}\nSubject: {subject}\n"
    if message_id:
        head += f"Message-ID: {message_id}\n"
    return (head + extra + "\n" + body).encode()
