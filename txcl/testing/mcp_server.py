"""A small Model Context Protocol server for tests, benchmarks and the examples.

    python -m txcl.testing.mcp_server [--port 0] [--calls FILE]

Built with the official SDK's FastMCP, served by uvicorn on 127.0.0.1 (streamable HTTP at
`/mcp`); the first line on stdout is `listening on http://127.0.0.1:<port>/mcp`. With
`--calls FILE` every tool call appends one JSON line (tool, arguments, the idempotency key
txcl sends in `_meta`), so a test can count how often a call was made.

Tools: `add` (structured result), `echo` (the arguments back), `slow` (sleeps, then answers),
`fail` (an `isError` result), `shout` (plain text), `double` (for itemized fan-outs; sleeps
`delay` seconds first so answers arrive out of order, and records how many calls of it were
in flight when it started).
"""

import argparse
import asyncio
import json
import logging
import os
import socket
import sys
from typing import Any

from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError

IDEMPOTENCY_META = "txcl/idempotency-key"


def build_server(calls_file: str | None = None) -> Any:
    server = FastMCP("txcl-test-tools", stateless_http=False, log_level="WARNING")

    inflight = {"double": 0}

    def record(tool: str, arguments: dict, ctx: Context | None) -> None:
        if not calls_file:
            return
        key = None
        try:
            meta = ctx.request_context.meta if ctx is not None else None
            extra = meta.model_dump() if meta is not None else {}
            key = extra.get(IDEMPOTENCY_META)
        except (AttributeError, ValueError, LookupError):
            key = None
        with open(calls_file, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"tool": tool, "arguments": arguments, "key": key}) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    @server.tool(description="Add two integers.")
    async def add(a: int, b: int, ctx: Context) -> dict:
        record("add", {"a": a, "b": b}, ctx)
        return {"sum": a + b}

    @server.tool(description="Answer with the arguments it was given.")
    async def echo(ctx: Context, message: str = "", extra: dict | None = None) -> dict:
        record("echo", {"message": message}, ctx)
        return {"message": message, "extra": extra or {}}

    @server.tool(description="Wait `seconds`, then answer with a tag.")
    async def slow(seconds: float, ctx: Context, tag: str = "") -> dict:
        record("slow", {"seconds": seconds, "tag": tag}, ctx)
        await asyncio.sleep(seconds)
        return {"slept": seconds, "tag": tag}

    @server.tool(description="Fails with the given message (after `delay` seconds).")
    async def fail(message: str, ctx: Context, delay: float = 0.0) -> dict:
        record("fail", {"message": message}, ctx)
        if delay > 0:
            await asyncio.sleep(delay)
        raise ToolError(message)

    @server.tool(description="Upper-case the text (a plain-text answer).", structured_output=False)
    async def shout(text: str, ctx: Context) -> str:
        record("shout", {"text": text}, ctx)
        return text.upper() + "!"

    @server.tool(description="Double a number after `delay` seconds.")
    async def double(value: float, ctx: Context, delay: float = 0.0) -> dict:
        inflight["double"] += 1
        try:
            record("double", {"value": value, "delay": delay, "in_flight": inflight["double"]}, ctx)
            if delay > 0:
                await asyncio.sleep(delay)
            return {"value": value, "doubled": value * 2}
        finally:
            inflight["double"] -= 1

    return server


class _QuietDisconnects(logging.Filter):
    """The SDK logs a traceback when a client ends its session; that is no error here."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (exc is not None and type(exc).__name__ == "ClosedResourceError")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m txcl.testing.mcp_server", description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free port)")
    parser.add_argument("--calls", default=None, help="append one JSON line per tool call to this file")
    args = parser.parse_args(argv)

    import uvicorn

    logging.getLogger("mcp.server.streamable_http").addFilter(_QuietDisconnects())
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    port = sock.getsockname()[1]
    app = build_server(args.calls).streamable_http_app()
    print(f"listening on http://127.0.0.1:{port}/mcp", flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])
    return 0



class McpServerProcess:
    """This server in a subprocess (tests, benchmarks, the example):

        with McpServerProcess(calls=path) as server:
            server.url            # http://127.0.0.1:<port>/mcp
            server.calls()        # the JSON lines of --calls, parsed
    """

    def __init__(self, calls: str | None = None, port: int = 0) -> None:
        self.calls_file = calls
        self.port = port
        self.proc: Any = None
        self.url = ""

    def start(self, timeout: float = 30.0) -> "McpServerProcess":
        import subprocess
        import time

        cmd = [sys.executable, "-m", "txcl.testing.mcp_server", "--port", str(self.port)]
        if self.calls_file:
            cmd += ["--calls", self.calls_file]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
        assert self.proc.stdout is not None
        end = time.monotonic() + timeout
        line = self.proc.stdout.readline()
        if not line.startswith("listening on ") or time.monotonic() > end:
            self.stop()
            raise RuntimeError(f"the MCP test server did not start: {line!r}")
        self.url = line.split("listening on ", 1)[1].strip()
        return self

    def calls(self) -> list[dict]:
        if not self.calls_file or not os.path.exists(self.calls_file):
            return []
        with open(self.calls_file, encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except Exception:  # noqa: BLE001
                self.proc.kill()
                self.proc.wait(5)

    def __enter__(self) -> "McpServerProcess":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


if __name__ == "__main__":
    sys.exit(main())
