"""`txcl why RID|last [--scope N] [--rule NAME|FILE] [--json]`: why a stored request went the way
it did (see txcl/explain.py)."""

from __future__ import annotations

import json
import sys

import click

from txcl.cli.common import DB_HELP, fail


@click.command("why")
@click.argument("rid")
@click.option("--scope", type=int, default=None, help="Only this scope (its number).")
@click.option("--rule", default=None, metavar="NAME|FILE", help="Only this rule (its name, stack/scope/name or file).")
@click.option("--json", "as_json", is_flag=True, help="Print the explanation as JSON.")
@click.option("--db", default=None, help=DB_HELP)
@click.option("--workspace", "directory", default=".", help="The workspace whose tree explains the request.")
def command(rid: str, scope: int | None, rule: str | None, as_json: bool, db: str | None, directory: str) -> None:
    """Explain a stored request (RID, or `last`): which rules ran, which did not and why — each
    WHEN condition's value with both sides, rules that lost on PRIORITY, scopes the walk never
    entered and where it went instead, ops that failed. With the request's op answers recorded
    (--trace-ops answers, or full traces) the walk is done again through the workspace's tree,
    every op answered from the recording (nothing is called); otherwise the trace alone tells
    which scopes were entered and which rules ran."""
    from txcl.cli.durable import open_settings, open_workspace_store
    from txcl.errors import TxclError
    from txcl.explain import explain_sync, render
    from txcl.ops.tree import load_ops

    workspace, settings = open_settings(directory, db)
    store = open_workspace_store(settings, workspace)
    try:
        if rid == "last":
            last = store.last_trace_rid()
            if last is None:
                fail("no stored request yet")
            rid = last
        record = store.get_trace(rid)
    finally:
        store.close()
    if record is None:
        fail(f"no stored request {rid}")
    try:
        tree = load_ops(workspace, import_python=False)  # py:// ops are answered from the recording
    except TxclError as exc:
        fail(f"the tree {workspace} failed to load: {exc}")
    why = explain_sync(tree, settings, record)
    if as_json:
        click.echo(json.dumps(why.as_json(), ensure_ascii=False, indent=2, default=str))
    else:
        click.echo(render(why, scope=scope, rule=rule))
    sys.exit(0)
