"""`mode = "async"` and `"continuable"` on `mcp+http://` targets, against a real `txcl serve`
and a real MCP server (FastMCP on 127.0.0.1), on every store backend: barrier, deferred join
(each rule of deferred joins that an http(s) worker follows), itemized fan-out, the budget cap,
fuel, and a SIGKILL while a tool call is in flight."""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
from typing import Any

import pytest


from cont_support import FAST_FLAGS, ServeProcess, _use_database, http_get, wait_until, write_tree

from txcl.runtime.budget import DISPATCH_FUEL
from txcl.testing.mcp_server import McpServerProcess

BODY = ('WHEN @web.req.body != ""\nEXEC "txco://noop"\nEMIT .in = &json(&b64decode(@web.req.body))')


def _stack(name: str, rules: dict[str, str]) -> dict[str, str]:
    files = {f"OPS/{name}/10/body.txcl": BODY}
    files.update({f"OPS/{name}/{rel}": text for rel, text in rules.items()})
    return files


def site_files(mcp: str) -> dict[str, str]:
    t = f"mcp+{mcp}"
    files: dict[str, str] = {}
    files.update(_stack("barrier", {
        "100/add.txcl": f'SELECT .in.a AS .a, .in.b AS .b\nWITH mode = "async", into = "r"\nEXEC "{t}#add"',
        "100/side.txcl": 'EXEC "txco://noop"\nEMIT .side = 1',
        "200/after.txcl": 'EXEC "txco://noop"\nEMIT .after = .r.sum',
    }))
    files.update(_stack("deferred", {
        "100/analyze.txcl": f'SELECT .in.seconds AS .seconds, .in.tag AS .tag\n'
                            f'WITH mode = "async", join_at_scope = 300, into = "analysis"\nEXEC "{t}#slow"',
        "200/between.txcl": 'EXEC "txco://noop"\nEMIT .between = true',
        "200/peek.txcl": 'WHEN .analysis.tag != null\nEXEC "txco://noop"\nEMIT .saw_early = true',
        "300/use.txcl": 'EXEC "txco://noop"\nEMIT .done = .analysis.tag',
    }))
    # the result is in before the join: a sync tool call in between takes longer than the deferred one
    files.update(_stack("ready", {
        "100/double.txcl": f'SELECT .in.value AS .value\nWITH mode = "async", join_at_scope = 300, into = "d"\n'
                           f'EXEC "{t}#double"',
        "200/wait.txcl": f'SELECT .in.pause AS .seconds\nWITH into = "waited"\nEXEC "{t}#slow"',
        "300/use.txcl": 'EXEC "txco://noop"\nEMIT .result = .d.doubled',
    }))
    files.update(_stack("failing", {
        "100/bad.txcl": f'SELECT .in.message AS .message, .in.delay AS .delay\n'
                        f'WITH mode = "async", join_at_scope = 300\nEXEC "{t}#fail"',
        "200/between.txcl": f'SELECT .in.pause AS .seconds\nWITH into = "waited"\nEXEC "{t}#slow"\n'
                            'EMIT .between = true',
        "300/use.txcl": 'EXEC "txco://noop"\nEMIT .joined = true',
    }))
    files.update(_stack("lowjoin", {
        "100/add.txcl": f'SELECT .in.a AS .a, .in.b AS .b\nWITH mode = "async", join_at_scope = 100, into = "r"\n'
                        f'EXEC "{t}#add"',
        "200/after.txcl": 'EXEC "txco://noop"\nEMIT .after = .r.sum',
    }))
    files.update(_stack("halting", {
        "100/analyze.txcl": f'SELECT .in.seconds AS .seconds, .in.tag AS .tag\n'
                            f'WITH mode = "async", join_at_scope = 300, into = "analysis"\nEXEC "{t}#slow"',
        "200/stop.txcl": 'EXEC "txco://noop"\nEMIT .stopped = true, @halt = true',
        "300/use.txcl": 'EXEC "txco://noop"\nEMIT .done = .analysis.tag',
    }))
    # two deferred ops joining at one scope merge by op name, not by finishing order
    files.update(_stack("two", {
        "100/a_first.txcl": f'SELECT .in.slow AS .seconds, .in.ta AS .tag\n'
                            f'WITH mode = "async", join_at_scope = 300, into = "r"\nEXEC "{t}#slow"',
        "100/b_second.txcl": f'SELECT .in.fast AS .seconds, .in.tb AS .tag\n'
                             f'WITH mode = "async", join_at_scope = 300, into = "r"\nEXEC "{t}#slow"',
        "300/use.txcl": 'EXEC "txco://noop"\nEMIT .last = .r.tag',
    }))
    files.update(_stack("jumping", {
        "100/analyze.txcl": f'SELECT .in.seconds AS .seconds, .in.tag AS .tag\n'
                            f'WITH mode = "async", join_at_scope = 300, into = "analysis"\nEXEC "{t}#slow"',
        "200/jump.txcl": 'EXEC "txco://noop"\nEMIT @goto = "landing/100"',
    }))
    files["OPS/landing/100/use.txcl"] = 'EXEC "txco://noop"\nEMIT .landed = .analysis.tag'
    files.update(_stack("capped", {
        "100/long.txcl": f'SELECT .in.seconds AS .seconds\nWITH mode = "async", timeout = "1h", into = "r"\n'
                         f'EXEC "{t}#slow"',
    }))
    files.update(_stack("items", {
        "100/fan.txcl": f'WITH mode = "async", each = .in.values, window = 2, into = "doubled"\nEXEC "{t}#double"',
        "200/after.txcl": 'EXEC "txco://noop"\nEMIT .count = &len(.doubled)',
    }))
    files.update(_stack("quick_or_not", {
        "100/maybe.txcl": f'SELECT .in.seconds AS .seconds, .in.tag AS .tag\n'
                          f'WITH mode = "continuable", continue_after = "400ms", timeout = "20s", into = "r"\n'
                          f'EXEC "{t}#slow"',
        "200/after.txcl": 'EXEC "txco://noop"\nEMIT .after = .r.tag',
    }))
    files.update(_stack("bad_continuable", {
        "100/maybe.txcl": f'SELECT .in.seconds AS .seconds\nWITH mode = .in.mode, join_at_scope = 200\n'
                          f'EXEC "{t}#slow"',
    }))
    files.update(_stack("plain", {  # the same walk as `ready` with sync ops only (fuel comparison)
        "100/double.txcl": f'SELECT .in.value AS .value\nWITH into = "d"\nEXEC "{t}#double"',
        "200/wait.txcl": f'SELECT .in.pause AS .seconds\nWITH into = "waited"\nEXEC "{t}#slow"',
        "300/use.txcl": 'EXEC "txco://noop"\nEMIT .result = .d.doubled',
    }))
    # a later continuable op of the same request reuses the run the deferred op created
    files.update(_stack("reuse", {
        "100/analyze.txcl": f'SELECT .in.seconds AS .seconds, .in.tag AS .tag\n'
                            f'WITH mode = "async", join_at_scope = 300, into = "analysis"\nEXEC "{t}#slow"',
        "200/quick.txcl": f'SELECT .in.value AS .value\nWITH mode = "continuable", continue_after = "3s", '
                          f'timeout = "20s", into = "q"\nEXEC "{t}#double"',
        "300/use.txcl": 'EXEC "txco://noop"\nEMIT .done = .analysis.tag, .quick = .q.doubled',
    }))
    # a backward jump below the floor: each pass dispatches anew, every unit joins at the floor
    files.update(_stack("looping", {
        "100/double.txcl": f'SELECT .in.value AS .value\nWITH mode = "async", join_at_scope = 300, into = "d"\n'
                           f'EXEC "{t}#double"',
        "200/again.txcl": 'WHEN .looped == null\nEXEC "txco://noop"\nEMIT .looped = true, @goto = "looping/100"',
        "300/use.txcl": 'EXEC "txco://noop"\nEMIT .result = .d.doubled',
    }))
    stacks = sorted({rel.split("/")[1] for rel in files})
    files["txcl.toml"] = "\n".join(f'[[serve.routes]]\npath = "/{s}"\nstack = "{s}"\n' for s in stacks)
    return files


SITE_FLAGS = [*FAST_FLAGS, "--op-timeout", "2s", "--loop-timeout", "2s", "--op-timeout-max", "3s", "--continuation-longpoll-ms", "8000",
              "--trace-mode", "full"]


@pytest.fixture(scope="module")
def mcp_server(tmp_path_factory):
    calls = tmp_path_factory.mktemp("mcp") / "calls.jsonl"
    with McpServerProcess(calls=str(calls)) as server:
        yield server


@pytest.fixture(scope="module", params=("sqlite", "postgresql"))
def site(tmp_path_factory, request, mcp_server):
    """One `txcl serve` over every stack of this module, per backend: (ws, srv, store)."""
    from txcl.continuations.service import open_run_store

    ws = write_tree(tmp_path_factory.mktemp("mcpsite"), site_files(mcp_server.url))
    db = str(ws / ".txcl-data" / "txcl.db")
    if request.param == "postgresql":
        server = request.getfixturevalue("pg_server")
        db = server.create_database("mcp_" + ws.name.replace("-", "_"))
        _use_database(ws, db)
    srv = ServeProcess(ws, ws / ".txcl-data" / "txcl.db", SITE_FLAGS).start()
    store = open_run_store(db)
    try:
        yield ws, srv, store
    finally:
        srv.stop()
        store.close()


def post(url: str, body: dict, timeout: float = 30.0) -> tuple[int, dict, dict]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, {k.lower(): v for k, v in resp.headers.items()}, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, json.loads(exc.read())


def poll(srv, location: str, timeout: float = 20.0) -> tuple[int, dict]:
    end = time.monotonic() + timeout
    while True:
        status, _, body = http_get(srv.url + location)
        data = json.loads(body)
        if status != 202 or time.monotonic() > end:
            return status, data
        time.sleep(0.1)


def _calls(mcp_server, tool: str, **match) -> list[dict]:
    return [c for c in mcp_server.calls() if c["tool"] == tool
            and all(c["arguments"].get(k) == v for k, v in match.items())]


def _run_of(store, rid: str):
    return next(r for r in store.list_runs(limit=1000) if r.origin_rid == rid)


def test_barrier_suspends_and_merges_the_tool_result(site):
    ws, srv, store = site
    status, headers, body = post(srv.url + "/barrier", {"a": 2, "b": 40})
    assert status == 202 and body["status"] == "running"
    status, data = poll(srv, headers["location"])
    assert status == 200 and data["r"] == {"sum": 42} and data["after"] == 42 and data["side"] == 1
    run = _run_of(store, headers["x-request-id"])
    unit = store.list_units(run.run_id)[0]
    assert unit.exec_target.startswith("mcp+http://") and unit.fuel_used == DISPATCH_FUEL
    terminal = store.get_terminal(store.list_interactions(unit.unit_id)[0].opc)
    assert terminal.source == "local" and terminal.transport == "mcp"


def test_deferred_join_suspends_at_the_floor_and_resumes(site, mcp_server):
    ws, srv, store = site
    tag = f"late-{uuid.uuid4().hex[:8]}"
    status, headers, body = post(srv.url + "/deferred", {"seconds": 1.2, "tag": tag})
    assert status == 202 and body["between"] is True and "saw_early" not in body  # in between: nothing yet
    status, data = poll(srv, headers["location"])
    assert status == 200 and data["done"] == tag and data["analysis"] == {"slept": 1.2, "tag": tag}
    assert "saw_early" not in data
    run = _run_of(store, headers["x-request-id"])
    assert run.cur_stage == "deferred/300"
    opc = store.list_interactions(store.list_units(run.run_id)[0].unit_id)[0].opc
    # the op continuation id travels as the idempotency key of the tools/call request
    assert [c["key"] for c in _calls(mcp_server, "slow", tag=tag)] == [opc]
    resume = wait_until(lambda: store.get_trace(f"resume-{run.run_id}-deferred_300-v1"))
    assert [s["name"] for s in resume.steps][:1] == ["analyze"]  # one step per joined op, then the join scope
    assert ("use", "ok") in [(s["name"], s["status"]) for s in resume.steps]


def test_result_in_before_the_join_merges_in_the_request(site):
    ws, srv, store = site
    status, _, body = post(srv.url + "/ready", {"value": 21, "pause": 0.8})
    assert status == 200  # no 202: the join check found the result already in
    assert body["result"] == 42 and body["waited"]["slept"] == 0.8


def test_fuel_of_an_async_mcp_op_is_added_at_the_join(site):
    ws, srv, store = site
    status, h_async, _ = post(srv.url + "/ready", {"value": 1, "pause": 0.6})
    status2, h_sync, _ = post(srv.url + "/plain", {"value": 1, "pause": 0.6})
    assert status == status2 == 200
    fuel = [wait_until(lambda rid=h["x-request-id"]: store.get_trace(rid)).request["fuel_used"]
            for h in (h_async, h_sync)]
    assert fuel[0] == fuel[1]  # its own EXEC charge, paid when it joined


def test_tool_failure_in_the_request_and_after_a_suspend(site):
    ws, srv, store = site
    # met in the request: the tool failed while scope 200's own (sync) tool call ran
    status, _, body = post(srv.url + "/failing", {"message": "no quota", "delay": 0, "pause": 0.6})
    assert status == 502, body
    assert body["error"]["code"] == "txcl_join_failed" and "no quota" in body["error"]["message"]
    status, headers, body = post(srv.url + "/failing", {"message": "late failure", "delay": 1.0, "pause": 0})
    assert status == 202 and body["between"] is True
    status, data = poll(srv, headers["location"])
    assert status == 502 and "late failure" in json.dumps(data)
    assert _run_of(store, headers["x-request-id"]).status == "failed"


def test_join_at_or_below_its_own_scope_is_a_plain_barrier(site):
    ws, srv, store = site
    status, headers, _ = post(srv.url + "/lowjoin", {"a": 1, "b": 2})
    assert status == 202
    status, data = poll(srv, headers["location"])
    assert status == 200 and data["after"] == 3
    run = _run_of(store, headers["x-request-id"])
    assert run.cur_stage == "lowjoin/100"  # suspended at its own scope
    assert store.list_units(run.run_id)[0].join_at_scope is None


def test_halt_before_the_floor_answers_without_the_result(site, mcp_server):
    ws, srv, store = site
    tag = f"never-merged-{uuid.uuid4().hex[:8]}"
    status, headers, body = post(srv.url + "/halting", {"seconds": 0.5, "tag": tag})
    assert status == 200 and body["stopped"] is True and "analysis" not in body and "done" not in body
    run = _run_of(store, headers["x-request-id"])
    assert run.status == "completed"
    # the tool still ran; its answer is recorded and never merged
    unit = store.list_units(run.run_id)[0]
    opc = store.list_interactions(unit.unit_id)[0].opc
    wait_until(lambda: store.get_terminal(opc) is not None, timeout=10)
    assert store.get_terminal(opc).payload == {"slept": 0.5, "tag": tag}
    assert "analysis" not in (store.get_run(run.run_id).result or {})
    assert len(_calls(mcp_server, "slow", tag=tag)) == 1


def test_two_joins_at_one_scope_merge_in_op_name_order(site):
    ws, srv, store = site
    # a_first finishes last, b_second first; a merge in finishing order would leave "a"
    status, headers, body = post(srv.url + "/two", {"slow": 0.9, "fast": 0.1, "ta": "a", "tb": "b"})
    if status == 202:
        status, body = poll(srv, headers["location"])
    assert status == 200 and body["last"] == "b"


def test_a_later_continuable_op_reuses_the_deferred_ops_run(site):
    ws, srv, store = site
    status, headers, body = post(srv.url + "/reuse", {"seconds": 0.8, "tag": "reused", "value": 4})
    if status == 202:
        status, body = poll(srv, headers["location"])
    assert status == 200 and body["done"] == "reused" and body["quick"] == 8
    runs = [r for r in store.list_runs(limit=1000) if r.origin_rid == headers["x-request-id"]]
    assert len(runs) == 1  # one durable run for the whole request
    assert [u.kind for u in store.list_units(runs[0].run_id)] == ["unary"]  # the quick op stayed synchronous


def test_a_backward_jump_below_the_floor_joins_every_dispatch_at_the_floor(site):
    ws, srv, store = site
    status, headers, body = post(srv.url + "/looping", {"value": 5})
    if status == 202:
        status, body = poll(srv, headers["location"])
    assert status == 200 and body["result"] == 10 and body["looped"] is True
    run = _run_of(store, headers["x-request-id"])
    units = store.list_units(run.run_id)
    assert len(units) == 2 and all(u.status == "completed" and u.join_at_scope == 300 for u in units)


def test_a_jump_to_another_stack_resolves_the_join_at_its_first_scope(site):
    ws, srv, store = site
    status, headers, body = post(srv.url + "/jumping", {"seconds": 0.6, "tag": "jumped"})
    assert status == 202
    status, data = poll(srv, headers["location"])
    assert status == 200 and data["landed"] == "jumped"
    assert _run_of(store, headers["x-request-id"]).cur_stage == "landing/100"


def test_the_budget_is_capped_by_op_timeout_max(site):
    ws, srv, store = site
    status, headers, _ = post(srv.url + "/capped", {"seconds": 10})
    assert status == 202
    run = _run_of(store, headers["x-request-id"])
    unit = store.list_units(run.run_id)[0]
    assert unit.budget_ms == 3000  # WITH timeout = "1h", capped by --op-timeout-max 3s
    started = time.monotonic()
    status, data = poll(srv, headers["location"], timeout=20)
    assert status == 502 and time.monotonic() - started < 8  # not the hour the rule asked for
    assert data["reason"] == "timed_out" and data["error"]["code"] == "txcl_run_expired"


def test_itemized_fan_out_keeps_the_window_and_the_order(site, mcp_server):
    ws, srv, store = site
    values = [1, 2, 3, 4, 5, 6]
    status, headers, _ = post(srv.url + "/items", {"values": [{"value": v, "delay": 0.05 * (7 - v)}
                                                               for v in values]})
    assert status == 202
    status, data = poll(srv, headers["location"])
    assert status == 200 and data["count"] == 6
    assert [d["value"] for d in data["doubled"]] == values  # by index, not by finishing order
    assert [d["doubled"] for d in data["doubled"]] == [2 * v for v in values]
    mine = [c for c in _calls(mcp_server, "double") if c["arguments"]["value"] in values]
    assert len(mine) >= 6 and max(c["arguments"]["in_flight"] for c in mine[-6:]) <= 2


def test_itemized_element_that_is_not_an_object_fails_the_item(site):
    ws, srv, store = site
    status, headers, _ = post(srv.url + "/items", {"values": [{"value": 1}, 7]})
    assert status == 202
    status, data = poll(srv, headers["location"])
    assert status == 502 and "item 1 is not an object" in json.dumps(data)


def test_continuable_answers_quickly_or_promotes(site):
    ws, srv, store = site
    status, _, body = post(srv.url + "/quick_or_not", {"seconds": 0.05, "tag": "quick"})
    assert status == 200 and body["after"] == "quick"
    status, headers, _ = post(srv.url + "/quick_or_not", {"seconds": 1.0, "tag": "slow"})
    assert status == 202
    status, data = poll(srv, headers["location"])
    assert status == 200 and data["after"] == "slow"


def test_continuable_with_join_at_scope_fails_at_dispatch(site):
    ws, srv, store = site
    status, _, body = post(srv.url + "/bad_continuable", {"seconds": 0, "mode": "continuable"})
    assert status == 500
    assert body["error"]["code"] == "txcl_continuable_invalid"
    assert 'requires mode = "async"' in body["error"]["message"]


# ------------------------------------------------------------------------------------------
# a crash while the tool runs


def test_sigkill_while_a_tool_call_is_in_flight_reissues_it_once_and_merges_once(
        serve, workspace, store_at, tmp_path):
    calls = tmp_path / "calls.jsonl"
    with McpServerProcess(calls=str(calls)) as mcp:
        ws = workspace(site_files(mcp.url))
        flags = ["--reconcile-after", "1500ms", "--async-ack-timeout", "1s", "--continuation-sweep-period", "300ms"]
        first = serve(ws, *flags)
        status, headers, _ = post(first.url + "/deferred", {"seconds": 2.0, "tag": "crash"})
        assert status == 202
        wait_until(lambda: len(mcp.calls()) == 1, timeout=10)
        first.proc.kill()  # SIGKILL while the tool is still sleeping
        assert first.wait_dead() is not None
        second = serve(ws, *flags)
        store = store_at(ws / ".txcl-data" / "txcl.db")
        run_id = _run_of(store, headers["x-request-id"]).run_id
        run = wait_until(lambda: (r := store.get_run(run_id)) and r.status == "completed" and r, timeout=30)
        assert run.result["done"] == "crash" and run.result["analysis"] == {"slept": 2.0, "tag": "crash"}
        made = [c for c in mcp.calls() if c["tool"] == "slow"]
        assert len(made) == 2 and made[0]["key"] == made[1]["key"]  # re-issued with the same key
        opc = made[0]["key"]
        assert store.get_interaction(opc).attempts == 2  # the first send and one resend
        assert store.get_terminal(opc).payload == {"slept": 2.0, "tag": "crash"}
        status, data = poll(second, headers["location"])
        assert status == 200 and data["done"] == "crash"
        import subprocess

        from cont_support import TXCL, db_of

        shown = subprocess.run([TXCL, "runs", "show", run_id, "--db", db_of(ws / ".txcl-data" / "txcl.db"),
                                "--workspace", str(ws)], capture_output=True, text=True, timeout=60)
        assert f"{opc}  [0]  completed  (2 attempts)" in shown.stdout, shown.stdout + shown.stderr


# ------------------------------------------------------------------------------------------
# stacks served as MCP tools (txcl serve --mcp), called by the SDK's own client


def _client_calls(url: str, calls: list[tuple[str, dict, bool]]) -> tuple[Any, list[Any], list[tuple]]:
    """Initialize a session with `url`, list the tools, make `calls` (name, arguments, with
    progress); (tools, results, progress notifications)."""
    import asyncio

    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    progress: list[tuple] = []

    async def go():
        async with streamable_http_client(url) as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = await session.list_tools()
                results = []
                for name, arguments, with_progress in calls:
                    async def note(p, total, message):
                        progress.append((p, total, message))
                    results.append(await session.call_tool(name, arguments,
                                                           progress_callback=note if with_progress else None))
                return tools, results

    tools, results = asyncio.run(go())
    return tools, results, progress


def test_stacks_served_as_mcp_tools(serve, workspace, mcp_server):
    files = site_files(mcp_server.url)
    files["OPS/barrier/schema.json"] = json.dumps({"$defs": {
        "input": {"description": "Adds a and b with a slow friend.",
                  "properties": {"in": {"$ref": "#/$defs/pair"}}, "required": ["in"]},
        "pair": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                 "required": ["a", "b"]},
        "output": {"type": "object", "properties": {"after": {"type": "integer"}}}}})
    ws = workspace(files)
    srv = serve(ws, "--mcp", "--mcp-tools", "barrier,deferred,items,failing", "--continuation-longpoll-ms", "1500",
                "--poll-retry-after", "300ms")
    tools, results, progress = _client_calls(srv.url + "/_txc/mcp", [
        ("barrier", {"in": {"a": 20, "b": 22}}, False),
        ("deferred", {"in": {"seconds": 1.0, "tag": "via-mcp"}}, True),
        ("items", {"in": {"values": [{"value": 1, "delay": 0.4}, {"value": 2}, {"value": 3, "delay": 0.2}]}}, True),
        ("deferred", {"in": {"seconds": 4.0, "tag": "too-slow"}}, False),
        ("failing", {"in": {"message": "tool broke", "delay": 0, "pause": 0.5}}, False),
        ("barrier", {"in": {"a": "x"}}, False),
    ])
    listed = {t.name: t for t in tools.tools}
    assert set(listed) == {"barrier", "deferred", "items", "failing"}
    assert listed["barrier"].description == "Adds a and b with a slow friend."
    assert listed["barrier"].inputSchema["required"] == ["in"]
    assert listed["barrier"].inputSchema["$defs"]["pair"]["required"] == ["a", "b"]  # refs resolve
    assert listed["barrier"].outputSchema["properties"]["after"] == {"type": "integer"}
    assert listed["deferred"].outputSchema is None
    quick, deferred, items, slow, failing, invalid = results
    # a suspending flow (the barrier's async mcp+ op) is waited for; the answer is the envelope
    assert not quick.isError and quick.structuredContent["after"] == 42
    assert not deferred.isError and deferred.structuredContent["done"] == "via-mcp"
    assert not items.isError and [d["doubled"] for d in items.structuredContent["doubled"]] == [2, 4, 6]
    # progress notifications while waiting: items done of the itemized await, and the stage
    assert any(message == "waiting at deferred/300" for _, _, message in progress)
    assert any(total == 3.0 for _, total, _ in progress)
    # a client without a progress token waits --continuation-longpoll-ms, then gets the poll URL
    assert not slow.isError and slow.structuredContent["status"] == "running"
    poll_url = slow.structuredContent["poll_url"]
    assert poll_url.startswith(srv.url + "/?_txc.continuation=rc_")
    status, data = poll(srv, poll_url[len(srv.url):])
    assert status == 200 and data["done"] == "too-slow"
    # a failed flow is an isError result with the error object
    assert failing.isError and "tool broke" in failing.content[0].text
    assert json.loads(failing.content[0].text)["error"]["code"] == "txcl_join_failed"
    # arguments are checked against schema.json
    assert invalid.isError and "validation" in invalid.content[0].text.lower()


def test_mcp_endpoint_is_off_unless_asked_and_checks_its_configuration(serve, workspace, mcp_server, tmp_path):
    import subprocess

    from cont_support import TXCL

    ws = workspace(site_files(mcp_server.url))
    srv = serve(ws)
    status, _, _ = http_get(srv.url + "/_txc/mcp")
    assert status == 404
    for flags, message in (
            (["--mcp"], "name the stacks to offer as tools with --mcp-tools"),
            (["--mcp", "--mcp-tools", "barier"], "no stack 'barier' in the OPS tree (did you mean 'barrier'?)")):
        done = subprocess.run([TXCL, "serve", str(ws), "--port", "0", *flags], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
    (ws / "OPS/barrier/schema.json").write_text('{"$defs": {"input": {"type": "array"}}}')
    done = subprocess.run([TXCL, "serve", str(ws), "--port", "0", "--mcp", "--mcp-tools", "barrier"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "must describe an object" in done.stderr
    (ws / "OPS/barrier/schema.json").write_text('{"type": "object"}')
    done = subprocess.run([TXCL, "serve", str(ws), "--port", "0", "--mcp", "--mcp-tools", "barrier"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "needs $defs.input" in done.stderr
