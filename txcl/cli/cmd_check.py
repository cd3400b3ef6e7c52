"""`txcl check [PATHS]...`: lint rule files and OPS trees."""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path

import click

from txcl.cli.common import color_option, colored_diff, fail
from txcl.cli.common import use_color as use_color_policy

FORMATS = ("full", "concise", "json", "github", "sarif")


class _ProgressBar:
    """A one-line bar on stderr, only for big trees on a terminal."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.shown = False

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or total < 300 or (done % 25 and done != total):
            return
        width = 30
        filled = width * done // total
        sys.stderr.write(f"\rchecking [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        sys.stderr.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            sys.stderr.write("\r" + " " * 60 + "\r")
            sys.stderr.flush()


def _default_jobs() -> int:
    """Worker processes for uncached files. On one or two CPUs (often shared with other work)
    forking did not pay off in bench/bench_check.py, so stay in one process there."""
    cpus = os.cpu_count() or 1
    return min(cpus, 8) if cpus >= 4 else 1


def summary_line(diagnostics, files: int, fixable: int) -> str:
    counts = Counter(d.severity for d in diagnostics)
    if not diagnostics:
        if files == 0:
            return "Nothing was checked: no rule files."
        return f"All checks passed ({files} file{'s' if files != 1 else ''} checked)."
    parts = [f"{counts[s]} {s if s == 'info' or counts[s] == 1 else s + 's'}"
             for s in ("error", "warning", "info") if counts[s]]
    tail = f" ({fixable} fixable with --fix)" if fixable else ""
    with_findings = len({d.file for d in diagnostics})
    checked = max(files, with_findings)
    return f"Found {', '.join(parts)} in {with_findings} of {checked} file{'s' if checked != 1 else ''}{tail}."


def statistics(diagnostics) -> str:
    from txcl.check.fix import FIXABLE
    from txcl.codes import CODES
    counts = Counter(d.code for d in diagnostics)
    rows = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    width = max((len(str(n)) for _, n in rows), default=1)
    lines = []
    for code, n in rows:
        mark = "[*]" if code in FIXABLE else "   "
        name = CODES[code].name if code in CODES else ""
        lines.append(f"{n:>{width}}  {code}  {mark} {name}")
    return "\n".join(lines)


@click.command("check")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--output-format", "output_format", type=click.Choice(FORMATS), default=None,
              envvar="TXCL_OUTPUT_FORMAT", help="How findings are printed (default: full).")
@click.option("--select", default=None, help="Only these codes or prefixes (TX2,TX301); replaces the config.")
@click.option("--ignore", default=None, help="Also ignore these codes or prefixes.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help="Read settings from this txcl.toml / pyproject.toml.")
@click.option("--strict", is_flag=True, help="Warnings also fail the check (exit 1).")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings remain.")
@click.option("--statistics", "show_stats", is_flag=True, help="Count findings per code instead of listing them.")
@click.option("--fix", is_flag=True, help="Apply safe fixes (TX201, TX301, TX302) in place.")
@click.option("--diff", "show_diff", is_flag=True, help="Print the safe fixes as a diff; change nothing.")
@click.option("--no-cache", is_flag=True, help="Do not read or write the parse cache under .txcl-data/.")
@color_option
@click.option("--quiet", "-q", is_flag=True, help="No summary line.")
@click.option("--stdin-filename", default=None, metavar="PATH",
              help="With '-' as the path: the name to report for the rule read from standard input.")
@click.option("--mcp-schemas", "mcp_schemas", is_flag=True,
              help="Ask the MCP server of each mcp+ target for its tools and check the tool exists and the "
                   "op's SELECT gives its required arguments (TX250-TX252; answers cached for an hour).")
@click.option("--mcp-schemas-refresh", "mcp_refresh", is_flag=True,
              help="Like --mcp-schemas, without the cached answers.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
              help="Worker processes for uncached files (default: the number of CPUs when 4 or more, else 1).")
def command(paths, output_format, select, ignore, config_path, strict, exit_zero, show_stats, fix,
            show_diff, no_cache, color, quiet, stdin_filename, mcp_schemas, mcp_refresh, jobs) -> None:
    """Check TXCL rule files and OPS trees (default: the current directory; '-' reads one rule
    from standard input)."""
    from txcl.check.config import ConfigError, load_config, parse_code_list
    from txcl.check.engine import run_check
    from txcl.check.fix import FIXABLE

    paths = list(paths) or ["."]
    output_format = output_format or "full"
    from_stdin = paths == ["-"]
    if "-" in paths and not from_stdin:
        fail("'-' (standard input) cannot be combined with other paths")
    if from_stdin and (fix or show_diff):
        fail("--fix and --diff work on files; format standard input with `txcl fmt -`")
    try:
        if config_path:
            cfg = _explicit_config(Path(config_path))
        else:
            cfg = load_config(Path(stdin_filename).parent if from_stdin and stdin_filename else
                              ("." if from_stdin else paths[0]))
        if select is not None:
            cfg.select = parse_code_list(select, "--select")
        if ignore is not None:
            cfg.ignore = cfg.ignore + parse_code_list(ignore, "--ignore")
    except ConfigError as exc:
        fail(str(exc))

    bar = _ProgressBar(sys.stderr.isatty())
    try:
        if from_stdin:
            result = _check_stdin(stdin_filename or "-", cfg)
        else:
            result = run_check(paths, cfg, cache_dir=False if no_cache else None, progress=bar,
                               jobs=jobs or _default_jobs(),
                               extra=_mcp_check(paths, no_cache, mcp_refresh) if mcp_schemas or mcp_refresh else None)
        bar.clear()
        if result.missing:
            fail(f"no such file or directory: {', '.join(result.missing)}")
        if fix or show_diff:
            changed = _apply_fixes(result, cfg, write=fix, diff=show_diff,
                                   color=use_color_policy(color, sys.stdout))
            if show_diff:
                sys.exit(1 if changed else 0)
            if changed:
                result = run_check(paths, cfg, cache_dir=False if no_cache else None)
                if not quiet:
                    click.echo(f"Fixed {changed} file{'s' if changed != 1 else ''}.", err=True)
    except SystemExit:
        raise
    except Exception as exc:  # an internal error is exit 2 with a message, never a traceback
        bar.clear()
        if os.environ.get("TXCL_DEBUG"):
            raise
        fail(f"internal error: {type(exc).__name__}: {exc}")

    diagnostics = result.diagnostics
    fixable = sum(1 for d in diagnostics if d.code in FIXABLE)
    use_color = use_color_policy(color, sys.stdout)
    if show_stats:
        text = statistics(diagnostics)
        if text:
            click.echo(text)
    else:
        from txcl.check.formats import renderer
        out = renderer(output_format)(result, color=use_color and output_format in ("full", "concise"))
        if output_format in ("json", "sarif", "github"):
            # machine formats are UTF-8: a file name that is not shows U+FFFD
            out = "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in out) \
                if not out.isascii() else out
        if out:
            click.echo(out, nl=False, color=use_color)
    if not quiet:
        if result.files_checked == 0 and not diagnostics:
            click.echo("txcl: warning: no rule files (.txcl) found under the given paths", err=True)
        line = summary_line(diagnostics, result.files_checked, fixable)
        machine = output_format in ("json", "sarif", "github")
        click.echo(line, err=machine)
    failing = {"error"} | ({"warning"} if strict else set())
    status = 1 if any(d.severity in failing for d in diagnostics) else 0
    sys.exit(0 if exit_zero else status)


def _mcp_check(paths: list[str], no_cache: bool, refresh: bool):
    """The --mcp-schemas pass, its answers cached in the first path's workspace."""
    from txcl.check.mcp_schemas import mcp_findings
    from txcl.ops.tree import WorkspaceNotFound, find_workspace

    try:
        workspace: Path | None = find_workspace(paths[0])[0]
    except (WorkspaceNotFound, OSError):
        workspace = Path.cwd()
    where = None if no_cache else workspace
    return lambda sources: mcp_findings(sources, where, refresh=refresh)


def _check_stdin(name: str, cfg):
    """One rule read from standard input, reported as `name` (the stack comes from the name
    when it lies in an OPS tree)."""
    from txcl.check.engine import CheckResult, check_source

    data = sys.stdin.buffer.read()
    stack = None
    parts = Path(name).parts
    if "OPS" in parts and len(parts) > parts.index("OPS") + 1:
        stack = parts[parts.index("OPS") + 1]
    diagnostics = check_source(data, name, cfg, stack=stack)
    return CheckResult(diagnostics, 1, {name: data.decode("utf-8", "replace")})


def _explicit_config(path: Path):
    import tomllib
    from txcl.check.config import ConfigError, config_from_document
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    return config_from_document(data, path)


def _apply_fixes(result, cfg, write: bool, diff: bool, color: bool = False) -> int:
    """Fix (or diff) every file with a fixable finding; the number of files changed."""
    from txcl.check.fix import FIXABLE, fix_text, unified_diff
    files = sorted({d.file for d in result.diagnostics if d.code in FIXABLE})
    changed = 0
    for file in files:
        path = Path(file)
        try:
            old = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        absolute = path.resolve()
        enabled = lambda code: cfg.enabled(code) and not cfg.ignored_for(code, absolute)
        new, applied = fix_text(old, file, codes=enabled)
        if new == old:
            continue
        changed += 1
        if diff:
            click.echo(colored_diff(unified_diff(old, new, file), color), nl=False, color=color)
        if write:
            with open(path, "w", encoding="utf-8", newline="") as fh:
                fh.write(new)
    return changed
