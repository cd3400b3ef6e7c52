"""Response shaping and error answers, as plain `Answer` values.

An `Answer` is status + header list + body bytes; `app.py` sends it over ASGI. Keeping the
shaping pure makes it testable without a server and reusable by the continuation endpoints
(a completed poll answers "exactly as a synchronous request would have").
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any, Iterable

import attrs

from txcl import runtime_codes as rc
from txcl.values.jsonio import dumps_utf8

JSON_TYPE = b"application/json"
IGNORED_HEADERS = frozenset({"connection", "transfer-encoding", "content-length", "keep-alive", "upgrade",
                             "te", "x-request-id"})
_TOKEN_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_BAD_VALUE_RE = re.compile(r"[\r\n\x00]")


@attrs.define
class Answer:
    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes = b""
    trace_event: Any = None  # (kind, data) the request's trace records with this answer

    def header(self, name: str) -> str | None:
        key = name.lower().encode("latin-1")
        for k, v in self.headers:
            if k == key:
                return v.decode("latin-1")
        return None

    def set_header(self, name: str, value: str) -> None:
        key = name.lower().encode("latin-1")
        self.headers = [(k, v) for k, v in self.headers if k != key]
        self.headers.append((key, value.encode("latin-1")))


def response_status(res: Any) -> int:
    """`@web.res.status` when an integer (or integer string) in 100–599, else 200."""
    if not isinstance(res, dict):
        return 200
    status = res.get("status")
    if isinstance(status, bool) or status is None:
        return 200
    if isinstance(status, int):
        value = status
    elif isinstance(status, str) and re.fullmatch(r"[0-9]{1,4}", status):
        value = int(status)
    else:
        return 200
    return value if 100 <= value <= 599 else 200


def _header_values(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value]
    out: list[str] = []
    for item in items:
        if isinstance(item, bool) or item is None or isinstance(item, (dict, list)):
            continue
        text = item if isinstance(item, str) else str(item)
        if _BAD_VALUE_RE.search(text):
            continue  # never let a rule split a header line
        out.append(text)
    return out


def rule_headers(res: Any) -> list[tuple[bytes, bytes]]:
    """`@web.res.headers.<name>` → header lines (arrays repeat the header, e.g. Set-Cookie)."""
    headers = res.get("headers") if isinstance(res, dict) else None
    if not isinstance(headers, dict):
        return []
    out: list[tuple[bytes, bytes]] = []
    for name, value in headers.items():
        lname = name.lower()
        if lname in IGNORED_HEADERS or not _TOKEN_RE.match(name):
            continue
        for text in _header_values(value):
            try:
                out.append((lname.encode("latin-1"), text.encode("latin-1")))
            except UnicodeEncodeError:
                out.append((lname.encode("latin-1"), text.encode("utf-8")))
    return out


def strip_private(envelope: dict) -> dict:
    """The envelope without top-level keys that start with `_`."""
    return {k: v for k, v in envelope.items() if not k.startswith("_")}


def bodyless(status: int, method: str) -> bool:
    """HEAD answers and statuses 1xx, 204 and 304 carry no body."""
    return method == "HEAD" or status < 200 or status in (204, 304)


def finish(answer: Answer, method: str, rid: str) -> Answer:
    """Set X-Request-ID and Content-Length; drop the body where HTTP forbids one."""
    answer.headers.append((b"x-request-id", rid.encode("latin-1")))
    status = answer.status
    if status < 200 or status in (204, 304):
        answer.body = b""
        return answer
    answer.headers.append((b"content-length", str(len(answer.body)).encode("ascii")))
    if method == "HEAD":
        answer.body = b""
    return answer


def shape_completed(envelope: dict, *, private: bool = False) -> Answer:
    """The answer of a completed request from its final envelope."""
    txc = envelope.get("_txc")
    web = txc.get("web") if isinstance(txc, dict) else None
    res = web.get("res") if isinstance(web, dict) else None
    status = response_status(res)
    if status < 200:
        # HTTP/1.1 has no final 1xx answer (uvicorn/h11 refuse to send one): say so clearly
        return error_answer({"error": {"code": rc.BAD_RESPONSE_STATUS.code,
                                       "message": f"_txc.web.res.status {status} cannot be a final answer"}}, 500)
    headers = rule_headers(res)
    if isinstance(res, dict) and "body" in res:
        raw = res["body"]
        try:
            if not isinstance(raw, str):
                raise ValueError("not a string")
            body = base64.b64decode(raw, validate=True)
        except (ValueError, binascii.Error):
            return error_answer({"error": {"code": rc.BAD_RESPONSE_BODY.code,
                                           "message": "_txc.web.res.body is not valid base64"}}, 500)
        return Answer(status, headers, body)
    shown = envelope if private else strip_private(envelope)
    body = dumps_utf8(shown)
    if not any(k == b"content-type" for k, _ in headers):
        headers.append((b"content-type", JSON_TYPE))
    return Answer(status, headers, body)


def json_answer(status: int, payload: Any, extra: Iterable[tuple[str, str]] = ()) -> Answer:
    headers = [(b"content-type", JSON_TYPE)]
    headers.extend((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in extra)
    return Answer(status, headers, dumps_utf8(payload))


def error_answer(payload: dict, status: int) -> Answer:
    """An error outcome: JSON, `Cache-Control: no-store`, never the envelope."""
    return json_answer(status, payload, [("cache-control", "no-store")])


def error_payload(code: str, message: str, **details: Any) -> dict:
    return {"error": {"code": code, "message": message, **details}}


STORE_RETRY_AFTER_S = 2


def store_unavailable_answer(exc: Exception) -> Answer:
    """503 + Retry-After: the database cannot be reached right now; nothing was lost, and the
    same request may be sent again."""
    payload = error_payload(rc.STORE_UNAVAILABLE.code, "the database is unavailable; retry later",
                            retry_after_s=STORE_RETRY_AFTER_S)
    return json_answer(503, payload, [("cache-control", "no-store"), ("retry-after", str(STORE_RETRY_AFTER_S))])


def suspended_answer(outcome: Any, *, path: str, accept: str, query: dict[str, list[str]],
                     retry_after_ms: int, private: bool = False) -> Answer:
    """303 to the poll URL for browsers, else 202 with Location."""
    rcid = getattr(outcome, "rcid", "")
    location = f"{path}?_txc.continuation={rcid}"
    wants_json = "json" in query.get("format", [])
    if "text/html" in accept and not wants_json:
        return Answer(303, [(b"location", location.encode("latin-1")), (b"cache-control", b"no-store"),
                            (b"content-type", b"text/plain; charset=utf-8")],
                      f"See Other: {location}\n".encode("utf-8"))
    envelope = getattr(outcome, "envelope", None)
    body: dict = {}
    if isinstance(envelope, dict):
        body = dict(envelope) if private else strip_private(envelope)
    body["status"] = "running"
    body["continuation"] = rcid
    retry = max(1, -(-retry_after_ms // 1000))
    return json_answer(202, body, [("location", location), ("retry-after", str(retry)),
                                   ("cache-control", "no-store")])
