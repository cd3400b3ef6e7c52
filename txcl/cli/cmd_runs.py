"""`txcl runs [list|show ID|cancel ID|retry ID] [--state S] [--json]`: durable runs and their
states. Bare `txcl runs` lists. `show`, `cancel` and `retry` accept a run id or an rcid; exit 1
when no such run exists (or, for `cancel`, when it had already finished; for `retry`, when it
cannot be retried)."""

from __future__ import annotations

import sys
from typing import Any

import click

from txcl.cli.common import DB_HELP


def _ms(value: int | None) -> str:
    if not value:
        return "-"
    import datetime as _dt

    return _dt.datetime.fromtimestamp(value / 1000, tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def run_json(store: Any, record: Any, detail: bool) -> dict:
    data: dict[str, Any] = {
        "run_id": record.run_id, "continuation": record.rcid, "status": record.status,
        "origin_rid": record.origin_rid, "entry_stack": record.entry_stack, "stage": record.cur_stage,
        "visit": record.cur_visit, "created_ms": record.created_ms, "updated_ms": record.updated_ms,
        "finished_ms": record.finished_ms, "expires_ms": record.expires_ms, "fail_reason": record.fail_reason,
    }
    if not detail:
        return data
    data["suspends"] = [{"stage": s.stage, "visit": s.visit, "kind": s.kind, "status": s.status,
                         "members": [m[0] for m in s.members]} for s in store.list_suspends(record.run_id)]
    from txcl.store.procedures.continuations import PASSED_OVER

    units = []
    for u in store.list_units(record.run_id):
        interactions = store.list_interactions(u.unit_id)
        marker = store.get_joined_marker(u.unit_id) if u.join_at_scope is not None else None
        units.append({"unit_id": u.unit_id, "kind": u.kind, "op": f"{u.op_stack}/{u.op_name}", "status": u.status,
                      "stage": u.dispatch_stage, "join_at_scope": u.join_at_scope, "items": u.expected,
                      "passed_over": marker is not None and marker.segment_id == PASSED_OVER,
                      "interactions": [{"opc": i.opc, "item_index": i.item_index, "status": i.status,
                                        "attempts": i.attempts, "heartbeat_ms": i.heartbeat_ms,
                                        "progress": i.progress, "cancel_url": i.cancel_url,
                                        "retries": i.retry_count, "retry_at_ms": i.retry_at_ms}
                                       for i in interactions]})
    data["units"] = units
    data["cancellations"] = store.list_cancel_calls(record.run_id)
    data["result"] = record.result
    data["error"] = record.error
    return data


def _print_list(runs: list[dict]) -> None:
    if not runs:
        click.echo("no runs")
        return
    created = max(len(_ms(r["created_ms"])) for r in runs)
    click.echo(f"{'RUN':<30}  {'STATUS':<9}  {'WAITING AT (STAGE, VISIT)':<26}  {'CREATED':<{created}}  STACK")
    for r in runs:
        where = f"{r['stage']} visit {r['visit']}" if r["stage"] else "-"
        click.echo(f"{r['run_id']:<30}  {r['status']:<9}  {where:<26}  {_ms(r['created_ms'])}  {r['entry_stack']}")


def queue_json(store: Any) -> list[dict]:
    """The pull queues with jobs: ready, leased, and how long the oldest ready job has waited."""
    now = store.now_ms()
    return [{"queue": q["queue"], "ready": q["ready"], "leased": q["leased"],
             "oldest_wait_s": round((now - q["oldest_ready_ms"]) / 1000, 3) if q["oldest_ready_ms"] else None}
            for q in store.queue_depths()]


def _wait(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds:.0f}s" if seconds < 120 else f"{seconds / 60:.0f}m" if seconds < 7200 else f"{seconds / 3600:.0f}h"


def _print_queues(queues: list[dict]) -> None:
    if not queues:
        click.echo("no jobs in any pull queue")
        return
    width = max(5, *(len(q["queue"]) for q in queues))
    click.echo(f"{'QUEUE':<{width}}  {'READY':>6}  {'LEASED':>6}  OLDEST WAIT")
    for q in queues:
        click.echo(f"{q['queue']:<{width}}  {q['ready']:>6}  {q['leased']:>6}  {_wait(q['oldest_wait_s'])}")


def _print_queue_line(queues: list[dict]) -> None:
    """Under the list: the pull queues that hold jobs, in one line."""
    if queues:
        parts = [f"{q['queue']} {q['ready']} ready" + (f" (oldest {_wait(q['oldest_wait_s'])})" if q["ready"] else "")
                 + f", {q['leased']} leased" for q in queues]
        click.echo("queues: " + "; ".join(parts))


def _print_show(r: dict) -> None:
    click.echo(f"run {r['run_id']}  {r['status']}" + (f" ({r['fail_reason']})" if r["fail_reason"] else ""))
    click.echo(f"  continuation {r['continuation']}  origin {r['origin_rid']}  stack {r['entry_stack']}")
    click.echo(f"  stage {r['stage'] or '-'} visit {r['visit'] or '-'}  created {_ms(r['created_ms'])}  "
               f"expires {_ms(r['expires_ms'])}")
    for s in r["suspends"]:
        click.echo(f"  suspend {s['stage']} visit {s['visit']}  {s['kind']}  {s['status']}")
    for u in r["units"]:
        items = f"  items {u['items']}" if u["kind"] == "itemized" else ""
        passed = "  (passed over at its join deadline: never merged)" if u.get("passed_over") else ""
        click.echo(f"  unit {u['unit_id']}  {u['kind']}  {u['op']}  {u['status']}{items}{passed}")
        for i in u["interactions"][:20]:
            retried = (f", {i['retries']} retr{'y' if i['retries'] == 1 else 'ies'}" if i.get("retries") else "")
            sent = f"  ({i['attempts']} attempts{retried})" if i["attempts"] > 1 else ""
            if i.get("retry_at_ms") and i["status"] == "queued":
                sent += f"  retry due {_ms(i['retry_at_ms'])}"
            if i.get("progress") is not None:
                from txcl.continuations.progress import progress_text

                sent += f"  progress: {progress_text(i['progress'])} (heartbeat {_ms(i['heartbeat_ms'])})"
            click.echo(f"    {i['opc']}  [{i['item_index']}]  {i['status']}{sent}")
    for c in r["cancellations"]:
        tried = f"  ({c['attempts']} attempts)" if c["attempts"] != 1 else ""
        error = f"  last error: {c['last_error']}" if c["last_error"] and c["status"] != "delivered" else ""
        click.echo(f"  cancel {c['opc']} -> {c['url']}  reason {c['reason']}  {c['status']}{tried}{error}")
    if r["status"] == "completed":
        from txcl.values.jsonio import dumps

        click.echo("  result " + dumps({k: v for k, v in (r["result"] or {}).items() if not k.startswith("_")}))
    elif r["error"] is not None:
        from txcl.values.jsonio import dumps

        click.echo("  error " + dumps(r["error"]))


def _report_retry(ident: str, record: Any, result: Any, as_json: bool) -> int:
    from txcl.cli.durable import echo_json

    if result is None:
        echo_json({"run_id": ident, "status": "unknown"}) if as_json else click.echo(f"txcl: no run {ident}", err=True)
        return 1
    if as_json:
        echo_json({"run_id": record.run_id, "status": result.outcome, "units": list(result.units),
                   "calls": result.calls, "reason": result.reason})
    elif result.outcome == "retried":
        click.echo(f"retried {record.run_id}: {result.calls} call(s) of {len(result.units)} op(s) go out again; "
                   "the run waits for them (the running server sends them)")
    elif result.outcome == "not_retryable":
        click.echo(f"txcl: run {record.run_id} cannot be retried: {result.reason}", err=True)
    else:
        click.echo(f"txcl: run {record.run_id} is {result.outcome}; only a failed or expired run can be retried",
                   err=True)
    return 0 if result.outcome == "retried" else 1


# A run is in exactly one of these states; `running` names the first three together (it is the
# word a poll answers with while the run is not finished).
STATES = ("running", "active", "waiting", "resuming", "completed", "failed", "expired")


@click.command("runs")
@click.argument("action", required=False, type=click.Choice(["list", "show", "cancel", "retry", "queues"]))
@click.argument("ident", required=False)
@click.option("--state", "state", default=None, type=click.Choice(STATES),
              help="Only runs in this state (list); running = active, waiting or resuming.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--limit", default=100, show_default=True, help="At most this many runs (list).")
@click.option("--reason", default=None, help="Why the run is cancelled (cancel): kept in its error.")
@click.option("--db", default=None, help=DB_HELP)
@click.option("--workspace", "directory", default=".", help="The workspace.")
def command(action: str | None, ident: str | None, state: str | None, as_json: bool, limit: int,
            reason: str | None, db: str | None, directory: str) -> None:
    """List durable runs, show one run (by run id or rcid), cancel one (its open calls are
    cancelled, late callbacks get 410, workers with a cancel URL are told, and it fails with
    reason `cancelled`), retry one that failed because of its async ops (its failed calls
    are sent again by the running server, and the run resumes from where it waited), or list
    the pull queues of queue:// ops (jobs ready, jobs leased, the oldest job's wait)."""
    from txcl.cli.common import fail
    from txcl.cli.durable import echo_json, open_settings, open_workspace_store

    action = action or "list"
    if action in ("show", "cancel", "retry") and not ident:
        fail(f"runs {action} needs a RUN_ID or RCID")
    if action in ("list", "queues") and ident:
        fail(f"runs {action} takes no argument" + (" (use --state)" if action == "list" else ""))
    workspace, settings = open_settings(directory, db)
    store = open_workspace_store(settings, workspace)
    try:
        if action == "list":
            wanted = ("active", "waiting", "resuming") if state == "running" else state
            runs = [run_json(store, r, False) for r in store.list_runs(status=wanted, limit=limit)]
            echo_json(runs) if as_json else _print_list(runs)
            if not as_json:
                _print_queue_line(queue_json(store))
            code = 0
        elif action == "queues":
            queues = queue_json(store)
            echo_json(queues) if as_json else _print_queues(queues)
            code = 0
        elif action == "cancel":
            record = store.get_run_by_rcid(ident) if ident.startswith("rc_") else store.get_run(ident)
            outcome = store.cancel_run(record.run_id, reason=reason) if record is not None else "unknown"
            if as_json:
                echo_json({"run_id": record.run_id if record else ident, "status": outcome})
            elif outcome == "cancelled":
                click.echo(f"cancelled {record.run_id}")
            elif outcome == "unknown":
                click.echo(f"txcl: no run {ident}", err=True)
            else:
                click.echo(f"txcl: run {record.run_id} had already finished ({outcome}); nothing to cancel", err=True)
            code = 0 if outcome == "cancelled" else 1
        elif action == "retry":
            record = store.get_run_by_rcid(ident) if ident.startswith("rc_") else store.get_run(ident)
            result = store.retry_run(record.run_id) if record is not None else None
            code = _report_retry(ident, record, result, as_json)
        else:
            record = store.get_run_by_rcid(ident) if ident.startswith("rc_") else store.get_run(ident)
            if record is None:
                click.echo(f"txcl: no run {ident}", err=True)
                code = 1
            else:
                data = run_json(store, record, True)
                echo_json(data) if as_json else _print_show(data)
                code = 0
    finally:
        store.close()
    sys.exit(code)
