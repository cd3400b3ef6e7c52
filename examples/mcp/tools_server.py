"""The example's MCP server: three tools on http://127.0.0.1:8768/mcp (FastMCP, the official SDK).

    python examples/mcp/tools_server.py [--port 8768]

- `word_count(text)` answers at once;
- `translate(text, to)` takes a second and a half (a stand-in for a slow model);
- `score(title)` rates one headline, taking longer for short ones (so a fan-out's answers
  arrive out of order).
"""

import argparse
import asyncio
import logging

import uvicorn
from mcp.server.fastmcp import FastMCP

server = FastMCP("example-newsroom-tools", log_level="WARNING")


@server.tool(description="Count the words of a text.")
async def word_count(text: str) -> dict:
    return {"words": len(text.split())}


@server.tool(description="Translate a text (slowly; this one only reverses the word order).")
async def translate(text: str, to: str = "fr") -> dict:
    await asyncio.sleep(1.5)
    return {"language": to, "text": " ".join(reversed(text.split()))}


@server.tool(description="Score one headline from 0 to 10.")
async def score(title: str) -> dict:
    await asyncio.sleep(max(0.0, 0.6 - 0.02 * len(title)))
    return {"title": title, "score": min(10, len(title) // 5)}


class _QuietDisconnects(logging.Filter):
    """The SDK logs a traceback when a client ends its session; that is no error here."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (exc is not None and type(exc).__name__ == "ClosedResourceError")


def main() -> None:
    logging.getLogger("mcp.server.streamable_http").addFilter(_QuietDisconnects())
    parser = argparse.ArgumentParser(description="The MCP server of examples/mcp")
    parser.add_argument("--port", type=int, default=8768)
    args = parser.parse_args()
    print(f"listening on http://127.0.0.1:{args.port}/mcp", flush=True)
    uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
