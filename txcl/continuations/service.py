"""The continuation service of one process: store, settings, snapshots, worker dispatch,
completions and resumes, shared by the web server, `txcl run`, `txcl complete` and
`txcl sweep`.

    store = open_durable_store(path)
    service = ContinuationService(store, settings, workspace=ws)
    interp = service.interpreter(tree)           # Interpreter with the continuation hooks
    outcome = await interp.run(envelope, stack)  # Completed | Failed | Suspended

In-process state is a cache only: parks in flight (so a release won by a callback while the
parking request is still sending can be handed back to that request, which then continues
inline, §2.2 step 4) and the background resume tasks.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any, Callable

from txcl.continuations.engine import ContinuationEngine
from txcl.continuations.worker_client import AckResult, DispatchClient, post_dispatch
from txcl.store.continuations_base import (
    AdmitResult,
    ClaimRecord,
    Dispatch,
    InteractionRecord,
    Materialized,
    ReleaseResult,
    TerminalRecord,
    UnitRecord,
)
from txcl.store.continuations_sqlite import SqliteContinuationStore
from txcl.store.sqlite import SqliteStore

log = logging.getLogger("txcl.continuations")


class DurableStore(SqliteContinuationStore, SqliteStore):
    """Traces, kv and continuations in one SQLite file."""

    def __init__(self, path: str | Path, busy_timeout_ms: int = 30_000, *, clock: Callable[[], int] | None = None,
                 node_id: str | None = None):
        self.clock = clock
        self.node_id = node_id
        SqliteStore.__init__(self, path, busy_timeout_ms)
        self.db_path = self.path

    def close(self) -> None:
        SqliteStore.close(self)
        self.close_continuations()


def open_durable_store(path: str | Path, settings: Any = None, **kwargs: Any) -> DurableStore:
    busy = getattr(settings, "sqlite_busy_timeout", 30_000) if settings is not None else 30_000
    node = getattr(settings, "effective_node_id", None) if settings is not None else None
    kwargs.setdefault("node_id", node)
    return DurableStore(path, busy, **kwargs)


def normalize_error(error: Any) -> dict:
    """A callback's `error`: an object as is, a string as {"message": s}, absent → default."""
    if isinstance(error, dict):
        return error
    if isinstance(error, str):
        return {"message": error}
    if error is None:
        return {"message": "worker reported failure"}
    return {"message": json.dumps(error)}


def materialize(unit: UnitRecord, interaction: InteractionRecord, terminal: TerminalRecord) -> Materialized:
    """A child's outcome from its terminal (§3.6): item objects sanitised as untrusted; unary
    outputs are sanitised by the per-op tail (after `into`), local and sync by their transport."""
    if terminal.status == "completed":
        output = terminal.payload
        if unit.kind == "itemized" and isinstance(output, dict):
            from txcl.values.reserved import sanitize_untrusted

            output, _ = sanitize_untrusted(output)
        return Materialized("succeeded", output=output)
    return Materialized("failed", error=normalize_error(terminal.payload))


class ContinuationService:
    """One process's continuation machinery (see the module docstring)."""

    def __init__(self, store: Any, settings: Any, *, workspace: Path | None = None,
                 trace_sink: Callable[[Any], None] | None = None, callback_base_url: str | None = None):
        self.store = store
        self.settings = settings
        self.workspace = Path(workspace) if workspace is not None else None
        self.trace_sink = trace_sink
        self.callback_base_url = callback_base_url if callback_base_url is not None else settings.callback_base_url
        self.engine = ContinuationEngine(self)
        self.materialize = materialize
        self._snapshots: dict[int, tuple[Any, str, bytes]] = {}
        self._trees: dict[str, Any] = {}
        self._interps: dict[int, Any] = {}
        self.inflight: dict[str, asyncio.Future] = {}
        self.tasks: set[asyncio.Task] = set()
        self._http: Any = None
        self._http_loop: Any = None
        self.resume_listeners: list[Callable[[Any], None]] = []
        self._run_waiters: dict[str, list[asyncio.Future]] = {}
        self.suspended_envelopes: dict[str, dict] = {}  # rid -> envelope at the suspend (202 body)
        self.before_dispatch: Callable[[], None] | None = None  # e.g. `txcl run`'s one-time warning
        # Store calls run in a worker thread so a commit's fsync (or a busy wait on another
        # process's write lock) never stalls the event loop of `txcl serve`; one-shot commands
        # (`txcl run`, `complete`, `sweep`) run them inline and save the thread hand-offs.
        self.inline_store = False

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
        """The frozen tree of a run (RUNTIME.md §1.7), rebuilt from the store when not cached."""
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

    async def run_store(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call a (blocking) store procedure: in a worker thread, or inline (`inline_store`)."""
        if self.inline_store:
            return fn(*args, **kwargs)
        return await asyncio.to_thread(fn, *args, **kwargs)

    # ------------------------------------------------------------------ worker dispatch
    def http(self) -> Any:
        """The worker dispatch client of the running loop (worker_client.DispatchClient)."""
        loop = asyncio.get_running_loop()
        if self._http is None or self._http_loop is not loop:
            self._http = DispatchClient(max_connections=256, max_idle=64)
            self._http_loop = loop
        return self._http

    async def aclose(self) -> None:
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
        """POST every dispatch concurrently; mark acks (P3); a failed ack is a failed terminal
        (P4, source `ack`) followed by P5. Returns the ack results and any claims won."""
        acks, claims, _ = await self.send_then(dispatches, origin_rid)
        return acks, claims

    async def send_then(self, dispatches: list[Dispatch] | tuple[Dispatch, ...], origin_rid: str | None = None,
                        after: Callable[[], Any] | None = None) -> tuple[list[AckResult], list[ClaimRecord], Any]:
        """`send`, then `after()` (a store call) in the same worker-thread hop as the ack
        marking; returns its result too (the barrier's drain check rides along)."""
        results: list[AckResult] = []
        if dispatches:
            if self.before_dispatch is not None:
                self.before_dispatch()
            client = self.http()
            results = list(await asyncio.gather(*(
                post_dispatch(client, d, base_url=self.callback_base_url,
                              ack_timeout_ms=self.settings.async_ack_timeout, origin_rid=origin_rid)
                for d in dispatches)))
        acked = [(r.opc, r.ack) for r in results if r.ok]
        failed = [r for r in results if not r.ok]
        after_result = None
        if acked or (after is not None and not failed):
            def step() -> Any:
                if acked:
                    self.store.mark_ack(acked)
                return after() if after is not None and not failed else None

            after_result = await self.run_store(step)
        claims: list[ClaimRecord] = []
        for r in failed:
            _, release = await self.complete(r.opc, "failed", {"message": r.error}, source="ack")
            if release is not None and release.won and release.claim is not None:
                claims.append(release.claim)
        if after is not None and failed:
            after_result = await self.run_store(after)
        return results, claims, after_result

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
                       best_effort: bool = False, transport: str | None = None
                       ) -> tuple[AdmitResult, ReleaseResult | None]:
        """P4 then (when admitted) P5 for one interaction; promoted items are sent."""
        store = self.store

        def admit_and_release() -> tuple[AdmitResult, ReleaseResult | None]:  # one thread hop, two transactions
            admitted = store.admit_terminal(opc, status, payload, source=source, token=token,
                                            best_effort=best_effort, transport=transport)
            if admitted.outcome != "admitted":
                return admitted, None
            return admitted, store.continue_release(opc, child_version=admitted.child_version,
                                                    materialize=self.materialize)

        admit, release = await self.run_store(admit_and_release)
        if release is None:
            return admit, None
        if admit.dispatches:
            self.send_later(admit.dispatches)
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
        from txcl.continuations.resume import resume_run

        outcome = await resume_run(self, claim)
        for listener in list(self.resume_listeners):
            try:
                listener(outcome)
            except Exception:  # noqa: BLE001
                log.exception("txcl: resume listener failed")
        return outcome

    # ------------------------------------------------------------------ run change notices
    async def wait_for_run(self, run_id: str, timeout: float) -> None:
        """Sleep up to `timeout` s, waking early when this process changes the run's state."""
        future = asyncio.get_running_loop().create_future()
        self._run_waiters.setdefault(run_id, []).append(future)
        try:
            await asyncio.wait_for(future, timeout)
        except (TimeoutError, asyncio.TimeoutError):
            pass
        finally:
            waiters = self._run_waiters.get(run_id)
            if waiters is not None:
                if future in waiters:
                    waiters.remove(future)
                if not waiters:
                    self._run_waiters.pop(run_id, None)

    def notify_run(self, run_id: str | None) -> None:
        for future in self._run_waiters.get(run_id or "", []):
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


__all__ = ["ContinuationService", "DurableStore", "open_durable_store", "materialize", "normalize_error"]
