"""Helpers for serve tests: workspaces in tmp_path and a real `txcl serve` subprocess."""

from __future__ import annotations

import itertools
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
from typing import Callable

import pytest

_counter = itertools.count()
TXCL = [sys.executable, "-m", "txcl"]
SERVING_RE = re.compile(r"txcl: serving .* on (http://127\.0\.0\.1:\d+)")


def write_files(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        body = textwrap.dedent(text).strip("\n")
        path.write_text(body if rel.endswith(".txcl") else body + "\n", encoding="utf-8")
    return root


@pytest.fixture
def workspace(tmp_path: Path) -> Callable[[dict[str, str]], Path]:
    def build(files: dict[str, str]) -> Path:
        ws = tmp_path / f"ws{next(_counter)}"
        ws.mkdir()
        return write_files(ws, files)

    return build


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


@pytest.fixture
def serve():
    """`serve(ws, *flags, env=None)` -> a started ServeProcess (stopped after the test)."""
    procs: list[ServeProcess] = []

    def start(ws: Path, *args: str, env: dict[str, str] | None = None) -> ServeProcess:
        proc = ServeProcess(ws, list(args), env)
        procs.append(proc)
        return proc.start()

    yield start
    for proc in procs:
        proc.stop()


def run_serve_expect_exit(ws: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 30.0):
    """Run `txcl serve` that must fail at startup; returns CompletedProcess."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("TXCL_")}
    full_env.update(env or {})
    return subprocess.run([*TXCL, "serve", str(ws), "--port", "0", *args], cwd=ws, capture_output=True,
                          text=True, timeout=timeout, env=full_env)
