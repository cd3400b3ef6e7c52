"""`txcl trace [RID | last] [--run RUN_ID] [--json] [--step N] [--grep TEXT] [-v] [--db PATH]`. Exit 0 when found, 1 when not found, 2 on usage errors."""

from __future__ import annotations

import sys

import click

from txcl.cli.common import DB_HELP

from txcl.cli.common import fail


@click.command("trace")
@click.argument("rid", default="last", required=False)
@click.option("--run", "run_id", default=None, help="List the origin and resume traces of a run.")
@click.option("--json", "as_json", is_flag=True, help="Print the records as JSON.")
@click.option("--step", "step", type=int, default=None, help="Print one step (by its # number) in full.")
@click.option("--grep", default=None, help="Only steps whose name, operation or error contains TEXT.")
@click.option("-v", "--verbose", is_flag=True, help="Show step details.")
@click.option("--db", default=None, help=DB_HELP)
@click.option("--workspace", default=".", help="Workspace (for the default --db).")
def command(rid: str, run_id: str | None, as_json: bool, step: int | None, grep: str | None,
            verbose: bool, db: str | None, workspace: str) -> None:
    """Show a stored trace: the request, its timeline and its steps."""
    from txcl.ops.tree import WorkspaceNotFound, find_workspace
    from txcl.runtime.config import ConfigError, load_settings
    from txcl.store import open_store
    from txcl.trace.reader import format_step, format_trace, trace_to_json
    from txcl.values.jsonio import dumps

    if db is None:
        try:
            ws, _ = find_workspace(workspace)
        except WorkspaceNotFound as exc:
            fail(f"{exc} (use --db to name the database)")
        try:
            settings = load_settings(ws)
        except ConfigError as exc:
            fail(str(exc))
        db = settings.db_path(ws)
    from txcl.store import sqlite_file
    from txcl.store.errors import StoreError

    try:
        file = sqlite_file(db)
        if file is not None and not file.exists():
            click.echo(f"txcl: no trace database at {file}", err=True)
            sys.exit(1)
        store = open_store(db, create=False)
    except StoreError as exc:
        fail(f"--db: {exc}")
    try:
        if run_id is not None:
            rids = store.trace_rids_for_run(run_id)
        elif rid == "last":
            last = store.last_trace_rid()
            rids = [last] if last else []
        else:
            rids = [rid]
        records = [r for r in (store.get_trace(x) for x in rids) if r is not None]
    except StoreError as exc:
        fail(f"--db: cannot read traces: {exc}")
    finally:
        store.close()
    if not records:
        what = f"run {run_id}" if run_id else ("any request" if rid == "last" else rid)
        click.echo(f"txcl: no trace found for {what}", err=True)
        sys.exit(1)
    if as_json:
        docs = [trace_to_json(r) for r in records]
        if step is not None:
            docs = [{**d, "steps": [s for s in d["steps"] if s["seq"] == step]} for d in docs]
        if grep:
            needle = grep.lower()
            docs = [{**d, "steps": [s for s in d["steps"]
                                    if any(needle in str(s.get(k) or "").lower() for k in ("name", "operation", "error"))]}
                    for d in docs]
        click.echo(dumps(docs[0] if len(docs) == 1 and run_id is None else docs, indent=2))
        sys.exit(0)
    if step is not None:
        text = format_step(records[0], step)
        if text is None:
            click.echo(f"txcl: trace {records[0].request['rid']} has no step #{step}", err=True)
            sys.exit(1)
        click.echo(text)
        sys.exit(0)
    click.echo("\n\n".join(format_trace(r, verbose=verbose, grep=grep) for r in records))
    sys.exit(0)
