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

from txcl import otel as _otel
from txcl.egress import DEFAULT_POLICY, EgressPolicy
from txcl.mcpclient import IDEMPOTENCY_META, McpCallError, McpClients
from txcl.runtime.dispatch import OpError
from txcl.runtime.schemes.http import resolve_secrets
from txcl.runtime_codes import EGRESS_DENIED, egress_denied_message
from txcl.secrets import SecretProvider, mask, mask_text

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
                   payload_max: int | None = None, meta: dict | None = None,
                   policy: EgressPolicy = DEFAULT_POLICY, rule: str = "", secrets: SecretProvider | None = None) -> Any:
    """One `tools/call` for an op: `target` is the classified EXEC (url and tool)."""
    arguments = tool_arguments(op_input)
    if payload_max:
        from txcl.values.jsonio import dumps

        size = len(dumps(arguments).encode("utf-8"))
        if size > payload_max:
            raise OpError(f"mcp {target.url}#{target.tool}: arguments of {size} bytes exceed "
                          f"--op-payload-max ({payload_max})")
    headers = call_headers(directives)
    if _otel.current.enabled:  # the trace context rides in the call's _meta (the session's headers are fixed)
        carrier: dict[str, str] = {}
        _otel.current.inject(carrier)
        meta = {**(meta or {}), **carrier}
    spliced = resolve_secrets(directives or {}, secrets)
    if spliced is not None:
        headers.update(spliced.headers)
    try:
        output = await clients().call(target.url, target.tool, arguments, headers=headers,
                                      timeout_s=timeout_s, meta=meta, policy=policy)
    except McpCallError as exc:
        if exc.denial is not None:
            raise OpError(egress_denied_message(rule or target.text, exc.denial), code=EGRESS_DENIED.code) from None
        message = mask_text(exc.message, spliced.values) if spliced is not None else exc.message
        raise OpError(message, status=exc.status) from None
    return mask(output, spliced.values) if spliced is not None else output


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
