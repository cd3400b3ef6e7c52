"""The scope walk: one test (or a few) per rule."""

from __future__ import annotations

import json

from txcl.runtime.interpreter import Completed, Failed


def test_natural_advance_and_stamping(workspace, run_tree):
    ws = workspace({
        "OPS/shop/0100/a.txcl": "EMIT .steps = [\"a\"]",
        "OPS/shop/0250_label/b.txcl": "EMIT .steps = [\"b\"]",
        "OPS/shop/0900 late/c.txcl": "EMIT .steps = [\"c\"]",
    })
    outcome, _ = run_tree(ws, {"_ts": "2020-01-01T00:00:00.000Z", "_txc": {"src": "x", "stack": "y"}})
    assert isinstance(outcome, Completed)
    env = outcome.envelope
    assert env["steps"] == ["a", "b", "c"]
    assert env["_ts"] == "2020-01-01T00:00:00.000Z"  # never rewritten
    assert env["_txc"]["src"] == "api" and env["_txc"]["stack"] == "shop"
    assert len(env["_txc"]["rid"]) == 26
    assert "ttl" not in env["_txc"] and "fuel_used" not in env["_txc"]


def test_ts_stamped_when_absent(workspace, run_tree):
    ws = workspace({"OPS/s/0001/a.txcl": "EMIT .ok = true"})
    outcome, _ = run_tree(ws, {})
    assert outcome.envelope["_ts"].endswith("Z") and "T" in outcome.envelope["_ts"]


def test_when_sees_scope_entry_envelope(workspace, run_tree):
    # b's WHEN is evaluated against E0, before a's output merges.
    ws = workspace({
        "OPS/s/0100/a.txcl": "EMIT .flag = true",
        "OPS/s/0100/b.txcl": "WHEN .flag == true\nEMIT .b_ran = true",
        "OPS/s/0200/c.txcl": "WHEN .flag == true\nEMIT .c_ran = true",
    })
    env = run_tree(ws, {})[0].envelope
    assert env["flag"] is True and "b_ran" not in env and env["c_ran"] is True


def test_overlay_per_scope_fallback(workspace, run_tree):
    ws = workspace({
        "OPS/shop/0100/a.txcl": "EMIT .who100 = \"parent\"",
        "OPS/shop/0200/a.txcl": "EMIT .who200 = \"parent\"",
        "OPS/shop/0300/a.txcl": "EMIT .who300 = \"parent\"",
        "OPS/shop/beta/0200/x.txcl": "EMIT .who200 = \"child\"",
        "OPS/shop/beta/0250/x.txcl": "EMIT .who250 = \"child\"",
    })
    env = run_tree(ws, {}, "shop/beta")[0].envelope
    assert env["who100"] == "parent"
    assert env["who200"] == "child"  # the child's scope replaces the parent's entirely
    assert env["who250"] == "child"
    assert env["who300"] == "parent"  # inherited after the child's own scopes
    assert env["_txc"]["stack"] == "shop/beta"


def test_overlay_bare_goto_stays_in_child(workspace, run_tree):
    ws = workspace({
        "OPS/shop/0100/a.txcl": "WHEN .n == 0\nEMIT .n = 1, @goto = \"100\"",
        "OPS/shop/0100/b.txcl": "WHEN .n == 1\nEMIT .done = true",
        "OPS/shop/beta/0500/x.txcl": "EMIT .child_tail = true",
    })
    env = run_tree(ws, {"n": 0}, "shop/beta")[0].envelope
    assert env["done"] is True and env["child_tail"] is True


def test_no_climb_from_underscore_stack(workspace, run_tree):
    ws = workspace({
        "OPS/www/0100/a.txcl": "EMIT .parent = true",
        "OPS/www/_mail/0200/a.txcl": "EMIT .mail = true",
        "OPS/www/_mail/eu/0300/a.txcl": "EMIT .eu = true",
    })
    env = run_tree(ws, {}, "www/_mail")[0].envelope
    assert env.get("mail") is True and "parent" not in env
    env = run_tree(ws, {}, "www/_mail/eu")[0].envelope
    assert env.get("eu") is True and env.get("mail") is True and "parent" not in env


def test_priority_ties_all_run_and_negative_never_filters(workspace, run_tree):
    ws = workspace({
        "OPS/s/0100/a.txcl": "PRIORITY 5\nEMIT .a = true",
        "OPS/s/0100/b.txcl": "PRIORITY 5\nEMIT .b = true",
        "OPS/s/0100/c.txcl": "PRIORITY 1\nEMIT .c = true",
        "OPS/s/0100/d.txcl": "WHEN .nope == 1\nPRIORITY 9\nEMIT .d = true",
        "OPS/s/0200/e.txcl": "PRIORITY -3\nEMIT .e = true",
        "OPS/s/0200/f.txcl": "EMIT .f = true",
    })
    env = run_tree(ws, {})[0].envelope
    assert env.get("a") and env.get("b")
    assert "c" not in env and "d" not in env  # lower priority filtered; unmatched priority ignored
    assert env.get("e") and env.get("f")


def test_halt_beats_goto_and_strips_control_fields(workspace, run_tree):
    ws = workspace({
        "OPS/s/0100/a.txcl": "EMIT @halt = true, @goto = \"300\"",
        "OPS/s/0200/b.txcl": "EMIT .b = true",
        "OPS/s/0300/c.txcl": "EMIT .c = true",
    })
    outcome, _ = run_tree(ws, {})
    assert isinstance(outcome, Completed) and outcome.halted
    env = outcome.envelope
    assert "b" not in env and "c" not in env
    assert "halt" not in env["_txc"] and "goto" not in env["_txc"]


def test_falsy_halt_stays_and_walk_continues(workspace, run_tree):
    ws = workspace({
        "OPS/s/0100/a.txcl": "EMIT @halt = false",
        "OPS/s/0200/b.txcl": "EMIT .b = true",
    })
    env = run_tree(ws, {})[0].envelope
    assert env["b"] is True and env["_txc"]["halt"] is False


def test_goto_forms(workspace, run_tree):
    ws = workspace({
        "OPS/s/0100/a.txcl": "WHEN .form == \"scope\"\nEMIT @goto = \"300\"",
        "OPS/s/0100/b.txcl": "WHEN .form == \"stage\"\nEMIT @goto = \"other/150\"",
        "OPS/s/0100/c.txcl": "WHEN .form == \"number\"\nEMIT @goto = 300",
        "OPS/s/0200/x.txcl": "EMIT .s200 = true",
        "OPS/s/0300/x.txcl": "EMIT .s300 = true",
        "OPS/other/0200/x.txcl": "EMIT .other200 = true",
    })
    env = run_tree(ws, {"form": "scope"}, "s")[0].envelope
    assert env.get("s300") and "s200" not in env
    env = run_tree(ws, {"form": "number"}, "s")[0].envelope
    assert env.get("s300") and "s200" not in env
    env = run_tree(ws, {"form": "stage"}, "s")[0].envelope
    # other/150 resolves to the smallest scope >= 150 of "other"; _txc.stack is unchanged
    assert env.get("other200") and "s200" not in env and env["_txc"]["stack"] == "s"


def test_bad_goto_fails_request(workspace, run_tree):
    ws = workspace({"OPS/s/0100/a.txcl": "EMIT @goto = \"not a stage\""})
    outcome, _ = run_tree(ws, {})
    assert isinstance(outcome, Failed) and outcome.http_status == 500
    assert outcome.payload == {"error": {"code": "txcl_bad_goto", "message": 'invalid @goto target "not a stage"'}}


def test_goto_into_system_stack_forbidden(workspace, run_tree):
    ws = workspace({
        "OPS/s/0100/a.txcl": "EMIT @goto = \"_sys/health/100\"",
        "OPS/_sys/health/0100/a.txcl": "EMIT .inside = true",
    })
    outcome, _ = run_tree(ws, {}, "s")
    assert isinstance(outcome, Failed) and outcome.code == "txcl_goto_forbidden"


def test_goto_into_a_stack_that_does_not_exist_fails_the_request(workspace, run_tree):
    ws = workspace({"OPS/s/0100/a.txcl": "EMIT @goto = \"nowhere/100\", .x = 1"})
    outcome, _ = run_tree(ws, {})
    assert isinstance(outcome, Failed)
    assert outcome.payload["error"]["code"] == "txcl_bad_goto"
    assert 'there is no stack "nowhere"' in outcome.payload["error"]["message"]


def test_stage_jump_exec(workspace, run_tree):
    ws = workspace({
        "OPS/s/0100/a.txcl": "EXEC \"goto://300\"",
        "OPS/s/0200/b.txcl": "EMIT .b = true",
        "OPS/s/0300/c.txcl": "EXEC \"t/100\"",
        "OPS/t/0100/d.txcl": "EMIT .d = true",
    })
    env = run_tree(ws, {}, "s")[0].envelope
    assert "b" not in env and env["d"] is True and "goto" not in env["_txc"]


def test_set_post_is_set_if_absent_and_runs_after_merge(workspace, run_tree):
    ws = workspace({
        "OPS/s/0100/a.txcl": """
            SELECT *
            SET .status = "default", .present = "no", .copy = .from_output
            EMIT .from_output = 7
        """,
    })
    env = run_tree(ws, {"present": "yes"})[0].envelope
    assert env["status"] == "default"
    assert env["present"] == "yes"
    assert env["copy"] == 7  # resolved against the merged envelope


def test_set_pre_is_op_local(workspace, run_tree):
    ws = workspace({"OPS/s/0100/a.txcl": "SET .region = \"eu\"\nEMIT .seen = .region"})
    env = run_tree(ws, {})[0].envelope
    assert env["seen"] == "eu" and "region" not in env


def test_merge_in_op_name_order_not_completion_order(workspace, run_tree):
    ws = workspace({
        "mod_merge_order.py": """
            import asyncio

            async def slow(inp, ctx):
                await asyncio.sleep(0.05)
                return {"who": "a_slow", "list": ["a"]}

            async def fast(inp, ctx):
                return {"who": "b_fast", "list": ["b"]}
        """,
        "OPS/s/0100/a.txcl": "EXEC \"py://mod_merge_order:slow\"",
        "OPS/s/0100/b.txcl": "EXEC \"py://mod_merge_order:fast\"",
    })
    env = run_tree(ws, {"list": ["start"]})[0].envelope
    assert env["who"] == "b_fast"  # b merges after a although it finished first
    assert env["list"] == ["start", "a", "b"]


def test_merge_type_change_wins(workspace, run_tree):
    ws = workspace({"OPS/s/0100/a.txcl": "EMIT .obj.k = 2, .arr = [3]"})
    env = run_tree(ws, {"obj": {"j": 1, "k": 1}, "arr": [1, 2]})[0].envelope
    assert env["obj"] == {"j": 1, "k": 2} and env["arr"] == [1, 2, 3]


def test_delete_targets(workspace, run_tree):
    ws = workspace({
        "OPS/s/0100/a.txcl": "EMIT @delete = [\".secret\", \"@web.req.body\", \"@rid\"]",
        "OPS/s/0200/b.txcl": "EMIT .after = true",
    })
    outcome, store = run_tree(ws, {"secret": 1, "_txc": {"web": {"req": {"body": "abc", "method": "GET"}}}})
    env = outcome.envelope
    assert "secret" not in env and "body" not in env["_txc"]["web"]["req"]
    assert env["_txc"]["rid"]  # reserved: refused
    assert "delete" not in env["_txc"]
    kinds = [e["kind"] for e in store.get_trace(outcome.rid).events]
    assert "envelope.delete_refused" in kinds


def test_op_error_is_best_effort(workspace, run_tree):
    ws = workspace({
        "mod_best_effort.py": """
            def boom(inp, ctx):
                raise ValueError("no stock")
        """,
        "OPS/s/0100/a.txcl": "EXEC \"py://mod_best_effort:boom\"\nEMIT .never = true",
        "OPS/s/0100/b.txcl": "EMIT .sibling = true",
        "OPS/s/0200/c.txcl": "EMIT .later = true",
    })
    outcome, store = run_tree(ws, {})
    env = outcome.envelope
    assert "never" not in env and env["sibling"] and env["later"]
    steps = {s["name"]: s for s in store.get_trace(outcome.rid).steps}
    assert steps["a"]["status"] == "error" and steps["a"]["error"] == "ValueError: no stock"
    assert "Traceback" in steps["a"]["traceback"]


def test_untrusted_output_sanitised(workspace, run_tree):
    ws = workspace({
        "mod_sanitise.py": """
            def evil(inp, ctx):
                return {"ok": 1, "_txc": {"rid": "forged", "stack": "x", "web": {"res": {"status": 201}}}}
        """,
        "OPS/s/0100/a.txcl": "EXEC \"py://mod_sanitise:evil\"",
    })
    outcome, store = run_tree(ws, {})
    env = outcome.envelope
    assert env["ok"] == 1
    assert env["_txc"]["rid"] == outcome.rid and env["_txc"]["stack"] == "s"
    assert env["_txc"]["web"]["res"]["status"] == 201  # author-writable subtree kept
    dropped = [e["data"] for e in store.get_trace(outcome.rid).events
               if e["kind"] == "envelope.reserved_write_dropped"]
    assert {"path": "._txc.rid", "op": "a"} in dropped


def test_identity_stamp_and_projection(workspace, run_tree):
    ws = workspace({
        "mod_stamp.py": """
            def echo(inp, ctx):
                return {"seen": inp, "ctx": [ctx.stack, ctx.scope, ctx.name]}
        """,
        "OPS/s/0100/a.txcl": "SELECT .order.id AS .id\nEXEC \"py://mod_stamp:echo\"",
    })
    env = run_tree(ws, {"order": {"id": 7, "secret": 1}, "_txc": {"op": "forged"}})[0].envelope
    seen = env["seen"]
    assert seen["id"] == 7 and "order" not in seen and seen["_ts"] == env["_ts"]
    assert seen["_txc"] == {"op": "s/a", "step": 100}
    assert env["ctx"] == ["s", 100, "a"]
    assert env["id"] == 7  # synthetic SELECT emit


def test_emit_ttl_lowering(workspace, run_tree):
    ws = workspace({
        "OPS/s/0100/a.txcl": "EMIT @ttl = 3",
        "OPS/s/0200/b.txcl": "EMIT .b = true",
        "OPS/s/0300/c.txcl": "EMIT .c = true",
        "OPS/s/0400/d.txcl": "EMIT .d = true",
    })
    outcome, _ = run_tree(ws, {})
    assert isinstance(outcome, Failed)
    assert outcome.payload["code"] == "txcl_scope_ttl_exhausted"
    assert outcome.payload["last_stage"] == "s/400"  # s/200 and s/300 ran: two more frames


def test_set_post_failure_replaces_envelope(workspace, run_tree):
    ws = workspace({
        "OPS/s/0100/a.txcl": "SELECT *\nSET .x = &div(1, 0)",
        "OPS/s/0200/b.txcl": "EMIT .after = true",
    })
    outcome, store = run_tree(ws, {"keep": 1})
    env = outcome.envelope
    assert env["error"]["message"].startswith("decorate .x:")
    assert "keep" not in env and env["after"] is True
    assert "envelope.set_post_failed" in [e["kind"] for e in store.get_trace(outcome.rid).events]


def test_run_state_round_trips_through_json(workspace):
    from txcl.ops.tree import load_ops
    from txcl.runtime.interpreter import Interpreter
    from txcl.runtime.state import Run

    ws = workspace({"OPS/s/0100/a.txcl": "EMIT .a = 1", "OPS/s/0200/b.txcl": "EMIT .b = .a"})
    interp = Interpreter(load_ops(ws))
    run = interp.new_run({}, "s")
    import asyncio

    from txcl.trace.recorder import TraceRecorder

    async def one_step_then_resume():
        rec = TraceRecorder("off", run.rid, run.src, run.entry_stack)
        await interp.walker.step(run, rec)  # scope 100 only
        frozen = json.loads(json.dumps(run.to_json()))
        again = Run.from_json(frozen)
        return await interp.drive(again)

    outcome = asyncio.run(one_step_then_resume())
    assert outcome.envelope["a"] == 1 and outcome.envelope["b"] == 1
    interp.close()


def test_set_pre_and_select_writes_never_leak_into_siblings(workspace, run_tree):
    ws = workspace({
        "OPS/s/0100/a.txcl": "SET .a.c = 2, .list.0.x = 9\nSELECT .a.b AS .a.copy\nEMIT .saw = .a.c",
        "OPS/s/0100/b.txcl": "EMIT .b_saw_c = .a.c, .b_saw_copy = .a.copy, .b_saw_x = .list.0.x",
    })
    env = run_tree(ws, {"a": {"b": 1}, "list": [{"y": 1}]})[0].envelope
    assert env["saw"] == 2
    assert env["b_saw_c"] is None and env["b_saw_copy"] is None and env["b_saw_x"] is None
    assert env["a"] == {"b": 1, "copy": 1} and env["list"] == [{"y": 1}]


def test_emit_ttl_raise_is_ignored_and_recorded(workspace, run_tree):
    ws = workspace({
        "OPS/s/0100/a.txcl": "EMIT @ttl = 100000",
        "OPS/s/0100/b.txcl": 'EMIT @ttl = "lots"',
        "OPS/s/0200/c.txcl": "EMIT .c = true",
    })
    outcome, store = run_tree(ws, {})
    assert outcome.envelope["c"] is True
    events = [e for e in store.get_trace(outcome.rid).events if e["kind"] == "budget.ttl_raise_ignored"]
    assert [e["data"]["op"] for e in events] == ["a"]


def test_respond_shapes_the_answer_once_and_the_trace_counts_its_body(workspace, tmp_path):
    """`run(respond=...)`: the caller's response is made from the final envelope before the
    trace is finished; the trace's bytes_out is that body's length and its http_status the
    response's status. A respond that fails
    leaves the outcome as it was and the trace measures the envelope as without one."""
    import attrs

    from txcl.ops.tree import load_ops
    from txcl.runtime.config import Settings
    from txcl.runtime.interpreter import Interpreter
    from txcl.store import open_store

    @attrs.define
    class Reply:
        body: bytes
        status: int = 201

    ws = workspace({"OPS/s/0100/a.txcl": 'EMIT .a = "ä"'})
    store = open_store(tmp_path / "t.db")
    interp = Interpreter(load_ops(ws), store=store, settings=Settings())
    seen = []

    def respond(outcome):
        seen.append(outcome.envelope["a"])
        return Reply(b"twelve bytes")

    def broken(outcome):
        raise ValueError("cannot shape")

    try:
        shaped = interp.run_sync({}, "s", respond=respond)
        plain = interp.run_sync({}, "s", respond=broken)
    finally:
        interp.close()
    assert isinstance(shaped, Completed) and shaped.answer == Reply(b"twelve bytes") and seen == ["ä"]
    assert store.get_trace(shaped.rid).request["bytes_out"] == 12
    assert store.get_trace(shaped.rid).request["http_status"] == 201  # the status the response carries
    assert store.get_trace(plain.rid).request["http_status"] == 200  # from the envelope, without one
    assert isinstance(plain, Completed) and plain.answer is None and plain.envelope["a"] == "ä"
    size = len(json.dumps(plain.envelope, ensure_ascii=False, separators=(",", ":")).encode())
    assert store.get_trace(plain.rid).request["bytes_out"] == size
    store.close()
