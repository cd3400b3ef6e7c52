"""The client side of the Model Context Protocol, on the official `mcp` SDK (the `mcp` extra):
sessions kept open per server, tool calls, and `probe` (initialize + tools/list).

    clients = McpClients()
    output = await clients.call("https://tools.example.net/mcp", "summarize", {"text": "…"})

`McpClients` keeps one session per server endpoint and header set (the SDK's streamable HTTP
client, the `initialize` handshake with version negotiation) and reuses it for every call; a
session the server dropped is opened again on the next call. A call's answer becomes a JSON
value (`tool_output`):

- the result's structured content when the server gave one;
- else its text content, parsed as JSON when it is JSON (`{"text": "…"}` when it is not);
- a result flagged `isError`, a protocol error or a broken connection raises `McpCallError`
  carrying the server's message.

Used by `mcp+` ops (txcl.runtime.schemes.mcp), `txcl mcp doctor` and `txcl check --mcp-schemas`.
"""

from __future__ import annotations

import asyncio
import json
import datetime as _dt
import logging
from typing import Any

import attrs

from txcl import __version__
from txcl.egress import DEFAULT_POLICY, EgressDenied, EgressPolicy, denial_in, guarded_client

log = logging.getLogger("txcl.mcp")

IDEMPOTENCY_META = "txcl/idempotency-key"  # the `_meta` key a durable call's retries share
MAX_SESSIONS = 64  # open sessions kept per event loop (the least recently used is closed)
CONNECT_TIMEOUT_S = 10.0


class McpCallError(Exception):
    """A call or a handshake failed; `message` says why (`status`: "error" or "timeout")."""

    def __init__(self, message: str, status: str = "error", denial: EgressDenied | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.denial = denial  # the egress policy refused the server's address


class McpUnavailable(McpCallError):
    """The `mcp` extra is not installed."""


def _sdk() -> Any:
    try:
        import mcp  # noqa: F401
        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared.exceptions import McpError
    except ImportError:
        from txcl.install import missing_extra

        raise McpUnavailable(missing_extra("MCP", "mcp")) from None
    return ClientSession, streamable_http_client, McpError


@attrs.frozen
class ToolInfo:
    name: str
    description: str | None
    input_schema: dict
    output_schema: dict | None = None  # a tool's outputSchema, when its server declares one


@attrs.frozen
class ServerInfo:
    """What the `initialize` handshake and `tools/list` told about a server."""

    name: str
    version: str
    protocol_version: str
    tools: tuple[ToolInfo, ...]


def _client_info() -> Any:
    from mcp.types import Implementation

    return Implementation(name="txcl", version=__version__)


def _http_client(headers: dict[str, str], timeout_s: float, on_response: Any = None,
                 policy: EgressPolicy = DEFAULT_POLICY) -> Any:
    import httpx

    hooks = {"response": [on_response]} if on_response is not None else {}
    return guarded_client(policy, headers={"User-Agent": f"txcl/{__version__}", **headers}, follow_redirects=False,
                          timeout=httpx.Timeout(timeout_s, read=max(timeout_s, 300.0)), event_hooks=hooks)


def _is_jsonrpc(value: Any) -> bool:
    if isinstance(value, list):
        return bool(value) and all(_is_jsonrpc(v) for v in value)
    return isinstance(value, dict) and value.get("jsonrpc") == "2.0"


class _QuietSdkParseErrors(logging.Filter):
    """The SDK logs a traceback for an answer that is not JSON-RPC; txcl reports it itself
    ("not an MCP endpoint"), in one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (exc is not None and type(exc).__name__ == "ValidationError")


def _quiet_sdk() -> None:
    sdk_log = logging.getLogger("mcp.client.streamable_http")
    if not any(isinstance(f, _QuietSdkParseErrors) for f in sdk_log.filters):
        sdk_log.addFilter(_QuietSdkParseErrors())


class McpSession:
    """One open session with one server, owned by a background task (the SDK's transport and
    session live in task groups that must be entered and left by the same task)."""

    def __init__(self, url: str, headers: dict[str, str], policy: EgressPolicy = DEFAULT_POLICY) -> None:
        self.url = url
        self.headers = headers
        self.policy = policy
        self.session: Any = None
        self.init_result: Any = None
        self._ready: asyncio.Future | None = None
        self._stop = asyncio.Event()
        self._owner: asyncio.Task | None = None
        self._tools: dict[str, Any] | None = None  # name -> compiled input schema (None: none), once listed

    @property
    def alive(self) -> bool:
        return self._owner is not None and not self._owner.done()

    async def open(self, timeout_s: float) -> None:
        _sdk()  # McpUnavailable now, rather than from the background task
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        self._owner = loop.create_task(self._own())
        try:
            async with asyncio.timeout(timeout_s):
                await asyncio.shield(self._ready)
        except (TimeoutError, asyncio.TimeoutError):
            await self.close()
            raise McpCallError(f"mcp {self.url}: no answer to initialize within {seconds(timeout_s)}",
                          status="timeout") from None
        except BaseException:
            await self.close()
            raise

    async def _own(self) -> None:
        ClientSession, streamable_http_client, McpError = _sdk()
        ready = self._ready
        assert ready is not None
        _quiet_sdk()

        async def check_answer(response: Any) -> None:
            """Before the session is up: an answer in JSON that is not JSON-RPC means the URL is
            some other JSON service, not an MCP endpoint (the SDK would wait for ever)."""
            if ready.done() or response.request.method != "POST":
                return
            kind = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if kind != "application/json" or not 200 <= response.status_code < 300:
                return
            try:
                body = json.loads(await response.aread() or b"null")
            except ValueError:
                body = None
            if not _is_jsonrpc(body):
                _fail(ready, McpCallError(f"mcp {self.url}: not an MCP endpoint: it answered initialize with "
                                          "JSON that is not a JSON-RPC message"))

        try:
            async with _http_client(self.headers, CONNECT_TIMEOUT_S, check_answer, self.policy) as http:
                async with streamable_http_client(self.url, http_client=http) as (read, write, _):
                    async with ClientSession(read, write, client_info=_client_info()) as session:
                        self.init_result = await session.initialize()
                        self.session = session
                        if not ready.done():
                            ready.set_result(None)
                        await self._stop.wait()
        except asyncio.CancelledError:
            if not ready.done():
                _fail(ready, McpCallError(f"mcp {self.url}: connection closed"))
            raise
        except BaseException as exc:  # noqa: BLE001 - reported to whoever waits for the session
            denial = denial_in(exc)
            if denial is not None and not ready.done():
                _fail(ready, McpCallError(f"mcp {self.url}: {denial}", denial=denial))
            elif not ready.done():
                reason = describe_error(exc, McpError)
                if reason == "Session terminated":  # what the SDK makes of a 404 to initialize
                    reason = "the server answered 404 Not Found (is this the MCP endpoint?)"
                _fail(ready, McpCallError(f"mcp {self.url}: {reason}"))
            else:
                log.debug("txcl: MCP session with %s ended: %r", self.url, exc)
        finally:
            self.session = None

    async def call(self, tool: str, arguments: dict, timeout_s: float, meta: dict | None,
                   shown_timeout_s: float | None = None) -> Any:
        """The tool's `CallToolResult`; raises McpCallError when the session breaks meanwhile."""
        ClientSession, _, McpError = _sdk()
        session = self.session
        if session is None or self._owner is None:
            raise McpCallError(f"mcp {self.url}: the session is closed")
        await self._check_arguments(session, tool, arguments, timeout_s)
        call = asyncio.ensure_future(session.call_tool(
            tool, arguments, read_timeout_seconds=_dt.timedelta(seconds=timeout_s), meta=meta))
        done, _ = await asyncio.wait({call, self._owner}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        if call in done:
            try:
                return call.result()
            except McpError as exc:
                raise McpCallError(f"mcp {self.url}#{tool}: {exc.error.message}") from None
            except Exception as exc:  # noqa: BLE001 - a transport or validation failure
                raise McpCallError(f"mcp {self.url}#{tool}: {describe_error(exc, McpError)}") from None
        call.cancel()
        if self._owner in done:
            raise _Dropped(f"mcp {self.url}#{tool}: the connection to the server was lost")
        shown = seconds(shown_timeout_s if shown_timeout_s is not None else timeout_s)
        raise McpCallError(f"mcp {self.url}#{tool}: no answer within {shown}", status="timeout")

    async def _check_arguments(self, session: Any, tool: str, arguments: dict, timeout_s: float) -> None:
        """Before a call: a tool the server does not list is an error with a did-you-mean, and
        arguments its inputSchema refuses are an error naming each field (the server's own
        answer to either is a text without them). The list is asked once per session; a
        server that cannot list its tools is simply called."""
        if self._tools is None:
            self._tools = await _listed_schemas(session, min(timeout_s, 10.0))
        if not self._tools:
            return
        if tool not in self._tools:
            from txcl.suggest import did_you_mean

            close = did_you_mean(tool, list(self._tools))
            hint = f'did you mean "{close}"?' if close else "it lists: " + ", ".join(sorted(self._tools))
            raise McpCallError(f"mcp {self.url}#{tool}: the server has no tool \"{tool}\" ({hint})")
        validator = self._tools[tool]
        if validator is None:
            return
        problems = [f"{'/'.join(str(p) for p in e.instance_path) or '(the arguments)'}: {e.message}"
                    for e in list(validator.iter_errors(arguments))[:5]]
        if problems:
            raise McpCallError(f"mcp {self.url}#{tool}: the arguments do not match the tool's input schema: "
                               + "; ".join(problems))

    async def close(self) -> None:
        self._stop.set()
        owner = self._owner
        if owner is not None and not owner.done():
            try:
                async with asyncio.timeout(2.0):
                    await asyncio.shield(owner)
            except (TimeoutError, asyncio.TimeoutError):
                owner.cancel()
            except BaseException:  # noqa: BLE001 - already reported
                pass


async def _listed_schemas(session: Any, timeout_s: float) -> dict[str, Any]:
    """{tool name: compiled input schema or None} of a session's server ({} when it cannot say)."""
    import jsonschema_rs

    out: dict[str, Any] = {}
    cursor = None
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                listed = await session.list_tools(cursor=cursor) if cursor else await session.list_tools()
                for tool in listed.tools:
                    schema = tool.inputSchema if isinstance(tool.inputSchema, dict) else None
                    try:
                        out[tool.name] = jsonschema_rs.validator_for(schema) if schema else None
                    except Exception:  # noqa: BLE001 - a schema the validator cannot use: not checked
                        out[tool.name] = None
                cursor = getattr(listed, "nextCursor", None)
                if not cursor:
                    return out
    except Exception:  # noqa: BLE001 - listing is a courtesy: the call goes ahead unchecked
        return {}


def _fail(future: asyncio.Future, exc: BaseException) -> None:
    """Fail `future` for whoever awaits it; nobody awaiting it is no error (shutdown)."""
    future.set_exception(exc)
    future.exception()  # marks it retrieved: no "exception was never retrieved" at exit


def seconds(value: float) -> str:
    """`2.5s`, `500ms`: a timeout as a person wrote it."""
    ms = round(value * 1000)
    return f"{ms / 1000:g}s" if ms >= 1000 else f"{ms}ms"


class _Dropped(McpCallError):
    """The session ended under a call (the server restarted or went away)."""


def describe_error(exc: BaseException, mcp_error: type | None = None) -> str:
    """One line about a failure inside the SDK (exception groups unwrapped)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if mcp_error is not None and isinstance(exc, mcp_error):
        return str(exc.error.message)  # type: ignore[attr-defined]
    import httpx

    if isinstance(exc, httpx.HTTPStatusError):
        return f"HTTP {exc.response.status_code} from the server (is this an MCP endpoint?)"
    if isinstance(exc, httpx.ConnectError):
        return f"cannot connect ({exc or 'connection refused'})"
    if isinstance(exc, httpx.HTTPError):
        return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class McpClients:
    """The open MCP sessions of one event loop, keyed by endpoint and headers."""

    def __init__(self, max_sessions: int = MAX_SESSIONS) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[tuple, McpSession] = {}
        self._opening: dict[tuple, asyncio.Future] = {}

    async def session(self, url: str, headers: dict[str, str], timeout_s: float,
                      policy: EgressPolicy = DEFAULT_POLICY) -> McpSession:
        key = (url, tuple(sorted(headers.items())), policy)
        found = self._sessions.get(key)
        if found is not None and found.alive and found.session is not None:
            self._sessions[key] = self._sessions.pop(key)  # most recently used last
            return found
        pending = self._opening.get(key)
        if pending is not None:
            await asyncio.shield(pending)
            return await self.session(url, headers, timeout_s, policy)
        self._opening[key] = asyncio.get_running_loop().create_future()
        try:
            if found is not None:
                self._sessions.pop(key, None)
                await found.close()
            fresh = McpSession(url, headers, policy)
            await fresh.open(min(timeout_s, CONNECT_TIMEOUT_S))
            self._sessions[key] = fresh
            while len(self._sessions) > self.max_sessions:
                oldest = next(iter(self._sessions))
                await self._sessions.pop(oldest).close()
            return fresh
        finally:
            waiter = self._opening.pop(key)
            waiter.set_result(None)

    async def call(self, url: str, tool: str, arguments: dict, *, headers: dict[str, str] | None = None,
                   timeout_s: float = 30.0, meta: dict | None = None, policy: EgressPolicy = DEFAULT_POLICY) -> Any:
        """Call `tool` and return its op output (see the module docstring)."""
        headers = headers or {}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        for attempt in (0, 1):
            session = await self.session(url, headers, max(0.001, deadline - loop.time()), policy)
            try:
                result = await session.call(tool, arguments, max(0.001, deadline - loop.time()), meta, timeout_s)
            except _Dropped:
                if attempt == 0 and deadline - loop.time() > 0.05:
                    continue  # a session the server dropped: once more on a fresh one
                raise
            return tool_output(url, tool, result)
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            await session.close()


def tool_output(url: str, tool: str, result: Any) -> Any:
    """The op output of a `CallToolResult` (see the module docstring)."""
    from txcl.values.jsonio import JsonError, loads

    texts = [block.text for block in result.content or [] if getattr(block, "type", None) == "text"]
    if result.isError:
        message = " ".join(t.strip() for t in texts if t.strip()) or "the tool reported an error"
        raise McpCallError(f"mcp {url}#{tool}: {message}")
    structured = getattr(result, "structuredContent", None)
    if structured is not None:
        return structured
    others = [block.model_dump(mode="json", exclude_none=True) for block in result.content or []
              if getattr(block, "type", None) != "text"]
    text = "".join(texts)
    if not others:
        if not text.strip():
            return {}
        try:
            return loads(text)
        except (JsonError, ValueError):
            return {"text": text}
    out: dict[str, Any] = {"content": others}
    if texts:
        out["text"] = text
    return out


async def probe(url: str, *, headers: dict[str, str] | None = None, timeout_s: float = 10.0) -> ServerInfo:
    """Initialize a session with `url` and list its tools (`txcl mcp doctor`, `--mcp-schemas`)."""
    ClientSession, streamable_http_client, McpError = _sdk()
    session = McpSession(url, headers or {})
    await session.open(timeout_s)
    try:
        assert session.session is not None
        tools: list[ToolInfo] = []
        cursor = None
        async with asyncio.timeout(timeout_s):
            while True:
                listed = await session.session.list_tools(cursor=cursor) if cursor else await session.session.list_tools()
                for tool in listed.tools:
                    tools.append(ToolInfo(tool.name, tool.description, dict(tool.inputSchema or {}),
                                          dict(out) if isinstance(out := getattr(tool, "outputSchema", None), dict)
                                          else None))
                cursor = getattr(listed, "nextCursor", None)
                if not cursor:
                    break
        init = session.init_result
        return ServerInfo(name=init.serverInfo.name, version=init.serverInfo.version,
                          protocol_version=str(init.protocolVersion), tools=tuple(tools))
    except (TimeoutError, asyncio.TimeoutError):
        raise McpCallError(f"mcp {url}: no answer to tools/list within {seconds(timeout_s)}", status="timeout") from None
    except McpError as exc:
        raise McpCallError(f"mcp {url}: {exc.error.message}") from None
    finally:
        await session.close()


__all__ = ["McpClients", "McpCallError", "McpUnavailable", "ServerInfo", "ToolInfo", "probe", "tool_output",
           "IDEMPOTENCY_META", "describe_error", "seconds"]
