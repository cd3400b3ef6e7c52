"""`_ts`, the envelope's timestamp: RFC 3339 UTC with milliseconds, read from the clock of
`&now`, the same text whether the request came through `txcl serve` or the Python API."""

from __future__ import annotations

import datetime as dt

from txcl.functions.registry import FixedEnvironment, use_environment
from txcl.runtime.clock import now_rfc3339
from txcl.serve import inlet


def _reference(ns: int) -> str:
    moment = dt.datetime.fromtimestamp(ns // 1_000_000_000, dt.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ns // 1_000_000 % 1000:03d}Z"


def test_the_timestamp_follows_the_clock_to_the_millisecond_and_across_seconds():
    base = 1_796_254_343_000_000_000  # a whole second
    for offset_ms in (0, 1, 999, 1000, 1001, 59_999, 86_400_000, 3):  # back again: no stale cache
        ns = base + offset_ms * 1_000_000 + 123_456  # sub-millisecond part truncated
        with use_environment(FixedEnvironment(ns)):
            assert now_rfc3339() == _reference(ns)
    with use_environment(FixedEnvironment(0)):
        assert now_rfc3339() == "1970-01-01T00:00:00.000Z"


def test_the_real_clock_reads_now():
    before = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    stamped = dt.datetime.strptime(now_rfc3339(), "%Y-%m-%dT%H:%M:%S.%f%z")
    assert before <= stamped <= dt.datetime.now(dt.timezone.utc)


def test_the_web_inlet_and_the_interpreter_share_the_stamp():
    from txcl.runtime import interpreter

    assert inlet.now_rfc3339 is now_rfc3339 is interpreter.now_rfc3339
