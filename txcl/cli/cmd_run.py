"""`txcl run [DIR] --stack NAME --input JSON|@file`: walk one stack in-process (RUNTIME.md §9.4).

Exit status: 0 completed, 1 failed (error payload on stdout), 2 usage or load error,
3 suspended.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from txcl.cli.common import fail, read_json_arg

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_SUSPENDED = 0, 1, 2, 3


def shape_envelope(envelope: dict, private: bool) -> dict:
    """Remove the budget fields always, and top-level `_` keys unless `private`."""
    from txcl.runtime.budget import strip_budget_fields

    strip_budget_fields(envelope)
    if private:
        return envelope
    return {k: v for k, v in envelope.items() if not k.startswith("_")}


def open_runtime(directory: str, db: str | None, flags: dict[str, Any]):
    """(workspace, tree, settings, store) or exit 2 with a clear message."""
    from txcl.errors import TxclLoadError, render_all
    from txcl.ops.tree import WorkspaceNotFound, find_workspace, load_ops
    from txcl.runtime.config import ConfigError, load_settings

    try:
        workspace, _ = find_workspace(directory)
    except WorkspaceNotFound as exc:
        fail(str(exc))
    try:
        settings = load_settings(workspace, {**flags, "db": db})
    except ConfigError as exc:
        fail(str(exc))
    try:
        tree = load_ops(workspace)
    except TxclLoadError as exc:
        click.echo(render_all(exc.diagnostics), err=True)
        n = len(exc.diagnostics)
        fail(f"the OPS tree failed to load ({n} error{'s' if n != 1 else ''})")
    store = open_store(settings, workspace)
    return workspace, tree, settings, store


def open_store(settings: Any, workspace: Path):
    from txcl.store.sqlite import SqliteStore

    path = settings.db_path(workspace)
    if path.startswith("postgresql://") or path.startswith("postgres://"):
        fail("--db: the PostgreSQL backend is not available in this build")
    try:
        return SqliteStore(path, settings.sqlite_busy_timeout)
    except Exception as exc:  # noqa: BLE001 - a store that cannot be opened is a usage problem
        fail(f"--db {path}: cannot open the database: {exc}")


@click.command("run")
@click.argument("directory", default=".", required=False)
@click.option("--stack", "stack", help="Stack to walk (optional when the tree has one stack).")
@click.option("--input", "input_", metavar="JSON|@FILE", help="Starting envelope (a JSON object).")
@click.option("--mock-request", "mock_request", type=click.Path(dir_okay=False),
              help="Start from this mock-request.json instead of --input.")
@click.option("--mock", "mocks", multiple=True, metavar="GLOB",
              help="Answer rules matching <stack>/<scope>/<name> from their mock-response.json.")
@click.option("--compact", is_flag=True, help="Print the envelope on one line.")
@click.option("--private", is_flag=True, default=None, help="Keep top-level keys starting with '_'.")
@click.option("--trace", "show_trace", is_flag=True, help="Print the trace on stderr afterwards.")
@click.option("--trace-mode", type=click.Choice(["off", "summary", "full"]), default=None)
@click.option("--db", default=None, help="Database file (default <workspace>/.txcl/txcl.db).")
@click.option("--workspace", default=None, help="Same as DIR.")
def command(directory: str, stack: str | None, input_: str | None, mock_request: str | None,
            mocks: tuple[str, ...], compact: bool, private: bool | None, show_trace: bool,
            trace_mode: str | None, db: str | None, workspace: str | None) -> None:
    """Walk one stack of the OPS tree with an input envelope and print the result."""
    from txcl.runtime.interpreter import Completed, Failed, Interpreter, UnknownStack
    from txcl.values.jsonio import dumps

    if input_ is not None and mock_request is not None:
        fail("--input and --mock-request exclude each other")
    envelope = read_json_arg(input_, "--input") if input_ is not None else None
    if mock_request is not None:
        envelope = read_json_arg("@" + mock_request, "--mock-request")
    if envelope is None:
        envelope = {}
    if not isinstance(envelope, dict):
        fail("--input must be a JSON object")
    flags: dict[str, Any] = {"trace_mode": trace_mode, "private": private}
    ws, tree, settings, store = open_runtime(workspace or directory, db, flags)
    if show_trace and settings.trace_mode == "off":
        settings = settings.evolve(trace_mode="summary")
    interp = Interpreter(tree, store=store, settings=settings)
    try:
        outcome = interp.run_sync(envelope, stack, src="cli", mocks=list(mocks) if mocks else None)
    except UnknownStack as exc:
        fail(str(exc))
    finally:
        interp.close()
    indent = None if compact else 2
    if isinstance(outcome, Completed):
        click.echo(dumps(shape_envelope(outcome.envelope, settings.private), indent=indent))
        code = EXIT_OK
    elif isinstance(outcome, Failed):
        click.echo(dumps(outcome.payload, indent=indent))
        code = EXIT_FAILED
    else:
        click.echo(dumps({"status": "running", "run_id": outcome.run_id, "continuation": outcome.rcid},
                         indent=indent))
        code = EXIT_SUSPENDED
    if show_trace:
        from txcl.trace.reader import format_trace

        record = store.get_trace(outcome.rid)
        if record is not None:
            click.echo(format_trace(record), err=True)
    store.close()
    sys.exit(code)
