"""Debug Adapter Protocol framing: `Content-Length: N\\r\\n\\r\\n` then N bytes of JSON."""

from __future__ import annotations

import json
import threading
from typing import Any, BinaryIO

MAX_MESSAGE = 16 * 1024 * 1024  # a request larger than this is refused (and the session ends)
MAX_HEADER_LINES = 32


class WireError(Exception):
    """The client sent something that is not a protocol message; the session cannot go on."""


def read_message(stream: BinaryIO) -> dict | None:
    """The next message, or None at the end of the stream."""
    length: int | None = None
    for _ in range(MAX_HEADER_LINES):
        line = stream.readline(1024)
        if not line:
            return None
        text = line.decode("ascii", "replace").strip()
        if not text:
            if length is None:
                continue  # blank lines between messages
            break
        name, _, value = text.partition(":")
        if name.strip().lower() == "content-length":
            try:
                length = int(value.strip())
            except ValueError:
                raise WireError(f"bad Content-Length header: {text!r}") from None
    else:
        raise WireError("no end to the message's headers")
    if length is None or length < 0 or length > MAX_MESSAGE:
        raise WireError(f"a message of {length} bytes (at most {MAX_MESSAGE})")
    body = stream.read(length)
    if len(body) < length:
        return None
    try:
        message = json.loads(body)
    except ValueError as exc:
        raise WireError(f"a message that is not JSON: {exc}") from None
    if not isinstance(message, dict):
        raise WireError("a message that is not a JSON object")
    return message


class Writer:
    """Sends messages with their sequence numbers; safe from several threads."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.seq = 0
        self.lock = threading.Lock()
        self.closed = False

    def send(self, message: dict[str, Any]) -> None:
        with self.lock:
            if self.closed:
                return
            self.seq += 1
            message["seq"] = self.seq
            body = json.dumps(message, ensure_ascii=False, default=str).encode("utf-8")
            try:
                self.stream.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
                self.stream.flush()
            except (OSError, ValueError):
                self.closed = True  # the client went away

    def event(self, name: str, body: dict | None = None) -> None:
        message: dict[str, Any] = {"type": "event", "event": name}
        if body is not None:
            message["body"] = body
        self.send(message)

    def response(self, request: dict, body: dict | None = None, *, error: str | None = None) -> None:
        message: dict[str, Any] = {"type": "response", "request_seq": request.get("seq", 0),
                                   "command": request.get("command", ""), "success": error is None}
        if error is not None:
            message["message"] = error
            message["body"] = {"error": {"id": 1, "format": error, "showUser": True}}
        elif body is not None:
            message["body"] = body
        self.send(message)
