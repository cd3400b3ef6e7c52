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
own from the pool and calls of its own: a call that names the runs whose records it writes
(``runs``: a park, a finish, a callback's admission, worker acks) goes to the thread its run
is on while the run has calls queued or running there, else to the least busy thread (which
then is the run's until its calls are done); any other call goes to the least busy thread.
So two calls on one run never wait for each other's row locks on two threads — they queue on
one and share its next commit — while calls on other runs overlap their round trips on the
other threads, spread by load rather than by a hash of their ids (a few busy runs do not
pile up on one thread). A batch locks every run
its calls name before the first call, in run id order (``lock_first``): two batches, of this
node or another, that name their runs cannot wait for each other in a circle. Each thread
takes its calls in the order they came; two calls of one caller are never in flight at once
(a caller awaits each result before its next call). SQLite, whose writers take turns, keeps
one thread.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import threading
from typing import Any, Callable, TypeVar

from txcl.procid import current_pid

T = TypeVar("T")


class _Slot:
    """One of the lane's threads and the calls queued for it."""

    __slots__ = ("jobs", "cond", "thread", "busy")

    def __init__(self, lock: threading.Lock) -> None:
        self.jobs: collections.deque = collections.deque()
        self.cond = threading.Condition(lock)
        self.thread: threading.Thread | None = None
        self.busy = False

    def load(self) -> int:
        return len(self.jobs) + self.busy


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
        self._lock = threading.Lock()
        self._slots = [_Slot(self._lock) for _ in range(self.max_threads)]
        self._pid = 0
        self._closing = False
        # the thread of each run with calls queued or running: [slot index, calls]
        self._homes: dict[str, list[int]] = {}
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

    async def call_batched_on(self, runs: tuple[str, ...], fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``call_batched`` for a call that writes the records of `runs` (see ``submit``)."""
        if self.inline:
            return fn(*args, **kwargs)
        return await self.submit(fn, args, kwargs, True, runs=runs)

    async def call_batched_then(self, read: Callable[[Any], Any], fn: Callable[..., Any], *args: Any,
                                runs: tuple[str, ...] = (), **kwargs: Any) -> Any:
        """``call_batched``, then ``read(result)`` on the lane's thread once the result is
        durable — a write and the read that follows it in one hand-off. What ``read`` returns
        is handed back; when it raises, the committed result goes back as it was."""
        if self.inline:
            return _then(read, fn(*args, **kwargs))
        return await self.submit(fn, args, kwargs, True, read, runs=runs)

    async def apart(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Long store work (many transactions) in a worker thread, beside the lane."""
        if self.inline:
            return fn(*args, **kwargs)
        return await asyncio.to_thread(fn, *args, **kwargs)

    def queued(self) -> int:
        """Calls waiting for a thread (not counting those running)."""
        with self._lock:
            return sum(len(slot.jobs) for slot in self._slots)

    def slot_of(self, run_id: str) -> int:
        """The thread that runs the calls on this run's records: the one its calls are on,
        while it has some; else a fixed guess by its id (for grouping calls that name several
        runs — where such a call goes is decided when it is submitted)."""
        with self._lock:
            home = self._homes.get(run_id)
            return home[0] if home is not None else hash(run_id) % len(self._slots)

    def submit(self, fn: Callable[..., Any], args: tuple, kwargs: dict, batchable: bool,
               then: Callable[[Any], Any] | None = None, *, runs: tuple[str, ...] = ()) -> asyncio.Future:
        """Queue one call. `runs`: the runs whose records it writes, when the caller knows
        them. Such a call goes to the thread its runs' calls are on (the first such run's),
        or, when none has calls queued or running, to the least busy thread, which keeps them
        until their calls are done: two calls on one run never wait for each other's row
        locks on two threads, and a batch locks its runs first, in one order. Any other call
        goes to the least busy thread."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._lock:
            if self._pid != current_pid():  # a forked child: the parent's threads are not here
                self._pid = current_pid()
                self._slots = [_Slot(self._lock) for _ in range(self.max_threads)]
                self._homes = {}
            slots = self._slots
            counted: tuple[str, ...] = ()
            if len(slots) == 1:
                slot = slots[0]
            elif runs:
                index, counted = self._home_for(runs)
                slot = slots[index]
            else:
                slot = min(slots, key=_Slot.load)
            slot.jobs.append((fn, args, kwargs, batchable, future, loop, then, runs, counted))
            self.trips += 1
            if slot.thread is None or not slot.thread.is_alive():
                self._closing = False
                slot.thread = threading.Thread(target=self._work, args=(slot,), name="txcl-store", daemon=True)
                slot.thread.start()
            else:
                slot.cond.notify()
        return future

    def _home_for(self, runs: tuple[str, ...]) -> tuple[int, tuple[str, ...]]:
        """(the thread for a call naming `runs`, the runs whose calls on it it counts). Called
        with the lock held."""
        homes = self._homes
        index = next((homes[run][0] for run in runs if run in homes), None)
        if index is None:
            slots = self._slots
            index = min(range(len(slots)), key=lambda i: slots[i].load())
        counted = []
        for run in runs:
            home = homes.get(run)
            if home is None:
                homes[run] = [index, 1]
            elif home[0] == index:
                home[1] += 1
            else:
                continue  # (its calls are on another thread: this call does not keep it here)
            counted.append(run)
        return index, tuple(counted)

    def _done(self, jobs: list) -> None:
        """`jobs` have run (their callers not yet told): their runs may go to another thread
        once none has calls here. Called with the lock held."""
        homes = self._homes
        for job in jobs:
            for run in job[8]:
                home = homes.get(run)
                if home is not None:
                    home[1] -= 1
                    if home[1] <= 0:
                        del homes[run]

    def close(self) -> None:
        """Let the threads end once the calls already queued have run."""
        with self._lock:
            self._closing = True
            for slot in self._slots:
                slot.cond.notify()

    def _work(self, slot: _Slot) -> None:
        while True:
            with self._lock:
                while not slot.jobs:
                    if self._closing:
                        slot.thread = None
                        return
                    slot.cond.wait()
                jobs = list(slot.jobs)
                slot.jobs.clear()
                slot.busy = True
            try:
                self._run_all(jobs)
            finally:
                with self._lock:
                    slot.busy = False

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
        try:
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
                    runs = sorted({run for job in live for run in job[7]})
                    outcomes = self.store.run_batch(calls, lock_first=runs) if runs else self.store.run_batch(calls)
            except BaseException as exc:  # noqa: BLE001 - handed to every caller of the batch
                outcomes = [(False, exc)] * len(calls)
            if any(job[6] is not None for job in live):  # committed: the follow-up reads now
                outcomes = [(True, _then(job[6], value)) if ok and job[6] is not None else (ok, value)
                            for job, (ok, value) in zip(live, outcomes)]
        finally:
            with self._lock:  # before the callers hear: a caller's next call may go anywhere
                self._done(group)
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
