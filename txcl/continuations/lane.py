"""The one way async code reaches the store: a :class:`StoreLane`.

Store procedures block (a commit's fsync, another process's write lock, a round trip to
PostgreSQL), so they never run on the event loop. The lane runs them in order on one thread of
its own, and lets calls that queue up while it is busy share a commit: consecutive calls
submitted as batchable run through ``store.run_batch`` (one write transaction, one COMMIT; a
call that fails is undone alone) — unless the store has paused batching for now (PostgreSQL,
after a batch gave way to another node's lock: ``store.batching_paused()``). A call's result is handed back
only after the commit that made it durable, so everything a caller does with it (answer a
callback, send a worker POST, run the next step) happens after its own writes are durable. One-shot commands (``txcl run``, ``complete``,
``sweep``) run the calls inline instead (``inline=True``): they have no event loop to keep
responsive. Long store work that must not hold up the lane (a whole sweeper pass) runs
``apart``, in a worker thread.

On a store whose writers run in parallel (PostgreSQL), the lane has several threads (the
``store_threads`` setting, ``PARALLEL_THREADS`` when it is 0), each with a connection of its
own from the pool: while one waits for the server, the next takes the calls queued
meanwhile — a thread that finds others free takes its share and wakes one for the rest — so
round trips overlap instead of queueing behind each other, and commits that meet at the
server share its WAL flush. Calls are still taken in the order they came; two calls of one caller are never in flight at
once (a caller awaits each result before its next call), and calls of different runs are
independent, exactly as between two nodes. SQLite, whose writers take turns, keeps one.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import threading
from typing import Any, Callable, TypeVar

from txcl.procid import current_pid

T = TypeVar("T")


class StoreLane:
    """A store's calls, in order, on threads of their own (see the module docstring)."""

    MAX_BATCH = 64
    PARALLEL_THREADS = 3  # on a store whose writers run in parallel (see the module docstring)

    def __init__(self, store: Any, *, inline: bool = False, threads: int | None = None) -> None:
        self.store = store
        self.inline = inline
        if getattr(store, "serialises_writers", True):
            threads = 1  # one writer at a time anyway: more threads would only wait for its lock
        elif threads is None:
            threads = self.PARALLEL_THREADS
        self.max_threads = max(1, threads)
        self._jobs: collections.deque = collections.deque()
        self._cond = threading.Condition(threading.Lock())
        self._threads: list[threading.Thread] = []
        self._idle = 0  # threads waiting for a call
        self._busy = 0  # threads running calls
        self._pid = 0
        self._closing = False
        self.trips = 0  # calls handed to the threads so far (each costs two thread wake-ups)

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run one store call; its result once committed."""
        if self.inline:
            return fn(*args, **kwargs)
        return await self.submit(fn, args, kwargs, False)

    async def call_batched(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``call`` for a call of exactly one write transaction that may share its commit with
        other such calls queued at the same time."""
        if self.inline:
            return fn(*args, **kwargs)
        return await self.submit(fn, args, kwargs, True)

    async def call_batched_then(self, read: Callable[[Any], Any], fn: Callable[..., Any], *args: Any,
                                **kwargs: Any) -> Any:
        """``call_batched``, then ``read(result)`` on the lane's thread once the result is
        durable — a write and the read that follows it in one hand-off. What ``read`` returns
        is handed back; when it raises, the committed result goes back as it was."""
        if self.inline:
            return _then(read, fn(*args, **kwargs))
        return await self.submit(fn, args, kwargs, True, read)

    async def apart(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Long store work (many transactions) in a worker thread, beside the lane."""
        if self.inline:
            return fn(*args, **kwargs)
        return await asyncio.to_thread(fn, *args, **kwargs)

    def submit(self, fn: Callable[..., Any], args: tuple, kwargs: dict, batchable: bool,
               then: Callable[[Any], Any] | None = None) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._cond:
            self._jobs.append((fn, args, kwargs, batchable, future, loop, then))
            self.trips += 1
            if self._pid != current_pid():  # a forked child: the parent's threads are not here
                self._pid, self._threads, self._idle, self._busy = current_pid(), [], 0, 0
            self._threads = [thread for thread in self._threads if thread.is_alive()]
            if self._idle:
                self._cond.notify()
            elif len(self._threads) < self.max_threads:  # every thread busy (or none yet): one more
                self._closing = False
                thread = threading.Thread(target=self._work, name="txcl-store", daemon=True)
                self._threads.append(thread)
                thread.start()
        return future

    def close(self) -> None:
        """Let the threads end once the calls already queued have run."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._jobs:
                    if self._closing:
                        return
                    self._idle += 1
                    try:
                        self._cond.wait()
                    finally:
                        self._idle -= 1
                free = len(self._threads) - self._busy - 1  # the other threads not running calls
                if free > 0:  # take a share, and wake another for the rest
                    share = -(-len(self._jobs) // (1 + free))
                    jobs = [self._jobs.popleft() for _ in range(share)]
                    if self._jobs:
                        self._cond.notify()
                else:
                    jobs = list(self._jobs)
                    self._jobs.clear()
                self._busy += 1
            try:
                self._run_all(jobs)
            finally:
                with self._cond:
                    self._busy -= 1

    def _run_all(self, jobs: list) -> None:
        """`jobs` in order, consecutive batchable ones sharing a commit."""
        i = 0
        while i < len(jobs):
            group = [jobs[i]]
            i += 1
            if group[0][3] and not self.store.batching_paused():
                while i < len(jobs) and jobs[i][3] and len(group) < self.MAX_BATCH:
                    group.append(jobs[i])
                    i += 1
            self._run(group)

    def _run(self, group: list) -> None:
        live = [job for job in group if not job[4].cancelled()]  # a caller gone before the call started
        if not live:
            return
        calls = [functools.partial(fn, *args, **kwargs) for fn, args, kwargs, *_ in live]
        try:
            if len(calls) == 1:
                try:
                    outcomes = [(True, calls[0]())]
                except BaseException as exc:  # noqa: BLE001 - handed to the caller
                    outcomes = [(False, exc)]
            else:
                outcomes = self.store.run_batch(calls)
        except BaseException as exc:  # noqa: BLE001 - handed to every caller of the batch
            outcomes = [(False, exc)] * len(calls)
        if any(job[6] is not None for job in live):  # committed: the follow-up reads now
            outcomes = [(True, _then(job[6], value)) if ok and job[6] is not None else (ok, value)
                        for job, (ok, value) in zip(live, outcomes)]
        by_loop: dict[Any, list] = {}
        for job, outcome in zip(live, outcomes):
            by_loop.setdefault(job[5], []).append((job[4], outcome))
        for loop, items in by_loop.items():
            try:
                loop.call_soon_threadsafe(_settle_futures, items)
            except RuntimeError:  # that loop is closed: nobody is waiting any more
                pass


def _then(read: Callable[[Any], Any], result: Any) -> Any:
    try:
        return read(result)
    except Exception:  # noqa: BLE001 - the follow-up is an optimisation; its caller reads again
        return result


def _settle_futures(items: list) -> None:
    for future, (ok, value) in items:
        if future.done():
            continue
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)


__all__ = ["StoreLane"]
