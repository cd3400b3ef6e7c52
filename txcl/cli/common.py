"""Helpers shared by CLI commands: reading JSON input and reporting user errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from txcl.errors import TxclError


DB_HELP = ("The database: a file path, sqlite:///path or postgresql://user@host/dbname "
           "(default: $TXCL_DB, then the workspace's txcl.toml, then <workspace>/.txcl-data/txcl.db).")


def fail(message: str, code: int = 2) -> NoReturn:
    """Print `txcl: error: message` on stderr and exit with `code`."""
    click.echo(f"txcl: error: {message}", err=True)
    sys.exit(code)


def read_json_arg(value: str | None, what: str = "--input") -> Any:
    """Parse a JSON argument given inline, as `@file`, or `-` / `@-` for standard input;
    exits 2 with a clear message."""
    if value is None:
        return None
    source = what
    text = value
    if value in ("-", "@-"):
        source = f"{what} (standard input)"
        text = sys.stdin.read()
    elif value.startswith("@"):
        path = Path(value[1:])
        source = str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            fail(f"{what}: cannot read {path}: {exc.strerror or exc}")
    from txcl.values.jsonio import JsonError, loads

    try:
        return loads(text)
    except JsonError as exc:
        fail(f"{source}: invalid JSON: {exc}")


def print_error(exc: TxclError) -> None:
    click.echo(str(exc), err=True)
