"""`mcp+http://` ops, synchronous, against a real MCP server (FastMCP on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest


from txcl.runtime.budget import DISPATCH_FUEL
from txcl.runtime.interpreter import Completed
from txcl.testing.mcp_server import McpServerProcess

TXCL = str(Path(sys.executable).parent / "txcl")


@pytest.fixture(scope="module")
def mcp_server(tmp_path_factory):
    calls = tmp_path_factory.mktemp("mcp") / "calls.jsonl"
    with McpServerProcess(calls=str(calls)) as server:
        yield server


def _steps(store, outcome):
    return {s["name"]: s for s in store.get_trace(outcome.rid).steps}


def test_structured_result_is_the_op_output(workspace, run_tree, mcp_server):
    ws = workspace({
        "OPS/s/0100/add.txcl": f'SELECT .a, .b\nEXEC "mcp+{mcp_server.url}#add"\nEMIT .total = .sum',
    })
    outcome, store = run_tree(ws, {"a": 2, "b": 40})
    assert isinstance(outcome, Completed)
    assert outcome.envelope["sum"] == 42 and outcome.envelope["total"] == 42
    step = _steps(store, outcome)["add"]
    assert step["status"] == "ok" and step["transport"] == "mcp"


def test_arguments_are_the_selected_input_without_txc(workspace, run_tree, mcp_server):
    ws = workspace({
        "OPS/s/0100/echo.txcl": f'SELECT .message\nWITH into = "echoed"\nEXEC "mcp+{mcp_server.url}#echo"',
    })
    outcome, _ = run_tree(ws, {"message": "hello", "secret": "not sent"})
    assert outcome.envelope["echoed"] == {"message": "hello", "extra": {}}
    last = [c for c in mcp_server.calls() if c["tool"] == "echo"][-1]
    assert last["arguments"] == {"message": "hello"}


def test_plain_text_answer_becomes_text(workspace, run_tree, mcp_server):
    ws = workspace({
        "OPS/s/0100/shout.txcl": f'SELECT .text\nEXEC "mcp+{mcp_server.url}#shout"\nEMIT .loud = .text',
    })
    outcome, _ = run_tree(ws, {"text": "hey"})
    assert outcome.envelope["loud"] == "HEY!"


def test_tool_error_is_an_op_error_with_the_servers_message(workspace, run_tree, mcp_server):
    ws = workspace({
        "OPS/s/0100/fail.txcl": f'SELECT .message\nEXEC "mcp+{mcp_server.url}#fail"\nEMIT .reached = true',
        "OPS/s/0200/after.txcl": "EMIT .after = true",
    })
    outcome, store = run_tree(ws, {"message": "disk on fire"})
    assert "reached" not in outcome.envelope and outcome.envelope["after"] is True  # best effort
    step = _steps(store, outcome)["fail"]
    assert step["status"] == "error" and "disk on fire" in step["error"]
    assert step["error"].startswith(f"mcp {mcp_server.url}#fail:")


def test_unknown_tool_and_unreachable_server_are_op_errors(workspace, run_tree, mcp_server):
    ws = workspace({
        "OPS/s/0100/nope.txcl": f'EXEC "mcp+{mcp_server.url}#no_such_tool"',
        "OPS/s/0100/down.txcl": 'EXEC "mcp+http://127.0.0.1:9/mcp#add"',
        "OPS/s/0100/notmcp.txcl": f'EXEC "mcp+{mcp_server.url.rsplit("/", 1)[0]}/elsewhere#add"',
    })
    outcome, store = run_tree(ws, {})
    steps = _steps(store, outcome)
    assert "has no tool \"no_such_tool\" (it lists: add," in steps["nope"]["error"]
    assert "cannot connect" in steps["down"]["error"]
    assert "404" in steps["notmcp"]["error"]


def test_timeout_applies(workspace, run_tree, mcp_server):
    ws = workspace({
        "OPS/s/0100/slow.txcl": f'SELECT .seconds\nWITH timeout = "300ms"\nEXEC "mcp+{mcp_server.url}#slow"',
    })
    outcome, store = run_tree(ws, {"seconds": 3})
    step = _steps(store, outcome)["slow"]
    assert step["status"] == "timeout" and "300ms" in step["error"]


def test_exec_charges_fuel_like_any_sync_op(workspace, run_tree, mcp_server):
    ws = workspace({"OPS/s/0100/add.txcl": f'SELECT .a, .b\nEXEC "mcp+{mcp_server.url}#add"'})
    plain = workspace({"OPS/s/0100/add.txcl": 'SELECT .a, .b\nEXEC "txco://noop"'})
    with_mcp, _ = run_tree(ws, {"a": 1, "b": 1})
    without, _ = run_tree(plain, {"a": 1, "b": 1})
    assert with_mcp.fuel_used == without.fuel_used  # the same per-EXEC charge as txco://
    assert with_mcp.fuel_used >= DISPATCH_FUEL


def test_headers_are_sent(workspace, run_tree, mcp_server, tmp_path):
    # a header the server would refuse shows that WITH headers.* reach it: a Host it does not
    # allow (DNS-rebinding protection of the SDK) answers 421
    ws = workspace({
        "OPS/s/0100/add.txcl": f'SELECT .a, .b\nWITH headers.Host = "evil.example"\n'
                               f'EXEC "mcp+{mcp_server.url}#add"',
    })
    outcome, store = run_tree(ws, {"a": 1, "b": 2})
    assert "sum" not in outcome.envelope
    assert "421" in _steps(store, outcome)["add"]["error"]


def test_sessions_are_reused_per_server(mcp_server):
    from txcl.mcpclient import McpClients

    async def go():
        clients = McpClients()
        try:
            for i in range(5):
                assert await clients.call(mcp_server.url, "add", {"a": i, "b": 1}) == {"sum": i + 1}
            assert len(clients._sessions) == 1
            first = next(iter(clients._sessions.values()))
            await clients.call(mcp_server.url, "add", {"a": 0, "b": 0}, headers={"X-Tenant": "a"})
            assert len(clients._sessions) == 2  # another header set is another session
            assert first in clients._sessions.values()
        finally:
            await clients.aclose()

    asyncio.run(go())


def test_txcl_run_prints_the_tool_result(tmp_path, mcp_server):
    ws = tmp_path / "ws"
    (ws / "OPS/s/0100").mkdir(parents=True)
    (ws / "OPS/s/0100/add.txcl").write_text(f'SELECT .a, .b\nEXEC "mcp+{mcp_server.url}#add"\n')
    done = subprocess.run([TXCL, "run", str(ws), "--input", '{"a": 20, "b": 22}', "--compact"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["sum"] == 42


def test_txcl_run_finishes_async_mcp_calls_itself(tmp_path, mcp_server):
    """No worker will call back: txcl is the one calling the tool, so `txcl run` waits for it,
    resumes the run and prints the result (exit 0, not 3 'waiting')."""
    ws = tmp_path / "ws"
    files = {
        "OPS/s/0100/slow.txcl": f'SELECT .seconds\nWITH mode = "async", join_at_scope = 300, into = "r"\n'
                                f'EXEC "mcp+{mcp_server.url}#slow"',
        "OPS/s/0200/between.txcl": "EMIT .between = true",
        "OPS/s/0300/use.txcl": "EMIT .done = .r.slept",
    }
    for rel, text in files.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text + "\n")
    done = subprocess.run([TXCL, "run", str(ws), "--input", '{"seconds": 0.5}', "--compact"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["done"] == 0.5
    assert "never retrieved" not in done.stderr and "Traceback" not in done.stderr


def test_a_misspelled_tool_gets_a_did_you_mean_and_bad_arguments_name_their_fields(workspace, run_tree, mcp_server):
    """Checked against the tools the server lists, before the call: a near miss is suggested,
    and arguments the tool's input schema refuses are named field by field (the server's own
    answer is a Pydantic text without them); nothing is sent for either."""
    ws = workspace({
        "OPS/s/0100/typo.txcl": f'SELECT .x AS .a, .y AS .b\nEXEC "mcp+{mcp_server.url}#ad"',
        "OPS/s/0100/wrong.txcl": f'SELECT .s AS .a\nEXEC "mcp+{mcp_server.url}#add"',
    })
    outcome, store = run_tree(ws, {"x": 1, "y": 2, "s": "seven"})
    steps = _steps(store, outcome)
    assert 'has no tool "ad" (did you mean "add"?)' in steps["typo"]["error"]
    error = steps["wrong"]["error"]
    assert "do not match the tool's input schema" in error
    assert 'a: "seven" is not of type "integer"' in error and '"b" is a required property' in error
    assert not [c for c in mcp_server.calls() if c["arguments"].get("a") == "seven"]  # never sent
