"""The worker SDK (`txcl.worker`) served by `txcl worker serve`, driven by a real `txcl serve`:
a function's result completes the op; `raise job.Retry` is sent again under `WITH retries`;
`raise job.Fail` fails the run; progress reaches the poll answer; a cancelled run cancels the
job's task (through the cancel URL the SDK serves, and through a heartbeat); a dispatch sent
twice runs the function once."""

from __future__ import annotations

import json
import re
import subprocess
import threading

import pytest
from cont_support import TXCL, http_get, wait_until
from contworker import post_json
from testtools import EchoServer

WORKER = '''
import asyncio
from pathlib import Path

from txcl.worker import Worker

worker = Worker()
MARKS = Path(__file__).parent / "marks"
MARKS.mkdir(exist_ok=True)
attempts = {}


def mark(name):
    with open(MARKS / name, "a") as f:
        f.write("x")


@worker.op("score", input_schema={"type": "object", "required": ["text"]})
async def score(job):
    mark("score")
    await asyncio.sleep(0.05)
    return {"score": len(job.input["text"]), "op": job.op}


@worker.op("flaky")
async def flaky(job):
    attempts[job.run_id] = attempts.get(job.run_id, 0) + 1
    if attempts[job.run_id] == 1:
        raise job.Retry("warming up")
    return {"attempt": attempts[job.run_id]}


@worker.op("bad")
def bad(job):
    raise job.Fail("no can do")


@worker.op("slow")
async def slow(job):
    await job.heartbeat(progress={"done": 0.25})
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        mark("cancelled-" + job.run_id)
        raise
    return {}
'''


def tree(base: str) -> dict[str, str]:
    def rule(op: str, extra: str = "") -> str:
        return f'WHEN .op == "{op}"\nWITH mode = "async", timeout = "1m", into = "r"{extra}\nEXEC "{base}/{op}"'

    return {"OPS/shop/100/score.txcl": rule("score"),
            "OPS/shop/100/flaky.txcl": rule("flaky", ', retries = 2, retry_backoff = "100ms"'),
            "OPS/shop/100/bad.txcl": rule("bad"),
            "OPS/shop/100/slow.txcl": rule("slow", ', heartbeat = "1s"')}


@pytest.fixture
def sdk_worker(tmp_path):
    folder = tmp_path / "worker"
    folder.mkdir()
    (folder / "sdkworker.py").write_text(WORKER)
    proc = subprocess.Popen([TXCL, "worker", "serve", "sdkworker:worker", "--port", "0"], cwd=folder,
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    lines: list[str] = []
    found = threading.Event()

    def read() -> None:
        for line in proc.stderr:  # type: ignore[union-attr]
            lines.append(line)
            found.set()

    threading.Thread(target=read, daemon=True).start()
    found.wait(20)
    url = re.search(r"on (http://127\.0\.0\.1:\d+)", "".join(lines))
    assert url, "".join(lines)
    yield url.group(1), folder / "marks", lines
    proc.terminate()
    proc.wait(10)


def _finish(url: str, location: str) -> dict:
    def done():
        status, _, body = http_get(url + location + "&format=json")
        return json.loads(body) if status in (200, 502) else None
    return wait_until(done, timeout=20)


def test_results_retries_and_failures(serve, workspace, sdk_worker):
    base, marks, _ = sdk_worker
    srv = serve(workspace(tree(base)))
    answers = {op: _ask(srv.url, {"op": op, **extra})
               for op, extra in (("score", {"text": "four"}), ("flaky", {}), ("bad", {}), ("score-", {}))}
    assert answers["score"]["result"]["r"] == {"score": 4, "op": "shop/score"}
    assert answers["flaky"]["result"]["r"] == {"attempt": 2}  # Retry: sent again, the second attempt answered
    assert "no can do" in json.dumps(answers["bad"]) and "result" not in answers["bad"]
    # an input the op's schema refuses: the job fails with what did not match
    assert "does not match the op's schema" in json.dumps(answers["score-"]) and "text" in json.dumps(answers["score-"])


def _ask(url: str, body: dict) -> dict:
    """The final answer of a request: at once when the worker was quicker than the dispatch's
    end, else by polling."""
    body = {**body, "op": body["op"].rstrip("-")}
    status, answer = post_json(url + "/", body)
    if status != 202:
        return answer if status == 502 else {"result": answer}
    return _finish(url, _location(answer))


def _location(answer: dict) -> str:
    return f"/?_txc.continuation={answer['continuation']}"


def test_progress_and_cancellation(serve, workspace, sdk_worker, store_at):
    base, marks, _ = sdk_worker
    ws = workspace(tree(base))
    srv = serve(ws, "--continuation-sweep-period", "300ms")
    store = store_at(ws / ".txcl-data" / "txcl.db")
    status, answer = post_json(srv.url + "/", {"op": "slow"})
    assert status == 202
    location = _location(answer)

    def progress():
        _, _, body = http_get(srv.url + location + "&format=json", timeout=30)
        return json.loads(body).get("progress")
    seen = wait_until(progress, timeout=10)
    assert seen[0]["progress"] == {"done": 0.25}
    run_id = store.get_run_by_rcid(answer["continuation"]).run_id
    assert store.cancel_run(run_id, reason="test") == "cancelled"
    wait_until(lambda: (marks / f"cancelled-{run_id}").exists(), timeout=10)  # the job's task was cancelled
    calls = wait_until(lambda: [c for c in store.list_cancel_calls(run_id) if c["status"] == "delivered"],
                       timeout=10)
    assert calls  # through the cancel URL the SDK gave in its ack


def test_a_dispatch_sent_twice_runs_the_function_once(sdk_worker):
    base, marks, _ = sdk_worker
    callbacks = EchoServer()
    try:
        dispatch = {"input": {"text": "hi"}, "_txc": {"op_continuation_id": "opc_dup1", "run_id": "run_x",
                                                       "callback_url": callbacks.url + "/cb", "op": "shop/score"}}
        headers = {"Idempotency-Key": "opc_dup1", "X-Txco-Continuation-Token": "tok"}
        first = post_json(base + "/score", dispatch, headers=headers)
        second = post_json(base + "/score", dispatch, headers=headers)  # while it runs
        assert first[0] == 202 and first[1]["cancel_url"].endswith("/_txc/cancel/opc_dup1")
        assert second[0] == 202 and second[1]["duplicate"] is True
        wait_until(lambda: len(callbacks.received) == 1, timeout=10)
        third = post_json(base + "/score", dispatch, headers=headers)  # after it finished: the same answer again
        assert third[1]["duplicate"] is True
        wait_until(lambda: len(callbacks.received) == 2, timeout=10)
        bodies = [json.loads(raw) for _, raw in callbacks.received]
        assert bodies[0] == bodies[1] == {"status": "completed", "output": {"score": 2, "op": "shop/score"}}
        assert (marks / "score").read_text() == "x"  # the function ran once
        assert post_json(base + "/nope", dispatch)[0] == 404
        assert post_json(base + "/score", None, raw=b"not json")[0] == 400
    finally:
        callbacks.close()


def test_worker_serve_usage_errors(tmp_path):
    (tmp_path / "empty.py").write_text("from txcl.worker import Worker\nworker = Worker()\nother = 3\n")
    for target, text in (("nocolon", "name the worker as module:attribute"),
                         ("missing_module:worker", "cannot import missing_module"),
                         ("empty:other", "is not a txcl.worker.Worker"),
                         ("empty:worker", "has no ops")):
        done = subprocess.run([TXCL, "worker", "serve", target, "--port", "0"], cwd=tmp_path, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 2 and text in done.stderr and "Traceback" not in done.stderr, done.stderr
