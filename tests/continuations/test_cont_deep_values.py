"""An envelope the rules themselves make deep: a `@goto` loop that nests a value one level per
pass. The write that would pass the limit is the rule's error with a code (not a
RecursionError), the run ends, and a durable run that completed stays pollable."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

from cont_support import http_get, wait_until

GROW = 'WHEN .n < 490\nEMIT .x = &object("a", .x), .n = &add(.n, 1), @goto = "200"'
SETTINGS = "[serve]\nop_repeat_penalty_ms = 0\n"


def _depth(value) -> int:
    depth = 0
    while isinstance(value, dict) and "a" in value:
        value, depth = value["a"], depth + 1
    return depth


def test_txcl_run_reports_the_rules_error_with_its_code(tmp_path):
    (tmp_path / "OPS/s/0200").mkdir(parents=True)
    (tmp_path / "OPS/s/0200/grow.txcl").write_text(GROW)
    (tmp_path / "txcl.toml").write_text(SETTINGS)
    done = subprocess.run([sys.executable, "-m", "txcl", "run", str(tmp_path), "--input", '{"n": 0}', "--compact"],
                          capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr and done.returncode == 0, done.stderr[-2000:]
    answer = json.loads(done.stdout)
    assert answer["error"]["code"] == "txcl_value_too_deep"
    assert "deeper than 200 levels" in answer["error"]["message"]
    assert _depth(answer["x"]) <= 200


def test_a_completed_deep_run_under_serve_is_pollable(serve, workspace, worker):
    ws = workspace({
        "OPS/s/0100/job.txcl": f'WITH mode = "async", timeout = "1m", into = "job"\nEXEC "{worker.url()}"',
        "OPS/s/0200/grow.txcl": GROW,
        "txcl.toml": SETTINGS,
    })
    srv = serve(ws, "--default-stack", "s")
    request = urllib.request.Request(srv.url + "/", data=b'{"n": 0}', headers={"Content-Type": "application/json"},
                                     method="POST")
    with urllib.request.urlopen(request, timeout=60) as answer:
        assert answer.status == 202
        location = answer.headers["Location"]
    job = worker.wait_job()
    assert worker.callback(job, {"ok": True})[0] == 200

    def polled():
        status, _, body = http_get(srv.url + location)
        return (status, json.loads(body)) if status != 202 else None

    status, data = wait_until(polled, timeout=60)
    assert status == 200, data
    assert data["error"]["code"] == "txcl_value_too_deep" and data["job"] == {"ok": True}
    for _ in range(3):  # and again: a completed run answers its poll every time
        again, _, _ = http_get(srv.url + location)
        assert again == 200
