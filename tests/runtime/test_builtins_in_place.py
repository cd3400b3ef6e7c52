"""A scope whose EXEC ops all call plain builtins (defined with `def`, so none ever waits)
calls them in place, one after another, instead of dispatching each as a task. It must do
exactly what the task path does: the same outcome, envelope, fuel, trace steps and timeline
events, for scopes of one and of several builtins, mixed with local rules, failing, halting,
nesting outputs `into` a path, recording bodies (`debug`) and writing reserved paths."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from testtools import walk_observed

from txcl.ops.tree import load_ops
from txcl.runtime.config import Settings
from txcl.runtime.interpreter import Interpreter
from txcl.runtime.schemes import txco

def _stable(value: Any) -> Any:
    """`value` with what differs between any two runs (the request id, the time) blanked,
    in the bodies a `debug` step records too."""
    if isinstance(value, dict):
        return {k: "…" if k in ("_ts", "rid", "duration_ms")
                else _stable(json.loads(v)) if k in ("input_json", "output_json") and isinstance(v, str)
                else _stable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_stable(v) for v in value]
    return value


def _observe(tree: Any, envelope: dict, in_place: bool) -> tuple[Any, int]:
    """What a walk of `envelope` leaves, and how many frames went through `dispatch_sync`."""
    kept: list = []
    interp = Interpreter(tree, settings=Settings(trace_mode="summary", op_repeat_penalty_ms=0),
                         trace_sink=kept.append)
    walker = interp.walker
    walker.call_in_place = in_place
    tasks = 0
    general = walker.dispatch_sync

    async def counted(*args: Any) -> None:
        nonlocal tasks
        tasks += 1
        await general(*args)

    walker.dispatch_sync = counted  # type: ignore[method-assign]
    try:
        outcome = interp.run_sync(copy.deepcopy(envelope), "s")
    finally:
        interp.close()
    (record,) = kept
    return _stable(walk_observed(outcome, record)), tasks


def _plain_but_returns_awaitable(op_input: dict, directives: dict, ctx: Any) -> Any:
    async def later() -> dict:
        if directives.get("wait"):
            import asyncio

            await asyncio.sleep(0)
        return {"later": True}

    return later()


CASES = {
    "several builtins and local rules in one scope, merged in name order, SET POST": {
        "0100_a/c.txcl": 'WITH from = "order.id", to = "copied.c"\nEXEC "txco://copy"\nEMIT .from_c = .copied.c',
        "0100_a/a.txcl": 'WITH from = "order", to = "copied.a"\nEXEC "txco://copy"',
        "0100_a/b.txcl": 'EMIT .local = &concat("x", .order.id)\nSET .after = .local',
        "0100_a/d.txcl": 'EXEC "txco://noop"\nEMIT .noop_ran = true',
        "0200_b/e.txcl": 'WITH from = "copied.a.id", to = "again"\nEXEC "txco://copy"',
    },
    "a failing builtin, a refused timeout, a WHEN that misses, PRIORITY, nope": {
        "0100_a/a.txcl": 'WITH to = "x"\nEXEC "txco://copy"',
        "0100_a/b.txcl": 'WITH from = "order.id", to = "y", timeout = "100000h"\nEXEC "txco://copy"',
        "0100_a/c.txcl": 'WHEN .order.id == "never"\nWITH from = "order.id", to = "z"\nEXEC "txco://copy"',
        "0300_c/d.txcl": 'WITH from = "order.id", to = "ok"\nEXEC "txco://nope"',
        "0200_b/e.txcl": 'PRIORITY 2\nWITH from = "order.id", to = "high"\nEXEC "txco://copy"',
        "0200_b/f.txcl": 'PRIORITY 1\nWITH from = "order.id", to = "low"\nEXEC "txco://copy"',
    },
    "into, debug, reserved writes, a halt": {
        "0100_a/a.txcl": 'WITH from = "order.id", to = "v", into = "nested.here"\nEXEC "txco://copy"',
        "0100_a/b.txcl": 'WITH from = "order", to = "dbg", debug = true\nEXEC "txco://copy"',
        "0100_a/c.txcl": 'WITH from = "order.id", to = "_txc.run_id"\nEXEC "txco://copy"',
        "0200_b/d.txcl": 'WITH status = 201, body = "done", content_type = "text/plain"\nEXEC "txco://web-render"',
        "0300_c/e.txcl": 'EMIT .never = true',
    },
    "kv without a store, hmac, a goto back": {
        "0100_a/a.txcl": 'WITH key = "k", value = 1\nEXEC "txco://kv/set"',
        "0100_a/b.txcl": 'WITH key = "secret", message = .order.id, into = "sig"\nEXEC "txco://hmac-sign"',
        "0200_b/c.txcl": 'WHEN .n < 2\nEMIT .n = &add(.n, 1), @goto = "s/100"',
        "0300_c/d.txcl": 'WITH from = "n", to = "final"\nEXEC "txco://copy"',
    },
    "a plain builtin handing back an awaitable": {
        "0100_a/a.txcl": 'WITH into = "quick"\nEXEC "txco://test-plain-awaitable"',
        "0100_a/b.txcl": 'WITH wait = true, into = "slow"\nEXEC "txco://test-plain-awaitable"',
    },
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_builtins_called_in_place_walk_as_dispatched_ones(tmp_path: Path, case: str, monkeypatch):
    monkeypatch.setitem(txco.BUILTINS, "test-plain-awaitable", _plain_but_returns_awaitable)
    for name, text in CASES[case].items():
        path = tmp_path / "OPS" / "s" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n", encoding="utf-8")
    tree = load_ops(tmp_path)
    for envelope in ({}, {"order": {"id": 7, "lines": [1, 2]}, "n": 0}, {"order": "flat", "n": "1"}):
        dispatched, tasks = _observe(tree, envelope, in_place=False)
        in_place, no_tasks = _observe(tree, envelope, in_place=True)
        assert in_place == dispatched, f"{case}: {envelope!r}"
        # the comparison is of the two paths (an unknown builtin is left to dispatch_sync)
        assert tasks > 0 and no_tasks == ("nope" in case)


def test_a_plain_builtin_must_not_wait(tmp_path: Path, monkeypatch):
    """A builtin defined with `def` that hands back a coroutine: its value is used when the
    coroutine finishes without waiting; one that would wait fails the op, on both paths."""
    monkeypatch.setitem(txco.BUILTINS, "test-plain-awaitable", _plain_but_returns_awaitable)
    for name, text in CASES["a plain builtin handing back an awaitable"].items():
        path = tmp_path / "OPS" / "s" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n", encoding="utf-8")
    tree = load_ops(tmp_path)
    for in_place in (True, False):
        (seen, steps, _events), _tasks = _observe(tree, {}, in_place)
        assert seen[1]["quick"] == {"later": True} and "slow" not in seen[1]
        failed = {s["name"]: s for s in steps}["b"]
        assert failed["status"] == "error"
        assert failed["error"] == 'txco://test-plain-awaitable waited; a builtin that waits must be an async def'


def test_a_builtin_defined_async_is_still_dispatched(tmp_path: Path, monkeypatch):
    async def napping(op_input: dict, directives: dict, ctx: Any) -> dict:
        return {"napped": True}

    monkeypatch.setitem(txco.BUILTINS, "test-async", napping)
    path = tmp_path / "OPS" / "s" / "0100_a" / "a.txcl"
    path.parent.mkdir(parents=True)
    path.write_text('EXEC "txco://test-async"\n', encoding="utf-8")
    (seen, _steps, _events), tasks = _observe(load_ops(tmp_path), {}, in_place=True)
    assert seen[1]["napped"] is True and tasks == 1
