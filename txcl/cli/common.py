"""Helpers shared by CLI commands: reading JSON input and reporting user errors."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from txcl.errors import TxclError


DB_HELP = ("The database: a file path, sqlite:///path or postgresql://user@host/dbname "
           "(default: $TXCL_DB, then the workspace's txcl.toml, then <workspace>/.txcl-data/txcl.db).")


EXTRAS = {
    "serve": ("starlette", "uvicorn"),
    "repl": ("prompt_toolkit", "pygments"),
    "lsp": ("pygls", "lsprotocol", "pygments"),
    "postgres": ("psycopg", "psycopg_pool"),
    "mcp": ("mcp",),
    "ui": ("starlette", "uvicorn", "jinja2"),
    "generate": ("hypothesis",),
    "metrics": ("prometheus_client",),
    "otel": ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http"),
    "mail": ("aiosmtpd",),
    "nats": ("nats",),
}


def require_extra(extra: str, command: str) -> None:
    """Exit 2 with the install command when an optional part of txcl is not installed."""
    import importlib.util

    missing = [m for m in EXTRAS[extra] if importlib.util.find_spec(m) is None]
    if missing:
        from txcl.install import install_command

        fail(f"{command} needs the '{extra}' extra, which is not installed (missing: {', '.join(missing)}): "
             f"{install_command(extra)}")


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


COLOR_HELP = "Colour: auto (on a terminal), always or never. NO_COLOR and FORCE_COLOR are honoured."


def color_option(fn):
    """`--color auto|always|never`, the same on every command that prints diagnostics or diffs."""
    return click.option("--color", "color", type=click.Choice(["auto", "always", "never"]), default="auto",
                        show_default=True, help=COLOR_HELP)(fn)


def use_color(choice: str = "auto", stream=None) -> bool:
    """The one colour policy: --color wins; then NO_COLOR (any value) turns colour off and
    FORCE_COLOR (any value) on; otherwise colour when `stream` (stderr) is a terminal."""
    if choice == "always":
        return True
    if choice == "never" or os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    stream = stream if stream is not None else sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)())


def colored_diff(diff: str, color: bool) -> str:
    """A unified diff with added lines green, removed red and hunk heads cyan (when `color`)."""
    if not color:
        return diff
    out = []
    for line in diff.splitlines(keepends=True):
        if line.startswith(("+++", "---")):
            out.append(f"\x1b[1m{line.rstrip(chr(10))}\x1b[0m\n")
        elif line.startswith("+"):
            out.append(f"\x1b[32m{line.rstrip(chr(10))}\x1b[0m\n")
        elif line.startswith("-"):
            out.append(f"\x1b[31m{line.rstrip(chr(10))}\x1b[0m\n")
        elif line.startswith("@@"):
            out.append(f"\x1b[36m{line.rstrip(chr(10))}\x1b[0m\n")
        else:
            out.append(line)
    return "".join(out)


def print_error(exc: TxclError, color: str = "auto") -> None:
    """A user-input error's diagnostics (carets, coloured on a terminal) on stderr."""
    from txcl.errors import render_all

    diagnostics = getattr(exc, "diagnostics", None)
    if diagnostics:
        click.echo(render_all(diagnostics, color=use_color(color)), err=True, color=use_color(color))
    else:
        click.echo(str(exc), err=True)
