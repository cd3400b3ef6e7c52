"""`mode = "continuable"`: a fast op answers synchronously, a
slow one is promoted (202, later result), an op error is 502, a restart during promotion
leaves a run that expires; and the preconditions."""

from __future__ import annotations

import json

import pytest
from cont_support import http_get, wait_until

PY = '''
import time

def fast(op_input, ctx):
    return {"v": "fast"}

def slow(op_input, ctx):
    time.sleep(1.0)
    return {"v": "slow", "_txc": {"rid": "forged"}}

def broken(op_input, ctx):
    raise RuntimeError("kaput")
'''


def _tree(fn: str, with_: str = 'mode = "continuable", continue_after = "300ms", timeout = "4s"',
          extra: dict | None = None, module: str = "contops") -> dict:
    files = {
        f"{module}.py": PY,
        "OPS/site/100/work.txcl": f'WITH {with_}\nEXEC "py://{module}:{fn}"',
        "OPS/site/200/after.txcl": "EMIT .after = .v",
    }
    files.update(extra or {})
    return files


def test_fast_op_answers_synchronously(serve, workspace, store_at):
    ws = workspace(_tree("fast", module="contops_fast"))
    srv = serve(ws)
    status, _, body = http_get(srv.url + "/")
    assert status == 200 and json.loads(body) == {"v": "fast", "after": "fast"}
    assert store_at(ws / ".txcl-data" / "txcl.db").list_runs() == []  # no run was needed


def test_slow_op_is_promoted_and_answers_later(serve, workspace, store_at):
    ws = workspace(_tree("slow", module="contops_slow"))
    srv = serve(ws)
    status, headers, body = http_get(srv.url + "/")
    assert status == 202 and json.loads(body)["status"] == "running"
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run = store.list_runs()[0]
    assert [s.kind for s in store.list_suspends(run.run_id)] == ["promotion"]
    unit = store.list_units(run.run_id)[0]
    assert unit.kind == "local" and not store.list_interactions(unit.unit_id)[0].has_token
    wait_until(lambda: store.get_run(run.run_id).status == "completed", timeout=15)
    status, _, body = http_get(srv.url + headers["location"])
    assert status == 200 and json.loads(body) == {"v": "slow", "after": "slow"}  # _txc.rid sanitised away


def test_op_error_is_502(serve, workspace):
    srv = serve(workspace(_tree("broken", module="contops_broken")))
    status, _, body = http_get(srv.url + "/")
    error = json.loads(body)["error"]
    assert status == 502 and error["code"] == "txcl_op_failed" and "kaput" in error["message"]


def test_restart_during_promotion_expires_the_run(serve, workspace, store_at):
    """`promote`: the process dies after the promotion park; the task is
    lost and the run expires at op start + timeout; polling then shows the failure."""
    ws = workspace(_tree("slow", 'mode = "continuable", continue_after = "200ms", timeout = "2s"',
                         module="contops_kill"))
    srv = serve(ws, env={"TXCL_TESTING": "1", "TXCL_FAULT": "promote"})
    status, _, _ = http_get(srv.url + "/", dead_ok=True)
    assert status == 0  # the connection died with the process
    assert srv.wait_dead() is not None
    store = store_at(ws / ".txcl-data" / "txcl.db")
    run = store.list_runs()[0]
    assert run.status == "waiting" and run.expires_ms is not None
    srv2 = serve(ws, "--continuation-sweep-period", "500ms", "--continuation-stale-resume-after", "2s")
    final = wait_until(lambda: (r := store.get_run(run.run_id)) and r.status == "expired" and r, timeout=15)
    assert final.finished_ms >= run.expires_ms
    status, _, body = http_get(srv2.url + f"/?_txc.continuation={run.rcid}")
    data = json.loads(body)
    assert status == 502 and data["status"] == "failed" and data["error"]["code"] == "txcl_run_expired"


@pytest.mark.parametrize("with_,message", [
    ('mode = "continuable", continue_after = "5s", timeout = "2s"',
     "continue_after must be shorter than timeout, or promotion never fires"),
    ('mode = "continuable", join_at_scope = .floor',
     'join_at_scope (= 300) requires mode = "async"; it is not honored with mode = "continuable"'),
])
def test_preconditions_end_the_request(serve, workspace, with_, message):
    srv = serve(workspace(_tree("fast", with_, module="contops_pre" + str(abs(hash(with_)) % 1000),
                                extra={"OPS/site/050/floor.txcl": "EMIT .floor = 300"})))
    status, _, body = http_get(srv.url + "/")
    error = json.loads(body)["error"]
    assert status == 500 and error == {"code": "txcl_continuable_invalid", "message": message}


def test_continuable_needs_a_solo_scope(serve, workspace):
    srv = serve(workspace(_tree("fast", extra={"OPS/site/100/other.txcl": "EMIT .o = 1"}, module="contops_solo")))
    status, _, body = http_get(srv.url + "/")
    assert status == 500
    assert json.loads(body)["error"]["message"] == \
        'mode = "continuable" requires a solo scope; scope 100 has 2 ops'
