"""`txcl dap` driven over stdio by a DAP client written here: a tree with a deferred join and
an itemized op answered by simulated workers (a test case), conditional breakpoints, hit counts,
log points, function and exception breakpoints, stepping (next, step in to a join, step out,
LOOP passes), frames, variables and evaluate, the three launch kinds, and bad input."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dap_client import DapClient

TXCL = str(Path(sys.executable).parent / "txcl")

TREE = {
    "OPS/flow/100/research.txcl": '# sent now, joined at 300\nWITH mode = "async", join_at_scope = 300, '
                                  'timeout = "1h"\nEXEC "https://w.example/research"\n',
    "OPS/flow/150/sizes.txcl": 'WHEN .items != null\nWITH mode = "async", each = .items, window = 2, '
                               'into = "sizes", timeout = "1h"\nEXEC "https://w.example/size"\n',
    "OPS/flow/200/big.txcl": 'WHEN .order.total > 100 && .order.country == "NL"\nSET .flag = true\nEMIT .big = true\n',
    "OPS/flow/200/small.txcl": "WHEN .order.total <= 100\nEMIT .big = false\n",
    "OPS/flow/300/page.txcl": "WHEN .research.done == true\nEMIT .page = .research.topic\n",
    "flow.test.yaml": """stack: flow
cases:
  - name: deferred and itemized
    input: {order: {total: 150, country: NL}, items: [a, b, c]}
    workers:
      "https://w.example/research": {after: 10m, output: {research: {done: true, topic: tides}}}
      "https://w.example/size": {each_output: {size: "{index}"}}
    expect:
      envelope: {page: tides, big: true, sizes: [{size: 0}, {size: 1}, {size: 2}]}
  - name: a small order
    input: {order: {total: 20, country: NL}}
    workers:
      "https://w.example/research": {after: 0s, output: {research: {done: true, topic: sand}}}
    expect:
      envelope: {page: sand, big: false}
""",
}


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def flow(tmp_path: Path) -> Path:
    return _write(tmp_path / "ws", TREE)


@pytest.fixture
def dap(flow: Path):
    clients: list[DapClient] = []

    def start(cwd: Path | None = None) -> DapClient:
        client = DapClient(str(cwd or flow))
        clients.append(client)
        body = client.ok("initialize", {"adapterID": "txcl", "linesStartAt1": True, "columnsStartAt1": True})
        assert body["supportsConditionalBreakpoints"] and body["supportsLogPoints"]
        assert {f["filter"] for f in body["exceptionBreakpointFilters"]} == {"opError", "exhausted", "suspend"}
        client.event("initialized")
        return client

    yield start
    for client in clients:
        client.close()


def _names(stop: dict) -> list[str]:
    return [f["name"] for f in stop["frames"]]


def test_a_session_on_a_deferred_join_and_an_itemized_op(dap, flow: Path) -> None:
    c = dap()
    c.ok("launch", {"test": "flow.test.yaml::deferred and itemized"})
    big = str(flow / "OPS/flow/200/big.txcl")
    bps = c.ok("setBreakpoints", {"source": {"path": big},
                                  "breakpoints": [{"line": 1, "condition": ".order.total > 100"}, {"line": 5}]})
    assert [b["verified"] for b in bps["breakpoints"]] == [True, False]
    assert "no clause on this line" in bps["breakpoints"][1]["message"]
    c.ok("setExceptionBreakpoints", {"filters": []})
    c.ok("configurationDone")

    # the breakpoint on big's WHEN (its condition holds): frames clause → rule → scope → stack
    stop = c.stopped()
    assert stop["reason"] == "breakpoint" and stop["hitBreakpointIds"] == [bps["breakpoints"][0]["id"]]
    assert _names(stop) == ["WHEN  flow/200/big", "flow/200/big", "flow/200", "stack flow (resumed)"]
    assert stop["top"]["source"]["path"] == big and stop["top"]["line"] == 1
    scopes = c.scopes(stop["top"]["id"])
    assert {"Conditions", "Envelope at scope entry", "Run"} <= set(scopes)
    conditions = c.value(scopes["Conditions"])
    assert conditions['.order.total > 100'] == {"value": True, "left": 150, "right": 100}
    assert conditions['.order.country == "NL"']["value"] is True and conditions["(WHEN holds)"] is True
    envelope = c.variables(scopes["Envelope at scope entry"])
    assert envelope["sizes"]["evaluateName"] == ".sizes"  # the itemized op's answers, joined in item order
    assert c.value(envelope["sizes"]["variablesReference"]) == {"[0]": {"size": 0}, "[1]": {"size": 1},
                                                               "[2]": {"size": 2}}
    run = c.value(scopes["Run"])
    assert run["fuel left"] > 0 and run["TTL left"] > 0 and run["outstanding joins"]  # research not joined yet

    # evaluate in the frame: an expression gives what `txcl eval` gives, a condition true/false
    answer = c.ok("evaluate", {"expression": '&concat("to ", .order.country)', "frameId": stop["top"]["id"]})
    done = subprocess.run([TXCL, "eval", '&concat("to ", .order.country)', "--input",
                           json.dumps({"order": {"country": "NL"}}), "--compact"],
                          capture_output=True, text=True, timeout=60)
    assert json.loads(answer["result"]) == json.loads(done.stdout) == "to NL"
    assert c.ok("evaluate", {"expression": ".order.total <= 100", "frameId": 1})["result"] == "false"
    bad = c.request("evaluate", {"expression": ".order.total >", "frameId": 1})
    assert not bad["success"] and "neither an expression nor a condition" in bad["message"]

    # next: the next rule's WHEN (false), then big's SET (its op input), then its EMIT (its answer)
    c.ok("next", {"threadId": 1})
    stop = c.stopped()
    assert stop["reason"] == "step" and stop["top"]["name"] == "WHEN  flow/200/small"
    assert c.value(c.scopes(stop["top"]["id"])["Conditions"])[".order.total <= 100"]["value"] is False
    c.ok("next", {"threadId": 1})
    stop = c.stopped()
    assert stop["top"]["name"] == "SET  flow/200/big" and stop["top"]["line"] == 2
    c.ok("next", {"threadId": 1})
    stop = c.stopped()
    assert stop["top"]["name"] == "EMIT  flow/200/big"
    answer = c.value(c.scopes(stop["top"]["id"])["Answer"])
    assert answer["output (after EMIT)"]["big"] is True

    # step out: the next scope's entry (300 is the join: the run suspends first, then resumes there)
    c.ok("stepOut", {"threadId": 1})
    stop = c.stopped()
    assert stop["reason"] == "step" and _names(stop)[0] == "flow/300"
    envelope = c.value(c.scopes(stop["frames"][0]["id"])["Envelope at scope entry"])
    assert envelope["research"] == {"done": True, "topic": "tides"}  # merged before the join scope's WHEN

    c.ok("continue", {"threadId": 1})
    assert c.event("exited")["body"]["exitCode"] == 0
    c.event("terminated")
    assert "the case passed" in c.output()


def test_hit_counts_log_points_and_a_false_condition(dap, flow: Path) -> None:
    c = dap()
    c.ok("launch", {"test": "flow.test.yaml::deferred and itemized"})
    page = str(flow / "OPS/flow/300/page.txcl")
    big = str(flow / "OPS/flow/200/big.txcl")
    c.ok("setBreakpoints", {"source": {"path": big}, "breakpoints": [
        {"line": 1, "condition": ".order.total > 1000"},  # never holds
        {"line": 3, "logMessage": "big answers for {.order.country} ({{total}} {.order.total})"}]})
    c.ok("setBreakpoints", {"source": {"path": page}, "breakpoints": [{"line": 2, "hitCondition": "2"}]})
    c.ok("configurationDone")
    # page's EMIT is reached once only: its hit count (the 2nd hit) never comes; nothing stops
    assert c.event("exited")["body"]["exitCode"] == 0
    c.event("terminated")
    assert "big answers for NL ({total} 150)" in c.output()
    assert not [e for e in c.events if e["event"] == "stopped"]


def test_bad_conditions_and_hit_counts_are_unverified_with_the_reason(dap, flow: Path) -> None:
    c = dap()
    c.ok("launch", {"test": "flow.test.yaml::a small order"})
    big = str(flow / "OPS/flow/200/big.txcl")
    body = c.ok("setBreakpoints", {"source": {"path": big}, "breakpoints": [
        {"line": 1, "condition": ".order.total >"}, {"line": 2, "hitCondition": "often"}]})
    first, second = body["breakpoints"]
    assert not first["verified"] and "TX0" in first["message"]
    assert not second["verified"] and "hit count" in second["message"]
    body = c.ok("setBreakpoints", {"source": {"path": str(flow / "flow.test.yaml")}, "breakpoints": [{"line": 1}]})
    assert not body["breakpoints"][0]["verified"]
    body = c.ok("setFunctionBreakpoints", {"breakpoints": [{"name": "flow/200"}, {"name": "flow/999"},
                                                           {"name": "nope/1"}, {"name": "flow/200/big"}]})
    assert [b["verified"] for b in body["breakpoints"]] == [True, False, False, True]
    assert "no scope 999" in body["breakpoints"][1]["message"]
    c.ok("configurationDone")
    stop = c.stopped()  # flow/200's entry (function breakpoint)
    assert stop["reason"] == "function breakpoint" and _names(stop)[0] == "flow/200"
    rules = c.value(c.scopes(stop["top"]["id"])["Rules"])
    assert rules["big"]["verdict"] == "WHEN false" and rules["small"]["verdict"] == "runs"
    c.ok("continue", {"threadId": 1})
    stop = c.stopped()  # flow/200/big: its first clause (the WHEN)
    assert stop["reason"] == "function breakpoint" and stop["top"]["name"] == "WHEN  flow/200/big"
    c.ok("continue", {"threadId": 1})
    assert c.event("exited")["body"]["exitCode"] == 0


def test_step_in_from_an_async_exec_stops_where_its_answer_joins(dap, flow: Path) -> None:
    c = dap()
    c.ok("launch", {"test": "flow.test.yaml::deferred and itemized", "stopOnEntry": True})
    c.ok("configurationDone")
    stop = c.stopped()
    assert stop["reason"] == "step" and _names(stop) == ["flow/100", "stack flow"]
    c.ok("next", {"threadId": 1})
    assert c.stopped()["top"]["name"] == "WITH  flow/100/research"
    c.ok("next", {"threadId": 1})
    stop = c.stopped()  # research's EXEC: sent, answered later at 300
    assert stop["top"]["name"] == "EXEC  flow/100/research" and stop["top"]["line"] == 3
    scopes = c.scopes(stop["top"]["id"])
    answer = c.value(scopes["Answer"])
    assert answer["joins at scope"] == 300
    assert c.value(scopes["Run"])["async ops sent from this scope"] == {"[0]": "flow/100/research"}
    c.ok("stepIn", {"threadId": 1})
    stop = c.stopped()
    assert _names(stop)[0] == "flow/300" and stop["frames"][-1]["name"] == "stack flow (resumed)"
    c.ok("continue", {"threadId": 1})
    assert c.event("exited")["body"]["exitCode"] == 0


def test_exception_breakpoints_suspend_and_op_error(dap, flow: Path) -> None:
    _write(flow, {"OPS/flow/250/fails.txcl": 'EXEC "https://w.example/not-mocked"\n'})
    c = dap()
    c.ok("launch", {"workspace": str(flow), "stack": "flow", "input": {"order": {"total": 5}},
                    "workers": {"https://w.example/research": {"after": "1m", "output": {"research": {"done": True}}}}})
    c.ok("setExceptionBreakpoints", {"filters": ["suspend", "opError"]})
    c.ok("configurationDone")
    stop = c.stopped()  # the http op is neither mocked nor allowed to reach the network
    assert stop["reason"] == "exception" and "flow/250/fails" in stop["text"]
    answer = c.value(c.scopes(stop["top"]["id"])["Answer"])
    assert answer["status"] == "error" and "not mocked" in answer["error"]
    c.ok("continue", {"threadId": 1})
    stop = c.stopped()  # at 300 the run waits for research's answer
    assert stop["reason"] == "exception" and "suspended" in stop["text"]
    c.ok("continue", {"threadId": 1})
    c.event("terminated")


def test_loop_passes_are_stepped_into(dap, tmp_path: Path) -> None:
    ws = _write(tmp_path / "loopws", {
        "OPS/poll/100/wait.txcl": 'EXEC "py://dbgloop:count"\nLOOP UNTIL .n >= 3 SET .n = .n EVERY 1 MAX 5\n',
        "dbgloop.py": "def count(inp, ctx):\n    return {'n': inp.get('n', 0) + 1}\n",
    })
    c = dap(ws)
    c.ok("launch", {"workspace": str(ws), "input": {"n": 0}})
    c.ok("setBreakpoints", {"source": {"path": str(ws / "OPS/poll/100/wait.txcl")}, "breakpoints": [{"line": 1}]})
    c.ok("configurationDone")
    stop = c.stopped()
    assert stop["top"]["name"] == "EXEC  poll/100/wait"
    passes = []
    for _ in range(3):
        c.ok("stepIn", {"threadId": 1})
        stop = c.stopped()
        if not stop["top"]["name"].startswith("LOOP"):
            break
        passes.append(c.value(c.scopes(stop["top"]["id"])["LOOP pass"])["pass"])
    assert passes == [1, 2, 3]
    c.ok("continue", {"threadId": 1})
    c.event("exited")
    assert '"n": 3' in c.output()


def test_bad_launches_are_refused_with_the_reason(dap, flow: Path) -> None:
    c = dap()
    for args, words in [({"test": "flow.test.yaml::nothing like it"}, "has no case"),
                        ({"test": "missing.test.yaml::x"}, "cannot read the test file"),
                        ({"test": "flow.test.yaml"}, "name the case"),
                        ({"stack": "nope"}, "no stack 'nope'"),
                        ({"input": [1]}, "must be a JSON object"),
                        ({"trace": "r-none"}, "")]:
        response = c.request("launch", args)
        assert not response["success"] and words in response["message"], (args, response)
    response = c.request("configurationDone")
    assert not response["success"] and "launch first" in response["message"]
    assert c.request("stackTrace", {"threadId": 1})["body"]["stackFrames"] == []
    assert not c.request("next", {"threadId": 1})["success"]
    assert not c.request("bogus")["success"]


def test_a_stored_request_is_debugged_with_its_recorded_answers(dap, tmp_path: Path) -> None:
    ws = _write(tmp_path / "recws", {
        "OPS/shop/100/price.txcl": 'SELECT .qty\nEXEC "py://recops:price"\n',
        "OPS/shop/200/flag.txcl": "WHEN .price > 10\nEMIT .expensive = true\n",
        "recops.py": "def price(inp, ctx):\n    open(__file__ + '.called', 'a').write('x')\n"
                     "    return {'price': inp.get('qty', 1) * 7}\n",
    })
    done = subprocess.run([TXCL, "run", ".", "--input", json.dumps({"qty": 2}), "--trace-ops", "answers"],
                          cwd=ws, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    (ws / "recops.py.called").unlink()
    c = dap(ws)
    c.ok("launch", {"workspace": str(ws), "trace": "last"})
    c.ok("setBreakpoints", {"source": {"path": str(ws / "OPS/shop/200/flag.txcl")},
                            "breakpoints": [{"line": 1}]})
    c.ok("configurationDone")
    stop = c.stopped()
    assert stop["top"]["name"] == "WHEN  shop/200/flag"
    conditions = c.value(c.scopes(stop["top"]["id"])["Conditions"])
    assert conditions[".price > 10"] == {"value": True, "left": 14, "right": 10}
    c.ok("continue", {"threadId": 1})
    assert c.event("exited")["body"]["exitCode"] == 0
    assert '"expensive": true' in c.output()
    assert not (ws / "recops.py.called").exists()  # answered from the recording, not called


def test_disconnect_while_stopped_ends_the_walk(dap, flow: Path) -> None:
    c = dap()
    c.ok("launch", {"test": "flow.test.yaml::a small order", "stopOnEntry": True})
    c.ok("configurationDone")
    c.stopped()
    c.ok("disconnect", {})
    assert c.proc.wait(30) == 0


def test_garbage_on_the_wire_ends_the_session_without_a_traceback(flow: Path) -> None:
    done = subprocess.run([TXCL, "dap"], cwd=flow, input=b"Content-Length: nope\r\n\r\n{}", capture_output=True,
                          timeout=60)
    assert done.returncode == 2
    assert b"Traceback" not in done.stderr and b"Content-Length" in done.stderr


def test_a_session_over_tcp(flow: Path) -> None:
    proc = subprocess.Popen([TXCL, "dap", "--port", "0"], cwd=flow, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        port = int(line.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            body = json.dumps({"seq": 1, "type": "request", "command": "initialize", "arguments": {}}).encode()
            sock.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            data = b""
            deadline = time.monotonic() + 30
            while b"initialized" not in data and time.monotonic() < deadline:
                data += sock.recv(65536)
            assert b'"supportsConfigurationDoneRequest": true' in data and b'"initialized"' in data
    finally:
        proc.wait(30)


def test_a_rule_files_debug_lens_launches_and_stops_at_its_rule(dap, flow: Path) -> None:
    """The language server's "Debug" lens above a rule file gives a launch configuration that
    stops at that rule (`stopAt`)."""
    from txcl.lsp.lenses import rule_lenses

    _write(flow, {"OPS/flow/200/mock-request.json": json.dumps({"order": {"total": 500, "country": "NL"}})})
    debug = next(lens for lens in rule_lenses(str(flow / "OPS/flow/200/big.txcl")) if lens.title == "Debug")
    launch = dict(debug.arguments[0])
    assert launch["stopAt"] == ["flow/200/big"]
    launch["workers"] = {"https://w.example/research": {"after": "0s", "output": {"research": {"done": True}}}}
    c = dap()
    c.ok("launch", launch)
    c.ok("setFunctionBreakpoints", {"breakpoints": []})  # the client's own list does not drop stopAt
    c.ok("configurationDone")
    stop = c.stopped()
    assert stop["reason"] == "function breakpoint" and stop["top"]["name"] == "WHEN  flow/200/big"
    c.ok("continue", {"threadId": 1})
    assert c.event("exited")["body"]["exitCode"] == 0
    bad = dap().request("launch", {**launch, "stopAt": "flow/200"})
    assert not bad["success"] and "stopAt" in bad["message"]


def test_pause_stops_a_running_walk_and_terminate_ends_it(dap, tmp_path: Path) -> None:
    ws = _write(tmp_path / "slowws", {
        "OPS/poll/100/wait.txcl": 'EXEC "py://dbgslow:tick"\nLOOP UNTIL .n >= 50 SET .n = .n EVERY 1 MAX 60\n',
        "dbgslow.py": "import time\nfrom pathlib import Path\n\ndef tick(inp, ctx):\n"
                      "    with open(Path(__file__).with_name('ticks'), 'a') as f:\n        f.write('x')\n"
                      "    time.sleep(0.05)\n    return {'n': inp.get('n', 0) + 1}\n",
    })
    c = dap(ws)
    c.ok("launch", {"workspace": str(ws), "input": {"n": 0}})
    c.ok("configurationDone")
    ticks = ws / "ticks"
    deadline = time.monotonic() + 60
    while (not ticks.exists() or len(ticks.read_text()) < 2) and time.monotonic() < deadline:
        time.sleep(0.02)  # the loop is under way (its second pass has begun)
    c.ok("pause", {"threadId": 1})
    stop = c.stopped()
    assert stop["reason"] == "pause" and stop["top"]["name"].startswith("LOOP pass")
    first = c.value(c.scopes(stop["top"]["id"])["LOOP pass"])["pass"]
    assert 1 <= first < 50
    c.ok("terminate", {})
    c.event("terminated")
    assert not any(e["event"] == "exited" and e["body"]["exitCode"] == 0 for e in c.events)  # it did not finish
