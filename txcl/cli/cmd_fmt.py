"""`txcl fmt [PATHS] [--check] [--diff]`: format rule files in canonical form."""

from __future__ import annotations

import sys

import click

from txcl.cli.common import color_option, colored_diff, fail, use_color


@click.command("fmt")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--check", "check_only", is_flag=True, help="Change nothing; exit 1 when a file would change.")
@click.option("--diff", "show_diff", is_flag=True, help="Print the changes as a diff; change nothing.")
@click.option("--stdin-filename", default=None, help="With PATH '-': the name used in messages.")
@click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors (and diffs).")
@color_option
def command(paths, check_only, show_diff, stdin_filename, quiet, color) -> None:
    """Format TXCL rule files (default: the current directory); `-` reads stdin."""
    from txcl.check.config import ConfigError, load_config
    from txcl.check.discover import rule_files
    from txcl.check.engine import display_path
    from txcl.check.fix import unified_diff
    from txcl.errors import render_all
    from txcl.fmt import FormatError, format_file, format_text
    from txcl.errors import TxclSyntaxError

    paths = list(paths) or ["."]
    if paths == ["-"]:
        name = stdin_filename or "<stdin>"
        text = sys.stdin.read()
        try:
            new = format_text(text, name)
        except TxclSyntaxError as exc:
            click.echo(render_all(exc.diagnostics, color=use_color(color)), err=True, color=use_color(color))
            sys.exit(2)
        except FormatError as exc:
            fail(str(exc))
        if check_only or show_diff:
            if show_diff and new != text:
                click.echo(colored_diff(unified_diff(text, new, name), use_color(color, sys.stdout)), nl=False, color=use_color(color, sys.stdout))
            sys.exit(1 if new != text else 0)
        click.echo(new, nl=False)
        return
    try:
        cfg = load_config(paths[0])
    except ConfigError as exc:
        fail(str(exc))
    files, missing = rule_files(paths, cfg)
    if missing:
        fail(f"no such file or directory: {', '.join(missing)}")
    changed = unchanged = failed = 0
    for path in files:
        shown = display_path(path)
        result = format_file(path, shown)
        if result.new is None:
            failed += 1
            if result.diagnostics:
                click.echo(render_all(result.diagnostics, color=use_color(color)), err=True, color=use_color(color))
            if result.error:
                click.echo(f"txcl: error: {result.error}", err=True)
            continue
        if not result.changed:
            unchanged += 1
            continue
        changed += 1
        if show_diff:
            click.echo(colored_diff(unified_diff(result.old, result.new, shown), use_color(color, sys.stdout)), nl=False,
                       color=use_color(color, sys.stdout))
        elif check_only:
            if not quiet:
                click.echo(f"Would reformat: {shown}")
        else:
            with open(path, "w", encoding="utf-8", newline="") as fh:
                fh.write(result.new)
    if not quiet:
        verb = "would be reformatted" if (check_only or show_diff) else "reformatted"
        parts = [f"{changed} file{'s' if changed != 1 else ''} {verb}",
                 f"{unchanged} file{'s' if unchanged != 1 else ''} left unchanged"]
        if failed:
            parts.append(f"{failed} file{'s' if failed != 1 else ''} could not be formatted")
        click.echo(", ".join(parts) + ".", err=True)
    if failed:
        sys.exit(2)
    if (check_only or show_diff) and changed:
        sys.exit(1)
