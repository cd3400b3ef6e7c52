"""`txcl replay [RID ...] [--since 1d] [--stack S] [--status S] [--limit N] [--tree DIR]`: run
recorded requests again through a tree and show what would change (see txcl/replay.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from txcl.cli.common import DB_HELP, fail


def _since_ms(text: str | None, now_ms: int) -> int | None:
    if text is None:
        return None
    from txcl.vocabulary import parse_duration_ns

    ns = parse_duration_ns(text, days=True)
    if ns is None or ns < 0:
        fail(f"--since takes a duration such as 30m, 12h or 1d (got {text!r})")
    return now_ms - ns // 1_000_000


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


@click.command("replay")
@click.argument("rids", nargs=-1)
@click.option("--since", default=None, metavar="DURATION", help="Requests recorded this long ago or later (30m, 12h, 1d).")
@click.option("--stack", default=None, help="Only requests that entered this stack.")
@click.option("--status", default=None, help="Only requests that ended so (completed, failed, halted).")
@click.option("--limit", default=1000, show_default=True, type=click.IntRange(1, 1_000_000), help="At most this many requests, newest first.")
@click.option("--tree", "tree_dir", default=None, metavar="DIR", help="The tree to replay through (default: the workspace as it is now).")
@click.option("--mocks", "mocks_file", default=None, metavar="FILE",
              help="JSON or YAML: answers for ops the recording lacks, by rule (stack/scope/name) or EXEC target.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object with every request's verdict.")
@click.option("--db", default=None, help=DB_HELP)
@click.option("--workspace", "directory", default=".", help="The workspace whose recorded requests are replayed.")
def command(rids: tuple[str, ...], since: str | None, stack: str | None, status: str | None, limit: int,
            tree_dir: str | None, mocks_file: str | None, as_json: bool, db: str | None, directory: str) -> None:
    """Replay recorded requests through the tree as it is now (or --tree DIR) and report what
    would change: each request unchanged, changed (with a diff of the final envelope and the
    first scope and rule where the walk went otherwise) or not replayable (and why). Op answers
    come from the recording; nothing is called. Requests must be recorded with their op
    answers (txcl serve --trace-ops answers, or --trace-mode full). Exit 1 when anything changed."""
    from txcl.cli.durable import open_settings, open_workspace_store
    from txcl.ops.tree import load_ops
    from txcl.replay import load_mocks, replay_all
    from txcl.errors import TxclError

    workspace, settings = open_settings(directory, db)
    mocks = None
    if mocks_file is not None:
        try:
            mocks = load_mocks(Path(mocks_file))
        except OSError as exc:
            fail(f"--mocks {mocks_file}: {exc.strerror or exc}")
        except ValueError as exc:  # not JSON or YAML, or not an object (the message says where)
            fail(f"--mocks {mocks_file}: {exc}")
    try:
        tree = load_ops(tree_dir or workspace, import_python=False)  # py:// ops are answered from the recording
    except TxclError as exc:
        fail(f"the tree {tree_dir or workspace} failed to load: {exc}")
    store = open_workspace_store(settings, workspace)
    try:
        if rids:
            records = [store.get_trace(rid) for rid in rids]
            missing = [rid for rid, r in zip(rids, records) if r is None]
            if missing:
                fail(f"no recorded request {missing[0]}")
        else:
            found = store.recent_traces(stack=stack, limit=limit, status=status,
                                        since_ms=_since_ms(since, store.now_ms()))
            records = [store.get_trace(row["rid"]) for row in found]
        records = [r for r in records if r is not None and (r.request.get("origin_rid") in (None, r.request.get("rid")))]
    finally:
        store.close()
    outcomes = replay_all(tree, settings, records, mocks)
    changed = [o for o in outcomes if o.verdict == "changed"]
    skipped = [o for o in outcomes if o.verdict == "not replayable"]
    if as_json:
        click.echo(json.dumps({"replayed": len(outcomes) - len(skipped), "changed": len(changed),
                               "not_replayable": len(skipped), "requests": [o.as_json() for o in outcomes]},
                              ensure_ascii=False, indent=2))
    else:
        for o in outcomes:
            if o.verdict == "unchanged":
                continue
            click.echo(f"{o.rid}  {o.stack}  {o.verdict}" + (f": {o.reason}" if o.reason else ""))
            if o.diverged is not None:
                click.echo(f"  diverged at {o.diverged['stage']} rule {o.diverged['rule']}: recorded "
                           f"{_step(o.diverged['recorded'])}, now {_step(o.diverged['replayed'])}")
            for entry in o.diff[:20]:
                click.echo(f"  {entry['path']}: {_short(entry['before']) if 'before' in entry else '(absent)'}"
                           f" -> {_short(entry['after']) if 'after' in entry else '(absent)'}")
            if len(o.diff) > 20:
                click.echo(f"  ... {len(o.diff) - 20} more differences (--json shows them all)")
        click.echo(f"{len(outcomes) - len(skipped)} replayed, {len(changed)} changed, {len(skipped)} not replayable")
    sys.exit(1 if changed else 0)


def _step(step: dict | None) -> str:
    return "nothing" if step is None else f"{step['rule']} {step['status']}"
