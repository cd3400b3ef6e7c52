"""The NATS JetStream transport with a real `nats-server` (Debian's, started by the tests) and
real `txcl serve` processes, on both store backends: a 1,000-item unit answered out of order,
answers delivered twice, the broker restarted mid-unit, and the dispatching node killed
mid-unit with another node finishing it — every item merged once, in item order."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import threading

import pytest
from cont_support import TXCL, http_get, wait_until
from contworker import post_json

WORKER = '''
import asyncio
import random
from pathlib import Path

from txcl.worker import Worker

worker = Worker()
ORDER = Path(__file__).parent / "order.txt"


@worker.op("thumbs")
async def thumbs(job):
    await asyncio.sleep(random.random() * float(job.input.get("pause", 0)))
    with open(ORDER, "a") as f:
        f.write(f"{job.item_index}\\n")
    return {"i": job.item_index, "thumb": job.input["p"]}
'''


def tree(window: int = 64) -> dict[str, str]:
    return {
        "OPS/img/100/thumbs.txcl": f'WITH mode = "async", timeout = "5m", each = .pics, window = {window}, '
                                   'into = "t"\nEXEC "nats://thumbs"',
        "OPS/img/200/after.txcl": "EMIT .done = true",
    }


@pytest.fixture(scope="module")
def broker():
    from txcl.testing.nats import TempNats

    server = TempNats.start()
    yield server
    server.stop()


@pytest.fixture
def nats_worker(tmp_path, broker):
    folder = tmp_path / "natsworker"
    folder.mkdir()
    (folder / "imgworker.py").write_text(WORKER)
    procs: list[subprocess.Popen] = []

    def start(*flags: str) -> subprocess.Popen:
        proc = subprocess.Popen([TXCL, "worker", "nats", "imgworker:worker", "--nats", broker.url, *flags],
                                cwd=folder, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        procs.append(proc)
        threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()  # type: ignore[union-attr]
        return proc

    yield start, folder / "order.txt"
    for proc in procs:
        proc.terminate()
        proc.wait(15)


def _final(url: str, rcid: str, timeout: float = 120) -> dict:
    def done():
        status, _, body = http_get(f"{url}/?_txc.continuation={rcid}&format=json")
        return json.loads(body) if status in (200, 502) else None
    final = wait_until(done, timeout=timeout, interval=0.2)
    assert final["status"] == "completed", final
    return final["result"]


def _pics(n: int, pause: float = 0.0) -> list[dict]:
    return [{"p": f"p{i}", "pause": pause} for i in range(n)]


def _expected(n: int) -> list[dict]:
    return [{"i": i, "thumb": f"p{i}"} for i in range(n)]


def _answers(store, run_id: str) -> int:
    rows = store.backend.execute_for_tests(
        "SELECT COUNT(*) FROM terminals x JOIN interactions i ON i.opc = x.opc WHERE i.run_id = ?", (run_id,))
    return rows[0][0]


def test_a_thousand_items_answered_out_of_order_are_merged_once_in_item_order(
        serve, workspace, broker, nats_worker, store_at):
    start, order = nats_worker
    ws = workspace(tree())
    srv = serve(ws, "--nats-url", broker.url)
    start("--concurrency", "32")
    status, answer = post_json(srv.url + "/", {"pics": _pics(1000, pause=0.01)}, timeout=60)
    assert status == 202, answer
    result = _final(srv.url, answer["continuation"])
    assert result["t"] == _expected(1000) and result["done"] is True
    finished = [int(line) for line in order.read_text().split()]
    assert sorted(finished) == list(range(1000)) and finished != sorted(finished)  # out of order, once each
    store = store_at(ws / ".txcl-data" / "txcl.db")
    assert _answers(store, store.get_run_by_rcid(answer["continuation"]).run_id) == 1000


def test_answers_delivered_twice_are_merged_once(serve, workspace, broker, store_at):
    """A worker (a plain NATS client following the documented contract) publishes every answer
    twice: the second is a duplicate admission, acknowledged and dropped."""
    import nats

    ws = workspace({"OPS/img/100/thumbs.txcl": 'WITH mode = "async", timeout = "5m", each = .pics, window = 8, '
                                              'into = "t"\nEXEC "nats://twice"'})
    srv = serve(ws, "--nats-url", broker.url)
    stop = threading.Event()
    seen: list[int] = []

    async def twice() -> None:
        nc = await nats.connect(broker.url)
        js = nc.jetstream()
        while True:  # txcl serve creates the jobs stream as it starts: until then there is none
            try:
                sub = await js.pull_subscribe("txcl.jobs.twice", durable="twice_test", stream="TXCL_JOBS")
                break
            except nats.js.errors.NotFoundError:
                await asyncio.sleep(0.05)
        while not stop.is_set():
            try:
                messages = await sub.fetch(8, timeout=0.5)
            except (nats.errors.TimeoutError, asyncio.TimeoutError):  # the client raises either when nothing came
                continue
            for m in messages:
                job = json.loads(m.data)
                index = job["_txc"]["item_index"]
                seen.append(index)
                body = json.dumps({"status": "completed", "output": {"i": index}}).encode()
                for _ in range(2):
                    await js.publish(job["_txc"]["reply_subject"], body, headers={"Txcl-Token": m.headers["Txcl-Token"]})
                await m.ack()
        await nc.close()

    thread = threading.Thread(target=lambda: asyncio.run(twice()), daemon=True)
    thread.start()
    try:
        status, answer = post_json(srv.url + "/", {"pics": list(range(40))})
        assert status == 202, answer
        result = _final(srv.url, answer["continuation"], timeout=60)
        assert result["t"] == [{"i": i} for i in range(40)]
        assert sorted(seen) == list(range(40))
        store = store_at(ws / ".txcl-data" / "txcl.db")
        assert _answers(store, store.get_run_by_rcid(answer["continuation"]).run_id) == 40
    finally:
        stop.set()
        thread.join(10)


def test_the_broker_restarted_mid_unit_loses_nothing(serve, workspace, broker, nats_worker, store_at):
    start, order = nats_worker
    ws = workspace(tree(window=16))
    srv = serve(ws, "--nats-url", broker.url, "--continuation-sweep-period", "1s")
    start("--concurrency", "8")
    status, answer = post_json(srv.url + "/", {"pics": _pics(300, pause=0.02)}, timeout=60)
    assert status == 202, answer
    wait_until(lambda: order.exists() and len(order.read_text().split()) >= 60, timeout=60)
    broker.restart()
    result = _final(srv.url, answer["continuation"], timeout=180)
    assert result["t"] == _expected(300)
    store = store_at(ws / ".txcl-data" / "txcl.db")
    assert _answers(store, store.get_run_by_rcid(answer["continuation"]).run_id) == 300


def test_the_dispatching_node_killed_mid_unit_another_node_finishes(serve, workspace, broker, nats_worker, store_at):
    start, order = nats_worker
    ws = workspace(tree(window=16))
    first = serve(ws, "--nats-url", broker.url, "--node-id", "node-a")
    second = serve(ws, "--nats-url", broker.url, "--node-id", "node-b", "--continuation-sweep-period", "1s")
    start("--concurrency", "8")
    status, answer = post_json(first.url + "/", {"pics": _pics(200, pause=0.02)}, timeout=60)
    assert status == 202, answer
    wait_until(lambda: order.exists() and len(order.read_text().split()) >= 40, timeout=60)
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait(10)
    result = _final(second.url, answer["continuation"], timeout=180)
    assert result["t"] == _expected(200)
    store = store_at(ws / ".txcl-data" / "txcl.db")
    assert _answers(store, store.get_run_by_rcid(answer["continuation"]).run_id) == 200


def test_without_a_nats_url_the_op_fails_with_a_clear_message(serve, workspace):
    srv = serve(workspace(tree()))
    status, answer = post_json(srv.url + "/", {"pics": _pics(2)})
    text = json.dumps(answer) if status != 202 else json.dumps(_final_any(srv.url, answer["continuation"]))
    assert "published by txcl serve with --nats-url" in text


def _final_any(url: str, rcid: str) -> dict:
    def done():
        status, _, body = http_get(f"{url}/?_txc.continuation={rcid}&format=json")
        return json.loads(body) if status in (200, 502) else None
    return wait_until(done, timeout=30)
