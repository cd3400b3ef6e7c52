"""What the workers that fetch their own jobs (the pull and NATS clients) share: their job
slots — at most `concurrency` jobs run at once, and each fetch asks for what is free — and how
their fetch loops run until they are told to stop."""

from __future__ import annotations

import asyncio
from typing import Any, Coroutine, Sequence


def check_ops(wanted: Sequence[str] | None, ops: dict, missing: str) -> list[str]:
    """The ops to take jobs for (all of the worker's by default); ValueError naming an unknown
    one (`missing`: how the message starts, e.g. "no op for queue")."""
    chosen = list(wanted) if wanted else sorted(ops)
    unknown = [o for o in chosen if o not in ops]
    if unknown:
        raise ValueError(f"{missing} {unknown[0]!r} (ops: {', '.join(sorted(ops))})")
    return chosen


class Slots:
    def __init__(self, concurrency: int, sources: int, gather_s: float = 0.0) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.concurrency = concurrency
        self.share = max(1, -(-concurrency // max(1, sources)))  # each source's fair part
        self.gather_s = gather_s
        self.busy = 0  # slots taken: jobs running, and jobs a fetch in flight may bring
        self.freed = asyncio.Event()

    async def reserve(self) -> int:
        """Wait for a free slot, then take as many as a fair share allows (the fetch's size).
        After a wait, slots that free up within `gather_s` join the same fetch: one fetch for
        several jobs instead of one per job as each finishes."""
        while True:
            if self.busy >= self.concurrency:
                while self.busy >= self.concurrency:
                    self.freed.clear()
                    await self.freed.wait()
                if self.gather_s:
                    await asyncio.sleep(self.gather_s)
            take = min(self.concurrency - self.busy, self.share)
            if take > 0:  # (jobs that arrived another way may have taken the slots meanwhile)
                self.busy += take
                return take

    def take(self, n: int = 1) -> None:
        """Jobs that arrived without a fetch (with a callback's answer) take slots of their own."""
        self.busy += n

    def give_back(self, n: int = 1) -> None:
        self.busy -= n
        self.freed.set()


async def run_fetch_loops(loops: Sequence[Coroutine[Any, Any, None]], stop: asyncio.Event,
                          running: set[asyncio.Task]) -> None:
    """Run the fetch loops until `stop` is set or one of them fails (its error is raised), then
    stop them and wait for the jobs `running` to finish."""
    tasks = [asyncio.ensure_future(loop) for loop in loops]
    stopper = asyncio.ensure_future(stop.wait())
    try:
        done, _ = await asyncio.wait([*tasks, stopper], return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if task is not stopper and not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
    finally:
        for task in (*tasks, stopper):
            task.cancel()
        await asyncio.gather(*tasks, stopper, return_exceptions=True)
        if running:
            await asyncio.gather(*running, return_exceptions=True)


__all__ = ["Slots", "check_ops", "run_fetch_loops"]
