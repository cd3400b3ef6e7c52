"""Running one case: the real interpreter, continuation machinery and merge over the
workspace's OPS tree, with only the network stood in (`txcl.ruletest.standins`) and time
virtual.

A case whose stack can suspend (an op with `mode`, or a kv builtin) runs on a fresh SQLite
store of its own in a temporary folder; the others need no store at all. After the request,
the runner delivers the simulated workers' callbacks in virtual-time order: before each, the
clock moves to its time and one sweeper pass runs (so a deadline or an expiry passed on the
way happens as it would), then the callback goes through the callback endpoint's handler and
the resume it wins is driven to its end.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import attrs

from txcl.ruletest.spec import Case
from txcl.ruletest.standins import ClockEnvironment, Delivery, StandIns, VirtualClock


@attrs.define
class CaseRun:
    """What a case did (before it is compared with what it expected)."""

    status: str  # completed | halted | failed | suspended
    envelope: Any
    error: Any
    ran: list[str]
    steps: list[dict]
    calls: list[Any]
    refused: list[str]
    deliveries: list[Delivery]
    duration_ms: float
    problem: str | None = None  # the case could not run (an internal error, a stack unknown)


def needs_store(tree: Any) -> bool:
    """Whether any rule of the tree can suspend or uses the kv or schedule builtins."""
    for stack in tree.stacks():
        for scope in tree.own_scopes(stack):
            for op in tree.rules_at(stack, scope):
                if any(pair.key == ("mode",) for pair in op.rule.with_):
                    return True
                text = op.exec_text or ""
                if text.startswith("txco://kv") or text == "txco://schedule":
                    return True
    return False


_TEMPLATE: dict[str, Path] = {}


def _fresh_database(folder: Path) -> Path:
    """A new SQLite file with the current schema: a copy of one migrated once per process
    (creating the schema is most of what a durable case would otherwise cost)."""
    import shutil

    from txcl.continuations.service import open_run_store

    template = _TEMPLATE.get("path")
    if template is None or not template.exists():
        home = Path(tempfile.mkdtemp(prefix="txcl-test-schema-"))
        template = home / "template.db"
        open_run_store(template).close()  # closing folds the WAL back into the file
        _TEMPLATE["path"] = template
    target = folder / "txcl.db"
    shutil.copyfile(template, target)
    return target


class _CallbackRequest:
    """The request the callback handler reads: headers and a body stream."""

    def __init__(self, token: str | None, body: bytes) -> None:
        self.headers = {"x-txco-continuation-token": token} if token else {}
        self.headers["content-length"] = str(len(body))
        self._body = body

    async def stream(self):
        yield self._body


async def _run_case(case: Case, tree: Any, settings: Any, stack: str, durable: bool, allow_network: bool,
                    folder: Path, observers: list[Any], clock: VirtualClock) -> CaseRun:
    import httpx

    from txcl.runtime.interpreter import Completed, Failed, Interpreter, Suspended

    stand = StandIns(case, clock, allow_network)
    traces: list[Any] = []
    service = store = None
    if durable:
        from txcl.continuations.service import ContinuationService, open_run_store

        store = open_run_store(_fresh_database(folder), settings, clock=clock, durable=False)
        service = ContinuationService(
            store, settings, workspace=tree.workspace, trace_sink=traces.append, inline_store=True,
            callback_base_url="http://txcl-test.invalid",
            dispatch_client=lambda: httpx.AsyncClient(transport=httpx.MockTransport(stand.worker_handler)))
        interp = service.interpreter(tree)
        stand.deliver_now = lambda delivery: service.spawn(_send(service, delivery))
        service.in_process.stand_in = stand.in_process
    else:
        interp = Interpreter(tree, settings=settings, trace_sink=traces.append)
    if not allow_network:
        interp.services.http_client = httpx.AsyncClient(transport=httpx.MockTransport(stand.http_handler),
                                                        follow_redirects=False)
    interp.services.stand_in = stand.local
    for observer in observers:
        observer.attach(interp.walker)
    started = time.perf_counter()
    try:
        outcome = await interp.run(case.input, stack, src="test")
        status, envelope, error = _from_outcome(outcome, Completed, Failed, Suspended)
        if isinstance(outcome, Suspended) and service is not None:
            await service.drain_tasks(30.0)
            status, envelope, error = await _deliver(service, stand, clock, outcome.run_id, observers, tree)
        steps = [step for record in traces for step in (record.steps or [])]
        ran = [f"{s.get('stack')}/{s.get('scope')}/{s.get('name')}" for s in steps
               if s.get("status") not in (None, "skipped", "not_run")]
        halted = any((record.request or {}).get("status") == "halted" for record in traces)
        if status == "completed" and halted:
            status = "halted"
        return CaseRun(status, envelope, error, ran, steps, stand.calls, stand.refused, stand.sent,
                       (time.perf_counter() - started) * 1000)
    finally:
        if service is not None:
            for task in list(service.tasks):
                task.cancel()
            await service.aclose()
        await interp.aclose_http()
        interp.close()
        if store is not None:
            store.close()


def _from_outcome(outcome: Any, Completed: Any, Failed: Any, Suspended: Any) -> tuple[str, Any, Any]:
    if isinstance(outcome, Completed):
        return ("halted" if outcome.halted else "completed"), outcome.envelope, None
    if isinstance(outcome, Failed):
        payload = outcome.payload
        error = payload.get("error", payload) if isinstance(payload, dict) else payload
        return "failed", None, error
    return "suspended", None, None


async def _deliver(service: Any, stand: StandIns, clock: VirtualClock, run_id: str, observers: list[Any],
                   tree: Any) -> tuple[str, Any, Any]:
    """Deliver the workers' callbacks in time order until the run finishes or none is left."""
    from txcl.continuations.sweep_task import sweep_once

    # every scheduled callback is delivered, also after the run finished: a late duplicate or
    # a conflicting answer gets the callback endpoint's answer, as a real worker would
    for _ in range(100_000):  # bounded: each delivery is one scheduled callback
        delivery = stand.next_delivery()
        if delivery is None:
            break
        if delivery.due_ms > clock.ms:
            clock.advance_to(delivery.due_ms)
            await sweep_once(service)
            await service.drain_tasks(30.0)
        await _send(service, delivery)
        await service.drain_tasks(30.0)
    record = service.store.get_run(run_id)
    if record is None:
        return "failed", None, {"message": "the run is gone"}
    if record.status == "completed":
        return "completed", record.result, None
    if record.status in ("failed", "expired"):
        from txcl.runtime_codes import run_error_payload as error_payload

        payload = error_payload(record)
        return "failed", None, payload.get("error", payload)
    return "suspended", None, None


async def _send(service: Any, delivery: Delivery) -> None:
    """One callback through the callback endpoint's handler; its answer is kept."""
    from txcl.serve.callbacks import handle_callback
    from txcl.values.jsonio import dumps

    body = dumps(delivery.body).encode("utf-8")
    answer = await handle_callback(service, _CallbackRequest(delivery.token, body), delivery.opc)
    delivery.answer = (answer.status, _answer_json(answer.body))


def _answer_json(body: bytes) -> Any:
    import json

    try:
        return json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace")


def run_case(case: Case, tree: Any, settings: Any, stack: str, *, allow_network: bool = False,
             observers: list[Any] | None = None, durable: bool | None = None) -> CaseRun:
    """Run one case to its end (blocking)."""
    from txcl.functions.registry import use_environment

    durable = needs_store(tree) if durable is None else durable
    clock = VirtualClock(case.clock_ms)
    with tempfile.TemporaryDirectory(prefix="txcl-test-") as tmp, use_environment(ClockEnvironment(clock)):
        return asyncio.run(_run_case(case, tree, settings, stack, durable, allow_network, Path(tmp),
                                     observers or [], clock))


__all__ = ["CaseRun", "run_case", "needs_store"]
