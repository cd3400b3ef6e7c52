"""A worker callback racing the in-request join check, on a real SQLite
file, with the real engine, the test worker and threads.

The flow: scope 100 dispatches a deferred op (join at 200), scope 150 runs a `py://` op that
naps a random moment (or runs a forced step of the callback), scope 200 consumes. The worker's
completion (`admit_terminal` then `continue_release`, exactly what the callback endpoint runs) comes from another thread
after a random delay. Whatever the order, the result is merged exactly once (its array would
double otherwise) and exactly one joined marker exists. The three forced interleavings of the race
are tested one by one.

The default run has 100 trials; the slow-marked run 1 000."""

from __future__ import annotations

import asyncio
import random
import sys
import threading
import time
import types
from collections import Counter

import pytest
from cont_support import write_tree
from contworker import TestWorker

GATE = "dj_t4_gate"


def _gate_module() -> types.ModuleType:
    """An in-memory `py://dj_t4_gate:gate` whose behaviour each trial sets."""
    module = sys.modules.get(GATE)
    if module is None:
        module = types.ModuleType(GATE)
        module.NAP = 0.0
        module.HOOK = None

        def gate(op_input, ctx):  # noqa: ANN001
            hook = module.HOOK
            if hook is not None:
                hook()
            if module.NAP:
                time.sleep(module.NAP)
            return {"gate": True}

        module.gate = gate
        sys.modules[GATE] = module
    return module


def _setup(tmp_path, db: str, worker: TestWorker):
    from txcl.continuations.service import ContinuationService, open_run_store
    from txcl.ops.tree import load_ops
    from txcl.runtime.config import Settings

    gate = _gate_module()
    ws = write_tree(tmp_path / "ws", {
        "OPS/site/100/research.txcl": f'WITH mode = "async", join_at_scope = 200\nEXEC "{worker.url()}"',
        "OPS/site/150/gate.txcl": f'EXEC "py://{GATE}:gate"',
        "OPS/site/200/render.txcl": "EMIT .count = &len(.research.items)",
    })
    store = open_run_store(db)
    settings = Settings().evolve(trace_mode="off")
    service = ContinuationService(store, settings, workspace=ws)
    return gate, store, service, service.interpreter(load_ops(ws))


OUTPUT = {"research": {"items": ["x"]}}


def _complete(store, service, opc: str, *, admit: bool = True, release: bool = True):
    result = {}
    if admit:
        result["admit"] = store.admit_terminal(opc, "completed", OUTPUT, source="cli")
    if release:
        result["release"] = store.continue_release(opc)
    return result


def _final_envelope(service, outcome, release):
    from txcl.runtime.interpreter import Completed, Suspended

    if isinstance(outcome, Completed):
        return outcome.envelope, "request"
    assert isinstance(outcome, Suspended), outcome
    assert release is not None and release.won, "a parked flow is released by the callback"
    return release.claim, "resume"


def _check_once(store, run_id: str, envelope: dict) -> None:
    assert envelope["research"] == {"items": ["x"]}, envelope  # a second merge would append
    assert envelope["count"] == 1
    units = store.list_units(run_id)
    assert len(units) == 1
    marker = store.get_joined_marker(units[0].unit_id)
    assert marker is not None
    run = store.get_run(run_id)
    assert run.status == "completed" and run.result["research"] == {"items": ["x"]}


def _race(tmp_path, db: str, trials: int) -> Counter:
    from txcl.runtime.interpreter import Completed

    seen: Counter = Counter()
    with TestWorker() as worker:
        gate, store, service, interp = _setup(tmp_path, db, worker)
        rng = random.Random(5)

        async def main() -> None:
            for _ in range(trials):
                gate.HOOK = None
                gate.NAP = rng.choice([0.0, rng.uniform(0, 0.004)])
                delay = rng.uniform(0, 0.06)
                box: dict = {}

                def callback() -> None:
                    job = worker.wait_job(timeout=10)
                    time.sleep(delay)
                    box.update(_complete(store, service, job.opc))
                    box["opc"] = job.opc

                thread = threading.Thread(target=callback)
                thread.start()
                outcome = await interp.run({}, "site")
                await asyncio.to_thread(thread.join, 10)
                release = box.get("release")
                final, where = _final_envelope(service, outcome, release)
                if where == "resume":
                    final = await service.drive_resume(final)
                    assert isinstance(final, Completed), final
                    final = final.envelope
                else:
                    assert release is not None and not release.won  # the callback answered `recorded`
                seen[where] += 1
                run_id = store.get_interaction(box["opc"]).run_id
                _check_once(store, run_id, final)
            await service.aclose()

        try:
            asyncio.run(main())
        finally:
            store.close()
    return seen


def test_callback_racing_the_join_check_merges_exactly_once(tmp_path, db_url):
    seen = _race(tmp_path, db_url, 100)
    assert sum(seen.values()) == 100
    print("orders seen:", dict(seen))


@pytest.mark.slow
def test_callback_racing_the_join_check_1000_trials(tmp_path, db_url):
    seen = _race(tmp_path, db_url, 1000)
    assert sum(seen.values()) == 1000
    assert seen["request"] and seen["resume"], seen  # both orders really happened


def _forced(tmp_path, db: str, order: str):
    from txcl.runtime.interpreter import Completed, Suspended

    with TestWorker() as worker:
        gate, store, service, interp = _setup(tmp_path, db, worker)
        gate.NAP = 0.0
        box: dict = {}

        def during_150() -> None:
            job = worker.wait_job(timeout=10)
            box["opc"] = job.opc
            if order == "p5-first":
                box.update(_complete(store, service, job.opc))
            elif order == "in-between":
                box.update(_complete(store, service, job.opc, release=False))

        gate.HOOK = during_150

        async def main():
            outcome = await interp.run({}, "site")
            gate.HOOK = None
            opc = box["opc"]
            run_id = store.get_interaction(opc).run_id
            if order == "p5-first":
                assert isinstance(outcome, Completed)
                assert box["release"].outcome == "recorded"  # the run was active, not releasable
                envelope = outcome.envelope
            elif order == "in-between":
                assert isinstance(outcome, Completed)  # `join_check` materialised and settled the unit itself
                child = store.list_children(store.list_units(run_id)[0].unit_id)[0]
                assert child.status == "succeeded"
                late = store.continue_release(opc, child_version=box["admit"].child_version)
                assert late.outcome == "recorded"
                envelope = outcome.envelope
            else:  # `join_check` first: the flow parks; the callback releases and the resume merges
                assert isinstance(outcome, Suspended)
                result = _complete(store, service, opc)
                assert result["release"].won
                final = await service.drive_resume(result["release"].claim)
                assert isinstance(final, Completed)
                envelope = final.envelope
                marker = store.get_joined_marker(store.list_units(run_id)[0].unit_id)
                assert marker.segment_id == result["release"].claim.segment_id
            _check_once(store, run_id, envelope)
            events = [e.kind for e in store.list_run_events(run_id)]
            assert events.count("run.completed") == 1
            await service.aclose()

        try:
            asyncio.run(main())
        finally:
            store.close()


@pytest.mark.parametrize("order", ["p5-first", "p6-first", "in-between"])
def test_forced_interleavings_of_5_6(tmp_path, db_url, order):
    _forced(tmp_path, db_url, order)
