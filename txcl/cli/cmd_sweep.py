"""`txcl sweep [--loop]`: one sweeper pass and exit — for cron — or,
with `--loop`, a pass every --continuation-sweep-period in the foreground. Resumes the pass
releases or takes over are driven in this process; dispatches to resend are sent from it."""

from __future__ import annotations

import asyncio
import sys

import click

from txcl.cli.common import DB_HELP


@click.command("sweep")
@click.option("--loop", "loop", is_flag=True, help="Keep sweeping every --continuation-sweep-period.")
@click.option("--json", "as_json", is_flag=True, help="Print what the pass did as JSON.")
@click.option("--continuation-sweep-period", "period", default=None, help="Period of --loop (e.g. 60s).")
@click.option("--continuation-stale-resume-after", "stale", default=None)
@click.option("--resume-max-attempts", "attempts", default=None)
@click.option("--reconcile-after", "reconcile", default=None)
@click.option("--continuation-retention", "retention", default=None)
@click.option("--callback-base-url", default=None, help="Base URL workers call back to (resent dispatches).")
@click.option("--db", default=None, help=DB_HELP)
@click.option("--workspace", "directory", default=".", help="The workspace.")
def command(loop: bool, as_json: bool, period: str | None, stale: str | None, attempts: str | None,
            reconcile: str | None, retention: str | None, callback_base_url: str | None, db: str | None,
            directory: str) -> None:
    """Time out, expire, take over stale resumes, reconcile and purge, idempotently."""
    from txcl.cli.durable import echo_json, open_service, open_settings
    from txcl.continuations.sweep_task import sweep_once

    flags = {"continuation_sweep_period": period, "continuation_stale_resume_after": stale,
             "resume_max_attempts": attempts, "reconcile_after": reconcile, "continuation_retention": retention,
             "callback_base_url": callback_base_url}
    workspace, settings = open_settings(directory, db, flags)
    service = open_service(settings, workspace)

    async def once() -> dict:
        report = await sweep_once(service)
        await service.drain_tasks(settings.request_deadline_ms / 1000.0)
        return {"timed_out": len(report.timed_out), "expired": len(report.expired),
                "taken_over": len(report.taken_over), "stale_failed": len(report.stale_failed),
                "resent": len(report.resent), "promoted": len(report.promoted),
                "repaired": len(report.children_repaired), "settled": len(report.settled),
                "released": len(report.released), "purged_runs": len(report.purged_runs),
                "purged_snapshots": report.purged_snapshots}

    async def main() -> None:
        try:
            while True:
                summary = await once()
                if as_json:
                    echo_json(summary, compact=True)
                else:
                    click.echo("txcl sweep: " + ", ".join(f"{k} {v}" for k, v in summary.items()))
                if not loop:
                    return
                await asyncio.sleep(max(settings.continuation_sweep_period, 1000) / 1000.0)
        finally:
            await service.aclose()

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
    finally:
        service.store.close()
    sys.exit(0)
