"""The worker contract's dispatch side: the POST to the worker and its 202 ack.

`post_dispatch` sends one interaction: always POST, JSON body `{"input": …, "_txc": {…}}`
with the callback URL, expiry, ids and (for itemized ops) the item index and count; headers
carry the single-use token (`X-Txco-Continuation-Token`) and `Idempotency-Key: <opc>`. The
worker must answer exactly 202 within the ack timeout; anything else is a failed ack whose
message names what went wrong. The token is never logged and never put in an error message.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import re
import urllib.parse
from typing import Any, Callable

import attrs
import httpx

from txcl.store.records import Dispatch

try:
    from importlib.metadata import version as _pkg_version

    _VERSION = _pkg_version("txcl")
except Exception:  # noqa: BLE001 - running from a source tree
    _VERSION = "0"

USER_AGENT = f"txcl/{_VERSION}"


@attrs.frozen
class AckResult:
    opc: str
    ok: bool
    ack: Any = None  # the ack body ({"job_id": …} or {})
    error: str | None = None
    retryable: bool = False  # no answer in time, no connection, or a 5xx: worth sending again

    @property
    def job_id(self) -> Any:
        return self.ack.get("job_id") if isinstance(self.ack, dict) else None


def iso_ms(ms: int | None) -> str | None:
    if ms is None:
        return None
    moment = _dt.datetime.fromtimestamp(ms / 1000.0, tz=_dt.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def callback_url(base: str | None, opc: str) -> str | None:
    if not base:
        return None
    return base.rstrip("/") + f"/_txc/continuations/op/{opc}/complete"


def worker_url(dispatch: Dispatch) -> str:
    directives = dispatch.directives if isinstance(dispatch.directives, dict) else {}
    url = directives.get("url")
    if isinstance(url, str) and url.strip():
        return url.strip()
    return dispatch.exec_target or ""


def dispatch_body(dispatch: Dispatch, base_url: str | None) -> dict:
    """The JSON body of a dispatch (the identity stamp is not added to `input`)."""
    stack = (dispatch.stage or "").rsplit("/", 1)[0] if dispatch.stage else dispatch.op_stack
    txc: dict[str, Any] = {
        "op_continuation_id": dispatch.opc,
        "callback_url": callback_url(base_url, dispatch.opc),
        "expires_at": iso_ms(dispatch.deadline_ms),
        "run_id": dispatch.run_id,
        "stack": stack,
        "stage": dispatch.stage,
        "op": f"{dispatch.op_stack}/{dispatch.op_name}" if dispatch.op_stack else dispatch.op_name,
    }
    if dispatch.kind == "itemized":
        txc["item_index"] = dispatch.item_index
        txc["item_count"] = dispatch.item_count
    if dispatch.retry:  # WITH retries: this call failed before and is tried again (a fresh token)
        txc["retry"] = dispatch.retry
    directives = dispatch.directives if isinstance(dispatch.directives, dict) else {}
    if directives.get("heartbeat") is not None:
        from txcl.values.coerce import duration_to_ms

        every = duration_to_ms(directives["heartbeat"])
        if every is not None and every > 0:  # POST {"status": "running"} to callback_url at least this often
            txc["heartbeat_ms"] = every
    return {"input": dispatch.input, "_txc": txc}


def dispatch_headers(dispatch: Dispatch, origin_rid: str | None) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT,
               "Idempotency-Key": dispatch.idempotency_key}
    if origin_rid:
        headers["X-Request-ID"] = origin_rid
    directives = dispatch.directives if isinstance(dispatch.directives, dict) else {}
    extra = directives.get("headers")
    if isinstance(extra, dict):
        for name, value in extra.items():
            if isinstance(name, str) and isinstance(value, (str, int, float)) and not isinstance(value, bool):
                if name.lower() not in ("x-txco-continuation-token", "idempotency-key", "content-type"):
                    headers[name] = str(value)
    if dispatch.token:
        headers["X-Txco-Continuation-Token"] = dispatch.token
    return headers


def usable_cancel_url(url: Any) -> bool:
    """A cancel URL txcl will call: an absolute http(s) URL of at most 2,048 characters."""
    return (isinstance(url, str) and len(url) <= 2048 and url.startswith(("http://", "https://"))
            and not _BAD_HEADER.search(url))


async def post_dispatch(client: Any, dispatch: Dispatch, *, base_url: str | None,
                        ack_timeout_ms: int, origin_rid: str | None = None) -> AckResult:
    """POST one interaction and wait for the 202 (never raises for worker problems).

    `client` is a :class:`DispatchClient` (plain `http://` URLs go over its own keep-alive
    connections, everything else through httpx) or an `httpx.AsyncClient`."""
    from txcl.values.jsonio import dumps, loads

    url = worker_url(dispatch)
    body = dumps(dispatch_body(dispatch, base_url)).encode("utf-8")
    headers = dispatch_headers(dispatch, origin_rid)
    seconds = ack_timeout_ms / 1000.0
    target = client.lean_target(url, headers) if isinstance(client, DispatchClient) else None
    if target is not None:
        try:
            async with asyncio.timeout(seconds):
                status, content = await client.post(target, headers, body)
        except (TimeoutError, asyncio.TimeoutError):
            return AckResult(dispatch.opc, False, error=f"async worker {url}: no answer within {_fmt(ack_timeout_ms)}",
                             retryable=True)
        except (OSError, ValueError) as exc:
            reason = str(exc) or type(exc).__name__
            return AckResult(dispatch.opc, False, error=f"async worker {url}: {reason}", retryable=True)
    else:
        if isinstance(client, DispatchClient):
            client = client.httpx_client()
        try:
            response = await client.post(url, content=body, headers=headers, timeout=httpx.Timeout(seconds))
        except httpx.TimeoutException:
            return AckResult(dispatch.opc, False, error=f"async worker {url}: no answer within {_fmt(ack_timeout_ms)}",
                             retryable=True)
        except (httpx.HTTPError, OSError, ValueError) as exc:
            reason = str(exc) or type(exc).__name__
            return AckResult(dispatch.opc, False, error=f"async worker {url}: {reason}", retryable=True)
        status, content = response.status_code, response.content
    if status != 202:
        return AckResult(dispatch.opc, False, error=f"async worker {url}: expected 202, got {status}",
                         retryable=status >= 500)
    ack: Any = {}
    if content:
        try:
            parsed = loads(content.decode("utf-8", "replace"))
            if isinstance(parsed, dict):
                if "job_id" in parsed:
                    ack["job_id"] = parsed["job_id"]
                if usable_cancel_url(parsed.get("cancel_url")):
                    ack["cancel_url"] = parsed["cancel_url"]
        except Exception:  # noqa: BLE001 - an unreadable ack body is ignored
            ack = {}
    return AckResult(dispatch.opc, True, ack=ack)


# ---------------------------------------------------------------------------------------------
# The dispatch client: keep-alive HTTP/1.1 POSTs on asyncio transports
#
# A worker POST is tiny and its answer is a bare 202, so httpx's general machinery (pool
# bookkeeping, anyio streams, h11 events, cookies, redirects) cost several times the work of
# the request itself. `DispatchClient` speaks just what the dispatch needs over plain `http://`
# — one request at a time per connection, Content-Length or chunked or close-delimited
# answers, keep-alive reuse — and hands anything else (https, proxies from the environment,
# credentials or non-ASCII in the URL, caller-set framing headers) to an httpx client.

_FRAMING = frozenset({"host", "content-length", "transfer-encoding", "connection"})
_BAD_HEADER = re.compile(r"[\r\n\0]")
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")


@attrs.frozen
class LeanTarget:
    host: str
    port: int
    host_header: str
    request_target: str


class _Disconnected(ConnectionError):
    """The connection closed before any byte of the answer (a stale keep-alive connection)."""


class _Conn(asyncio.Protocol):
    """One HTTP/1.1 connection: one request in flight, the answer parsed as bytes arrive."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.waiter: asyncio.Future | None = None
        self.closed = False
        self.eof = False

    # -- protocol callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self.waiter is None or self.waiter.done():  # bytes nobody asked for: unusable
            self.closed = True
            if self.transport is not None:
                self.transport.close()
            return
        self.buf += data
        self._advance()

    def eof_received(self) -> bool:
        self.eof = True
        self._advance()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.eof = True
        self._advance()

    # -- requests
    def usable(self) -> bool:
        return not self.closed and self.transport is not None and not self.transport.is_closing()

    async def request(self, data: bytes) -> tuple[int, bytes, bool]:
        assert self.transport is not None
        self.buf.clear()
        waiter = asyncio.get_running_loop().create_future()
        self.waiter = waiter
        self.transport.write(data)
        return await waiter

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def _advance(self) -> None:
        waiter = self.waiter
        if waiter is None or waiter.done():
            return
        try:
            result = _parse_response(self.buf, self.eof)
        except ValueError as exc:
            waiter.set_exception(exc)
            return
        if result is not None:
            waiter.set_result(result)
        elif self.eof:
            if not self.buf:
                waiter.set_exception(_Disconnected("Server disconnected without sending a response."))
            else:
                waiter.set_exception(ConnectionError("Server disconnected before the response was complete."))


def _parse_response(buf: bytearray, eof: bool) -> tuple[int, bytes, bool] | None:
    """(status, body, keep-alive) once `buf` holds one whole answer; None while incomplete.
    Interim 1xx answers are skipped."""
    start = 0
    while True:
        end = buf.find(b"\r\n\r\n", start)
        if end < 0:
            if len(buf) - start > 65536:
                raise ValueError("invalid HTTP response: header section too large")
            return None
        lines = bytes(buf[start:end]).decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit() or len(parts[1]) != 3:
            raise ValueError(f"invalid HTTP response: {lines[0][:80]!r}")
        status = int(parts[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                raise ValueError("invalid HTTP response: malformed header line")
            key = name.strip().lower()
            value = value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        body_start = end + 4
        if 100 <= status < 200 and status != 101:
            start = body_start
            continue
        break
    tokens = {t.strip().lower() for t in headers.get("connection", "").split(",")}
    keep = "close" not in tokens if parts[0] == "HTTP/1.1" else "keep-alive" in tokens
    if status in (204, 304) or 100 <= status < 200:
        return status, b"", keep and len(buf) == body_start
    if "chunked" in headers.get("transfer-encoding", "").lower():
        parsed = _parse_chunked(buf, body_start)
        if parsed is None:
            return None
        body, used = parsed
        return status, body, keep and used == len(buf)
    length = headers.get("content-length")
    if length is not None:
        try:
            n = int(length.split(",")[0].strip())
        except ValueError:
            raise ValueError("invalid HTTP response: bad Content-Length") from None
        if n < 0:
            raise ValueError("invalid HTTP response: bad Content-Length")
        if len(buf) - body_start < n:
            return None
        return status, bytes(buf[body_start:body_start + n]), keep and len(buf) == body_start + n
    if not eof:  # delimited by the end of the connection
        return None
    return status, bytes(buf[body_start:]), False


def _parse_chunked(buf: bytearray, pos: int) -> tuple[bytes, int] | None:
    chunks: list[bytes] = []
    while True:
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            return None
        size_text = bytes(buf[pos:eol]).split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise ValueError("invalid HTTP response: bad chunk size") from None
        pos = eol + 2
        if size == 0:
            if buf[pos:pos + 2] == b"\r\n":
                return b"".join(chunks), pos + 2
            trailer_end = buf.find(b"\r\n\r\n", pos)
            if trailer_end < 0:
                return None
            return b"".join(chunks), trailer_end + 4
        if len(buf) < pos + size + 2:
            return None
        chunks.append(bytes(buf[pos:pos + size]))
        pos += size + 2


class DispatchClient:
    """Worker POSTs of one event loop (see above). At most `max_connections` requests run at
    once; up to `max_idle` idle connections per worker address are kept for reuse."""

    def __init__(self, *, max_connections: int = 256, max_idle: int = 64,
                 httpx_factory: Callable[[], Any] | None = None) -> None:
        self.max_idle = max_idle
        self._slots = asyncio.Semaphore(max_connections)
        self._idle: dict[tuple[str, int], list[_Conn]] = {}
        self._targets: dict[str, LeanTarget | None] = {}
        self._httpx_factory = httpx_factory
        self._httpx: Any = None
        self._proxied = _env_proxies()
        self.closed = False

    def httpx_client(self) -> Any:
        if self._httpx is None:
            factory = self._httpx_factory or (lambda: httpx.AsyncClient(
                limits=httpx.Limits(max_connections=256, max_keepalive_connections=64)))
            self._httpx = factory()
        return self._httpx

    def lean_target(self, url: str, headers: dict[str, str]) -> LeanTarget | None:
        """Where to send `url` over this client's own connections; None → httpx."""
        if self._proxied:
            return None
        for name in headers:
            if name.lower() in _FRAMING:
                return None
        if url in self._targets:
            return self._targets[url]
        target = _lean_target(url)
        if len(self._targets) < 256:
            self._targets[url] = target
        return target

    async def post(self, target: LeanTarget, headers: dict[str, str], body: bytes) -> tuple[int, bytes]:
        """(status, body) of one POST; raises OSError/ValueError for transport problems."""
        head = [f"POST {target.request_target} HTTP/1.1\r\nHost: {target.host_header}\r\n"]
        accept = True
        for name, value in headers.items():
            if not _TOKEN.match(name) or _BAD_HEADER.search(value):
                raise ValueError(f"Illegal header: {name!r}")
            if accept and name.lower() == "accept":
                accept = False
            head.append(f"{name}: {value}\r\n")
        if accept:
            head.append("Accept: */*\r\n")
        head.append(f"Content-Length: {len(body)}\r\n\r\n")
        data = "".join(head).encode("latin-1") + body
        key = (target.host, target.port)
        async with self._slots:
            for attempt in (0, 1):
                conn = self._take(key)
                reused = conn is not None
                if conn is None:
                    loop = asyncio.get_running_loop()
                    _, conn = await loop.create_connection(_Conn, target.host, target.port)
                try:
                    status, content, keep = await conn.request(data)
                except _Disconnected:
                    conn.abort()
                    if reused and attempt == 0:
                        continue  # the worker had closed the idle connection: once more on a new one
                    raise
                except BaseException:
                    conn.abort()  # cancelled, timed out or broken mid-answer: never reuse it
                    raise
                if keep and not self.closed and conn.usable():
                    self._give_back(key, conn)
                else:
                    conn.close()
                return status, content
        raise AssertionError("unreachable")

    def _take(self, key: tuple[str, int]) -> _Conn | None:
        idle = self._idle.get(key)
        while idle:
            conn = idle.pop()
            if conn.usable():
                conn.waiter = None
                return conn
        return None

    def _give_back(self, key: tuple[str, int], conn: _Conn) -> None:
        conn.waiter = None
        idle = self._idle.setdefault(key, [])
        if len(idle) < self.max_idle:
            idle.append(conn)
        else:
            conn.close()

    async def aclose(self) -> None:
        self.closed = True
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()
        if self._httpx is not None:
            client, self._httpx = self._httpx, None
            try:
                await client.aclose()
            except RuntimeError:
                pass


def _lean_target(url: str) -> LeanTarget | None:
    if not url.isascii() or any(c.isspace() for c in url):
        return None
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme.lower() != "http" or not parts.hostname or "@" in parts.netloc:
        return None
    host = parts.hostname
    shown = f"[{host}]" if ":" in host else host
    host_header = shown if port is None or port == 80 else f"{shown}:{port}"
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    return LeanTarget(host, port or 80, host_header, target)


def _env_proxies() -> bool:
    """httpx honours HTTP(S)_PROXY/ALL_PROXY from the environment; so does the dispatch,
    by leaving those requests to httpx."""
    import os

    return any(os.environ.get(name) for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"))


def _fmt(ms: int) -> str:
    if ms % 1000 == 0 and ms >= 1000:
        return f"{ms // 1000}s"
    return f"{ms}ms"
