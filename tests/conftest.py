"""Shared pytest fixtures: the repository root, and OPS trees built in tmp_path and run."""

from __future__ import annotations

import itertools
import textwrap
from pathlib import Path
from typing import Any, Callable

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT

_counter = itertools.count()


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """Write `files` (paths relative to the workspace; `.txcl` texts dedented) and return it."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        body = textwrap.dedent(text).strip("\n")
        path.write_text(body + "\n", encoding="utf-8")
    return root


@pytest.fixture
def workspace(tmp_path: Path) -> Callable[[dict[str, str]], Path]:
    """`workspace({"OPS/shop/0100/a.txcl": "EMIT .a = 1"})` -> the workspace directory.

    Python modules written beside OPS/ get a unique name per test to avoid import caching."""

    def build(files: dict[str, str]) -> Path:
        ws = tmp_path / f"ws{next(_counter)}"
        ws.mkdir()
        return write_tree(ws, files)

    return build


@pytest.fixture
def run_tree(tmp_path: Path):
    """`run_tree(ws, envelope, stack=None, **settings)` -> (outcome, store)."""
    from txcl.ops.tree import load_ops
    from txcl.runtime.config import Settings
    from txcl.runtime.interpreter import Interpreter
    from txcl.store.sqlite import SqliteStore

    stores: list[Any] = []

    def run(ws: Path, envelope: dict | None = None, stack: str | None = None, *, mocks=None,
            sleep=None, **settings: Any):
        store = SqliteStore(ws / ".txcl" / "txcl.db")
        stores.append(store)
        tree = load_ops(ws)
        interp = Interpreter(tree, store=store, settings=Settings(**settings))
        if sleep is not None:
            interp.services.sleep = sleep
        try:
            outcome = interp.run_sync(dict(envelope or {}), stack, mocks=mocks)
        finally:
            interp.close()
        return outcome, store

    yield run
    for store in stores:
        store.close()

