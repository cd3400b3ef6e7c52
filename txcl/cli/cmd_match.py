"""`txcl match FILE --input JSON|@file`: does the rule's WHEN match the envelope?"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from txcl.cli.common import color_option, fail, print_error, read_json_arg
from txcl.errors import TxclSyntaxError


@click.command("match")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--input", "input_", metavar="JSON|@FILE|-", required=True, help="The envelope ('-': standard input).")
@color_option
def command(file: Path, input_: str, color: str) -> None:
    """Print `true` when the WHEN of FILE matches the envelope, else `false`."""
    from txcl.evaluate.when import when_matches
    from txcl.syntax.parser import parse_source

    try:
        data = file.read_bytes()
    except OSError as exc:
        fail(f"cannot read {file}: {exc.strerror or exc}")
    envelope = read_json_arg(input_)
    if not isinstance(envelope, dict):
        fail("--input must be a JSON object")
    try:
        rule = parse_source(data, str(file))
    except TxclSyntaxError as exc:
        print_error(exc, color)
        sys.exit(1)
    click.echo("true" if when_matches(rule, envelope) else "false")
