"""Fixtures for serve tests: workspaces in tmp_path and started `txcl serve` subprocesses."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Callable

import pytest

from serve_helpers import ServeProcess, write_files

_counter = itertools.count()


@pytest.fixture
def workspace(tmp_path: Path) -> Callable[[dict[str, str]], Path]:
    def build(files: dict[str, str]) -> Path:
        ws = tmp_path / f"ws{next(_counter)}"
        ws.mkdir()
        return write_files(ws, files)

    return build


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
