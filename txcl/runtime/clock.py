"""The envelope's timestamp: `_ts`, stamped on every request."""

from __future__ import annotations

import datetime as _dt

from txcl.functions import registry

_second_text: tuple[int, str] = (-1, "")


def now_rfc3339() -> str:
    """UTC now as `YYYY-MM-DDTHH:MM:SS.mmmZ`, read from the clock of `&now` (virtual under
    `txcl test`). The date and time of day are formatted once per second, the milliseconds
    appended: a request costs no `strftime`."""
    global _second_text
    ms = registry.environment.now_ns() // 1_000_000
    second, milli = divmod(ms, 1000)
    cached_second, text = _second_text
    if cached_second != second:
        text = _dt.datetime.fromtimestamp(second, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.")
        _second_text = (second, text)
    return f"{text}{milli:03d}Z"
