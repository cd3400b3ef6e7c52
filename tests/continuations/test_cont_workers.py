"""`txcl serve --workers 2` (both store backends): two processes serve one port, both take
requests; one is SIGKILLed while runs wait on a worker — the supervisor starts another, the
survivor keeps answering, and every run completes with its result merged once; SIGTERM to the
parent drains and stops them all."""

from __future__ import annotations

import json
import os
import re
import signal
import time

from cont_support import http_get, wait_until
from contworker import post_json


def workers_tree(worker_url: str) -> dict[str, str]:
    return {
        "OPS/shop/100/who.txcl": 'WHEN .mode == "sync"\nEXEC "py://ops.who:pid"\nEMIT @halt = true',
        "OPS/shop/100/enrich.txcl": f'WHEN .mode != "sync"\nWITH mode = "async", timeout = "1m"\nEXEC "{worker_url}"',
        "OPS/shop/200/after.txcl": "EMIT .after = .enriched",
        "ops/who.py": "import os\n\n\ndef pid(op_input, ctx):\n    return {'pid': os.getpid()}\n",
    }


def _pids(log: str) -> dict[int, int]:
    """Worker index -> its latest pid, from the supervisor's log."""
    found: dict[int, int] = {}
    for index, pid in re.findall(r"worker process (\d+) started \(pid (\d+)\)", log):
        found[int(index)] = int(pid)
    return found


def _sync_pids(url: str, n: int) -> set[int]:
    seen = set()
    for _ in range(n):
        status, answer = post_json(url + "/", {"mode": "sync"})
        assert status == 200, answer
        seen.add(answer["pid"])
    return seen


def test_two_worker_processes_share_the_port_and_survive_a_kill(serve, workspace, worker):
    ws = workspace(workers_tree(worker.url()))
    srv = serve(ws, "--workers", "2")
    wait_until(lambda: srv.log.count("txcl: serving") == 2, timeout=20)
    first = _pids(srv.log)
    assert sorted(first) == [1, 2]
    assert _sync_pids(srv.url, 40) == set(first.values())  # the kernel spreads connections over both

    runs = []
    for i in range(10):
        status, headers, _ = http_get(srv.url + f"/go?i={i}")
        assert status == 202
        runs.append(headers["location"])
    jobs = [worker.wait_job() for _ in range(10)]

    os.kill(first[1], signal.SIGKILL)
    wait_until(lambda: "worker process 1 (pid %d) was killed by signal 9; starting another" % first[1] in srv.log,
               timeout=10)
    assert _sync_pids(srv.url, 10) <= set(first.values()) | {_pids(srv.log)[1]}  # answering all along
    wait_until(lambda: srv.log.count("txcl: serving") == 3, timeout=20)
    assert _pids(srv.log)[1] != first[1] and _pids(srv.log)[2] == first[2]

    for n, job in enumerate(jobs):
        assert worker.callback(job, {"enriched": [n]})[0] == 200
    results = []
    for location in runs:
        def done(location=location):
            status, _, body = http_get(srv.url + location + "&format=json")
            return json.loads(body) if status == 200 else None
        results.append(wait_until(done, timeout=20))
    merged = sorted(r["result"]["after"] for r in results)
    assert merged == [[n] for n in range(10)]  # each merged once: a second merge would give [n, n]

    parent = srv.proc
    parent.send_signal(signal.SIGTERM)
    assert parent.wait(30) == 0
    time.sleep(0.2)
    for pid in _pids(srv.log).values():
        assert not os.path.exists(f"/proc/{pid}") or _zombie(pid), f"worker {pid} outlived the parent"


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1].startswith("Z")
    except OSError:
        return True


def test_a_worker_that_cannot_start_stops_the_server_with_one_message(tmp_path):
    import subprocess

    from cont_support import TXCL

    (tmp_path / "OPS" / "shop" / "100").mkdir(parents=True)
    (tmp_path / "OPS" / "shop" / "100" / "a.txcl").write_text("WHEN WHEN\n")
    done = subprocess.run([TXCL, "serve", str(tmp_path), "--port", "0", "--workers", "2"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.count("the OPS tree failed to load") == 1, done.stderr
    assert "worker process" not in done.stderr  # found before any worker was started
    bad = subprocess.run([TXCL, "serve", str(tmp_path), "--port", "0", "--workers", "none"], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and "must be a number of processes from 1, or auto" in bad.stderr
