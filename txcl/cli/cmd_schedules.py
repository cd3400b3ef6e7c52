"""`txcl schedules [list|show KEY|cancel KEY] [--status S] [--json]`: the scheduled events of
`EXEC "txco://schedule"`. Bare `txcl schedules` lists (pending and claimed soonest first,
then the rest, latest first). `show` and `cancel` take an idempotency key or an event id;
exit 1 when there is no such event (or, for `cancel`, when it is no longer pending)."""

from __future__ import annotations

import sys
from typing import Any

import click

from txcl.cli.common import DB_HELP
from txcl.store.states.scheduled_events import MACHINE

STATUSES = MACHINE.states


def event_json(event: Any) -> dict:
    from txcl.scheduling import rfc3339

    return {"idempotency_key": event.idempotency_key, "event_id": event.event_id, "status": event.status,
            "schedule_at": rfc3339(event.schedule_at_ms), "payload": event.payload,
            "origin_stack": event.origin_stack, "origin_rid": event.origin_rid,
            "created_at": rfc3339(event.created_ms), "updated_at": rfc3339(event.updated_ms),
            "claimed_by": event.claimed_by, "attempts": event.attempts, "fired_at": rfc3339(event.fired_ms),
            "rid": event.rid, "error": event.error}


def _print_list(events: list[dict]) -> None:
    if not events:
        click.echo("no scheduled events")
        return
    width = max(12, *(len(e["idempotency_key"]) for e in events))
    click.echo(f"{'KEY':<{width}}  {'STATUS':<9}  {'SCHEDULE AT':<24}  FROM")
    for e in events:
        click.echo(f"{e['idempotency_key']:<{width}}  {e['status']:<9}  {e['schedule_at']:<24}  "
                   f"{e['origin_stack'] or '-'}")


def _print_show(e: dict) -> None:
    from txcl.values.jsonio import dumps

    click.echo(f"event {e['idempotency_key']}  {e['status']}  ({e['event_id']})")
    click.echo(f"  schedule at {e['schedule_at']}  scheduled by {e['origin_stack'] or '-'} "
               f"(request {e['origin_rid'] or '-'})")
    if e["attempts"]:
        click.echo(f"  claimed by {e['claimed_by']}  attempts {e['attempts']}  fired {e['fired_at'] or '-'}  "
                   f"request {e['rid'] or '-'}")
    if e["error"]:
        click.echo(f"  error {e['error']}")
    click.echo("  payload " + dumps(e["payload"]))


@click.command("schedules")
@click.argument("action", required=False, type=click.Choice(["list", "show", "cancel"]))
@click.argument("key", required=False)
@click.option("--status", default=None, type=click.Choice(STATUSES), help="Only events in this state (list).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--limit", default=100, show_default=True, help="At most this many events (list).")
@click.option("--db", default=None, help=DB_HELP)
@click.option("--workspace", "directory", default=".", help="The workspace.")
def command(action: str | None, key: str | None, status: str | None, as_json: bool, limit: int,
            db: str | None, directory: str) -> None:
    """List the scheduled events (EXEC "txco://schedule"), show one, or cancel a pending one."""
    from txcl.cli.common import fail
    from txcl.cli.durable import echo_json, open_settings, open_workspace_store

    action = action or "list"
    if action in ("show", "cancel") and not key:
        fail(f"schedules {action} needs an idempotency key or event id")
    if action == "list" and key:
        fail("schedules list takes no argument (use --status)")
    workspace, settings = open_settings(directory, db)
    store = open_workspace_store(settings, workspace)
    try:
        code = 0
        if action == "list":
            events = [event_json(e) for e in store.list_events(status=status, limit=limit)]
            echo_json(events) if as_json else _print_list(events)
        else:
            event = store.get_event(key)
            if event is None:
                echo_json({"idempotency_key": key, "status": "not_found"}) if as_json else \
                    click.echo(f"txcl: no scheduled event {key}", err=True)
                code = 1
            elif action == "show":
                data = event_json(event)
                echo_json(data) if as_json else _print_show(data)
            else:
                outcome, after = store.cancel_event(event.idempotency_key)
                if as_json:
                    echo_json({"idempotency_key": event.idempotency_key, "status": outcome})
                elif outcome == "cancelled":
                    was = "was already" if event.status == "cancelled" else ""
                    click.echo(f"{event.idempotency_key} {was} cancelled" if was else f"cancelled {event.idempotency_key}")
                else:
                    click.echo(f"txcl: event {event.idempotency_key} is {outcome}; only a pending event can be "
                               "cancelled", err=True)
                code = 0 if outcome == "cancelled" else 1
    finally:
        store.close()
    sys.exit(code)
