"""`txcl rule TX123`: explain a check code with a bad and a good example."""

from __future__ import annotations

import json
import sys

import click

from txcl.cli.common import fail


@click.command("rule")
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="List every code with its name and severity.")
@click.option("--json", "as_json", is_flag=True, help="Print the entry as JSON.")
def command(code: str | None, show_all: bool, as_json: bool) -> None:
    """Explain a rule code (`txcl rule TX201`), or list them all (`--all`)."""
    from txcl.check.docs import DOCS
    from txcl.check.docs import text as render_text
    from txcl.codes import CODES

    if show_all or code is None:
        if as_json:
            click.echo(json.dumps([{"code": c, "name": i.name, "severity": i.severity, "summary": i.summary}
                                   for c, i in CODES.items()], indent=2))
        else:
            for c, i in CODES.items():
                click.echo(f"{c}  {i.severity:<7}  {i.name}")
        return
    key = code.upper()
    if key.isdigit():
        key = f"TX{int(key):03d}"
    info = CODES.get(key)
    if info is None:
        matches = [c for c, i in CODES.items() if i.name == code.lower()]
        if not matches:
            fail(f"unknown rule code {code!r} (see `txcl rule --all`)")
        key, info = matches[0], CODES[matches[0]]
    doc = DOCS[key]
    if as_json:
        click.echo(json.dumps({"code": key, "name": info.name, "severity": info.severity,
                               "summary": info.summary, "explanation": doc.explanation,
                               "bad": doc.bad, "good": doc.good}, indent=2, ensure_ascii=False))
        return
    click.echo(render_text(doc), nl=False)
    sys.exit(0)
