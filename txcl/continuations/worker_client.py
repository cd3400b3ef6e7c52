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
import h11
import httpx

from txcl import otel as _otel
from txcl.egress import DEFAULT_POLICY, EgressDenied, EgressPolicy, guarded_client
from txcl.runoptions import usable_cancel_url
from txcl.runtime_codes import egress_denied_message
from txcl.secrets import SecretError, SecretProvider, mask_text, refs_from_directives, resolve
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


async def post_dispatch(client: Any, dispatch: Dispatch, *, base_url: str | None,
                        ack_timeout_ms: int, origin_rid: str | None = None,
                        secrets: SecretProvider | None = None) -> AckResult:
    """POST one interaction and wait for the 202 (never raises for worker problems).

    `client` is a :class:`DispatchClient` (plain `http://` URLs go over its own keep-alive
    connections, everything else through httpx) or an `httpx.AsyncClient`."""
    from txcl.values.jsonio import dumps_utf8

    url = worker_url(dispatch)
    body = dumps_utf8(dispatch_body(dispatch, base_url))
    headers = dispatch_headers(dispatch, origin_rid)
    if _otel.current.enabled:  # W3C traceparent/tracestate: the worker's span joins the trace
        _otel.current.inject(headers)
    spliced = None
    if isinstance(dispatch.directives, dict) and "secrets" in dispatch.directives:
        refs, problems = refs_from_directives(dispatch.directives)
        try:
            if problems:
                raise SecretError(problems[0])
            spliced = resolve(refs, secrets or SecretProvider())
        except SecretError as exc:  # not worth sending again until the operator sets the secret
            return AckResult(dispatch.opc, False, error=f"async worker {url}: {exc}", retryable=False)
        headers.update(spliced.headers)
    seconds = ack_timeout_ms / 1000.0
    target = client.lean_target(url, headers) if isinstance(client, DispatchClient) else None
    try:
        result = await _post_and_read(client, dispatch, target, url, body, headers, seconds, ack_timeout_ms)
        if spliced is not None and result.error:  # an error that quotes the request keeps no secret
            result = attrs.evolve(result, error=mask_text(result.error, spliced.values))
        return result
    except EgressDenied as exc:  # never worth sending again: the policy will not change its mind
        rule = f"{dispatch.op_stack}/{dispatch.op_name}" if dispatch.op_stack else dispatch.op_name
        return AckResult(dispatch.opc, False, error=egress_denied_message(rule, exc), retryable=False)


async def _post_and_read(client: Any, dispatch: Dispatch, target: "LeanTarget | None", url: str, body: bytes,
                         headers: dict[str, str], seconds: float, ack_timeout_ms: int) -> AckResult:
    from txcl.values.jsonio import loads

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
# bookkeeping, anyio streams, cookies, redirects) costs many times the work of the request
# itself. `DispatchClient` keeps its own keep-alive connections on asyncio transports for plain
# `http://`, one request at a time per connection, and lets h11 write the request and parse
# the answer (Content-Length, chunked or close-delimited bodies, interim 1xx answers,
# keep-alive); anything else (https, proxies from the environment, credentials or non-ASCII
# in the URL, caller-set framing headers) goes to an httpx client.

_FRAMING = frozenset({"host", "content-length", "transfer-encoding", "connection"})
_MAX_HEAD = 65536  # bytes of an answer's status line and headers
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
    """One HTTP/1.1 connection: one request in flight, the answer parsed by h11 as bytes arrive."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.http = h11.Connection(h11.CLIENT, max_incomplete_event_size=_MAX_HEAD)
        self.waiter: asyncio.Future | None = None
        self.closed = False
        self.eof = False
        self.received = False  # a byte of the current answer arrived
        self.status = 0
        self.body: list[bytes] = []

    # -- protocol callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self.waiter is None or self.waiter.done():  # bytes nobody asked for: unusable
            self.closed = True
            if self.transport is not None:
                self.transport.close()
            return
        self.received = True
        self.http.receive_data(data)
        self._advance()

    def eof_received(self) -> bool:
        self._end_of_input()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._end_of_input()

    def _end_of_input(self) -> None:
        if not self.eof:
            self.eof = True
            try:
                self.http.receive_data(b"")
            except RuntimeError:  # h11 had already seen the end
                pass
        self._advance()

    # -- requests
    def usable(self) -> bool:
        return not self.closed and self.transport is not None and not self.transport.is_closing()

    async def request(self, request: h11.Request, body: bytes) -> tuple[int, bytes, bool]:
        assert self.transport is not None
        http = self.http
        data = http.send(request) + http.send(h11.Data(data=body)) + http.send(h11.EndOfMessage())
        self.received, self.status, self.body = False, 0, []
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
        if self.eof and not self.received:
            waiter.set_exception(_Disconnected("Server disconnected without sending a response."))
            return
        http = self.http
        try:
            while True:
                event = http.next_event()
                kind = type(event)
                if event is h11.NEED_DATA or event is h11.PAUSED:
                    return
                if kind is h11.Response:
                    self.status = event.status_code
                elif kind is h11.Data:
                    self.body.append(event.data)
                elif kind is h11.EndOfMessage:
                    keep = http.our_state is h11.DONE and http.their_state is h11.DONE
                    if keep:
                        http.start_next_cycle()
                    waiter.set_result((self.status, b"".join(self.body), keep))
                    return
                elif kind is h11.ConnectionClosed:
                    waiter.set_exception(ConnectionError("Server disconnected before the response was complete."))
                    return
                # InformationalResponse (100 Continue, ...): wait for the final answer
        except h11.RemoteProtocolError as exc:
            if self.eof:
                waiter.set_exception(ConnectionError("Server disconnected before the response was complete."))
            else:
                waiter.set_exception(ValueError(f"invalid HTTP response: {exc}"))


class DispatchClient:
    """Worker POSTs of one event loop (see above). At most `max_connections` requests run at
    once; up to `max_idle` idle connections per worker address are kept for reuse."""

    def __init__(self, *, max_connections: int = 256, max_idle: int = 64,
                 httpx_factory: Callable[[], Any] | None = None, policy: EgressPolicy = DEFAULT_POLICY) -> None:
        self.policy = policy  # every connection, its own and httpx's, goes through it
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
            factory = self._httpx_factory or (lambda: guarded_client(
                self.policy, limits=httpx.Limits(max_connections=256, max_keepalive_connections=64)))
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
        fields = [("Host", target.host_header)]
        accept = True
        for name, value in headers.items():
            if not _TOKEN.match(name) or _BAD_HEADER.search(value):
                raise ValueError(f"Illegal header: {name!r}")
            if accept and name.lower() == "accept":
                accept = False
            fields.append((name, value))
        if accept:
            fields.append(("Accept", "*/*"))
        fields.append(("Content-Length", str(len(body))))
        try:
            request = h11.Request(method="POST", target=target.request_target, headers=fields)
        except h11.LocalProtocolError as exc:
            raise ValueError(f"invalid request: {exc}") from None
        key = (target.host, target.port)
        async with self._slots:
            for attempt in (0, 1):
                conn = self._take(key)
                reused = conn is not None
                if conn is None:
                    conn = await self._connect(target)
                try:
                    status, content, keep = await conn.request(request, body)
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

    async def _connect(self, target: LeanTarget) -> _Conn:
        """A new connection to a permitted address of the target (resolved once, here)."""
        loop = asyncio.get_running_loop()
        last: OSError | None = None
        for address in await self.policy.permitted_addresses(target.host, target.port):
            try:
                _, conn = await loop.create_connection(_Conn, address, target.port)
                return conn
            except OSError as exc:
                last = exc
        assert last is not None
        raise last

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
