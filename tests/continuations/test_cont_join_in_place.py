"""A join's resume re-enters the join scope: when that scope's EXEC ops all call plain
builtins, they are called in place there too (as in any other scope), with the same result
as the general dispatch. Real engine, real store (SQLite and PostgreSQL), the test worker."""

from __future__ import annotations

import asyncio

import pytest
from cont_support import write_tree
from contworker import TestWorker


@pytest.mark.parametrize("in_place", [True, False])
def test_a_join_resume_calls_the_join_scopes_builtins_in_place(tmp_path, db_url, monkeypatch, in_place):
    from txcl.continuations.service import ContinuationService, open_run_store
    from txcl.ops.tree import load_ops
    from txcl.runtime.config import Settings
    from txcl.runtime.interpreter import Completed, Suspended
    from txcl.runtime.walker import Walker

    paths: list[str] = []
    for name in ("_dispatch_in_place", "dispatch_sync"):
        original = getattr(Walker, name)

        def counted(self, run, frame, *args, _original=original, _name=name, **kwargs):
            paths.append(f"{frame.stage} {_name}")
            return _original(self, run, frame, *args, **kwargs)

        monkeypatch.setattr(Walker, name, counted)
    with TestWorker() as worker:
        ws = write_tree(tmp_path / "ws", {
            "OPS/site/100/research.txcl": f'WITH mode = "async", join_at_scope = 200\nEXEC "{worker.url()}"',
            "OPS/site/200/copy.txcl": 'WITH from = "research.items", to = "copied"\nEXEC "txco://copy"',
            "OPS/site/200/count.txcl": "EMIT .count = &len(.research.items)",
        })
        store = open_run_store(db_url)
        service = ContinuationService(store, Settings().evolve(trace_mode="summary"), workspace=ws)
        interp = service.interpreter(load_ops(ws))
        interp.walker.call_in_place = in_place

        async def main():
            outcome = await interp.run({}, "site")
            assert isinstance(outcome, Suspended), outcome  # waiting at the join, scope 200
            job = await asyncio.to_thread(worker.wait_job, 10)
            store.admit_terminal(job.opc, "completed", {"research": {"items": ["x", "y"]}}, source="cli")
            release = store.continue_release(job.opc)
            assert release.won
            paths.clear()
            final = await service.drive_resume(release.claim)
            await service.aclose()
            return final

        try:
            final = asyncio.run(main())
        finally:
            store.close()
    assert isinstance(final, Completed), final
    assert final.envelope["copied"] == ["x", "y"] and final.envelope["count"] == 2
    assert paths == [f"site/200 {'_dispatch_in_place' if in_place else 'dispatch_sync'}"]
