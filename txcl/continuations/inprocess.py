"""Async units that txcl runs itself: `mode = "async"` on an `mcp+http(s)://` target.

An http(s) worker is handed the input and calls back; an MCP server has no callback, so the
call runs inside this process instead, as a background task per interaction:

1. the interaction stays ``dispatching`` while the tool runs (nothing is acked), and this
   process touches it every third of --reconcile-after so reconciliation leaves it alone;
2. the tool's answer (or its error) is admitted as the interaction's terminal (source
   ``local``, transport ``mcp``) and the release follows, exactly as for a worker's callback;
3. a process that dies mid-call stops touching it: once it is older than --reconcile-after,
   the sweeper of any node sharing the store hands it out again and that node calls the tool
   again (at least once; every attempt carries the op continuation id as the idempotency key
   in the request's `_meta`), and the first answer admitted is the one merged.

The call's time is the worker budget (`WITH max_duration`/`timeout`, else
--async-runtime-default) capped by --op-timeout-max: unlike a remote worker, it occupies
this process.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Callable

from txcl.runtime.dispatch import OpError, exec_target_of
from txcl.store.records import Dispatch

if TYPE_CHECKING:
    from txcl.continuations.service import ContinuationService

log = logging.getLogger("txcl.continuations")


def runs_in_process(dispatch: Dispatch) -> bool:
    """Does txcl itself carry out this dispatch (an `mcp+` target)?"""
    target = dispatch.exec_target or ""
    return target[:4].lower() == "mcp+"


_PAST_DEADLINE_MS = 250


def call_budget_ms(settings: Any, directives: Any) -> int:
    """The time an in-process call may take: the worker budget capped by --op-timeout-max."""
    from txcl.continuations.model import worker_budget_ms

    budget = worker_budget_ms(directives if isinstance(directives, dict) else {}, settings.async_runtime_default)
    return min(budget, settings.op_timeout_max)


class InProcessCalls:
    """The in-process calls of one continuation service (see the module docstring)."""

    def __init__(self, service: "ContinuationService") -> None:
        self.service = service
        self.running: dict[str, asyncio.Task] = {}
        self._keeper: asyncio.Task | None = None
        # `txcl test`: answers a dispatch without calling anything (True), or None/False to call
        self.stand_in: Callable[[Dispatch], bool] | None = None

    def start(self, dispatch: Dispatch) -> bool:
        """Run one dispatch in the background (a second start of a running one is ignored).
        True when a stand-in took it instead: it is then acked like a worker's dispatch, since
        no call of this process keeps its lease."""
        if dispatch.opc in self.running:
            return False
        if self.stand_in is not None and self.stand_in(dispatch):
            return True
        task = self.service.spawn(self._run(dispatch))
        self.running[dispatch.opc] = task
        task.add_done_callback(lambda _t, opc=dispatch.opc: self.running.pop(opc, None))
        if self._keeper is None or self._keeper.done():
            self._keeper = self.service.spawn(self._keep_leases())
        return False

    async def _run(self, dispatch: Dispatch) -> None:
        service = self.service
        settings = service.settings
        status, payload = await self._call(dispatch, settings)
        try:
            _, release = await service.complete(dispatch.opc, status, payload, source="local", transport="mcp")
        except Exception:  # noqa: BLE001 - the sweeper sends it again after --reconcile-after
            log.exception("txcl: could not record the answer of an MCP call (%s)", dispatch.opc)
            return
        if release is not None and release.won and release.claim is not None:
            service.start_resume(release.claim)

    async def _call(self, dispatch: Dispatch, settings: Any) -> tuple[str, Any]:
        from txcl.runtime.schemes.mcp import IDEMPOTENCY_META, call_mcp

        target, problem, _ = exec_target_of(dispatch.exec_target or "")
        if target is None or target.kind != "mcp":
            return "failed", {"message": problem or f"not an MCP target: {dispatch.exec_target}"}
        if dispatch.kind == "itemized" and not isinstance(dispatch.input, dict):
            return "failed", {"message": f"item {dispatch.item_index} is not an object; the arguments of an "
                                         "MCP tool are an object"}
        budget_ms = call_budget_ms(settings, dispatch.directives)
        if dispatch.deadline_ms is not None:
            # Cut the call just after its deadline, not at it: its answer then always finds the
            # deadline passed and the call is recorded as timed out, never as an ordinary
            # failure that raced the deadline by a millisecond.
            budget_ms = min(budget_ms, max(1, dispatch.deadline_ms - self.service.store.now_ms())) + _PAST_DEADLINE_MS
        try:
            output = await call_mcp(target, dispatch.input, dispatch.directives if isinstance(
                dispatch.directives, dict) else {}, budget_ms / 1000.0, payload_max=settings.op_payload_max,
                meta={IDEMPOTENCY_META: dispatch.opc}, policy=self.service.egress, secrets=self.service.secrets,
                rule=f"{dispatch.op_stack}/{dispatch.op_name}" if dispatch.op_stack else dispatch.op_name)
        except OpError as exc:
            return "failed", ({"message": exc.message, "code": exc.code} if exc.code else {"message": exc.message})
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - an SDK failure is this call's error, not the process's
            return "failed", {"message": f"mcp {target.url}#{target.tool}: {type(exc).__name__}: {exc}"}
        return "completed", output

    async def _keep_leases(self) -> None:
        """Touch the running calls every third of --reconcile-after while there are any."""
        period = max(0.2, self.service.settings.reconcile_after / 3000.0)
        while self.running:
            await asyncio.sleep(period)
            opcs = list(self.running)
            if not opcs:
                break
            try:
                await self.service.call_batched(self.service.store.touch_dispatches, opcs)
            except Exception as exc:  # noqa: BLE001 - the next period tries again
                log.warning("txcl: could not renew the lease of %d MCP call(s): %s", len(opcs), exc)

    async def aclose(self) -> None:
        for task in list(self.running.values()):
            task.cancel()
        if self._keeper is not None:
            self._keeper.cancel()


__all__ = ["InProcessCalls", "runs_in_process", "call_budget_ms"]
