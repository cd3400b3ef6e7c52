"""The continuations layer's walk hooks (`txcl.runtime.hooks.WalkHooks`).

At a frame's entry, the join check (deferred ops due here merge, park or fail the run); when a
scope's ops are prepared, each is classified (:func:`txcl.continuations.model.op_class_of`) and
handed to its mechanism:

- deferred ops (``join_at_scope`` above the scope) → :mod:`txcl.continuations.deferred`;
- a continuable op → :mod:`txcl.continuations.continuable`;
- barrier ops → :mod:`txcl.continuations.barrier` (every op still in the set becomes a member);
- itemized ops over an empty array finish at once (:mod:`txcl.continuations.itemized`);
- everything else stays synchronous.

At the segment's end, a run that exists in the store is finished there. Nothing about a flow
is kept in memory that matters for correctness: the store's records decide.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from txcl import runtime_codes as rc
from txcl.continuations import barrier, continuable, deferred, itemized
from txcl.continuations.model import op_class_of
from txcl.continuations.resume import heartbeat_at_frame
from txcl.continuations.segment import fence_of, is_resuming, run_lost, segment_of
from txcl.runtime.budget import strip_budget_fields
from txcl.store.errors import RunLost
from txcl.values.merge import deep_copy

if TYPE_CHECKING:
    from txcl.continuations.ports import OpRunner, ContinuationServices
    from txcl.runtime.state import Frame, PreparedOp, Run

log = logging.getLogger("txcl.continuations")


class ContinuationEngine:
    """Walk hooks with durable suspends; one per continuation service (shared by segments)."""

    def __init__(self, service: "ContinuationServices"):
        self.service = service

    def frame_checks_due(self, run: "Run") -> bool:
        """A resumed segment beats its heartbeat at every frame; a run with joins checks them."""
        return is_resuming(run) or (run.run_id is not None and bool(run.joins))

    async def join_check(self, walker: "OpRunner", run: "Run", frame: "Frame") -> None:
        if is_resuming(run) and not await heartbeat_at_frame(self.service, run):
            return
        if run.run_id is not None and run.joins:
            await deferred.join_check(self.service, walker, run, frame)

    async def dispatch_special(self, walker: "OpRunner", run: "Run", frame: "Frame",
                               ops: list["PreparedOp"]) -> list["PreparedOp"]:
        service = self.service
        classes = itemized.take_empty(walker, run, frame, [(pop, op_class_of(pop, frame.scope)) for pop in ops])
        later = [(p, c) for p, c in classes if c.kind == "deferred"]
        if later:
            await deferred.dispatch(service, walker, run, frame, later)
            if run.finished:
                return []
            classes = [(p, c) for p, c in classes if c.kind != "deferred"]
        if any(c.kind == "continuable" for _, c in classes):
            return await continuable.run_continuable(service, walker, run, frame, classes)
        if any(c.kind == "barrier" for _, c in classes):
            await barrier.park_barrier(service, walker, run, frame, classes)
            return []
        return [p for p, _ in classes]

    async def segment_end(self, walker: "OpRunner", run: "Run") -> None:
        """The end of a segment that drives a run in the store and did not suspend: finish it."""
        service = self.service
        if run.status == "suspended":
            service.remember_suspended(run.rid, run.envelope)
            return
        if run.run_id is None or run.status == "running" or segment_of(run).finished_in_store:
            return
        await self._finish(run)

    async def _finish(self, run: "Run") -> None:
        store = self.service.store
        try:
            if run.status in ("completed", "halted"):
                result = deep_copy(run.envelope)
                strip_budget_fields(result)
                await self.service.call_batched_on(run.run_id, store.finish_segment, run.run_id, fence_of(run),
                                                status="completed", result=result)
            elif run.reason == rc.RUN_LOST.code:
                return
            else:
                error: Any = run.error
                if isinstance(error, dict) and isinstance(error.get("error"), dict) and len(error) == 1:
                    error = error["error"]
                await self.service.call_batched_on(run.run_id, store.finish_segment, run.run_id, fence_of(run), status="failed",
                                                error=error, fail_reason=run.reason or "failed")
        except RunLost as exc:
            log.warning("txcl: %s", exc)
            run_lost(run, exc)


__all__ = ["ContinuationEngine"]
