"""uuid, now, tz, tz_offsets with an injected clock."""

from __future__ import annotations

import re
import uuid as uuid_mod
from datetime import datetime, timezone

import pytest

from txcl.functions import registry
from txcl.functions.registry import FixedEnvironment, FunctionEnvironment, call, use_environment

from functions_testutil import fails

# 2026-07-01T12:34:56.789Z
T = int(datetime(2026, 7, 1, 12, 34, 56, tzinfo=timezone.utc).timestamp()) * 10**9 + 789_000_123
WINTER = int(datetime(2026, 1, 15, 12, 0, tzinfo=timezone.utc).timestamp()) * 10**9
UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


@pytest.fixture
def fixed():
    with use_environment(FixedEnvironment(T)) as env:
        yield env


def test_use_environment_restores():
    original = registry.environment
    with use_environment(FixedEnvironment(1)):
        assert registry.environment is not original
    assert registry.environment is original


@pytest.mark.parametrize("args,expected", [
    ([], T // 10**9), ([""], T // 10**9), (["unix"], T // 10**9), (["millis"], T // 10**6),
    (["nanos"], T), (["rfc3339"], "2026-07-01T12:34:56Z"), (["iso8601"], "2026-07-01T12:34:56Z"),
])
def test_now(fixed, args, expected):
    assert call("now", args) == expected


@pytest.mark.parametrize("args", [["RFC3339"], ["Unix"], ["seconds"], [1], [None], ["unix", "x"]])
def test_now_errors(fixed, args):
    fails("now", *args)


def test_uuid_v7_layout_and_time(fixed):
    u = call("uuid", [])
    assert UUID_RE.match(u)
    parsed = uuid_mod.UUID(u)
    assert parsed.version == 7
    assert int(u.replace("-", "")[:12], 16) == T // 10**6


def test_uuid_unique_and_sorted_within_one_millisecond(fixed):
    ids = [call("uuid", []) for _ in range(5000)]
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)


def test_uuid_later_millisecond_sorts_after():
    env = FixedEnvironment(T)
    with use_environment(env):
        a = call("uuid", [])
        env.now = T + 1_000_000
        b = call("uuid", [])
    assert a < b


def test_uuid_real_clock_and_arity():
    with use_environment(FunctionEnvironment()):
        a, b = call("uuid", []), call("uuid", [])
    assert UUID_RE.match(a) and a != b
    fails("uuid", 1, match="takes no arguments")


@pytest.mark.parametrize("args,expected", [
    (["Asia/Kathmandu", "hour", 10], 4),
    (["Asia/Kathmandu", "minute", 10], 15),
    (["Asia/Kathmandu", "hour", 10, 30], 4),
    (["Asia/Kathmandu", "minute", 10, 30], 45),
    (["UTC", "hour", 23, 59], 23),
    (["", "minute", 5, 7], 7),
    (["America/New_York", "hour", 9], 13),        # July: EDT (UTC-4)
    (["America/New_York", "hour", 9.0, 0.0], 13),
    (["Asia/Tokyo", "hour", 3], 18),
])
def test_tz(fixed, args, expected):
    assert call("tz", args) == expected


def test_tz_winter():
    with use_environment(FixedEnvironment(WINTER)):
        assert call("tz", ["America/New_York", "hour", 9]) == 14


def test_tz_gap_and_overlap_use_offset_before_transition():
    gap = int(datetime(2026, 3, 8, 12, tzinfo=timezone.utc).timestamp()) * 10**9
    with use_environment(FixedEnvironment(gap)):
        # 02:30 does not exist in New York that day; EST (-5) was in force before
        assert call("tz", ["America/New_York", "hour", 2, 30]) == 7
    overlap = int(datetime(2026, 11, 1, 12, tzinfo=timezone.utc).timestamp()) * 10**9
    with use_environment(FixedEnvironment(overlap)):
        # 01:30 happens twice; EDT (-4) was in force before
        assert call("tz", ["America/New_York", "hour", 1, 30]) == 5


def test_tz_local_zone_works(fixed):
    assert 0 <= call("tz", ["Local", "hour", 12]) <= 23


@pytest.mark.parametrize("args,match", [
    (["Nowhere/City", "hour", 1], "unknown time zone"),
    (["../etc/passwd", "hour", 1], "unknown time zone"),
    (["UTC", "second", 1], "part"),
    (["UTC", "Hour", 1], "part"),
    (["UTC", "hour", 24], "out of range"),
    (["UTC", "hour", -1], "out of range"),
    (["UTC", "hour", 1, 60], "out of range"),
    (["UTC", "hour", "1"], "integer"),
    (["UTC", "hour", 1.5], "integer"),
    (["UTC", "hour", True], "integer"),
    ([1, "hour", 1], "string"),
    (["UTC", None, 1], "string"),
])
def test_tz_errors(fixed, args, match):
    fails("tz", *args, match=match)


def test_tz_arity(fixed):
    fails("tz", "UTC", "hour", match="takes 3 or 4 arguments, got 2")
    fails("tz", "UTC", "hour", 1, 2, 3)


def test_tz_offsets_new_york_year():
    got = call("tz_offsets", ["America/New_York", "2026-01-01T00:00:00Z", 400])
    assert len(got["changes"]) == 2  # 400 days end on 2027-02-05
    got = call("tz_offsets", ["America/New_York", "2026-03-01T00:00:00Z", 400])
    assert got == {
        "zone": "America/New_York",
        "offset": -300,
        "changes": [
            {"at": "2026-03-08T07:00:00Z", "offset": -240},
            {"at": "2026-11-01T06:00:00Z", "offset": -300},
            {"at": "2027-03-14T07:00:00Z", "offset": -240},
        ],
    }


def test_tz_offsets_window_is_half_open():
    # from exactly at the change: not included; the change at the end: included
    at_change = call("tz_offsets", ["Europe/Berlin", "2026-03-29T01:00:00Z", 1])
    assert at_change == {"zone": "Europe/Berlin", "offset": 120, "changes": []}
    ending = call("tz_offsets", ["Europe/Berlin", "2026-03-28T01:00:00Z", 1])
    assert ending["offset"] == 60
    assert ending["changes"] == [{"at": "2026-03-29T01:00:00Z", "offset": 120}]


def test_tz_offsets_from_is_truncated_to_minute_any_offset():
    got = call("tz_offsets", ["Europe/Berlin", "2026-03-29T02:59:59.999+02:00", 1])
    # 00:59Z: the change at 01:00Z is after from
    assert got["changes"] == [{"at": "2026-03-29T01:00:00Z", "offset": 120}]


def test_tz_offsets_no_changes_and_odd_offsets():
    assert call("tz_offsets", ["Asia/Kathmandu", "2026-01-01T00:00:00+05:45", 30]) == \
        {"zone": "Asia/Kathmandu", "offset": 345, "changes": []}
    lord_howe = call("tz_offsets", ["Australia/Lord_Howe", "2026-01-01T00:00:00Z", 365])
    assert lord_howe["offset"] == 660
    assert [c["offset"] for c in lord_howe["changes"]] == [630, 660]


def test_tz_offsets_utc():
    assert call("tz_offsets", ["UTC", "2026-01-01T00:00:00Z", 1]) == \
        {"zone": "UTC", "offset": 0, "changes": []}


@pytest.mark.parametrize("args,match", [
    (["", "2026-01-01T00:00:00Z", 1], "empty"),
    ([None, "2026-01-01T00:00:00Z", 1], "string"),
    (["Nowhere/City", "2026-01-01T00:00:00Z", 1], "unknown time zone"),
    (["UTC", "2026-01-01", 1], "RFC 3339"),
    (["UTC", "2026-01-01 00:00:00Z", 1], "RFC 3339"),
    (["UTC", "2026-01-01T00:00:00", 1], "RFC 3339"),
    (["UTC", "2026-13-01T00:00:00Z", 1], "not a valid time"),
    (["UTC", 1767225600, 1], "string"),
    (["UTC", "2026-01-01T00:00:00Z", 0], "out of range"),
    (["UTC", "2026-01-01T00:00:00Z", 401], "out of range"),
    (["UTC", "2026-01-01T00:00:00Z", "1"], "integer"),
    (["UTC", "2026-01-01T00:00:00Z", 1.5], "integer"),
])
def test_tz_offsets_errors(args, match):
    fails("tz_offsets", *args, match=match)


def test_tz_offsets_arity():
    fails("tz_offsets", "UTC", "2026-01-01T00:00:00Z", match="takes 3 arguments, got 2")


def test_tz_offsets_results_are_independent_copies():
    a = call("tz_offsets", ["Europe/Berlin", "2026-01-01T00:00:00Z", 120])
    a["changes"].clear()
    b = call("tz_offsets", ["Europe/Berlin", "2026-01-01T00:00:00Z", 120])
    assert b["changes"] == [{"at": "2026-03-29T01:00:00Z", "offset": 120}]
