"""The `@cron.*` fields of a tick: wall-clock parts in UTC or a configured zone, the minute
buckets, and the bucket key every node computes alike."""

from __future__ import annotations

import datetime as dt

from txcl.cronticks import tick_fields
from txcl.vocabulary import CRON_FIELDS


def test_fields_in_utc_and_in_a_zone_with_a_half_hour_offset():
    bucket = int(dt.datetime(2026, 12, 6, 3, 45, tzinfo=dt.timezone.utc).timestamp() * 1000)  # a Sunday
    utc = tick_fields(bucket, "UTC", 60_000, 7, "node-a")
    assert (utc["year"], utc["month"], utc["dom"], utc["hour"], utc["minute"], utc["dow"]) == (2026, 12, 6, 3, 45, 0)
    assert (utc["mod5"], utc["mod10"], utc["mod15"], utc["mod30"]) == (0, 5, 0, 15)
    assert utc["bucket"] == "2026-12-06T03:45:00Z" and utc["bucket_ms"] == bucket
    assert (utc["tick"], utc["node"], utc["job"], utc["tz"], utc["period_s"]) == (7, "node-a", "_cron", "UTC", 60)
    india = tick_fields(bucket, "Asia/Kolkata", 60_000, 1, "n")  # +05:30: 09:15 on the same day
    assert (india["hour"], india["minute"], india["dow"]) == (9, 15, 0) and india["bucket"] == utc["bucket"]
    assert set(utc) == set(CRON_FIELDS)  # the table the check knows is what a tick holds
