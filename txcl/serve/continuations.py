"""The continuation layer's extension of `txcl serve` (see txcl/serve/extensions.py).

It opens the store named by --db (traces, kv and durable runs in one database), gives the
interpreter the continuation hooks, answers worker callbacks (txcl/serve/callbacks.py),
makes polls answer from the store (txcl/serve/poll.py), shapes the suspend answer with the
envelope at the suspend, and runs the sweeper: once at startup, then every
--continuation-sweep-period.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import attrs

from txcl import runtime_codes as rc

log = logging.getLogger("txcl.continuations")


@attrs.frozen
class _SuspendView:
    run_id: str
    rcid: str
    envelope: Any


class ContinuationExtension:
    def __init__(self, settings: Any, workspace: Path):
        self.settings = settings
        self.workspace = workspace
        self.service: Any = None
        self.sweeper: asyncio.Task | None = None
        self.deadlines: asyncio.Task | None = None

    def base_url(self) -> str:
        settings = self.settings
        if settings.callback_base_url:
            return settings.callback_base_url
        host = settings.host
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"http://{host}:{settings.port}"

    # ------------------------------------------------------------------ extension methods
    def open_run_store(self, settings: Any, workspace: Path) -> Any:
        from txcl.continuations.service import open_run_store

        return open_run_store(settings.db_path(workspace), settings)

    def walk_hooks(self, store: Any, settings: Any) -> Any:
        from txcl.continuations.service import ContinuationService
        from txcl.serve import poll

        self.service = ContinuationService(store, settings, workspace=self.workspace,
                                           callback_base_url=self.base_url())
        if settings.nats_url:
            from txcl.serve.natslink import NatsLink

            self.service.brokered = NatsLink(self.service, settings.nats_url)
        poll.install(self.service)
        return self.service.engine

    async def startup(self, state: Any) -> None:
        if self.service is None:
            return
        from txcl.continuations.sweep_task import deadlines_forever, sweep_forever

        self.service.trace_sink = state.trace_writer
        self.service.snapshot_of(state.tree)  # resumes of this tree's runs reuse it
        loop = asyncio.get_running_loop()
        self.sweeper = loop.create_task(sweep_forever(self.service, self.settings.continuation_sweep_period))
        self.deadlines = loop.create_task(deadlines_forever(self.service))
        if self.service.brokered is not None:
            self.service.brokered.start()

    async def shutdown(self, state: Any, grace_s: float) -> None:
        if self.service is None:
            return
        for task in (self.sweeper, self.deadlines):
            if task is None:
                continue
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
        if self.service.brokered is not None:  # its sessions last as long as their units: stopped first
            await self.service.brokered.aclose()
        await self.service.drain_tasks(grace_s)
        await self.service.aclose()

    async def callback(self, request: Any, opc: str, state: Any) -> Any:
        from txcl.serve.callbacks import handle_callback
        from txcl.serve.shaping import error_payload, json_answer

        if self.service is None:
            return json_answer(404, error_payload(rc.UNKNOWN_OP_CONTINUATION.code, "unknown op continuation"),
                               [("cache-control", "no-store")])
        return await handle_callback(self.service, request, opc)

    async def suspended(self, request: Any, outcome: Any, state: Any) -> Any:
        from txcl.serve.inlet import parse_query
        from txcl.serve.shaping import suspended_answer

        envelope = None
        if self.service is not None:
            envelope = self.service.suspended_envelopes.pop(outcome.rid, None)
        view = _SuspendView(outcome.run_id, outcome.rcid, envelope)
        query = parse_query(request.scope.get("query_string", b"").decode("latin-1"))
        return suspended_answer(view, path=request.scope["path"], accept=request.headers.get("accept", ""),
                                query=query, retry_after_ms=self.settings.poll_retry_after,
                                private=self.settings.private)


def serve_extension(settings: Any, workspace: Path) -> ContinuationExtension:
    return ContinuationExtension(settings, workspace)
