"""`txcl repl [OPS_DIR] [--input JSON|@file]`: the interactive rule playground."""

from __future__ import annotations

import sys

import click

from txcl.cli.common import color_option, fail, read_json_arg, require_extra, use_color


@click.command("repl")
@click.argument("ops_dir", required=False, type=click.Path(file_okay=False))
@click.option("--input", "input_", metavar="JSON|@FILE", help="Initial envelope (inline JSON or @file).")
@color_option
def command(ops_dir: str | None, input_: str | None, color: str) -> None:
    """Try rules and expressions against a working envelope.

    Type a rule (submitted when it parses), an expression such as &now("rfc3339") or .user.id,
    or a meta-command (.help lists them). With OPS_DIR, `.run STACK` walks a stack of that
    tree over the envelope. Piped stdin runs in batch mode: no prompt, one reply per entry,
    exit status 1 when any entry failed.
    """
    require_extra("repl", "txcl repl")
    from txcl.repl.app import run_batch, run_interactive
    from txcl.repl.session import ReplSession

    envelope = read_json_arg(input_) if input_ is not None else {}
    if not isinstance(envelope, dict):
        fail("--input: the envelope must be a JSON object")
    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    colour = use_color(color, sys.stdout) if (interactive or color != "auto") else False
    session = ReplSession(envelope, ops_dir=ops_dir, colour=colour)
    if interactive:
        sys.exit(run_interactive(session))
    if session.ops_error:
        click.echo(session.ops_error, err=True)
    sys.exit(run_batch(session, sys.stdin, sys.stdout))
