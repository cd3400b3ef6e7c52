"""The `txcl` command line: a click group whose commands live one per module.

Every module `txcl/cli/cmd_<name>.py` defines a click command named `command` whose name
is `<name>`. Commands are discovered from the module names and imported only when used,
so `txcl check` does not pay for importing the server, the REPL or the language server.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import click

import txcl.cli as _cli_pkg
from txcl import __version__

_PREFIX = "cmd_"


class LazyGroup(click.Group):
    """A group that imports `txcl.cli.cmd_<name>` when command `<name>` is asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = [
            info.name[len(_PREFIX):]
            for info in pkgutil.iter_modules(_cli_pkg.__path__)
            if info.name.startswith(_PREFIX)
        ]
        return sorted(names)

    def resolve_command(self, ctx: click.Context, args: list[str]):
        """A mistyped command name is a usage error that suggests the closest command."""
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            from txcl.suggest import did_you_mean

            close = did_you_mean(name, self.list_commands(ctx))
            hint = f" Did you mean '{close}'?" if close else ""
            ctx.fail(f"No such command '{name}'.{hint}")
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Each command with the first sentence of its help, wrapped, never cut with `...`."""
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is None or command.hidden:
                continue
            text = command.short_help or (command.help or "").strip().split("\n\n")[0]
            first = " ".join(text.split())
            end = first.find(". ")
            rows.append((name, first[: end + 1] if end >= 0 else first))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if not cmd_name.isidentifier() or cmd_name not in self.list_commands(ctx):
            return None
        module = importlib.import_module(f"txcl.cli.{_PREFIX}{cmd_name}")
        command = getattr(module, "command", None)
        return command if isinstance(command, click.Command) else None


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """`txcl --version`: the version, and whether the parser runs compiled."""
    if not value or ctx.resilient_parsing:
        return
    from txcl.syntax.compiled import summary

    click.echo(f"txcl, version {__version__} ({summary()})")
    ctx.exit()


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Show the version (and whether the parser runs compiled) and exit.")
def cli() -> None:
    """txcl: parse, check, format and run TXCL rules."""
    from txcl.syntax import diskcache

    diskcache.enable()  # parse results kept between runs (TXCL_PARSE_CACHE=off: not)


def main(argv: list[str] | None = None) -> int:
    """Entry point; mistakes in user input exit 1 or 2 with a message, never a traceback.

    Whatever a command does not handle itself is caught here by its class: a file or folder
    that cannot be read or made (a `--db` under a missing folder, a path without permission)
    is the user's to fix and exits 2 with what the system said; anything else is txcl's bug
    and exits 70 with a one-line report (`TXCL_DEBUG=1` prints the traceback too)."""
    try:
        cli.main(args=argv, prog_name="txcl", standalone_mode=True)
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    except KeyboardInterrupt:
        return 130
    except OSError as exc:
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        click.echo(f"txcl: error: {where}{exc.strerror or exc}", err=True)
        return 2
    except RecursionError:
        click.echo("txcl: error: the input nests too deeply to process", err=True)
        return 2
    except Exception as exc:  # noqa: BLE001 - the last line of defence: no traceback for users
        import os
        import traceback

        if os.environ.get("TXCL_DEBUG"):
            traceback.print_exc()
        click.echo(f"txcl: internal error ({type(exc).__name__}: {exc}); this is a bug in txcl — please "
                   "report it with the command you ran (TXCL_DEBUG=1 shows the traceback)", err=True)
        return 70
    return 0


if __name__ == "__main__":
    sys.exit(main())
