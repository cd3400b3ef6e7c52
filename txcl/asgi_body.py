"""Reading a small request body from an ASGI `receive`, with a size cap (txcl serve's admin
and queue endpoints, the worker SDK's app)."""

from __future__ import annotations

from typing import Any


async def read_capped_body(receive: Any, cap: int) -> bytes | None:
    """The whole body, or None as soon as it is larger than `cap` bytes (the rest is not read)."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > cap:
            return None
        chunks.append(chunk)
        if not message.get("more_body"):
            break
    return b"".join(chunks)


__all__ = ["read_capped_body"]
