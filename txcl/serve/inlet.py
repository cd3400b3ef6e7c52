"""The web inlet: request ids, the capped body read and the envelope.

Everything here works on the raw ASGI scope so the hot path builds the envelope in one pass
without Starlette's Request wrapper.
"""

from __future__ import annotations

import base64
import re
from typing import Any, Awaitable, Callable
from urllib.parse import unquote

import attrs

from txcl.ids import new_request_id
from txcl.runtime.clock import now_rfc3339

CLIENT_RID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
CONTINUATION_PARAM = "_txc.continuation"

Receive = Callable[[], Awaitable[dict]]


class BodyTooLarge(Exception):
    """The request body exceeds --web-max-body-bytes."""


class ClientGone(Exception):
    """The client disconnected while the body was being read."""


def request_id(headers: list[tuple[bytes, bytes]], trust: bool) -> str:
    """A new ULID, or the client's `X-Request-ID` when trusted and well-formed."""
    if trust:
        for name, value in headers:
            if name == b"x-request-id":
                text = value.decode("latin-1")
                if CLIENT_RID_RE.match(text):
                    return text
                break
    return new_request_id()


def declared_length(headers: list[tuple[bytes, bytes]]) -> int | None:
    for name, value in headers:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def read_body(receive: Receive, cap: int, declared: int | None = None) -> bytes:
    """The whole body, counting while streaming; BodyTooLarge beyond `cap` bytes."""
    if declared is not None and declared > cap:
        raise BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        kind = message["type"]
        if kind == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        if chunk:
            size += len(chunk)
            if size > cap:
                raise BodyTooLarge
            chunks.append(chunk)
        if not message.get("more_body", False):
            break
    if len(chunks) == 1:
        return chunks[0]
    return b"".join(chunks)


def parse_query(raw: str) -> dict[str, list[str]]:
    """Decoded query parameters, every value kept in arrival order (blank values too)."""
    out: dict[str, list[str]] = {}
    if not raw:
        return out
    for part in raw.split("&"):
        if not part:
            continue
        name, _, value = part.partition("=")
        name = unquote(name.replace("+", " "))
        value = unquote(value.replace("+", " "))
        out.setdefault(name, []).append(value)
    return out


def parse_cookies(values: list[str]) -> dict[str, list[str]]:
    """`Cookie` header values → name → values (lenient, like Go's readCookies)."""
    out: dict[str, list[str]] = {}
    for header in values:
        for part in header.split(";"):
            part = part.strip()
            if not part:
                continue
            name, eq, value = part.partition("=")
            name = name.strip()
            if not name or not eq:
                continue
            value = value.strip()
            if len(value) >= 2 and value[0] == '"' and value[-1] == '"':
                value = value[1:-1]
            out.setdefault(name, []).append(value)
    return out


def split_host(host: str) -> tuple[str, str]:
    """(hostname, port) of a Host header value; port is "" when absent."""
    if host.startswith("["):  # IPv6 literal
        end = host.find("]")
        if end != -1:
            rest = host[end + 1:]
            return host[1:end], rest[1:] if rest.startswith(":") else ""
    name, sep, port = host.rpartition(":")
    if sep and port.isdigit():
        return name, port
    return host, ""


@attrs.frozen
class RequestHead:
    """What routing needs, read from the ASGI scope before the body."""

    method: str
    host: str
    path: str
    raw_query: str
    query: dict[str, list[str]]
    headers: dict[str, list[str]]

    @property
    def has_continuation(self) -> bool:
        return CONTINUATION_PARAM in self.query

    def first(self, name: str, default: str = "") -> str:
        values = self.headers.get(name)
        return values[0] if values else default


def request_head(scope: dict[str, Any]) -> RequestHead:
    headers: dict[str, list[str]] = {}
    for name, value in scope["headers"]:
        headers.setdefault(name.decode("latin-1").lower(), []).append(value.decode("latin-1"))
    host_values = headers.get("host")
    host = host_values[0] if host_values else ""
    if not host:
        server = scope.get("server")
        if server:
            host = f"{server[0]}:{server[1]}" if server[1] else str(server[0])
    raw_query = scope.get("query_string", b"").decode("latin-1")
    return RequestHead(scope["method"].upper(), host, scope["path"], raw_query, parse_query(raw_query), headers)


def json_body(head: RequestHead, body: bytes) -> tuple[dict | None, str | None]:
    """A JSON object body, as `txcl run --input` reads its document: (the object, None), or
    (None, why not) when the content type says JSON but the body is not a JSON object, or
    (None, None) when it is not JSON at all."""
    values = head.headers.get("content-type") or [""]
    media = values[0].split(";", 1)[0].strip().lower()
    if not body or not (media == "application/json" or (media.startswith("application/") and media.endswith("+json"))):
        return None, None
    from txcl.values.jsonio import JsonError, loads

    try:
        document = loads(body)
    except (JsonError, ValueError) as exc:
        return None, f"the body is not valid JSON: {exc}"
    if not isinstance(document, dict):
        return None, "the body is JSON but not an object"
    return document, None


def build_envelope(scope: dict[str, Any], head: RequestHead, body: bytes, rid: str, *,
                   mock_header: bool = False, document: dict | None = None) -> dict:
    """The starting envelope of an HTTP request; the interpreter stamps `_txc.stack`.
    `document`: the JSON object body, merged into the root (reserved `_txc` and `_ts` keys
    dropped, as for any untrusted input)."""
    headers = head.headers
    host = head.host
    hostname, port = split_host(host)
    raw_query = head.raw_query
    scheme = scope.get("scheme", "http")
    raw_path = scope.get("raw_path") or scope["path"].encode("utf-8")
    full = f"{scheme}://{host}{raw_path.decode('latin-1')}" + (f"?{raw_query}" if raw_query else "")
    client = scope.get("client")
    remote = f"{client[0]}:{client[1]}" if client else ""
    req = {
        "method": head.method,
        "host": host,
        "proto": f"HTTP/{scope.get('http_version', '1.1')}",
        "remote_addr": remote,
        "headers": headers,
        "cookies": parse_cookies(headers["cookie"]) if "cookie" in headers else {},
        "url": {
            "full": full, "scheme": scheme, "hostname": hostname, "port": port,
            "path": head.path, "user": "", "query": head.query, "raw_query": raw_query,
        },
        "body": base64.b64encode(body).decode("ascii") if body else "",
    }
    txc: dict[str, Any] = {"src": "http", "rid": rid, "web": {"req": req}}
    if CONTINUATION_PARAM in head.query:
        txc["continuation"] = head.query[CONTINUATION_PARAM][0]
    if mock_header and "x-txco-mocks" in headers:
        globs = [g.strip() for v in headers["x-txco-mocks"] for g in v.split(",")]
        txc["mocks"] = [g for g in globs if g]
    envelope: dict[str, Any] = {}
    if document:
        envelope.update((k, v) for k, v in document.items() if k not in ("_txc", "_ts"))
    envelope["_ts"] = now_rfc3339()
    envelope["_txc"] = txc
    return envelope
