"""`txcl run [DIR] --stack NAME --input JSON|@file`: walk one stack in-process.

Exit status: 0 completed, 1 failed (error payload on stdout), 2 usage or load error,
3 suspended.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from txcl import runtime_codes as rc
from txcl.cli.common import DB_HELP, color_option, fail, print_error, read_json_arg

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_SUSPENDED = 0, 1, 2, 3


def shape_envelope(envelope: dict, private: bool) -> dict:
    """Remove the budget fields always, and top-level `_` keys unless `private`."""
    from txcl.runtime.budget import strip_budget_fields

    strip_budget_fields(envelope)
    if private:
        return envelope
    return {k: v for k, v in envelope.items() if not k.startswith("_")}


def open_runtime(directory: str, db: str | None, flags: dict[str, Any], color: str = "auto"):
    """(workspace, tree, settings, store) or exit 2 with a clear message."""
    from txcl.errors import TxclLoadError
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
        print_error(exc, color)
        n = len(exc.diagnostics)
        fail(f"the OPS tree failed to load ({n} error{'s' if n != 1 else ''})")
    from txcl.cli.durable import open_workspace_store

    # traces, kv and continuations in one SQLite file (a suspending stack needs the latter)
    store = open_workspace_store(settings, workspace, create=True)
    return workspace, tree, settings, store


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
@click.option("--trace-ops", type=click.Choice(["off", "answers"]), default=None,
              help="answers: the trace also keeps each op call's input and answer (for txcl replay).")
@click.option("--db", default=None, help=DB_HELP)
@click.option("--workspace", default=None, help="Same as DIR.")
@click.option("--wait", "wait", is_flag=False, flag_value="10m", default=None, metavar="[DURATION]",
              help="When the run suspends, wait for its result (default 10m); exit 3 if still running.")
@click.option("--callback-base-url", default=None, help="Base URL workers call back to (a txcl serve).")
@click.option("--validate-input", is_flag=True,
              help="Check the input against the stack's schema.json $defs.input first; exit 2 on a violation.")
@click.option("--validate-output", "validate_output", is_flag=False, flag_value="log", default=None,
              type=click.Choice(["log", "strict"]), metavar="[strict]",
              help="Check the answer against $defs.output: report a violation on stderr (strict: fail, exit 1).")
@color_option
def command(directory: str, stack: str | None, input_: str | None, mock_request: str | None,
            mocks: tuple[str, ...], compact: bool, private: bool | None, show_trace: bool,
            trace_mode: str | None, trace_ops: str | None, db: str | None, workspace: str | None, wait: str | None,
            callback_base_url: str | None, validate_input: bool, validate_output: str | None, color: str) -> None:
    """Walk one stack of the OPS tree with an input envelope and print the result."""
    from txcl.runtime.interpreter import Completed, Failed, UnknownStack
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
    flags: dict[str, Any] = {"trace_mode": trace_mode, "trace_ops": trace_ops, "private": private,
                             "callback_base_url": callback_base_url}
    ws, tree, settings, store = open_runtime(workspace or directory, db, flags, color)
    if show_trace and settings.trace_mode == "off":
        settings = settings.evolve(trace_mode="summary")
    wait_ms = None
    if wait is not None:
        from txcl.runtime.config import parse_duration_ms

        try:
            wait_ms = parse_duration_ms(wait)
        except ValueError as exc:
            fail(f"--wait: {exc}")
    from txcl.cli.durable import run_command_walk

    schemas = _schemas(ws) if (validate_input or validate_output) else None
    if validate_input:
        _check_input(schemas, _stack_of(tree, stack), envelope)
    try:
        outcome, finished = run_command_walk(tree, store, settings, ws, envelope, stack,
                                             list(mocks) if mocks else None, wait_ms)
    except UnknownStack as exc:
        fail(str(exc))
    indent = None if compact else 2
    if finished is not None:  # --wait saw the suspended run end
        from txcl.runtime_codes import run_error_payload as error_payload

        if finished.status == "completed":
            click.echo(dumps(shape_envelope(dict(finished.result or {}), settings.private), indent=indent))
            store.close()
            sys.exit(EXIT_OK)
        click.echo(dumps(error_payload(finished), indent=indent))
        store.close()
        sys.exit(EXIT_FAILED)
    if isinstance(outcome, Completed) and validate_output and not _output_ok(
            schemas, outcome, validate_output, indent):
        store.close()
        sys.exit(EXIT_FAILED)
    if isinstance(outcome, Completed):
        click.echo(dumps(shape_envelope(outcome.envelope, settings.private), indent=indent))
        code = EXIT_OK
    elif isinstance(outcome, Failed):
        click.echo(dumps(outcome.payload, indent=indent))
        code = EXIT_FAILED
    else:
        click.echo(dumps({"status": "waiting", "run_id": outcome.run_id, "continuation": outcome.rcid},
                         indent=indent))
        code = EXIT_SUSPENDED
    if show_trace:
        from txcl.trace.reader import format_trace

        record = store.get_trace(outcome.rid)
        if record is not None:
            click.echo(format_trace(record), err=True)
    store.close()
    sys.exit(code)


def _schemas(ws: Any) -> Any:
    from txcl.types.validate import TreeSchemas

    return TreeSchemas(ws / "OPS")


def _stack_of(tree: Any, stack: str | None) -> str | None:
    if stack is not None:
        return stack
    stacks = tree.user_stacks()
    return stacks[0] if len(stacks) == 1 else None


def _check_input(schemas: Any, stack: str | None, envelope: dict) -> None:
    """--validate-input: one line per violation on stderr and exit 2."""
    from txcl.types.validate import SchemaProblem

    if stack is None:
        return  # the walk says which stack is missing
    try:
        validator = schemas.validator(stack, "input")
    except SchemaProblem as exc:
        fail(f"--validate-input: the schema of stack {stack}: {exc}")
    if validator is None:
        fail(f"--validate-input: stack {stack} has no schema.json with $defs.input")
    errors = validator.errors({k: v for k, v in envelope.items() if k != "_txc"})
    if errors:
        for error in errors:
            click.echo(f"txcl: invalid input at {error['pointer'] or '/'}: {error['message']}", err=True)
        sys.exit(2)


def _output_ok(schemas: Any, outcome: Any, mode: str, indent: int | None) -> bool:
    """--validate-output: report a violation; False when strict (the error is printed)."""
    from txcl.types.validate import SchemaProblem, answer_document
    from txcl.values.jsonio import dumps

    stack = outcome.envelope.get("_txc", {}).get("stack") if isinstance(outcome.envelope.get("_txc"), dict) else None
    try:
        validator = schemas.validator(stack, "output") if stack else None
    except SchemaProblem as exc:
        fail(f"--validate-output: the schema of stack {stack}: {exc}")
    if validator is None:
        return True
    errors = validator.errors(answer_document(outcome.envelope))
    if not errors:
        return True
    for error in errors:
        click.echo(f"txcl: {'invalid' if mode == 'strict' else 'warning: invalid'} output at "
                   f"{error['pointer'] or '/'}: {error['message']}", err=True)
    if mode != "strict":
        return True
    click.echo(dumps({"error": {"code": rc.INVALID_OUTPUT.code, "message": "the answer does not match the stack's "
                                "$defs.output", "errors": errors}}, indent=indent))
    return False
