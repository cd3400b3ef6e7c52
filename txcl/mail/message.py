"""A delivered message as the `@lmtp.msg.*` facts, parsed from its bytes with the standard
library's `email` package (the modern policy, which decodes encoded words and bodies).

The parsed fields are best effort: a part that cannot be decoded is left out, and a message
that cannot be parsed at all still has `raw` (the exact bytes, base64 with a `b64:` prefix) —
the safe way to archive or re-deliver it."""

from __future__ import annotations

import base64
import datetime as _dt
import email
import email.policy
import email.utils
import hashlib
import logging
from typing import Any

log = logging.getLogger("txcl.mail")

MAX_HEADERS = 1000  # headers kept (a message of a few MiB could otherwise have very many)


def _addresses(values: list[str]) -> list[dict[str, str]]:
    return [{"name": name, "addr": addr} for name, addr in email.utils.getaddresses(values) if addr]


def _date(value: str | None) -> str | None:
    if not value:
        return None
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.timezone.utc)
    return moment.astimezone(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _text(part: Any) -> str | None:
    if part is None:
        return None
    try:
        content = part.get_content()
    except (LookupError, ValueError, AssertionError, UnicodeError):
        payload = part.get_payload(decode=True) or b""
        content = payload.decode("utf-8", errors="replace")
    return content.replace("\r\n", "\n") if isinstance(content, str) else None  # line ends as \n


def _attachment(part: Any, inline: bool) -> dict[str, Any]:
    payload = part.get_payload(decode=True) or b""
    return {"name": part.get_filename() or "", "type": part.get_content_type(), "size": len(payload),
            "sha256": hashlib.sha256(payload).hexdigest(), "inline": inline}


def _attachments(msg: Any, bodies: tuple[Any, ...]) -> list[dict[str, Any]]:
    attached, inline = [], []
    for part in msg.walk():
        if part.is_multipart() or part in bodies or part is msg and not msg.is_multipart():
            continue
        disposition = (part.get_content_disposition() or "").lower()
        if disposition == "attachment" or (not disposition and part.get_filename()):
            attached.append(_attachment(part, False))
        elif disposition == "inline" and (part.get("content-id") or part.get_filename()) \
                or part.get("content-id") and not disposition:
            inline.append(_attachment(part, True))
    return attached + inline  # what a person attached first, then what the HTML shows


def parse_message(raw: bytes) -> dict[str, Any]:
    """The `@lmtp.msg` facts of a message."""
    facts: dict[str, Any] = {"id": None, "date": None, "from": [], "to": [], "cc": [], "subject": None,
                             "text": None, "html": None, "headers": {}, "attachments": [],
                             "raw": "b64:" + base64.b64encode(raw).decode("ascii")}
    try:
        msg = email.message_from_bytes(raw, policy=email.policy.default)
        headers: dict[str, list[str]] = {}
        for index, (name, value) in enumerate(msg.items()):
            if index >= MAX_HEADERS:
                break
            headers.setdefault(name.lower(), []).append(str(value))
        facts["headers"] = dict(sorted(headers.items()))
        message_id = msg.get("message-id")
        facts["id"] = str(message_id).strip() if message_id else None
        facts["date"] = _date(str(msg.get("date") or ""))
        for field in ("from", "to", "cc"):
            facts[field] = _addresses([str(v) for v in msg.get_all(field, [])])
        subject = msg.get("subject")
        facts["subject"] = str(subject) if subject is not None else None
        plain = msg.get_body(preferencelist=("plain",))
        html = msg.get_body(preferencelist=("html",))
        facts["text"] = _text(plain)
        facts["html"] = _text(html)
        facts["attachments"] = _attachments(msg, tuple(p for p in (plain, html) if p is not None))
    except Exception as exc:  # noqa: BLE001 - a malformed message keeps its raw bytes
        log.info("txcl: a delivered message could not be parsed (%s: %s); only raw is set", type(exc).__name__, exc)
    return facts


def message_key(raw: bytes, message_id: str | None) -> str:
    """What names a message across the MTA's delivery attempts: its Message-ID, or (without
    one) the digest of its bytes, which a repeated delivery sends unchanged."""
    if message_id:
        return "id:" + message_id
    return "sha256:" + hashlib.sha256(raw).hexdigest()


__all__ = ["parse_message", "message_key"]
