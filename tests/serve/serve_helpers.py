"""Helpers for serve tests: workspace files and a real `txcl serve` subprocess (a module
with a unique name, so importing it never picks up another area's conftest)."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

TXCL = [sys.executable, "-m", "txcl"]
SERVING_RE = re.compile(r"(?:txcl: |\"message\": \")serving .* on (http://127\.0\.0\.1:\d+)")


def write_files(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        body = textwrap.dedent(text).strip("\n")
        path.write_text(body if rel.endswith(".txcl") else body + "\n", encoding="utf-8")
    return root


class ServeProcess:
    """`txcl serve --port 0` in a subprocess; stderr lines are collected by a thread."""

    def __init__(self, ws: Path, args: list[str], env: dict[str, str] | None = None):
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("TXCL_")}
        full_env.update(env or {})
        full_env.setdefault("PYTHONUNBUFFERED", "1")
        self.proc = subprocess.Popen([*TXCL, "serve", str(ws), "--port", "0", *args], cwd=ws,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env)
        self.lines: list[str] = []
        self._new: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.url = ""

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))
            self._new.put(line.rstrip("\n"))
        self._new.put(None)

    def wait_for(self, pattern: str, timeout: float = 20.0, start: int = 0) -> re.Match:
        """Wait until a stderr line (index >= start) matches `pattern`."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        seen = start
        while True:
            while seen < len(self.lines):
                m = rx.search(self.lines[seen])
                seen += 1
                if m:
                    return m
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no stderr line matched {pattern!r}; got:\n" + "\n".join(self.lines))
            try:
                item = self._new.get(timeout=remaining)
            except queue.Empty:
                continue
            if item is None and seen >= len(self.lines):
                raise AssertionError(f"server exited ({self.proc.wait()}) before {pattern!r}:\n" + "\n".join(self.lines))

    def start(self) -> "ServeProcess":
        self.url = self.wait_for(SERVING_RE.pattern).group(1)
        return self

    def stop(self, timeout: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def run_serve_expect_exit(ws: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 30.0):
    """Run `txcl serve` that must fail at startup; returns CompletedProcess."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("TXCL_")}
    full_env.update(env or {})
    return subprocess.run([*TXCL, "serve", str(ws), "--port", "0", *args], cwd=ws, capture_output=True,
                          text=True, timeout=timeout, env=full_env)
