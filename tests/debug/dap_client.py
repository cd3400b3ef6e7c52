"""A Debug Adapter Protocol client for the tests: starts `txcl dap` over stdio, sends requests,
waits for responses and events (written here from the protocol's specification)."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from typing import Any


class DapClient:
    def __init__(self, cwd: str, *args: str) -> None:
        env = dict(os.environ)
        self.proc = subprocess.Popen([sys.executable, "-m", "txcl", "dap", *args], cwd=cwd, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.seq = 0
        self.messages: "queue.Queue[dict | None]" = queue.Queue()
        self.events: list[dict] = []
        self.pending: list[dict] = []  # read but not yet asked for
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        stream = self.proc.stdout
        while True:
            length = None
            while True:
                line = stream.readline()
                if not line:
                    self.messages.put(None)
                    return
                line = line.strip()
                if not line:
                    break
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            assert length is not None, "a message without Content-Length"
            self.messages.put(json.loads(stream.read(length)))

    def send(self, command: str, arguments: dict | None = None) -> int:
        self.seq += 1
        body = json.dumps({"seq": self.seq, "type": "request", "command": command,
                           "arguments": arguments or {}}).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()
        return self.seq

    def _next(self, timeout: float) -> dict:
        message = self.messages.get(timeout=timeout)
        if message is None:
            raise AssertionError("txcl dap closed its output: " + self.proc.stderr.read().decode(errors="replace"))
        return message

    def _take(self, match, timeout: float) -> dict:
        for i, message in enumerate(self.pending):
            if match(message):
                return self.pending.pop(i)
        while True:
            message = self._next(timeout)
            if message.get("type") == "event":
                self.events.append(message)
            if match(message):
                return message
            self.pending.append(message)

    def request(self, command: str, arguments: dict | None = None, timeout: float = 60.0) -> dict:
        seq = self.send(command, arguments)
        return self._take(lambda m: m.get("type") == "response" and m.get("request_seq") == seq, timeout)

    def ok(self, command: str, arguments: dict | None = None) -> dict:
        response = self.request(command, arguments)
        assert response["success"], response
        return response.get("body") or {}

    def event(self, name: str, timeout: float = 60.0) -> dict:
        return self._take(lambda m: m.get("type") == "event" and m.get("event") == name, timeout)

    def output(self) -> str:
        return "".join(e["body"]["output"] for e in self.events if e.get("event") == "output")

    def stopped(self) -> dict:
        """The next stop: its event body, with the top frame as `top` and all frames as `frames`."""
        body = self.event("stopped")["body"]
        frames = self.ok("stackTrace", {"threadId": 1})["stackFrames"]
        body["frames"] = frames
        body["top"] = frames[0]
        return body

    def scopes(self, frame_id: int) -> dict[str, int]:
        return {s["name"]: s["variablesReference"] for s in self.ok("scopes", {"frameId": frame_id})["scopes"]}

    def variables(self, ref: int) -> dict[str, dict]:
        return {v["name"]: v for v in self.ok("variables", {"variablesReference": ref})["variables"]}

    def value(self, ref: int) -> Any:
        """A variables tree as plain JSON (each leaf's value text parsed back)."""
        out: dict[str, Any] = {}
        for name, var in self.variables(ref).items():
            out[name] = self.value(var["variablesReference"]) if var["variablesReference"] else json.loads(var["value"]) \
                if var["type"] != "object" and var["type"] != "array" else var["value"]
        return out

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                self.request("disconnect", {}, timeout=15)
        except Exception:  # noqa: BLE001 - closing after a failure
            pass
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
