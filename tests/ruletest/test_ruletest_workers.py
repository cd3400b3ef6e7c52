"""Simulated async workers on the virtual clock: answers in time order, never, too late (the
run expires), duplicates and conflicts answered as the callback endpoint answers them, a worker
that never acks, itemized answers out of order, a deferred join."""

from __future__ import annotations

import json

import pytest

from txcl.ruletest.runner import run_case
from txcl.ruletest.spec import parse_test_text

WORKER = "https://w.example/start"
TREE = {
    "OPS/flow/100/ask.txcl": f'WITH mode = "async", timeout = "1h", into = "answer"\nEXEC "{WORKER}"',
    "OPS/flow/200/after.txcl": 'EMIT .done_at = &now("rfc3339"), .done = true',
}


def _case(root, text: str):
    from txcl.ops.tree import load_ops
    from txcl.runtime.config import Settings

    test_file, diags = parse_test_text(root / "x.test.yaml", "stack: flow\ncases:\n" + text)
    assert test_file is not None, [d.render() for d in diags]
    return test_file.cases[0], load_ops(root), Settings()


def _run(ws, text: str, files=None):
    root = ws({**TREE, **(files or {})})
    case, tree, settings = _case(root, text)
    return run_case(case, tree, settings, "flow")


def test_the_callback_arrives_after_virtual_time_and_the_run_completes(ws) -> None:
    run = _run(ws, f"""
  - name: late answer
    clock: "2026-05-01T10:00:00Z"
    input: {{}}
    workers:
      "{WORKER}": {{after: 45m, output: {{ok: 1}}}}
""")
    assert run.status == "completed"
    assert run.envelope["answer"] == {"ok": 1}
    assert run.envelope["done_at"] == "2026-05-01T10:45:00Z"  # &now after 45 virtual minutes
    assert [(d.kind, d.answer[0]) for d in run.deliveries] == [("callback", 200)]
    assert run.duration_ms < 10_000  # no real waiting (a generous bound: virtual time is instant)


def test_a_worker_that_never_answers_leaves_the_run_suspended(ws) -> None:
    run = _run(ws, f"""
  - name: silent
    input: {{}}
    workers:
      "{WORKER}": {{after: never}}
""")
    assert run.status == "suspended" and run.deliveries == []


def test_an_answer_after_the_deadline_finds_the_run_expired(ws) -> None:
    run = _run(ws, f"""
  - name: too late
    input: {{}}
    workers:
      "{WORKER}": {{after: 2h, output: {{ok: 1}}}}
""")
    assert run.status == "failed"
    assert run.error["code"] == "txcl_run_expired"
    assert run.deliveries[0].answer[0] == 410  # the callback endpoint's answer: gone


def test_duplicates_and_a_conflict_get_the_production_answers(ws) -> None:
    run = _run(ws, f"""
  - name: noisy worker
    input: {{}}
    workers:
      "{WORKER}": {{after: 1m, output: {{ok: 1}}, duplicate: 1, conflicting: {{ok: 2}}}}
""")
    assert run.status == "completed" and run.envelope["answer"] == {"ok": 1}
    answers = [(d.kind, d.answer[0], d.answer[1]) for d in run.deliveries]
    assert answers[0] == ("callback", 200, {"status": "resumed"})
    assert answers[1] == ("duplicate", 200, {"status": "recorded", "duplicate": True})
    assert answers[2][0:2] == ("conflicting", 409)
    assert answers[2][2]["error"]["code"] == "txcl_conflicting_completion"


def test_a_failed_answer_and_a_worker_that_never_acks(ws) -> None:
    failed = _run(ws, f"""
  - name: refuses
    input: {{}}
    workers:
      "{WORKER}": {{after: 1s, status: failed, error: {{message: "no capacity"}}}}
""")
    assert failed.status == "failed"  # the op the stage waited on failed: so does the run
    assert "no capacity" in json.dumps(failed.error)
    no_ack = _run(ws, f"""
  - name: no ack
    input: {{}}
    workers:
      "{WORKER}": {{ack: false}}
""")
    assert no_ack.status == "failed"  # as with a real worker whose 202 never comes (and at once)
    assert "async worker https://w.example/start: no answer within" in no_ack.error["message"]
    assert no_ack.duration_ms < 4_000


def test_itemized_answers_out_of_order_are_joined_in_item_order(ws) -> None:
    files = {"OPS/flow/100/ask.txcl": f'WITH mode = "async", each = .items, window = 2, into = "results", '
                                      f'timeout = "1h"\nEXEC "{WORKER}"'}
    run = _run(ws, f"""
  - name: out of order
    input: {{items: [a, b, c, d]}}
    workers:
      "{WORKER}":
        - {{after: 40s, output: {{n: 0}}}}
        - {{after: 10s, output: {{n: 1}}}}
        - {{after: 5s, output: {{n: 2}}}}
        - {{after: 1s, output: {{n: 3}}}}
""", files)
    assert run.status == "completed"
    assert run.envelope["results"] == [{"n": 0}, {"n": 1}, {"n": 2}, {"n": 3}]
    # window 2: items 2 and 3 were dispatched only as earlier ones finished
    assert [d.body["output"]["n"] for d in run.deliveries] == [1, 2, 3, 0]


def test_each_output_fills_the_item_and_its_index(ws) -> None:
    files = {"OPS/flow/100/ask.txcl": f'WITH mode = "async", each = .items, into = "results", timeout = "1h"\n'
                                      f'EXEC "{WORKER}"'}
    run = _run(ws, f"""
  - name: template
    input: {{items: [{{sku: a}}, {{sku: b}}]}}
    workers:
      "{WORKER}": {{each_output: {{item: "{{item}}", i: "{{index}}", label: "item {{index}}"}}}}
""", files)
    assert run.envelope["results"] == [{"item": {"sku": "a"}, "i": 0, "label": "item 0"},
                                       {"item": {"sku": "b"}, "i": 1, "label": "item 1"}]


@pytest.mark.parametrize("after,merged_in_request", [("0s", True), ("10m", False)])
def test_a_deferred_join_merges_early_or_resumes_at_the_join(ws, after: str, merged_in_request: bool) -> None:
    files = {
        "OPS/flow/100/ask.txcl": f'WITH mode = "async", join_at_scope = 300, timeout = "1h"\nEXEC "{WORKER}"',
        "OPS/flow/200/after.txcl": 'EXEC "py://slow:work"',
        "OPS/flow/300/use.txcl": "WHEN .research.done == true\nEMIT .page = .research.topic",
        "slow.py": "import asyncio\n\nasync def work(op_input, ctx):\n    await asyncio.sleep(0.05)\n"
                   "    return {'middle': True}\n",
    }
    run = _run(ws, f"""
  - name: deferred
    input: {{}}
    workers:
      "{WORKER}": {{after: {after}, output: {{research: {{done: true, topic: tides}}}}}}
""", files)
    assert run.status == "completed", run.error
    assert run.envelope["page"] == "tides" and run.envelope["middle"] is True
    assert run.deliveries[0].answer[1]["status"] == ("recorded" if merged_in_request else "resumed")


MCP = "mcp+https://tools.example.net/mcp"
MCP_TREE = {
    "OPS/flow/100/count.txcl": f'SELECT .text\nWITH into = "count"\nEXEC "{MCP}#word_count"',
    "OPS/flow/200/translate.txcl": f'SELECT .text\nWITH mode = "async", join_at_scope = 400, into = "tr", '
                                   f'timeout = "5m"\nEXEC "{MCP}#translate"',
    "OPS/flow/300/score.txcl": f'WITH mode = "async", each = .items, window = 2, into = "scores"\n'
                               f'EXEC "{MCP}#score"',
    "OPS/flow/400/page.txcl": 'EMIT .page = &concat(.count.words, " ", .tr.text)',
}


def test_mcp_tools_are_stood_in_sync_async_and_itemized(ws) -> None:
    """txcl calls MCP tools itself; in a test their answers come from `mocks:`/`workers:` on the
    virtual clock, and nothing reaches the network."""
    root = ws(MCP_TREE)
    case, tree, settings = _case(root, f"""
  - name: tools
    input: {{text: "a b c", items: [{{t: 1}}, {{t: 2}}]}}
    mocks:
      "{MCP}#word_count": {{output: {{words: 3}}}}
    workers:
      "{MCP}#translate": {{after: 2m, output: {{text: "c b a"}}}}
      "{MCP}#score": {{after: 10s, each_output: {{got: "{{item}}"}}}}
""")
    run = run_case(case, tree, settings, "flow")
    assert run.status == "completed", run.error
    assert run.envelope["page"] == "3 c b a"
    assert run.envelope["scores"] == [{"got": {"t": 1}}, {"got": {"t": 2}}]
    assert run.refused == []
    assert sorted((c.target.rsplit("#", 1)[1], c.kind) for c in run.calls) == [
        ("score", "worker"), ("score", "worker"), ("translate", "worker"), ("word_count", "mock")]


def test_an_unmocked_mcp_tool_is_refused_not_called(ws) -> None:
    root = ws(MCP_TREE)
    case, tree, settings = _case(root, """
  - name: nothing mocked
    input: {text: "a b c", items: []}
""")
    run = run_case(case, tree, settings, "flow")
    assert f"{MCP}#word_count" in run.refused and f"{MCP}#translate" in run.refused
    assert run.status == "failed" and "not mocked" in json.dumps(run.error)


QUEUE_TREE = {
    "OPS/flow/100/resize.txcl": 'WITH mode = "async", into = "r"\nEXEC "queue://resize"',
    "OPS/flow/200/thumbs.txcl": 'WITH mode = "async", each = .pics, window = 2, into = "t"\nEXEC "nats://img.thumbs"',
}


def test_queue_and_nats_jobs_are_answered_by_simulated_workers(ws) -> None:
    """queue:// and nats:// jobs are taken by nobody in a test: `workers:` answers them, keyed
    by the target, on the virtual clock."""
    root = ws(QUEUE_TREE)
    case, tree, settings = _case(root, """
  - name: pulled
    input: {pics: [a, b, c]}
    workers:
      "queue://resize": {after: 30s, output: {size: 2}}
      "nats://img.thumbs": {after: 5s, each_output: {thumb: "{item}"}}
""")
    run = run_case(case, tree, settings, "flow")
    assert run.status == "completed", run.error
    assert run.envelope["r"] == {"size": 2}
    assert run.envelope["t"] == [{"thumb": "a"}, {"thumb": "b"}, {"thumb": "c"}]
    assert sorted(c.target for c in run.calls) == [*["nats://img.thumbs"] * 3, "queue://resize"]


def test_a_queue_without_simulated_workers_fails_with_a_clear_message(ws) -> None:
    root = ws(QUEUE_TREE)
    case, tree, settings = _case(root, """
  - name: nobody claims
    input: {pics: []}
""")
    run = run_case(case, tree, settings, "flow", allow_network=True)
    assert run.refused == ["queue://resize"]
    assert run.status == "failed" and "nothing claims the jobs of queue://resize" in json.dumps(run.error)
