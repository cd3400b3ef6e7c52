"""`txcl complete OPC | RUN_ID [--op NAME] [--item N] (--output JSON|@file | --fail [--error JSON|@file])`: admit an interaction's outcome without a token — access to the
database is the authority — through exactly the callback's two steps (admit the outcome, then continue it). When it wins the release it drives the
resume in this process and prints the run's new state.

Exit 0 recorded/resumed (a duplicate too), 1 for the 404/409/410 outcomes, 2 usage errors.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import click

from txcl.cli.common import DB_HELP, fail, read_json_arg

ANSWERS = {
    "unknown": (1, "unknown op continuation"),
    "cancelled": (1, "gone: the interaction was cancelled"),
    "expired": (1, "gone: the interaction expired"),
    "conflict": (1, "conflicting completion: a different outcome was recorded first"),
}


@click.command("complete")
@click.argument("target")
@click.option("--output", "output", metavar="JSON|@FILE", help="Complete the interaction with this output.")
@click.option("--fail", "failed", is_flag=True, help="Fail the interaction.")
@click.option("--error", "error", metavar="JSON|@FILE", help="The error of --fail (object or string).")
@click.option("--op", "op_name", default=None, help="With a run id: the op whose interaction to complete.")
@click.option("--item", "item", default=None, type=int,
              help="With a run id: the item index (itemized ops; default 0).")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON (the default).")
@click.option("--db", default=None, help=DB_HELP)
@click.option("--workspace", "directory", default=".", help="The workspace (for py:// modules of the resume).")
def command(target: str, output: str | None, failed: bool, error: str | None, op_name: str | None, item: int | None,
            as_json: bool, db: str | None, directory: str) -> None:
    """Complete (or fail) an outstanding interaction by hand."""
    from txcl.cli.durable import echo_json, open_service, open_settings, open_workspace_store
    from txcl.runtime_codes import normalize_error

    if (output is None) == (not failed):
        fail("give exactly one of --output or --fail")
    if error is not None and not failed:
        fail("--error goes with --fail")
    if output is not None:
        status, payload = "completed", read_json_arg(output, "--output")
    else:
        raw = None
        if error is not None:
            raw = error if not error.startswith("@") and not error.lstrip().startswith(("{", '"')) else \
                read_json_arg(error, "--error")
        status, payload = "failed", normalize_error(raw)
    workspace, settings = open_settings(directory, db)
    store = open_workspace_store(settings, workspace)
    try:
        if not target.startswith("opc_") and (op_name is None or item is None):
            _refuse_when_ambiguous(store, target, op_name, item)
        opc = _resolve(store, target, op_name, item or 0)
        interaction = store.get_interaction(opc) if opc else None
        if interaction is None:
            click.echo(f"txcl: {ANSWERS['unknown'][1]}: {target}", err=True)
            sys.exit(1)
        unit = store.get_unit(interaction.unit_id)
        if status == "completed" and unit is not None and unit.kind != "itemized" and not unit.into \
                and not isinstance(payload, dict):
            fail("--output must be a JSON object for an op without into")
        service = open_service(settings, workspace, store)
        result = asyncio.run(_complete(service, opc, status, payload))
    finally:
        store.close()
    outcome, data = result
    if outcome in ANSWERS:
        code, message = ANSWERS[outcome]
        click.echo(f"txcl: {message}", err=True)
        echo_json({"status": outcome, "opc": opc})
        sys.exit(code)
    echo_json(data)
    sys.exit(0)


_OPEN = ("queued", "dispatching", "dispatched")


def _refuse_when_ambiguous(store: Any, target: str, op_name: str | None, item: int | None) -> None:
    """With a run id and more than one open call that --op/--item leave possible: refuse and
    list the choices (completing an arbitrary one would give another op the answer)."""
    record = store.get_run_by_rcid(target) if target.startswith("rc_") else store.get_run(target)
    if record is None:
        return
    choices = []
    for unit in store.list_units(record.run_id):
        if unit.kind == "sync" or (op_name is not None and unit.op_name != op_name):
            continue
        for interaction in store.list_interactions(unit.unit_id):
            if interaction.status in _OPEN and (item is None or interaction.item_index == item):
                choices.append((unit.op_name, interaction.item_index, interaction.opc))
    if len(choices) > 1:
        lines = "\n".join(f"  --op {op} --item {index}   ({opc})" for op, index, opc in sorted(choices))
        fail(f"run {record.run_id} has {len(choices)} open calls; say which with --op and --item "
             f"(or give the op continuation id):\n{lines}")


def _resolve(store: Any, target: str, op_name: str | None, item: int) -> str | None:
    if target.startswith("opc_"):
        return target
    record = store.get_run_by_rcid(target) if target.startswith("rc_") else store.get_run(target)
    if record is None:
        return None
    # the newest awaited (non-sync) unit of the op, preferring one still waiting
    units = [u for u in store.list_units(record.run_id)
             if u.kind != "sync" and (op_name is None or u.op_name == op_name)]
    units.sort(key=lambda u: (u.status == "waiting", u.created_seq), reverse=True)
    for unit in units:
        for interaction in store.list_interactions(unit.unit_id):
            if interaction.item_index == item:
                return interaction.opc
    return None


async def _complete(service: Any, opc: str, status: str, payload: Any) -> tuple[str, dict]:
    try:
        admit, release = await service.complete(opc, status, payload, source="cli")
        data: dict[str, Any] = {"opc": opc, "run_id": admit.run_id}
        if admit.outcome == "duplicate":
            data["duplicate"] = True
        elif admit.outcome != "admitted":
            return admit.outcome, data
        if release is not None and release.won and release.claim is not None:
            data["status"] = "resumed"
            await service.drive_resume(release.claim)
        else:
            data["status"] = "recorded"
        # what the admission let out (the next items of a window, a call to retry) is sent
        # from here, as a server would: nothing waits for the sweeper's reconcile period
        await service.drain_tasks(30.0)
        record = service.store.get_run(admit.run_id) if admit.run_id else None
        if record is not None:
            data["run_status"] = record.status
            data["continuation"] = record.rcid
            if record.status not in ("completed", "failed", "expired"):
                data["stage"] = record.cur_stage
        return "ok", data
    finally:
        await service.aclose()
