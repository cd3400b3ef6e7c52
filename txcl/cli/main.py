"""The `txcl` command line: a click group whose commands live one per module.

Every module `txcl/cli/cmd_<name>.py` that defines a click command named `command` is
added automatically, so a new command never edits this file.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import click

import txcl.cli as _cli_pkg
from txcl import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="txcl")
def cli() -> None:
    """txcl: parse, check, format and run TXCL rules."""


def _register_commands() -> None:
    for info in sorted(pkgutil.iter_modules(_cli_pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("cmd_"):
            module = importlib.import_module(f"txcl.cli.{info.name}")
            command = getattr(module, "command", None)
            if isinstance(command, click.Command):
                cli.add_command(command)


_register_commands()


def main(argv: list[str] | None = None) -> int:
    """Entry point; mistakes in user input exit 1 or 2 with a message, never a traceback."""
    try:
        cli.main(args=argv, prog_name="txcl", standalone_mode=True)
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
