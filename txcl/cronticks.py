"""The tick envelope of a `_cron` stack: `_txc.cron` of a tick, from its time (used by the
server's ticker, txcl.serve.cron, and by `txcl test` cases that give a `tick:`)."""

from __future__ import annotations

import datetime as _dt
from typing import Any
from zoneinfo import ZoneInfo

JOB = "_cron"


def tick_fields(bucket_ms: int, zone: str, period_ms: int, tick: int, node: str) -> dict[str, Any]:
    """`_txc.cron` of the tick at `bucket_ms`."""
    utc = _dt.datetime.fromtimestamp(bucket_ms / 1000, _dt.timezone.utc)
    local = utc.astimezone(ZoneInfo(zone)) if zone != "UTC" else utc
    minute = local.minute
    return {"minute": minute, "hour": local.hour, "dom": local.day, "dow": (local.weekday() + 1) % 7,
            "month": local.month, "year": local.year, "mod5": minute % 5, "mod10": minute % 10,
            "mod15": minute % 15, "mod30": minute % 30,
            "bucket": utc.strftime("%Y-%m-%dT%H:%M:%S") + (f".{bucket_ms % 1000:03d}Z" if bucket_ms % 1000 else "Z"),
            "bucket_ms": bucket_ms, "tick": tick, "job": JOB, "node": node, "tz": zone, "period_s": period_ms / 1000}


def tick_envelope(bucket_ms: int, zone: str = "UTC", period_ms: int = 60_000, tick: int = 1,
                  node: str = "test") -> dict[str, Any]:
    """The whole envelope a `_cron` stack receives for the tick at `bucket_ms`."""
    return {"_txc": {"cron": tick_fields(bucket_ms, zone, period_ms, tick, node)}}


__all__ = ["JOB", "tick_fields", "tick_envelope"]
