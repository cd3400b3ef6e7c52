"""Non-web callers: `txcl run` exits 3 on an op whose worker
only acks, `txcl complete` resumes it, `txcl run --wait`, `callback_url: null` without a
base URL; `txcl runs` and `txcl sweep`."""

from __future__ import annotations

import json
import subprocess

import pytest

from cont_support import TXCL, barrier_tree


def txcl(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([TXCL, *args], capture_output=True, text=True, timeout=timeout)


def test_run_exits_3_then_complete_resumes(workspace, worker):
    ws = workspace(barrier_tree(worker.url()))
    ran = txcl("run", str(ws), "--input", '{"q": 1}')
    assert ran.returncode == 3, ran.stderr
    printed = json.loads(ran.stdout)
    assert printed["status"] == "waiting" and printed["run_id"].startswith("run_")
    assert printed["continuation"].startswith("rc_")
    assert "callback_url: null" in ran.stderr and ran.stderr.count("warning") == 1
    job = worker.wait_job()
    assert job.body["_txc"]["callback_url"] is None and job.token  # only `txcl complete` can finish it
    listed = json.loads(txcl("runs", "--workspace", str(ws), "--json").stdout)
    assert [(r["run_id"], r["status"]) for r in listed] == [(printed["run_id"], "waiting")]
    # one vocabulary: `running` is every unfinished state; an unknown state is a usage error
    running = json.loads(txcl("runs", "list", "--state", "running", "--workspace", str(ws), "--json").stdout)
    assert [r["run_id"] for r in running] == [printed["run_id"]]
    assert json.loads(txcl("runs", "list", "--state", "completed", "--workspace", str(ws), "--json").stdout) == []
    bogus = txcl("runs", "list", "--state", "bogus", "--workspace", str(ws))
    assert bogus.returncode == 2 and "'bogus' is not one of" in bogus.stderr
    done = txcl("complete", printed["run_id"], "--workspace", str(ws), "--output", '{"enriched": "by hand"}')
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "resumed" and result["run_status"] == "completed"
    shown = json.loads(txcl("runs", "show", printed["continuation"], "--workspace", str(ws), "--json").stdout)
    assert shown["status"] == "completed" and shown["result"]["after"] == "by hand"
    assert shown["units"][0]["interactions"][0]["status"] == "completed"
    again = txcl("complete", job.opc, "--workspace", str(ws), "--output", '{"enriched": "other"}')
    assert again.returncode == 1 and json.loads(again.stdout)["status"] == "conflict"
    same = txcl("complete", job.opc, "--workspace", str(ws), "--output", '{"enriched": "by hand"}')
    assert same.returncode == 0 and json.loads(same.stdout)["duplicate"] is True


def test_run_wait_prints_the_result(workspace, worker):
    ws = workspace(barrier_tree(worker.url()))
    proc = subprocess.Popen([TXCL, "run", str(ws), "--wait", "30s", "--compact"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        job = worker.wait_job(timeout=20)
        done = txcl("complete", job.opc, "--workspace", str(ws), "--output", '{"enriched": 3}')
        assert done.returncode == 0, done.stderr
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert json.loads(out) == {"enriched": 3, "side": 1, "after": 3}


@pytest.mark.slow
def test_run_wait_failure_and_timeout(workspace, worker):
    ws = workspace(barrier_tree(worker.url()))
    ran = txcl("run", str(ws), "--wait", "300ms")
    assert ran.returncode == 3 and json.loads(ran.stdout)["status"] == "waiting"
    job = worker.wait_job()
    failed = txcl("complete", job.opc, "--workspace", str(ws), "--fail", "--error", '{"message": "denied"}')
    assert failed.returncode == 0
    shown = json.loads(txcl("runs", "show", json.loads(ran.stdout)["run_id"], "--workspace", str(ws),
                            "--json").stdout)
    assert shown["status"] == "failed" and shown["error"]["code"] == "txcl_op_failed"
    assert shown["error"]["detail"] == {"message": "denied"}
    assert txcl("runs", "show", "run_01M8MQ00000000000000000000", "--workspace", str(ws)).returncode == 1


def test_complete_usage_errors(workspace, worker):
    ws = workspace(barrier_tree(worker.url()))
    assert txcl("complete", "opc_x", "--workspace", str(ws), "--output", "{}", "--fail").returncode == 2
    assert txcl("db", "upgrade", "--workspace", str(ws)).returncode == 0
    unknown = txcl("complete", "opc_" + "1" * 22, "--workspace", str(ws), "--output", "{}")
    assert unknown.returncode == 1


def test_sweep_once_from_the_command_line(workspace, worker):
    ws = workspace(barrier_tree(worker.url()))
    assert txcl("db", "upgrade", "--workspace", str(ws)).returncode == 0
    swept = txcl("sweep", "--workspace", str(ws), "--json")
    assert swept.returncode == 0
    assert json.loads(swept.stdout.strip().splitlines()[-1])["expired"] == 0


def test_run_wait_keeps_a_promoted_continuable_op_running(workspace):
    """`txcl run --wait`: the promoted op finishes in the same process and the run completes;
    without --wait the command exits 3 and the run is left waiting."""
    ws = workspace({
        "cli_slowop.py": "import time\ndef slow(op_input, ctx):\n    time.sleep(0.8)\n    return {'v': 'slow'}\n",
        "OPS/site/100/work.txcl": 'WITH mode = "continuable", continue_after = "150ms", timeout = "10s"\n'
                                  'EXEC "py://cli_slowop:slow"',
        "OPS/site/200/after.txcl": "EMIT .after = .v",
    })
    waited = txcl("run", str(ws), "--wait", "20s", "--compact")
    assert waited.returncode == 0, waited.stderr
    assert json.loads(waited.stdout) == {"v": "slow", "after": "slow"}
    left = txcl("run", str(ws), "--compact")
    assert left.returncode == 3
    run_id = json.loads(left.stdout)["run_id"]
    shown = json.loads(txcl("runs", "show", run_id, "--workspace", str(ws), "--json").stdout)
    assert shown["status"] == "waiting" and shown["suspends"][0]["kind"] == "promotion"


def test_complete_refuses_to_guess_among_several_open_calls(workspace, worker):
    """Two items of an itemized op are open: `txcl complete RUN --output` without --item would
    give an arbitrary call the answer; it refuses and lists the choices, and with them it works."""
    ws = workspace({"OPS/s/100/each.txcl": f'WITH mode = "async", each = .xs, into = "out", window = 2\n'
                                           f'EXEC "{worker.url()}"'})
    ran = txcl("run", str(ws), "--input", '{"xs": [1, 2]}')
    assert ran.returncode == 3, ran.stderr
    run_id = json.loads(ran.stdout)["run_id"]
    worker.wait_job(), worker.wait_job()
    refused = txcl("complete", run_id, "--workspace", str(ws), "--output", '{"v": 1}')
    assert refused.returncode == 2 and "2 open calls" in refused.stderr
    assert "--op each --item 0" in refused.stderr and "--op each --item 1" in refused.stderr
    done = txcl("complete", run_id, "--workspace", str(ws), "--item", "1", "--output", '{"v": 1}')
    assert done.returncode == 0, done.stderr
    shown = json.loads(txcl("runs", "show", run_id, "--workspace", str(ws), "--json").stdout)
    statuses = {i["item_index"]: i["status"] for i in shown["units"][0]["interactions"]}
    assert statuses == {0: "dispatched", 1: "completed"}


def test_an_item_completed_by_hand_lets_the_next_one_out_at_once(workspace, worker):
    """A window of 2 over 3 items, answered with `txcl complete` and no server running: the
    freed slot's item is sent by the command itself (not left `dispatching` until the
    sweeper's reconcile period)."""
    ws = workspace({"OPS/s/100/each.txcl": f'WITH mode = "async", each = .xs, into = "out", window = 2\n'
                                           f'EXEC "{worker.url()}"'})
    ran = txcl("run", str(ws), "--input", '{"xs": [1, 2, 3]}')
    assert ran.returncode == 3, ran.stderr
    run_id = json.loads(ran.stdout)["run_id"]
    first = [worker.wait_job(), worker.wait_job()]
    done = txcl("complete", run_id, "--workspace", str(ws), "--op", "each", "--item", "0", "--output", '{"v": 0}')
    assert done.returncode == 0, done.stderr
    third = worker.wait_job(timeout=10)  # sent by `txcl complete`, at once
    assert third.body["_txc"]["item_index"] == 2 and len(first) == 2
