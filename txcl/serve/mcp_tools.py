"""`txcl serve --mcp`: chosen stacks offered as Model Context Protocol tools on `/_txc/mcp`.

    txcl serve --mcp --mcp-tools research,summarize

Each stack named by --mcp-tools is one tool (its name: the stack, `/` written as `.`). Its
input and output schemas are the `$defs.input` and `$defs.output` of `OPS/<stack>/schema.json`
when that file exists (the description of `$defs.input`, or of the document, becomes the
tool's description), else any object is accepted. A call runs the stack with the arguments as the envelope (`_txc.src` is `mcp`):

- the flow completes → the result is the final envelope (without its top-level `_` keys),
  as structured content and as JSON text;
- it fails → an `isError` result carrying the error object;
- it suspends (an async op, a deferred join, a promoted continuable op) → the call waits for
  the run to finish. A client that sent a progress token gets a progress notification every
  --poll-retry-after (items done of the run's itemized awaits, and the stage it waits at)
  until the run ends; a client that did not waits at most --continuation-longpoll-ms and then
  gets `{"status": "running", "continuation": …, "poll_url": …}`, the URL it can poll.

Built on the official SDK's low-level server and streamable-HTTP session manager.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from pathlib import Path
from typing import Any

import attrs

from txcl import runtime_codes as rc
from txcl.runtime.config import ConfigError

log = logging.getLogger("txcl.serve")

SCHEMA_FILE = "schema.json"
FINISHED = ("completed", "failed", "expired", "cancelled")
ANY_OBJECT = {"type": "object", "additionalProperties": True}


@attrs.frozen
class StackTool:
    name: str
    stack: str
    description: str
    input_schema: dict
    output_schema: dict | None = None


def tool_name(stack: str) -> str:
    return stack.replace("/", ".")


def stack_tools(tree: Any, stacks: tuple[str, ...], workspace: Path) -> list[StackTool]:
    """The tools for `stacks`; ConfigError for a stack the tree lacks or a bad schema.json."""
    known = set(tree.user_stacks())
    tools = []
    for stack in stacks:
        if stack not in known:
            from txcl.suggest import did_you_mean

            close = did_you_mean(stack, sorted(s for s in known if not s.startswith("_")))
            hint = f" (did you mean {close!r}?)" if close else ""
            raise ConfigError(f"mcp-tools: no stack {stack!r} in the OPS tree{hint}")
        schema, output, description = ANY_OBJECT, None, f"Runs the TXCL stack {stack!r} with the arguments as its envelope."
        path = workspace / "OPS" / Path(*stack.split("/")) / SCHEMA_FILE
        if path.is_file():
            schema, output, described = _tool_schemas(path)
            description = described or description
        tools.append(StackTool(tool_name(stack), stack, description, schema, output))
        continue
    return tools


def _tool_schemas(path: Path) -> tuple[dict, dict | None, str | None]:
    """(inputSchema, outputSchema, description) of a stack tool from the stack's schema.json:
    `$defs.input` and `$defs.output` (with the file's `$defs` beside each, so `#/$defs/…`
    references resolve), the description of `$defs.input` or of the document."""
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a JSON Schema: {exc}") from None
    defs = loaded.get("$defs") if isinstance(loaded, dict) else None
    if not isinstance(defs, dict) or not isinstance(defs.get("input"), dict):
        raise ConfigError(f"{path}: a stack's schema.json needs $defs.input (the tool's arguments) — "
                          "see txcl check (TX260)")
    def with_defs(definition: dict) -> dict:
        return {**definition, "$defs": defs} if len(defs) > 1 or "$ref" in json.dumps(definition) else dict(definition)

    given = defs["input"]
    if given.get("type", "object") != "object":
        raise ConfigError(f"{path}: $defs.input, the input schema of a tool, must describe an object")
    schema = {"type": "object", **with_defs(given)}
    output = defs.get("output")
    output_schema = {"type": "object", **with_defs(output)} if isinstance(output, dict) and \
        output.get("type", "object") == "object" else None
    description = next((d.strip() for d in (given.get("description"), loaded.get("description"))
                        if isinstance(d, str) and d.strip()), None)
    return schema, output_schema, description


class _QuietClosedStreams(logging.Filter):
    """The SDK logs a traceback when a client ends its session while the server-to-client
    stream is open (an ordinary disconnect); that one is dropped, everything else kept."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (exc is not None and type(exc).__name__ == "ClosedResourceError")


class McpEndpoint:
    """The `/_txc/mcp` endpoint of one `txcl serve` (see the module docstring)."""

    def __init__(self, state: Any, tools: list[StackTool]) -> None:
        self.state = state
        self.tools = {t.name: t for t in tools}
        self._exit = contextlib.AsyncExitStack()
        self._manager: Any = None

    # ------------------------------------------------------------------ lifespan
    async def startup(self) -> None:
        from mcp.server.lowlevel import Server
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        from txcl import __version__

        server: Any = Server("txcl", version=__version__,
                             instructions="Each tool runs one TXCL stack with the arguments as its envelope.")
        self._register(server)
        sdk_log = logging.getLogger("mcp.server.streamable_http")
        if not any(isinstance(f, _QuietClosedStreams) for f in sdk_log.filters):
            sdk_log.addFilter(_QuietClosedStreams())
        self._manager = StreamableHTTPSessionManager(app=server, json_response=False, stateless=False)
        await self._exit.enter_async_context(self._manager.run())

    async def shutdown(self) -> None:
        await self._exit.aclose()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if self._manager is None:
            from starlette.responses import PlainTextResponse

            await PlainTextResponse("the MCP endpoint is not running", status_code=503)(scope, receive, send)
            return
        await self._manager.handle_request(scope, receive, send)

    # ------------------------------------------------------------------ the tools
    def _register(self, server: Any) -> None:
        import mcp.types as types

        @server.list_tools()
        async def list_tools() -> list[types.Tool]:
            return [types.Tool(name=t.name, description=t.description, inputSchema=t.input_schema,
                               **({"outputSchema": t.output_schema} if t.output_schema else {}))
                    for t in self.tools.values()]

        @server.call_tool()
        async def call_tool(name: str, arguments: dict) -> Any:
            tool = self.tools.get(name)
            if tool is None:
                return _error_result(f"unknown tool {name!r}")
            ctx = server.request_context
            token = getattr(ctx.meta, "progressToken", None) if ctx.meta is not None else None
            return await self.run_tool(tool, dict(arguments or {}), ctx.session, token)

    async def run_tool(self, tool: StackTool, arguments: dict, session: Any, progress_token: Any) -> Any:
        from txcl.ids import new_request_id
        from txcl.runtime.interpreter import Completed, Failed, Suspended
        from txcl.serve.shaping import strip_private

        state = self.state
        rid = new_request_id()
        try:
            outcome = await state.interp.run(arguments, tool.stack, src="mcp", rid=rid)
        except Exception as exc:  # noqa: BLE001 - never a traceback to the client
            log.exception("txcl: MCP call %s of %s failed inside the runtime", rid, tool.name)
            return _error_result(f"internal error ({type(exc).__name__}); see the server log", rid=rid)
        if isinstance(outcome, Completed):
            return _envelope_of(outcome.envelope, state.settings.private, strip_private)
        if isinstance(outcome, Failed):
            return _error_result(outcome.payload, rid=rid)
        if isinstance(outcome, Suspended):
            return await self._wait(outcome, session, progress_token)
        return _error_result(f"unexpected outcome {type(outcome).__name__}", rid=rid)

    async def _wait(self, outcome: Any, session: Any, progress_token: Any) -> Any:
        from txcl.serve.shaping import strip_private

        service = _service_of(self.state)
        settings = self.state.settings
        if service is None:
            return _running(outcome, self.state)
        loop = asyncio.get_running_loop()
        patience = settings.continuation_longpoll_ms / 1000.0
        started = loop.time()
        beat = max(0.2, settings.poll_retry_after / 1000.0)
        while True:
            run = await service.call(service.store.get_run, outcome.run_id)
            if run is None:
                return _error_result("the run is gone (purged)", run_id=outcome.run_id)
            if run.status in FINISHED:
                if run.status == "completed" and isinstance(run.result, dict):
                    return _envelope_of(run.result, settings.private, strip_private)
                error = run.error if run.error is not None else (
                    rc.RUN_EXPIRED if run.status == "expired" else rc.RUN_FAILED).error()
                return _error_result(error, run_id=run.run_id, status=run.status)
            if progress_token is None and loop.time() - started >= patience:
                return _running(outcome, self.state)
            if progress_token is not None:
                await self._progress(service, session, progress_token, run)
            wait = beat if progress_token is not None else min(beat, max(0.05, patience - (loop.time() - started)))
            await service.wait_for_run(outcome.run_id, wait)

    @staticmethod
    async def _progress(service: Any, session: Any, token: Any, run: Any) -> None:
        units = await service.call(service.store.list_units, run.run_id)
        done = sum(u.provider_done for u in units)
        total = sum(u.expected for u in units)
        message = f"waiting at {run.cur_stage}" if run.cur_stage else "running"
        try:
            await session.send_progress_notification(token, float(done), total=float(total) or None,
                                                     message=message)
        except Exception as exc:  # noqa: BLE001 - a client that went away stops hearing progress
            log.debug("txcl: MCP progress notification failed: %r", exc)


def _service_of(state: Any) -> Any:
    for ext in state.extensions:
        service = getattr(ext, "service", None)
        if service is not None:
            return service
    return None


def _envelope_of(envelope: dict, private: bool, strip_private: Any) -> dict:
    return envelope if private else strip_private(envelope)


def _running(outcome: Any, state: Any) -> dict:
    base = (state.settings.callback_base_url or "").rstrip("/")
    return {"status": "running", "continuation": outcome.rcid, "run_id": outcome.run_id,
            "poll_url": f"{base}/?_txc.continuation={outcome.rcid}"}


def _error_result(error: Any, **extra: Any) -> Any:
    import mcp.types as types

    payload = error if isinstance(error, dict) else {"error": {"message": str(error)}}
    if extra:
        payload = {**payload, **extra}
    return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(payload))], isError=True)


def build_endpoint(state: Any) -> McpEndpoint | None:
    """The endpoint when --mcp is on (ConfigError for bad tool definitions), else None."""
    settings = state.settings
    if not settings.mcp:
        return None
    try:
        import mcp  # noqa: F401
    except ImportError:
        from txcl.install import missing_extra

        raise ConfigError(missing_extra("--mcp", "mcp")) from None
    return McpEndpoint(state, stack_tools(state.tree, settings.mcp_tools, state.workspace))


__all__ = ["McpEndpoint", "StackTool", "build_endpoint", "stack_tools", "tool_name"]
