"""`txcl eval 'EXPR' [--input JSON|@file]`: evaluate a value expression."""

from __future__ import annotations

import sys

import click

from txcl.cli.common import color_option, fail, print_error, read_json_arg
from txcl.errors import TxclEvalError, TxclSyntaxError


@click.command("eval")
@click.argument("expression")
@click.option("--input", "input_", metavar="JSON|@FILE|-", help="Envelope to evaluate against (default {}).")
@click.option("--compact", is_flag=True, help="Print JSON on one line.")
@color_option
def command(expression: str, input_: str | None, compact: bool, color: str) -> None:
    """Evaluate EXPRESSION as it would stand on a SET right-hand side; print it as JSON."""
    from txcl.evaluate.expression import eval_expression
    from txcl.values.jsonio import dumps

    envelope = read_json_arg(input_)
    if envelope is not None and not isinstance(envelope, dict):
        fail("--input must be a JSON object")
    try:
        value = eval_expression(expression, envelope)
    except TxclSyntaxError as exc:
        print_error(exc, color)
        sys.exit(1)
    except TxclEvalError as exc:
        click.echo(f"txcl: error: {exc}", err=True)
        sys.exit(1)
    click.echo(dumps(value, indent=None if compact else 2))
