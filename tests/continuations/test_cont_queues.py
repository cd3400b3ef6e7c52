"""Pull queues served by a real `txcl serve` on both backends: a worker written with the SDK
pulls the jobs of a `queue://` op (`txcl worker pull`, no port of its own) and the requests
resume with its answers, itemized too; claims over plain HTTP follow the documented contract
(auth, long poll, lease, 400/403/405); an expired lease puts the job back under WITH retries
and fails the op without; a cancelled job's heartbeat is answered 410; two serve processes
sharing the database hand each job out once."""

from __future__ import annotations

import json
import subprocess
import threading
import time

import pytest
from cont_support import TXCL, http_get, wait_until
from contworker import post_json

TOKEN = "queue-token-0123456789"

WORKER = '''
import asyncio
from pathlib import Path

from txcl.worker import Worker

worker = Worker()
SEEN = Path(__file__).parent / "seen"
SEEN.mkdir(exist_ok=True)


def mark(job):
    """One file per job run; a second run of the same job leaves a `.again` beside it."""
    path = SEEN / job.opc
    (SEEN / (job.opc + ".again") if path.exists() else path).write_text("x")


@worker.op("resize")
async def resize(job):
    mark(job)
    await asyncio.sleep(0.02)
    return {"size": job.input["w"] * 2}


@worker.op("thumbs")
async def thumbs(job):
    mark(job)
    return {"thumb": job.input, "i": job.item_index}
'''


def tree(with_: str = 'mode = "async", timeout = "1m"') -> dict[str, str]:
    return {
        "OPS/img/100/resize.txcl": f'WHEN .w > 0\nWITH {with_}, into = "r"\nEXEC "queue://resize"',
        "OPS/img/100/thumbs.txcl": f'WHEN .pics != null\nWITH {with_}, each = .pics, window = 2, into = "t"\n'
                                   'EXEC "queue://thumbs"',
        "OPS/img/200/after.txcl": "EMIT .done = true",
    }


@pytest.fixture
def pull_worker(tmp_path):
    folder = tmp_path / "puller"
    folder.mkdir()
    (folder / "imgworker.py").write_text(WORKER)
    procs: list[subprocess.Popen] = []

    def start(server: str, *flags: str) -> subprocess.Popen:
        proc = subprocess.Popen([TXCL, "worker", "pull", "imgworker:worker", "--server", server, "--wait", "2",
                                 *flags], cwd=folder, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        procs.append(proc)
        return proc

    yield start, folder / "seen"
    for proc in procs:
        proc.terminate()
        proc.wait(15)


def _final(url: str, answer: dict) -> dict:
    location = f"/?_txc.continuation={answer['continuation']}&format=json"

    def done():
        status, _, body = http_get(url + location)
        return json.loads(body) if status in (200, 502) else None
    final = wait_until(done, timeout=30)
    return final.get("result", final)  # the envelope of a completed run, else the failure


def _ask(url: str, body: dict) -> dict:
    status, answer = post_json(url + "/", body)
    assert status in (200, 202), answer
    return answer if status == 200 else _final(url, answer)


def claim(url: str, name: str, body: dict | None = None, token: str | None = TOKEN) -> tuple[int, dict]:
    return post_json(f"{url}/_txc/queues/{name}/claim", body or {}, token=token, timeout=60)


def test_an_sdk_worker_pulls_unary_and_itemized_jobs(serve, workspace, pull_worker):
    start, seen = pull_worker
    srv = serve(workspace(tree()))
    worker = start(srv.url, "--concurrency", "3")
    try:
        assert _ask(srv.url, {"w": 21}) == {"w": 21, "r": {"size": 42}, "done": True}
        answer = _ask(srv.url, {"pics": ["a", "b", "c", "d", "e"]})
        assert answer["t"] == [{"thumb": p, "i": i} for i, p in enumerate("abcde")] and answer["done"] is True
        assert len([p for p in seen.iterdir() if not p.name.endswith(".again")]) == 6  # each job ran once
        assert not [p for p in seen.iterdir() if p.name.endswith(".again")]
    finally:
        worker.terminate()
        assert worker.wait(15) == 0 or worker.returncode == -15


def test_claims_over_http_follow_the_contract(serve, workspace):
    srv = serve(workspace(tree()), "--queue-token", TOKEN, "--queue-lease", "20s")
    # refusals change nothing
    assert claim(srv.url, "resize", token=None)[0] == 403
    assert claim(srv.url, "resize", token="x" * 20)[0] == 403
    status, body = claim(srv.url, "resize", {"max": 0})
    assert status == 400 and "max must be a number from 1 to 100" in body["error"]["message"]
    status, body = claim(srv.url, "resize", {"lease": 1, "colour": "red"})
    assert status == 400 and "unknown field 'colour'" in body["error"]["message"]
    assert claim(srv.url, "a%20b")[0] == 400
    assert http_get(srv.url + "/_txc/queues/resize/claim")[0] in (403, 405)
    assert claim(srv.url, "resize")[1] == {"jobs": []}  # nothing waits: answered at once without a wait
    # a long poll started before the request gets its job
    got: list = []
    poller = threading.Thread(target=lambda: got.append(claim(srv.url, "resize", {"wait": 20, "worker": "w-1"})))
    poller.start()
    time.sleep(0.3)
    status, answer = post_json(srv.url + "/", {"w": 5})
    assert status == 202
    poller.join(30)
    status, body = got[0]
    assert status == 200 and len(body["jobs"]) == 1
    job = body["jobs"][0]
    assert job["input"]["w"] == 5 and job["_txc"]["queue"] == "resize" and job["_txc"]["lease_ms"] == 20_000
    assert job["idempotency_key"] == job["_txc"]["op_continuation_id"] and job["token"]
    # answered through the callback contract with the claim's token
    callback = job["_txc"]["callback_url"]
    assert post_json(callback, {"status": "running", "progress": {"p": 1}}, token=job["token"])[0] == 200
    assert post_json(callback, {"status": "completed", "output": {"size": 10}}, token="wrong")[0] == 401
    assert post_json(callback, {"status": "completed", "output": {"size": 10}}, token=job["token"])[0] == 200
    assert _final(srv.url, answer)["r"] == {"size": 10}
    assert claim(srv.url, "resize")[1] == {"jobs": []}


def test_a_lapsed_lease_is_retried_then_fails(serve, workspace):
    srv = serve(workspace(tree('mode = "async", timeout = "1m", retries = 1, retry_backoff = "50ms"')))
    status, answer = post_json(srv.url + "/", {"w": 1})
    assert status == 202
    first = claim(srv.url, "resize", {"lease": 1}, token=None)[1]["jobs"][0]
    assert "retry" not in first["_txc"]
    second = claim(srv.url, "resize", {"lease": 1, "wait": 10}, token=None)[1]["jobs"][0]  # back after the lease
    assert second["_txc"]["op_continuation_id"] == first["_txc"]["op_continuation_id"]
    assert second["_txc"]["retry"] == 1 and second["token"] != first["token"]
    # the first claim's late answer is refused; after the second lease the op fails
    late = post_json(first["_txc"]["callback_url"], {"status": "completed", "output": {}}, token=first["token"])
    assert late[0] == 410
    final = _final(srv.url, answer)
    assert "txcl_lease_expired" in json.dumps(final) and "r" not in final


def test_a_cancelled_jobs_heartbeat_is_answered_410(serve, workspace, store_at):
    ws = workspace(tree())
    srv = serve(ws)
    status, answer = post_json(srv.url + "/", {"w": 1})
    job = claim(srv.url, "resize", token=None)[1]["jobs"][0]
    store = store_at(ws / ".txcl-data" / "txcl.db")
    assert store.cancel_run(store.get_run_by_rcid(answer["continuation"]).run_id, reason="test") == "cancelled"
    status, body = post_json(job["_txc"]["callback_url"], {"status": "running"}, token=job["token"])
    assert status == 410 and body["cancelled"] is True and body["error"]["code"] == "txcl_gone"


def test_two_serve_processes_hand_each_job_out_once(serve, workspace, pull_worker, store_at):
    start, seen = pull_worker
    ws = workspace(tree())
    a, b = serve(ws), serve(ws)
    workers = [start(a.url, "--concurrency", "4"), start(b.url, "--concurrency", "4")]
    try:
        answers = [post_json((a if i % 2 else b).url + "/", {"w": i}) for i in range(1, 17)]
        finals = [_final(a.url, body) if status == 202 else body for status, body in answers]
        assert [f["r"]["size"] for f in finals] == [2 * i for i in range(1, 17)]
    finally:
        for w in workers:
            w.terminate()
    store = store_at(ws / ".txcl-data" / "txcl.db")
    rows = store.backend.execute_for_tests("SELECT ack_json FROM interactions")
    assert len(rows) == 16 and all(json.loads(r[0])["claimed_by"] for r in rows)  # each claimed, by a worker
    assert len([p for p in seen.iterdir()]) == 16  # and run once: no `.again` marks


def test_queue_depths_in_txcl_runs_the_dashboard_and_the_metrics(serve, workspace):
    ws = workspace(tree())
    srv = serve(ws, "--ui", "--metrics", "--metrics-refresh", "200ms")
    for w in (1, 2, 3):
        assert post_json(srv.url + "/", {"w": w})[0] == 202
    assert len(claim(srv.url, "resize", token=None)[1]["jobs"]) == 1
    done = subprocess.run([TXCL, "runs", "queues", "--json", "--workspace", str(ws)], capture_output=True,
                          text=True, timeout=60)
    queues = json.loads(done.stdout)
    assert [(q["queue"], q["ready"], q["leased"]) for q in queues] == [("resize", 2, 1)]
    assert queues[0]["oldest_wait_s"] >= 0
    listed = subprocess.run([TXCL, "runs", "--workspace", str(ws)], capture_output=True, text=True, timeout=60)
    assert "queues: resize 2 ready" in listed.stdout and "1 leased" in listed.stdout
    status, _, page = http_get(srv.url + "/_txc/ui/", accept="text/html")
    assert status == 200
    text = page.decode()
    assert 'data-queue="resize"' in text and "<td data-ready>2</td>" in text and "<td data-leased>1</td>" in text

    def scraped():
        _, _, body = http_get(srv.url + "/_txc/metrics", accept="text/plain")
        found = body.decode()
        return found if 'txcl_queue_jobs{queue="resize",state="ready"} 2.0' in found else None
    metrics = wait_until(scraped, timeout=10)
    assert 'txcl_queue_jobs{queue="resize",state="leased"} 1.0' in metrics
    assert 'txcl_queue_oldest_ready_age_seconds{queue="resize"}' in metrics


def test_tolerated_failures_and_join_deadlines_apply_to_queue_ops(serve, workspace):
    """A queue op is an async op like any: an itemized one collects its failed items under
    on_item_error, and a deferred one passes over its join deadline when told to."""
    ws = workspace({
        "OPS/img/100/thumbs.txcl": 'WHEN .pics != null\nWITH mode = "async", timeout = "1m", each = .pics, '
                                   'on_item_error = "collect", into = "t"\nEXEC "queue://thumbs"',
        "OPS/img/100/late.txcl": 'WHEN .late == true\nWITH mode = "async", timeout = "1m", join_at_scope = 300, '
                                 'join_deadline = "1s", on_join_deadline = "continue", into = "l"\n'
                                 'EXEC "queue://late"',
        "OPS/img/200/mid.txcl": "EMIT .mid = true",
        "OPS/img/300/after.txcl": "EMIT .done = true",
    })
    srv = serve(ws)
    status, answer = post_json(srv.url + "/", {"pics": ["a", "b", "c"]})
    assert status == 202, answer
    jobs = claim(srv.url, "thumbs", {"max": 3}, token=None)[1]["jobs"]
    assert len(jobs) == 3
    for job in jobs:
        index = job["_txc"]["item_index"]
        body = ({"status": "failed", "error": {"message": "blurry"}} if index == 1 else
                {"status": "completed", "output": {"thumb": job["input"]}})
        assert post_json(job["_txc"]["callback_url"], body, token=job["token"])[0] == 200
    result = _final(srv.url, answer)
    assert result["t"][0] == {"thumb": "a"} and result["t"][2] == {"thumb": "c"}
    assert "blurry" in json.dumps(result["t"][1]) and result["done"] is True
    # the deferred op's worker never answers: at its join deadline the run goes on without it
    status, answer = post_json(srv.url + "/", {"late": True})
    assert status == 202, answer
    assert len(claim(srv.url, "late", token=None)[1]["jobs"]) == 1
    result = _final(srv.url, answer)
    assert result["done"] is True and result["mid"] is True and "l" not in result


def test_an_answer_can_bring_back_the_next_job(serve, workspace):
    """A pull worker's callback may ask for the jobs its answer lets out (`?claim=`): an itemized
    op's next item comes back with the answer's acknowledgement, leased to that worker in the
    admission's transaction; without the queue token the answer stands and the item waits to be
    claimed."""
    srv = serve(workspace({"OPS/img/100/thumbs.txcl": 'WITH mode = "async", timeout = "1m", each = .pics, '
                                                      'window = 1, into = "t"\nEXEC "queue://thumbs"'}),
                "--queue-token", TOKEN)
    status, answer = post_json(srv.url + "/", {"pics": ["a", "b", "c"]})
    assert status == 202, answer
    job = claim(srv.url, "thumbs", {"max": 5})[1]["jobs"]
    assert [j["_txc"]["item_index"] for j in job] == [0]  # the window lets one out
    job = job[0]
    for expected in (1, 2):
        url = job["_txc"]["callback_url"] + "?claim=thumbs&max=1&worker=w-9"
        status, body = post_json(url, {"status": "completed", "output": {"thumb": job["input"]}},
                                 token=job["token"], headers={"X-Txcl-Queue-Token": TOKEN})
        assert status == 200 and [j["_txc"]["item_index"] for j in body["jobs"]] == [expected]
        assert claim(srv.url, "thumbs")[1] == {"jobs": []}  # leased to this worker: no one else gets it
        job = body["jobs"][0]
    # the queue token is needed for the next jobs, not for the answer itself
    status, body = post_json(job["_txc"]["callback_url"] + "?claim=thumbs", {"status": "completed",
                             "output": {"thumb": job["input"]}}, token=job["token"])
    assert status == 200 and "jobs" not in body
    assert _final(srv.url, answer)["t"] == [{"thumb": p} for p in "abc"]
