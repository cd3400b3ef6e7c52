"""Shared pieces of the continuation commands (`txcl run` suspends, `runs`, `complete`, `sweep`)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import click

from txcl.cli.common import fail


def open_settings(directory: str, db: str | None, flags: dict[str, Any] | None = None) -> tuple[Path, Any]:
    """(workspace, settings). Without a workspace (no OPS/ at or above DIR) the database must
    be named (--db, TXCL_DB); otherwise exit 2 with one line."""
    import os

    from txcl.ops.tree import WorkspaceNotFound, find_workspace
    from txcl.runtime.config import ConfigError, load_settings

    try:
        workspace, _ = find_workspace(directory)
    except WorkspaceNotFound as exc:
        if db is None and not os.environ.get("TXCL_DB"):
            fail(f"{exc} (use --db to name the database)")
        workspace = Path(directory).resolve()
    try:
        settings = load_settings(workspace, {**(flags or {}), "db": db})
    except ConfigError as exc:
        fail(str(exc))
    return workspace, settings


def open_workspace_store(settings: Any, workspace: Path, *, create: bool = False) -> Any:
    """The workspace's store. Commands that only read or act on existing runs pass
    `create=False` (the default): a database that does not exist is exit 2 with one line,
    and nothing is created."""
    from txcl.continuations.service import open_run_store
    from txcl.store import sqlite_file
    from txcl.store.errors import StoreError

    path = settings.db_path(workspace)
    try:
        file = sqlite_file(path)
        if not create and file is not None and not file.exists():
            fail(f"no database at {file} (nothing has run in this workspace yet; use --db to name another)")
        return open_run_store(path, settings, create=create)
    except StoreError as exc:  # a store that cannot be opened is a usage problem
        fail(f"--db: {exc}")


def open_service(settings: Any, workspace: Path, store: Any = None) -> Any:
    from txcl.continuations.service import ContinuationService

    # one-shot commands: no event loop to keep responsive, so store calls run inline
    service = ContinuationService(store if store is not None else open_workspace_store(settings, workspace), settings,
                                  workspace=workspace, inline_store=True)
    return service


async def wait_for_finish(service: Any, run_id: str, timeout_ms: int) -> Any:
    """The run record once it is finished, or the latest record when `timeout_ms` passes."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout_ms / 1000.0
    while True:
        record = await service.call(service.store.get_run, run_id)
        if record is None or record.status in ("completed", "failed", "expired"):
            return record
        left = end - loop.time()
        if left <= 0:
            return record
        await service.wait_for_run(run_id, min(0.2, left))


async def wait_while_working(service: Any, run_id: str) -> Any:
    """The finished run, waiting as long as this process still works on it (in-process calls
    and the resumes they release); None when it stops working and the run is not finished."""
    while True:
        record = await service.call(service.store.get_run, run_id)
        if record is None or record.status in ("completed", "failed", "expired"):
            return record
        if not service.in_process.running and not service.tasks:
            return None
        await service.wait_for_run(run_id, 0.2)


def echo_json(value: Any, compact: bool = False) -> None:
    from txcl.values.jsonio import dumps

    click.echo(dumps(value, indent=None if compact else 2))


def run_command_walk(tree: Any, store: Any, settings: Any, workspace: Path, envelope: dict, stack: str | None,
                     mocks: list[str] | None, wait_ms: int | None) -> tuple[Any, Any]:
    """`txcl run`'s walk with the continuation hooks: (outcome, finished run record or None).

    With `wait_ms`, a suspended run is watched in the same event loop (so a promoted
    continuable op keeps running) until it finishes or the wait ends."""
    import logging

    from txcl.runtime.interpreter import Suspended

    service = open_service(settings, workspace, store)
    if not service.callback_base_url:
        logging.getLogger("txcl").debug("no callback base url")
    warned = {"done": False}

    def warn_once() -> None:
        if not warned["done"]:
            warned["done"] = True
            click.echo("txcl: warning: no --callback-base-url; async workers get callback_url: null "
                       "(complete them with `txcl complete`)", err=True)

    service.before_dispatch = None if service.callback_base_url else warn_once
    interp = service.interpreter(tree)

    async def go() -> tuple[Any, Any]:
        try:
            outcome = await interp.run(envelope, stack, src="cli", mocks=mocks, from_json=True)
            finished = None
            if isinstance(outcome, Suspended) and wait_ms is not None:
                record = await wait_for_finish(service, outcome.run_id, wait_ms)
                if record is not None and record.status in ("completed", "failed", "expired"):
                    finished = record
            elif isinstance(outcome, Suspended) and service.in_process.running:
                # txcl itself is calling the tools this run waits for (mcp+ ops): finish them
                # here rather than leave them to a server's sweeper
                finished = await wait_while_working(service, outcome.run_id)
            await service.drain_tasks(0 if wait_ms is None else 1.0)
            for task in list(service.tasks):
                task.cancel()
            return outcome, finished
        finally:
            await service.aclose()

    try:
        return asyncio.run(go())
    finally:
        interp.close()
