"""`mcp+http://` and `mcp+https://` ops: one `tools/call` on a Model Context Protocol server.

`EXEC "mcp+https://tools.example.net/mcp#summarize"` calls the tool `summarize` on the server
whose streamable-HTTP endpoint is `https://tools.example.net/mcp`. The op input (after SELECT,
without `_txc`) is the tool's arguments; `WITH headers.*` are the session's HTTP headers; the
answer becomes the op output (see txcl.mcpclient); a failure is an op error carrying the
server's message. The sessions of one event loop are shared by every op of the process.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

from txcl.mcpclient import IDEMPOTENCY_META, McpCallError, McpClients
from txcl.runtime.dispatch import OpError

_BY_LOOP: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, McpClients]" = weakref.WeakKeyDictionary()


def clients() -> McpClients:
    """The sessions of the running event loop (shared by every op of the process on it)."""
    loop = asyncio.get_running_loop()
    found = _BY_LOOP.get(loop)
    if found is None:
        found = _BY_LOOP[loop] = McpClients()
    return found


async def close_clients() -> None:
    """Close the running loop's sessions (at shutdown)."""
    found = _BY_LOOP.pop(asyncio.get_running_loop(), None)
    if found is not None:
        await found.aclose()


async def call_mcp(target: Any, op_input: Any, directives: dict | None, timeout_s: float, *,
                   payload_max: int | None = None, meta: dict | None = None) -> Any:
    """One `tools/call` for an op: `target` is the classified EXEC (url and tool)."""
    arguments = tool_arguments(op_input)
    if payload_max:
        from txcl.values.jsonio import dumps

        size = len(dumps(arguments).encode("utf-8"))
        if size > payload_max:
            raise OpError(f"mcp {target.url}#{target.tool}: arguments of {size} bytes exceed "
                          f"--op-payload-max ({payload_max})")
    try:
        return await clients().call(target.url, target.tool, arguments, headers=call_headers(directives),
                                    timeout_s=timeout_s, meta=meta)
    except McpCallError as exc:
        raise OpError(exc.message, status=exc.status) from None


def tool_arguments(op_input: Any) -> dict:
    """The `tools/call` arguments: the op input without `_txc` (tool schemas rarely allow it)."""
    if not isinstance(op_input, dict):
        return {}
    return {k: v for k, v in op_input.items() if k != "_txc"}


def call_headers(directives: dict | None) -> dict[str, str]:
    """`WITH headers.*` as request headers of the session."""
    extra = (directives or {}).get("headers")
    out: dict[str, str] = {}
    if isinstance(extra, dict):
        for name, value in extra.items():
            if isinstance(name, str) and isinstance(value, (str, int, float)) and not isinstance(value, bool):
                out[name] = str(value)
    return out


__all__ = ["clients", "close_clients", "call_mcp", "tool_arguments", "call_headers", "IDEMPOTENCY_META"]
