"""Identity and time: uuid, now, tz, tz_offsets.

The clock and randomness come from `registry.environment` (replaceable in tests). Zones are
IANA names read through `zoneinfo`; a wall-clock time in a gap or an overlap uses the
offset in force before the transition (`fold=0`).
"""

from __future__ import annotations

import functools
import os
import re
from datetime import datetime, timedelta, timezone, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from txcl.functions import registry
from txcl.functions.helpers import err, want_int, want_str
from txcl.functions.registry import function
from txcl.values.merge import deep_copy

_UTC = timezone.utc
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?(?:([Zz])|([+-])(\d{2}):(\d{2}))")


@function("uuid", min_args=0, max_args=0, signature="uuid()", deterministic=False,
          doc="a new UUID version 7 (time-ordered) as lowercase text")
def _uuid(args: list) -> str:
    return registry.environment.uuid7()


@function("now", min_args=0, max_args=1, signature="now([fmt])", deterministic=False,
          doc="the current time: unix seconds (default), millis, nanos, rfc3339 or iso8601")
def _now(args: list) -> Any:
    fmt = want_str("now", args[0], 0, "format") if args else ""
    ns = registry.environment.now_ns()
    if fmt in ("", "unix"):
        return ns // 1_000_000_000
    if fmt == "millis":
        return ns // 1_000_000
    if fmt == "nanos":
        return ns
    if fmt in ("rfc3339", "iso8601"):
        t = datetime.fromtimestamp(ns // 1_000_000_000, _UTC)
        return t.strftime("%Y-%m-%dT%H:%M:%SZ")
    raise err("now", f'unknown format "{fmt}" (use unix, millis, nanos, rfc3339 or iso8601)')


@functools.lru_cache(maxsize=1)
def _local_zone() -> tzinfo:
    """The host zone: $TZ, else /etc/localtime, else UTC."""
    name = os.environ.get("TZ", "").lstrip(":")
    if name:
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            pass
    try:
        with open("/etc/localtime", "rb") as fh:
            return ZoneInfo.from_file(fh, key="Local")
    except (OSError, ValueError):
        return ZoneInfo("UTC")


def _zone(name: str, zone: str, allow_empty: bool) -> tzinfo:
    if zone == "" and allow_empty:
        return ZoneInfo("UTC")
    if zone == "":
        raise err(name, "zone must not be empty")
    if zone == "UTC":
        return ZoneInfo("UTC")
    if zone == "Local":
        return _local_zone()
    try:
        return ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise err(name, f'unknown time zone "{zone}"') from None


@function("tz", min_args=3, max_args=4, signature="tz(zone, part, hour[, minute])",
          deterministic=False,
          doc="the UTC hour or minute of the wall-clock time hour:minute today in zone")
def _tz(args: list) -> int:
    zone_name = want_str("tz", args[0], 0, "zone")
    part = want_str("tz", args[1], 1, "part")
    if part not in ("hour", "minute"):
        raise err("tz", f'part must be "hour" or "minute", got "{part}"')
    hour = want_int("tz", args[2], 2, "hour")
    if not 0 <= hour <= 23:
        raise err("tz", f"hour {hour} is out of range 0-23")
    minute = want_int("tz", args[3], 3, "minute") if len(args) > 3 else 0
    if not 0 <= minute <= 59:
        raise err("tz", f"minute {minute} is out of range 0-59")
    zone = _zone("tz", zone_name, allow_empty=True)
    now = datetime.fromtimestamp(registry.environment.now_ns() // 1_000_000_000, zone)
    wall = datetime(now.year, now.month, now.day, hour, minute, tzinfo=zone, fold=0)
    utc = wall.astimezone(_UTC)
    return utc.hour if part == "hour" else utc.minute


def _parse_rfc3339(name: str, text: str) -> datetime:
    m = _RFC3339.fullmatch(text)
    if not m:
        raise err(name, f'"{text}" is not an RFC 3339 time')
    y, mo, d, h, mi, s = (int(m.group(i)) for i in range(1, 7))
    if m.group(8):
        off = timedelta(0)
    else:
        oh, om = int(m.group(10)), int(m.group(11))
        if oh > 23 or om > 59:
            raise err(name, f'"{text}" has an invalid offset')
        off = timedelta(hours=oh, minutes=om)
        if m.group(9) == "-":
            off = -off
    try:
        t = datetime(y, mo, d, h, mi, min(s, 59), tzinfo=timezone(off))
    except ValueError:
        raise err(name, f'"{text}" is not a valid time') from None
    return t.astimezone(_UTC)  # seconds and fraction dropped: truncated to the minute


def _offset_minutes(zone: tzinfo, t: datetime) -> int:
    off = t.astimezone(zone).utcoffset()
    seconds = int(off.total_seconds()) if off is not None else 0
    return int(seconds / 60)  # toward zero, as Go's integer division


_STEP = timedelta(hours=1)
_MINUTE = timedelta(minutes=1)


@function("tz_offsets", min_args=3, max_args=3, signature="tz_offsets(zone, from, days)",
          doc="the UTC offset of zone at from and every offset change in the next days")
def _tz_offsets(args: list) -> dict:
    zone_name = want_str("tz_offsets", args[0], 0, "zone")
    zone = _zone("tz_offsets", zone_name, allow_empty=False)
    start = _parse_rfc3339("tz_offsets", want_str("tz_offsets", args[1], 1, "from"))
    days = want_int("tz_offsets", args[2], 2, "days")
    if not 1 <= days <= 400:
        raise err("tz_offsets", f"days {days} is out of range 1-400")
    start = start.replace(second=0, microsecond=0)
    return deep_copy(_offsets(zone_name, zone, start, days))


@functools.lru_cache(maxsize=256)
def _offsets(zone_name: str, zone: tzinfo, start: datetime, days: int) -> dict:
    """The scan behind tz_offsets (about 10 ms for 400 days, hence the cache; callers get
    copies). Hourly samples, then a bisection to the minute where the offset changed."""
    end = start + timedelta(days=days)
    first = _offset_minutes(zone, start)
    changes: list[dict[str, Any]] = []
    lo, lo_off = start, first
    while lo < end:
        hi = min(lo + _STEP, end)
        hi_off = _offset_minutes(zone, hi)
        if hi_off != lo_off:
            # bisect on whole minutes: lo has the old offset, hi the new one
            a, b = lo, hi
            while b - a > _MINUTE:
                mid = a + timedelta(minutes=(b - a) // _MINUTE // 2)
                if _offset_minutes(zone, mid) == lo_off:
                    a = mid
                else:
                    b = mid
            changes.append({"at": b.strftime("%Y-%m-%dT%H:%M:%SZ"),
                            "offset": _offset_minutes(zone, b)})
            lo, lo_off = b, _offset_minutes(zone, b)
            continue
        lo, lo_off = hi, hi_off
    return {"zone": zone_name, "offset": first, "changes": changes}
