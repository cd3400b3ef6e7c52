"""The continuation service of one process: store, settings, snapshots, worker dispatch,
completions and resumes, shared by `txcl serve`, `txcl run`, `txcl complete` and `txcl sweep`.

    store = open_run_store(db, settings)
    service = ContinuationService(store, settings, workspace=ws)
    interp = service.interpreter(tree)           # Interpreter with the continuation hooks
    outcome = await interp.run(envelope, stack)  # Completed | Failed | Suspended

In-process state is a cache only: parks in flight (so a release won by a callback while the
parking request is still sending can be handed back to that request, which then continues
inline without a 202) and the background resume tasks. Store calls go through the lane
(`call`, `call_batched`, `apart`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

from txcl import metrics as _metrics
from txcl.continuations.acks import PendingAcks, mark_then
from txcl.continuations.engine import ContinuationEngine
from txcl.continuations.inprocess import InProcessCalls, runs_in_process
from txcl.continuations.lane import StoreLane
from txcl.continuations.pullqueue import PullQueues, is_brokered, is_queued
from txcl.continuations.resume import resume_run
from txcl.continuations.worker_client import AckResult, DispatchClient, post_dispatch
from txcl.egress import EgressPolicy
from txcl.secrets import SecretProvider
from txcl.store import open_store
from txcl.store.records import AdmitResult, ClaimRecord, Dispatch, ReleaseResult, evolve
from txcl.store.store import DatabaseStore

log = logging.getLogger("txcl.continuations")
T = TypeVar("T")


def open_run_store(db: str | Path, settings: Any = None, **kwargs: Any) -> DatabaseStore:
    """The store of durable runs for ``--db`` (a path, ``sqlite:///path`` or ``postgresql://…``)."""
    if settings is not None:
        kwargs.setdefault("busy_timeout_ms", getattr(settings, "sqlite_busy_timeout", 30_000))
        kwargs.setdefault("node_id", getattr(settings, "effective_node_id", None))
    return open_store(db, **kwargs)


class ContinuationService:
    """One process's continuation machinery (see the module docstring)."""

    def __init__(self, store: Any, settings: Any, *, workspace: Path | None = None,
                 trace_sink: Callable[[Any], None] | None = None, callback_base_url: str | None = None,
                 inline_store: bool = False, dispatch_client: Callable[[], Any] | None = None):
        self.store = store
        self.settings = settings
        self.workspace = Path(workspace) if workspace is not None else None
        self.trace_sink = trace_sink
        self.callback_base_url = callback_base_url if callback_base_url is not None else settings.callback_base_url
        self.engine = ContinuationEngine(self)
        self._snapshots: dict[int, tuple[Any, str, bytes]] = {}
        self._trees: dict[str, Any] = {}
        self._interps: dict[int, Any] = {}
        self.inflight: dict[str, asyncio.Future] = {}
        self.tasks: set[asyncio.Task] = set()
        self._http: Any = None
        self._http_loop: Any = None
        self.resume_listeners: list[Callable[[Any], None]] = []
        self._run_waiters: dict[str, list[asyncio.Future]] = {}
        self._listening: Any = None  # the loop whose waiters the store's change notices wake
        self.suspended_envelopes: dict[str, dict] = {}  # rid -> envelope at the suspend (202 body)
        self.before_dispatch: Callable[[], None] | None = None  # e.g. `txcl run`'s one-time warning
        self.lane = StoreLane(store, inline=inline_store, threads=getattr(settings, "store_threads", 0) or None)
        self.egress = EgressPolicy.from_settings(settings)  # what worker dispatches and cancel calls may reach
        self.secrets = SecretProvider.from_settings(settings)  # where WITH secrets.* values are read
        self.dispatch_client = dispatch_client  # makes the worker POST client (`txcl test`: simulated workers)
        self.in_process = InProcessCalls(self)  # mcp+ units: txcl calls the tool itself
        self.queues = PullQueues(self)  # queue:// units: workers claim their jobs
        self.brokered: Any = None  # nats:// units: txcl serve's NATS link (txcl.serve.natslink)
        # worker acks held back to share a commit (txcl.continuations.acks); one-shot commands write at once
        delay = 0 if inline_store else int(getattr(settings, "ack_write_delay", 0) or 0)
        self.pending_acks: PendingAcks | None = (
            PendingAcks(delay, self.mark_acks) if delay > 0 else None)
        # the run of each call this process sent, for its callback's store call (see run_of)
        self._run_of_opc: dict[str, str] = {}

    def remember_suspended(self, rid: str, envelope: dict) -> None:
        """The envelope at a request's suspend, for its 202 answer (the oldest forgotten first
        when answers are never collected)."""
        self.suspended_envelopes[rid] = envelope
        if len(self.suspended_envelopes) > 10_000:
            self.suspended_envelopes.pop(next(iter(self.suspended_envelopes)))

    # ------------------------------------------------------------------ trees and snapshots
    def snapshot_of(self, tree: Any) -> tuple[str, bytes]:
        """(snapshot id, body) of a tree; the tree is remembered for resumes of its runs."""
        cached = self._snapshots.get(id(tree))
        if cached is None or cached[0] is not tree:
            body = json.dumps(tree.snapshot(), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
            cached = (tree, tree.snapshot_id, body)
            self._snapshots[id(tree)] = cached
            self._trees.setdefault(tree.snapshot_id, tree)
        return cached[1], cached[2]

    def tree_for_snapshot(self, snapshot_id: str | None) -> Any:
        """The frozen tree of a run (its ops snapshot), rebuilt from the store when not cached."""
        if snapshot_id is None:
            raise LookupError("the run has no ops snapshot")
        tree = self._trees.get(snapshot_id)
        if tree is None:
            from txcl.ops.tree import tree_from_snapshot

            body = self.store.get_snapshot(snapshot_id)
            if body is None:
                raise LookupError(f"ops snapshot {snapshot_id} is missing")
            tree = tree_from_snapshot(json.loads(body), self.workspace)
            self._trees[snapshot_id] = tree
        return tree

    def walker_for(self, snapshot_id: str | None) -> Any:
        """The walker over a run's frozen ops snapshot."""
        return self.interpreter(self.tree_for_snapshot(snapshot_id)).walker

    def interpreter(self, tree: Any) -> Any:
        """An Interpreter over `tree` with the continuation hooks (cached per tree)."""
        interp = self._interps.get(id(tree))
        if interp is None or interp.tree is not tree:
            from txcl.runtime.interpreter import Interpreter

            interp = Interpreter(tree, store=self.store, settings=self.settings, hooks=self.engine,
                                 trace_sink=self.trace_sink)
            self._interps[id(tree)] = interp
        return interp

    def write_trace(self, rec: Any) -> None:
        record = rec.build()
        if record is None:
            return
        if self.trace_sink is not None:
            self.trace_sink(record)
        else:
            self.store.write_traces([record])

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """One store call through the lane (see txcl.continuations.lane)."""
        return await self.lane.call(fn, *args, **kwargs)

    async def call_batched(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A one-transaction store call that may share its commit with others queued with it."""
        return await self.lane.call_batched(fn, *args, **kwargs)

    async def call_batched_on(self, run_id: str | None, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``call_batched`` for a call that writes one run's records: it runs on that run's
        store thread, and its batch locks the run up front (see StoreLane.submit). None: a
        run not yet created (its first park)."""
        return await self.lane.call_batched_on((run_id,) if run_id else (), fn, *args, **kwargs)

    # calls whose run is remembered for their callbacks; the oldest are forgotten first (a
    # callback that reaches another node is never looked up here)
    MAX_REMEMBERED_CALLS = 100_000

    def remember_runs(self, dispatches: Any) -> None:
        remembered = self._run_of_opc
        for d in dispatches:
            remembered[d.opc] = d.run_id
        while len(remembered) > self.MAX_REMEMBERED_CALLS:
            remembered.pop(next(iter(remembered)))

    def run_of(self, opc: str) -> tuple[str, ...]:
        """The run of a call this process sent, as the lane's ``runs`` (empty: not known here)."""
        run_id = self._run_of_opc.get(opc)
        return (run_id,) if run_id is not None else ()

    async def mark_acks(self, rows: list[tuple]) -> int:
        """Write worker acks: those of one store thread's runs in one call on that thread,
        naming their runs (its batch locks them first, in run id order, so it never holds a
        call's row while waiting for a run another batch holds); acks of calls sent by
        another process in one more call."""
        groups: dict[int | None, tuple[list[tuple], set[str]]] = {}
        for row in rows:
            runs = self.run_of(row[0])
            group = groups.setdefault(self.lane.slot_of(runs[0]) if runs else None, ([], set()))
            group[0].append(row)
            group[1].update(runs)
        counts = await asyncio.gather(*(self.lane.call_batched_on(tuple(sorted(runs)), self.store.mark_ack, acks)
                                        for acks, runs in groups.values()))
        return sum(counts)

    # ------------------------------------------------------------------ worker dispatch
    def http(self) -> Any:
        """The worker dispatch client of the running loop (worker_client.DispatchClient)."""
        loop = asyncio.get_running_loop()
        if self._http is None or self._http_loop is not loop:
            self._http = (self.dispatch_client() if self.dispatch_client is not None
                          else DispatchClient(max_connections=256, max_idle=64, policy=self.egress))
            self._http_loop = loop
        return self._http

    async def aclose(self) -> None:
        await self.in_process.aclose()
        if self.pending_acks is not None:
            await self.pending_acks.flush()
        self.lane.close()
        if self._http is not None:
            client, self._http = self._http, None
            try:
                await client.aclose()
            except RuntimeError:
                pass
        for interp in list(self._interps.values()):
            await interp.aclose_http()

    async def send(self, dispatches: list[Dispatch] | tuple[Dispatch, ...], origin_rid: str | None = None
                   ) -> tuple[list[AckResult], list[ClaimRecord]]:
        """POST every dispatch concurrently; mark the acks; a failed ack is a failed terminal
        (admitted with source `ack`), then its release attempt. Returns the ack results and any claims won."""
        acks, claims, _ = await self.send_then(dispatches, origin_rid)
        return acks, claims

    async def send_then(self, dispatches: list[Dispatch] | tuple[Dispatch, ...], origin_rid: str | None = None,
                        after: Callable[[], Any] | None = None) -> tuple[list[AckResult], list[ClaimRecord], Any]:
        """`send`, then `after()` (a store call) in the same store-lane call as the ack
        marking; returns its result too (the barrier's drain check rides along).

        An `mcp+` dispatch is not sent anywhere: txcl calls the tool itself in the background
        (txcl.continuations.inprocess); it counts as sent and is never acked. A `queue://`
        dispatch waits in its pull queue for a worker's claim (txcl.continuations.pullqueue)."""
        results: list[AckResult] = []
        self.remember_runs(dispatches)
        recorder = _metrics.current
        if recorder.enabled:
            retried = sum(1 for d in dispatches if d.retry)
            if retried:
                recorder.retry_sent(retried)
        local = [d for d in dispatches if runs_in_process(d)]
        queued = [d for d in dispatches if is_queued(d)]
        brokered = [d for d in dispatches if is_brokered(d)]
        remote = ([d for d in dispatches if not runs_in_process(d) and not is_queued(d) and not is_brokered(d)]
                  if local or queued or brokered else list(dispatches))
        stood_in: list[tuple] = []  # `txcl test`: calls its simulated workers answer (acked as a worker's)
        if queued:  # wait in their pull queues until a worker claims them (never acked here)
            stand_in = self.in_process.stand_in
            waiting = [d for d in queued if stand_in is None or not stand_in(d)]
            stood_in = [(d.opc, {}) for d in queued if d not in waiting]
            if waiting:
                await self.queues.enqueue(waiting)
        if remote:
            if self.before_dispatch is not None:
                self.before_dispatch()
            client = self.http()
            results = list(await asyncio.gather(*(
                post_dispatch(client, d, base_url=self.callback_base_url,
                              ack_timeout_ms=self.settings.async_ack_timeout, origin_rid=origin_rid,
                              secrets=self.secrets)
                for d in remote)))
        tokens = {d.opc: d.token for d in remote}
        # an ack naming a cancel URL keeps the call's token with it (a cancellation presents it)
        acked: list[tuple] = [(r.opc, r.ack, tokens.get(r.opc)) if isinstance(r.ack, dict) and "cancel_url" in r.ack
                              else (r.opc, r.ack) for r in results if r.ok]
        acked.extend(stood_in)
        results.extend(AckResult(d.opc, True, ack={}) for d in queued)
        if brokered:  # published to NATS: acknowledged once the broker stored them
            published, refused = await self._publish(brokered)
            acked.extend(published)
            results.extend(AckResult(row[0], True, ack=row[1]) for row in published)
            results.extend(refused)
        for d in local:
            if self.in_process.start(d):
                acked.append((d.opc, {}))
            results.append(AckResult(d.opc, True, ack={}))
        failed = [r for r in results if not r.ok]
        after_result = None
        if acked and self.pending_acks is not None:
            # held back to share a commit, except one naming a cancel URL (a cancellation needs it)
            self.pending_acks.add([row for row in acked if len(row) == 2])
            acked = [row for row in acked if len(row) > 2]
        if acked and after is None:
            await self.mark_acks(acked)  # the ack marking may share a commit
        elif acked or (after is not None and not failed):
            def step() -> Any:
                if acked:
                    self.store.mark_ack(acked)
                return after() if after is not None and not failed else None

            after_result = await self.call(step)
        claims: list[ClaimRecord] = []
        for r in failed:
            _, release = await self.complete(r.opc, "failed", {"message": r.error}, source="ack",
                                             retryable=r.retryable)
            if release is not None and release.won and release.claim is not None:
                claims.append(release.claim)
        if after is not None and failed:
            after_result = await self.call(after)
        return results, claims, after_result

    async def _publish(self, dispatches: list[Dispatch]) -> tuple[list[tuple], list[AckResult]]:
        """NATS dispatches: through the serve process's link; refused where there is none."""
        stand_in = self.in_process.stand_in
        if stand_in is not None:  # `txcl test`: the simulated workers answer
            return [(d.opc, {}) for d in dispatches if stand_in(d)], []
        if self.brokered is None:
            return [], [AckResult(d.opc, False, error=f"{d.exec_target}: nats:// ops are published by txcl serve "
                                  "with --nats-url (a NATS server with JetStream)") for d in dispatches]
        return await self.brokered.publish(dispatches)

    def send_later(self, dispatches: list[Dispatch] | tuple[Dispatch, ...], origin_rid: str | None = None) -> None:
        """Send in a background task; any release won there is driven here."""
        if not dispatches:
            return

        async def go() -> None:
            _, claims = await self.send(dispatches, origin_rid)
            for claim in claims:
                self.start_resume(claim)

        self.spawn(go())

    # ------------------------------------------------------------------ completions
    async def complete(self, opc: str, status: str, payload: Any, *, source: str, token: str | None = None,
                       best_effort: bool = False, transport: str | None = None, retryable: bool = False
                       ) -> tuple[AdmitResult, ReleaseResult | None]:
        """Admit one interaction's outcome, then (when admitted) continue it: materialise, settle,
        try the release — both in one commit (the admission commits even when continuing
        fails). Items the admission promoted are sent. A `retryable` failure under WITH retries
        is sent again later instead (outcome ``retrying``). A release won here comes back with
        its resume's bundle already read (in the same store-lane call, after the commit)."""
        admit, release = await self.call_admitting_on(
            self.run_of(opc), mark_then, self.take_ack(opc), functools.partial(
                self.store.admit_and_continue, opc, status, payload, source=source, token=token,
                best_effort=best_effort, transport=transport, retryable=retryable))
        return self.admitted(admit, release)

    async def call_admitting(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``call_batched`` for an admission that returns ``(admit, release)``: a release won
        comes back with its resume's bundle already read, in the same store-lane call once
        the commit is durable (one hand-off less per resume)."""
        return await self.lane.call_batched_then(self._read_resume, fn, *args, **kwargs)

    async def call_admitting_on(self, runs: tuple[str, ...], fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``call_admitting`` for an admission of a call of `runs` (see StoreLane.submit)."""
        return await self.lane.call_batched_then(self._read_resume, fn, *args, runs=runs, **kwargs)

    def _read_resume(self, result: Any) -> Any:
        """On the store's thread, after the commit: the bundle a won release's resume starts
        from, carried on its claim (the claim holder is the only writer of the run, so reading
        it now or when the resume starts gives the same)."""
        if not (isinstance(result, tuple) and len(result) == 2):
            return result  # refused before admission (an answer), or not an admission at all
        admit, release = result
        if isinstance(release, ReleaseResult) and release.won and release.claim is not None \
                and release.claim.bundle is None:  # (a release usually builds it as it is made)
            claim = release.claim
            bundle = self.store.claim_resume(claim.run_id, claim.claim_token)
            return admit, evolve(release, claim=evolve(claim, bundle=bundle))
        return result

    def take_ack(self, opc: str) -> tuple | None:
        """The interaction's worker ack still held back, for its admission to write (None: none)."""
        return self.pending_acks.take(opc) if self.pending_acks is not None else None

    def admitted(self, admit: AdmitResult, release: ReleaseResult | Exception | None
                 ) -> tuple[AdmitResult, ReleaseResult | None]:
        """After ``admit_and_continue`` committed: send the items the admission let out (a
        freed window slot, a call to retry), then hand back the release, or raise what
        stopped the continuation (the admission itself is durable either way).

        A duplicate continues again in that call: when the first delivery's continuation never
        happened (the database went away between the two, or the process died), the worker's
        retry finishes it at once instead of leaving it to the sweeper. Continuing is
        idempotent (compare-and-swap on the child, one release per suspend)."""
        self._run_of_opc.pop(admit.opc, None)  # answered (a call sent again is remembered again)
        if admit.outcome in ("admitted", "retrying") and admit.dispatches:
            self.send_later(admit.dispatches)
        if isinstance(release, Exception):
            raise release
        return admit, release

    # ------------------------------------------------------------------ resumes
    def spawn(self, coro: Any) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("txcl: background continuation task failed: %r", task.exception())

    def start_resume(self, claim: ClaimRecord) -> None:
        """Drive a won release: hand it to the parking request of this process when it is
        still answering (it continues inline), else resume in a background task."""
        waiter = self.inflight.get(claim.run_id)
        if waiter is not None and not waiter.done():
            waiter.set_result(claim)
            return
        self.spawn(self.drive_resume(claim))

    async def drive_resume(self, claim: ClaimRecord) -> Any:
        outcome = await resume_run(self, claim)
        for listener in list(self.resume_listeners):
            try:
                listener(outcome)
            except Exception:  # noqa: BLE001
                log.exception("txcl: resume listener failed")
        return outcome

    # ------------------------------------------------------------------ run change notices
    def _listen_to_store(self) -> None:
        """Wake this process's waiters when the store reports a changed run — a commit of
        this process, or of any node sharing the database where the backend can tell."""
        loop = asyncio.get_running_loop()
        if self._listening is loop:
            return
        self._listening = loop

        def changed(run_id: str | None) -> None:
            try:
                loop.call_soon_threadsafe(self.notify_run, run_id)
            except RuntimeError:  # that loop is closed
                pass

        subscribe = getattr(self.store, "subscribe", None)
        if subscribe is not None:
            subscribe(changed)

    @contextlib.contextmanager
    def watch_run(self, run_id: str) -> Iterator[asyncio.Future]:
        """A future that a change of the run completes, registered from the moment the block
        is entered: read the run inside the block, then await the future (with a timeout) —
        a change committed between the read and the wait is not missed."""
        self._listen_to_store()
        future = asyncio.get_running_loop().create_future()
        self._run_waiters.setdefault(run_id, []).append(future)
        try:
            yield future
        finally:
            waiters = self._run_waiters.get(run_id)
            if waiters is not None:
                if future in waiters:
                    waiters.remove(future)
                if not waiters:
                    self._run_waiters.pop(run_id, None)

    @staticmethod
    async def until_changed(future: asyncio.Future, timeout: float) -> None:
        """Wait up to `timeout` s for a `watch_run` future."""
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout)
        except (TimeoutError, asyncio.TimeoutError):
            pass

    async def wait_for_run(self, run_id: str, timeout: float) -> None:
        """Sleep up to `timeout` s, waking early when the run's state changes."""
        with self.watch_run(run_id) as changed:
            await self.until_changed(changed, timeout)

    def notify_run(self, run_id: str | None) -> None:
        """Wake the waiters of a run (``None``: of every run)."""
        if run_id is None:
            waiting = [f for futures in self._run_waiters.values() for f in futures]
        else:
            waiting = self._run_waiters.get(run_id, [])
        for future in list(waiting):
            if not future.done():
                future.set_result(None)

    async def drain_tasks(self, timeout: float | None = None) -> None:
        """Wait for background sends and resumes (tests, shutdown, `txcl complete`)."""
        deadline = None if timeout is None else asyncio.get_running_loop().time() + timeout
        while self.tasks:
            pending = list(self.tasks)
            remaining = None if deadline is None else max(0.0, deadline - asyncio.get_running_loop().time())
            done, _ = await asyncio.wait(pending, timeout=remaining)
            if not done:
                return


__all__ = ["ContinuationService", "open_run_store"]
