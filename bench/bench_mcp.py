"""MCP tool calls through a sync `mcp+` op, beside the same tool called with the SDK directly:
`python bench/bench_mcp.py [calls]`.

Both sides call `add` on the local test server (FastMCP on 127.0.0.1, one process) in one
event loop, one call after another, over one kept-open session. Printed: calls per second
(wall time, median of 5 batches), CPU time per call of this process (median), and the ratio
txcl / direct — the overhead txcl adds (the walk, the op's tail, the trace, the session pool).
The server's own time is in both figures alike.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


async def _direct(url: str, calls: int, batches: int) -> tuple[list[float], list[float]]:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    rates, cpus = [], []
    async with streamable_http_client(url) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            await session.call_tool("add", {"a": 1, "b": 2})  # warm
            for _ in range(batches):
                wall, cpu = time.perf_counter(), time.process_time()
                for i in range(calls):
                    result = await session.call_tool("add", {"a": i, "b": 2})
                    assert json.loads(result.content[0].text) == {"sum": i + 2}, result
                rates.append(calls / (time.perf_counter() - wall))
                cpus.append((time.process_time() - cpu) / calls * 1e6)
    return rates, cpus


async def _through_txcl(url: str, calls: int, batches: int, trace_mode: str) -> tuple[list[float], list[float]]:
    from txcl.ops.tree import load_ops
    from txcl.runtime.config import Settings
    from txcl.runtime.interpreter import Completed, Interpreter

    with tempfile.TemporaryDirectory() as tmp:
        scope = Path(tmp) / "OPS" / "tools" / "0100"
        scope.mkdir(parents=True)
        (scope / "add.txcl").write_text(f'SELECT .a, .b\nEXEC "mcp+{url}#add"\n', encoding="utf-8")
        interp = Interpreter(load_ops(Path(tmp)), settings=Settings(trace_mode=trace_mode))
        rates, cpus = [], []
        try:
            await interp.run({"a": 1, "b": 2}, "tools")  # warm: opens the session
            for _ in range(batches):
                wall, cpu = time.perf_counter(), time.process_time()
                for i in range(calls):
                    outcome = await interp.run({"a": i, "b": 2}, "tools")
                    assert isinstance(outcome, Completed) and outcome.envelope["sum"] == i + 2
                rates.append(calls / (time.perf_counter() - wall))
                cpus.append((time.process_time() - cpu) / calls * 1e6)
        finally:
            await interp.aclose_http()
            interp.close()
    return rates, cpus


def main() -> int:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    batches = 5
    from txcl.testing.mcp_server import McpServerProcess

    with McpServerProcess() as server:
        direct_rate, direct_cpu = asyncio.run(_direct(server.url, calls, batches))
        off_rate, off_cpu = asyncio.run(_through_txcl(server.url, calls, batches, "off"))
        summary_rate, summary_cpu = asyncio.run(_through_txcl(server.url, calls, batches, "summary"))
    med = statistics.median
    print(f"{calls} sequential calls of `add` per batch, median of {batches} batches")
    print(f"{'':<44}{'calls/s':>10}{'CPU µs/call':>14}{'vs direct':>11}")
    base = med(direct_rate)
    for name, rate, cpu in (("SDK ClientSession.call_tool (baseline)", direct_rate, direct_cpu),
                            ("txcl sync mcp+ op, tracing off", off_rate, off_cpu),
                            ("txcl sync mcp+ op, summary tracing", summary_rate, summary_cpu)):
        print(f"{name:<44}{med(rate):>10.0f}{med(cpu):>14.0f}{med(rate) / base:>10.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
