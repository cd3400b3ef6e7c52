"""Budgets and LOOP: every stop reason, both payloads."""

from __future__ import annotations

from txcl.runtime.budget import Budget
from txcl.runtime.interpreter import Completed, Failed


async def _no_sleep(_seconds: float) -> None:
    return None


def test_fuel_exhaustion_payload(workspace, run_tree):
    ws = workspace({"OPS/s/0100/a.txcl": "EMIT @goto = \"100\""})
    outcome, store = run_tree(ws, {}, max_fuel_per_request=400, sleep=_no_sleep)
    assert isinstance(outcome, Failed) and outcome.http_status == 500
    payload = outcome.payload
    assert set(payload) == {"code", "max_fuel", "fuel_used", "last_stage", "last_transitions"}
    assert payload["code"] == "txco_fuel_exhausted" and payload["max_fuel"] == 400
    assert payload["fuel_used"] > 400
    assert payload["last_stage"] == "s/100"
    assert payload["last_transitions"] == ["s/100->s/100"] * 3
    trace = store.get_trace(outcome.rid)
    assert trace.request["status"] == "failed"
    assert "stage.penalty" in [e["kind"] for e in trace.events]


def test_ttl_exhaustion_payload(workspace, run_tree):
    ws = workspace({
        "OPS/s/0100/a.txcl": "EMIT @goto = \"200\"",
        "OPS/s/0200/a.txcl": "EMIT @goto = \"100\"",
    })
    outcome, _ = run_tree(ws, {}, op_scope_ttl_max=5, sleep=_no_sleep)
    assert isinstance(outcome, Failed)
    assert outcome.payload == {
        "code": "txcl_scope_ttl_exhausted", "max_ttl": 5, "consumed": 5, "last_stage": "s/100",
        "last_transitions": ["s/200->s/100", "s/100->s/200", "s/200->s/100"],
    }


def test_repeat_penalty_charges_and_sleeps():
    b = Budget.fresh(0, 0)
    assert b.enter_frame(None, "s/0") is False
    assert b.enter_frame("s/0", "s/1") is False
    assert b.enter_frame("s/0", "s/1") is True
    assert b.fuel_used == 10 + 10 + 10 + 50
    assert b.exhaustion_payload("s/1") is None  # 0 = meter only / TTL off


def test_an_entry_charged_only_when_new_leaves_a_repeat_uncharged():
    b = Budget.fresh(0, 100)
    assert b.enter_frame(None, "s/0", only_new=True) is False
    assert b.enter_frame("s/0", "s/1", only_new=True) is False
    state = b.to_json()
    assert b.enter_frame("s/0", "s/1", only_new=True) is None  # a repeat: nothing charged
    assert b.to_json() == state
    assert b.enter_frame("s/0", "s/1") is True
    assert (b.fuel_used, b.ttl, b.transitions) == (10 + 10 + 10 + 50, 97, ["s/0->s/1", "s/0->s/1"])


def test_penalty_sleep_uses_configured_delay(workspace, run_tree):
    slept: list[float] = []

    async def record(seconds: float) -> None:
        slept.append(seconds)

    ws = workspace({"OPS/s/0100/a.txcl": "WHEN .n < 3\nEMIT @goto = \"100\", .n = &add(.n, 1)"})
    outcome, _ = run_tree(ws, {"n": 0}, sleep=record, op_repeat_penalty_ms=20)
    assert isinstance(outcome, Completed) and outcome.envelope["n"] == 3
    assert slept == [0.02, 0.02]  # entries 3 and 4 repeat s/100->s/100 (entry 2 takes it first)


# ---------------------------------------------------------------- LOOP

COUNTER = """
import asyncio

def count(inp, ctx):
    return {"n": inp.get("n", 0) + 1}

def fail_on_three(inp, ctx):
    if inp.get("n", 0) >= 2:
        raise RuntimeError("third pass failed")
    return {"n": inp.get("n", 0) + 1}

async def slow(inp, ctx):
    await asyncio.sleep(0.02)
    return {"n": inp.get("n", 0) + 1}

def halter(inp, ctx):
    return {"_txc": {"halt": True}}
"""


def _loop_ws(workspace, module: str, rule: str, extra: dict | None = None):
    files = {f"{module}.py": COUNTER, "OPS/s/0100/loop.txcl": rule.replace("MOD", module)}
    files.update(extra or {})
    return workspace(files)


def _record(outcome):
    return outcome.envelope["_txc"]["runtime"]["loop"]["loop"]


def test_loop_done(workspace, run_tree):
    ws = _loop_ws(workspace, "mod_loop_done", 'EXEC "py://MOD:count"\nLOOP UNTIL .n >= 3 SET .n = .n EVERY 2')
    outcome, store = run_tree(ws, {"n": 0})
    rec = _record(outcome)
    assert rec["passes"] == 3 and rec["stop"] == "done" and "error" not in rec
    assert outcome.envelope["n"] == 3
    step = store.get_trace(outcome.rid).steps[0]
    assert step["passes"] == 3 and step["stop"] == "done"
    assert outcome.fuel_used == 10 + 3 * 25


def test_loop_max(workspace, run_tree):
    ws = _loop_ws(workspace, "mod_loop_max", 'EXEC "py://MOD:count"\nLOOP UNTIL .n >= 100 SET .n = .n EVERY 2 MAX 4')
    outcome, _ = run_tree(ws, {"n": 0})
    assert _record(outcome)["passes"] == 4 and _record(outcome)["stop"] == "max"


def test_loop_error_keeps_accumulated_output(workspace, run_tree):
    ws = _loop_ws(workspace, "mod_loop_error",
                  'EXEC "py://MOD:fail_on_three"\nLOOP UNTIL .n >= 10 SET .n = .n EVERY 2 MAX 5')
    outcome, _ = run_tree(ws, {"n": 0})
    rec = _record(outcome)
    assert rec["stop"] == "error" and rec["passes"] == 3
    assert rec["error"] == "RuntimeError: third pass failed"
    assert outcome.envelope["n"] == 2


def test_loop_timeout(workspace, run_tree):
    ws = _loop_ws(workspace, "mod_loop_timeout",
                  'WITH timeout = "60ms"\nEXEC "py://MOD:slow"\nLOOP UNTIL .n >= 1000 SET .n = .n EVERY 2 MAX 1000')
    outcome, _ = run_tree(ws, {"n": 0})
    rec = _record(outcome)
    assert rec["stop"] == "timeout" and 1 <= rec["passes"] < 1000


def test_loop_fuel(workspace, run_tree):
    ws = _loop_ws(workspace, "mod_loop_fuel", 'EXEC "py://MOD:count"\nLOOP UNTIL .n >= 1000 SET .n = .n EVERY 2 MAX 1000')
    outcome, _ = run_tree(ws, {"n": 0}, max_fuel_per_request=100)
    assert isinstance(outcome, Completed)  # the loop stops; the request's last frame ends the stack
    rec = _record(outcome)
    assert rec["stop"] == "fuel" and rec["passes"] == 4  # 10 + 4*25 = 110 > 100


def test_loop_halted_by_sibling(workspace, run_tree):
    ws = _loop_ws(workspace, "mod_loop_halt", 'EXEC "py://MOD:slow"\nLOOP UNTIL .n >= 1000 SET .n = .n EVERY 2 MAX 1000',
                  {"OPS/s/0100/stop.txcl": 'EXEC "py://mod_loop_halt:halter"',
                   "OPS/s/0200/after.txcl": "EMIT .after = true"})
    outcome, _ = run_tree(ws, {"n": 0})
    rec = _record(outcome)
    assert rec["stop"] == "halted" and rec["passes"] >= 1
    assert outcome.halted and "after" not in outcome.envelope


def test_loop_set_and_with_reresolved(workspace, run_tree):
    ws = workspace({
        "mod_loop_with.py": """
            def page(inp, ctx):
                return {"pages": [ctx.directives["page"]], "cursor": inp["cursor"] + 1}
        """,
        "OPS/s/0100/loop.txcl": """
            SELECT .cursor
            WITH page = .cursor
            EXEC "py://mod_loop_with:page"
            LOOP UNTIL .cursor >= 3 SET .cursor = .cursor EVERY 2
        """,
    })
    outcome, _ = run_tree(ws, {"cursor": 0})
    assert outcome.envelope["pages"] == [0, 1, 2]
    assert _record(outcome)["stop"] == "done"


def test_loop_max_above_ceiling_is_refused(workspace, run_tree):
    ws = _loop_ws(workspace, "mod_loop_ceiling", 'EXEC "py://MOD:count"\nLOOP UNTIL .n >= 3 MAX 50')
    outcome, store = run_tree(ws, {"n": 0}, op_loop_max=10)
    assert "n" in outcome.envelope and outcome.envelope["n"] == 0
    step = store.get_trace(outcome.rid).steps[0]
    assert step["status"] == "error" and "exceeds --op-loop-max 10" in step["error"]


def test_sync_timeout_above_cap_is_op_error(workspace, run_tree):
    ws = _loop_ws(workspace, "mod_timeout_cap", 'WITH timeout = "2h"\nEXEC "py://MOD:count"')
    outcome, store = run_tree(ws, {"n": 0})
    step = store.get_trace(outcome.rid).steps[0]
    assert step["status"] == "error" and step["error"] == "timeout 2h exceeds --op-timeout-max 10m"


def test_sync_op_timeout(workspace, run_tree):
    ws = _loop_ws(workspace, "mod_timeout_hit", 'WITH timeout = 5\nEXEC "py://MOD:slow"', {
        "OPS/s/0200/next.txcl": "EMIT .next = true"})
    outcome, store = run_tree(ws, {"n": 0})
    assert outcome.envelope["next"] is True and outcome.envelope["n"] == 0
    step = store.get_trace(outcome.rid).steps[0]
    assert step["status"] == "timeout"
