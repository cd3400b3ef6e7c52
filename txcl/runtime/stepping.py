"""Driving a coroutine's first step by hand, so work that never waits pays for no waiting.

Most walks and most in-process ops finish without suspending once. Wrapping them in a
timeout, a timer or a task costs more than the work itself; `first_step` runs a coroutine
up to its first suspension, and only a coroutine that did suspend is then awaited (through
`Resumed`) under whatever machinery waiting needs.
"""

from __future__ import annotations

import asyncio
from typing import Any


def first_step(coro: Any) -> tuple[bool, Any]:
    """Run `coro` to its first suspension: (True, its result) when it finished without one,
    else (False, what it yielded), to be handed to `Resumed`. Its exceptions propagate."""
    try:
        return False, coro.send(None)
    except StopIteration as stop:
        return True, stop.value


class Resumed:
    """Awaiting this goes on driving a coroutine whose first step has already run (the
    `yield from` protocol by hand: values out, results and exceptions in)."""

    __slots__ = ("coro", "first")

    def __init__(self, coro: Any, first: Any):
        self.coro = coro
        self.first = first

    def __await__(self):
        coro = self.coro
        value = self.first
        while True:
            try:
                sent = yield value
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # noqa: BLE001 - handed to the coroutine, as `await` does
                try:
                    value = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    value = coro.send(sent)
                except StopIteration as stop:
                    return stop.value


async def run_within(coro: Any, when: float) -> Any:
    """`await coro` under `asyncio.timeout_at(when)` (`when` in loop time), without the
    timeout machinery when the coroutine finishes without suspending — most in-process ops
    and whole walks do. A timeout only takes effect where the awaiting task suspends, so
    the outcome is the same: the deadline was fixed before the first step, and a deadline
    already past when the timeout is entered cancels at that first suspension, as the timer
    would have."""
    try:  # (first_step, inline: this runs for every op and every walk)
        first = coro.send(None)
    except StopIteration as stop:
        return stop.value
    async with asyncio.timeout_at(when):
        return await Resumed(coro, first)


__all__ = ["Resumed", "first_step", "run_within"]
