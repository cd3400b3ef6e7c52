"""`txcl parse FILE... [--json]`: parse rule files and report ok or the diagnostics."""

from __future__ import annotations

import json
import sys

import click

from txcl.cli.common import color_option, print_error
from txcl.errors import TxclSyntaxError


@click.command("parse")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the AST of each file as JSON.")
@color_option
def command(files: tuple[str, ...], as_json: bool, color: str) -> None:
    """Parse rule files: print `FILE: ok` (or the AST with --json) or the diagnostics.

    Exit status: 0 when every file parses, 1 when any has errors, 2 when a file cannot be
    read.
    """
    from txcl.syntax.ast import to_json
    from txcl.syntax.parser import parse_source

    status = 0
    outputs: list[dict] = []
    for name in files:
        try:
            with open(name, "rb") as fh:
                data = fh.read()
        except OSError as exc:
            click.echo(f"txcl: error: cannot read {name}: {exc.strerror or exc}", err=True)
            status = 2
            continue
        try:
            rule = parse_source(data, name)
        except TxclSyntaxError as exc:
            print_error(exc, color)
            status = max(status, 1)
            if as_json:
                outputs.append({"file": name, "diagnostics":
                                [d.to_json() for d in exc.diagnostics]})
            continue
        if as_json:
            outputs.append({"file": name, "rule": to_json(rule)})
        else:
            click.echo(f"{name}: ok")
    if as_json:
        # one file: the bare AST; several: a list of {"file", "rule" | "diagnostics"}
        doc: object = outputs
        if len(files) == 1 and outputs and "rule" in outputs[0]:
            doc = outputs[0]["rule"]
        if outputs and (len(files) > 1 or "rule" in outputs[0]):
            click.echo(json.dumps(doc, indent=2, ensure_ascii=False))
    sys.exit(status)
