"""Restart safety: reopening the file reconstructs everything; crash at fault points."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from contstore_util import FakeClock, complete, itemized, open_store, park_barrier, unary

from txcl.continuations.sweeper import SweepConfig, sweep
from txcl.store.records import Fence

HERE = Path(__file__).resolve().parent

CHILD = r"""
import json, sys
sys.path.insert(0, {here!r})
from contstore_util import open_store, park_barrier, itemized, unary
store = open_store({path!r}, node="doomed")
park = park_barrier(store, units=[itemized(n=4, window=2)])
print(json.dumps([[d.opc, d.token] for d in park.dispatches]), flush=True)
pending = list(park.dispatches)
while pending:
    d = pending.pop(0)
    admit = store.admit_terminal(d.opc, "completed", {{"i": d.item_index}}, source="callback", token=d.token)
    print(json.dumps([[x.opc, x.token] for x in admit.dispatches]), flush=True)
    pending += admit.dispatches
    store.continue_release(d.opc, child_version=admit.child_version)
print("survived", flush=True)
"""


def run_child(path: Path, fault: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, TXCL_TESTING="1", TXCL_FAULT=fault)
    return subprocess.run([sys.executable, "-c", CHILD.format(here=str(HERE), path=str(path))], env=env,
                          capture_output=True, text=True, timeout=60)


def test_reopening_the_file_reconstructs_everything(db_url):
    path = db_url
    clock = FakeClock()
    s1 = open_store(path, clock)
    park = park_barrier(s1, units=[unary("a"), itemized("b", n=3, window=3)])
    by_unit = {}
    for d in park.dispatches:
        by_unit.setdefault(d.op_name, []).append(d)
    complete(s1, by_unit["a"][0])
    for d in by_unit["b"]:
        s1.admit_terminal(d.opc, "completed", {"b": d.item_index}, source="callback", token=d.token)
    s1.close()
    # a fresh process (store) decides only from stored records
    s2 = open_store(path, clock, node="node-b")
    assert s2.get_run(park.run.run_id).status == "waiting"
    assert not s2.try_release(park.run.run_id).won  # b's children are not materialised yet
    report = sweep(s2, SweepConfig(reconcile_after_ms=0))  # the sweeper finishes the work
    assert len(report.released) == 1
    claim = report.released[0]
    assert claim.owner == "node-b"
    bundle = s2.claim_resume(park.run.run_id, claim.claim_token)
    assert bundle.suspend.envelope == {"e": 0}
    assert {u.op_name: u.output for u in bundle.members} == {"a": {"ok": 0}, "b": [{"b": 0}, {"b": 1}, {"b": 2}]}
    s2.close()
    s3 = open_store(path, clock)
    assert s3.get_claim(park.run.run_id).claim_token == claim.claim_token
    s3.close()


def test_crash_after_admit_commit_then_recovery(db_url):
    """Kill at `admit`: the terminal is durable; the next completion or the sweeper finishes the work."""
    path = db_url
    proc = run_child(path, "admit")
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert "survived" not in proc.stdout
    first = json.loads(proc.stdout.splitlines()[0])
    store = open_store(path)
    run = store.list_runs()[0]
    assert run.status == "waiting"
    opc0 = first[0][0]
    assert store.get_terminal(opc0).payload == {"i": 0}
    assert store.list_children(store.get_interaction(opc0).unit_id)[0].status == "queued"
    # deliver the rest of the callbacks (the worker retries item 0: a duplicate)
    unit_id = store.get_interaction(opc0).unit_id
    assert store.admit_terminal(opc0, "completed", {"i": 0}, source="callback", token=first[0][1]).outcome == "duplicate"
    # the crashed process never promoted or ran `continue_release`; the sweeper promotes and repairs
    report = sweep(store, SweepConfig(reconcile_after_ms=0))
    assert (unit_id, 0) in report.children_repaired
    tokens = {opc: tok for opc, tok in first}
    # item 2 was promoted inside the admit commit; its POST died with the process → resent
    assert 2 in [d.item_index for d in report.resent]
    for d in [*report.resent, *report.promoted]:
        tokens[d.opc] = d.token
    pending = [i for i in store.list_interactions(unit_id) if i.status in ("dispatching", "dispatched")]
    won = 0
    while pending:
        it = pending.pop(0)
        admit = store.admit_terminal(it.opc, "completed", {"i": it.item_index}, source="callback",
                                     token=tokens[it.opc])
        assert admit.outcome == "admitted"
        for d in admit.dispatches:
            tokens[d.opc] = d.token
        won += store.continue_release(it.opc, child_version=admit.child_version).won
        pending = [i for i in store.list_interactions(unit_id) if i.status in ("dispatching", "dispatched")]
    assert won == 1
    assert store.get_unit(unit_id).output == [{"i": i} for i in range(4)]
    store.close()


def test_crash_after_release_commit_takeover(db_url):
    """Kill at `release`: the run is resuming under a dead claim; a takeover re-drives it (attempt 2)."""
    path = db_url
    proc = run_child(path, "release")
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    store = open_store(path, node="node-b")
    run = store.list_runs()[0]
    assert run.status == "resuming" and store.get_claim(run.run_id).owner == "doomed"
    report = sweep(store, SweepConfig(stale_after_ms=-1, max_attempts=3))
    assert [c.attempt for c in report.taken_over] == [2]
    claim = report.taken_over[0]
    bundle = store.claim_resume(run.run_id, claim.claim_token)
    assert bundle.members[0].output == [{"i": i} for i in range(4)]
    done = store.finish_segment(run.run_id, Fence(claim.segment_id, claim.claim_token), status="completed",
                                result={"n": 4})
    assert done.status == "completed"
    store.close()


def test_fault_point_not_reached_without_testing_flag(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TXCL_TESTING"}
    env["TXCL_FAULT"] = "admit"
    proc = subprocess.run([sys.executable, "-c", CHILD.format(here=str(HERE), path=str(tmp_path / "t.db"))],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "survived" in proc.stdout


FLOW = r"""
import json, sys
sys.path.insert(0, {here!r})
from contstore_util import open_store, park_barrier, itemized
from txcl.store.records import Fence
store = open_store({path!r}, node="doomed")
def send(dispatches):  # the "worker" receives the POST: it now knows the token
    print(json.dumps({{d.opc: d.token for d in dispatches}}), flush=True)

park = park_barrier(store, units=[itemized(n=5, window=2)])
send(park.dispatches)
store.mark_ack([(d.opc, {{"job": d.opc}}) for d in park.dispatches])
pending = list(park.dispatches)
claim = None
while pending:
    d = pending.pop(0)
    admit = store.admit_terminal(d.opc, "completed", {{"i": d.item_index}}, source="callback", token=d.token)
    send(admit.dispatches)
    if admit.dispatches:
        store.mark_ack([(x.opc, {{"job": x.opc}}) for x in admit.dispatches])
    pending += admit.dispatches
    rel = store.continue_release(d.opc, child_version=admit.child_version)
    claim = rel.claim or claim
bundle = store.claim_resume(park.run.run_id, claim.claim_token)
store.finish_segment(park.run.run_id, Fence(claim.segment_id, claim.claim_token), status="completed",
                     result={{"items": bundle.members[0].output}})
print("survived", flush=True)
"""


def _recover(store, tokens: dict[str, str]) -> None:
    """What any process does after a crash: sweep, deliver callbacks, take over, drive, finish.
    ``tokens`` is what the worker received before the crash (it calls back with those)."""
    for _ in range(40):
        run = store.list_runs()[0]
        if run.status in ("completed", "failed", "expired"):
            return
        if run.status == "resuming":
            took = store.take_over_claim(run.run_id, stale_after_ms=-1, max_attempts=5, owner="node-b")
            claim = took.claim
            bundle = store.claim_resume(run.run_id, claim.claim_token)
            store.finish_segment(run.run_id, Fence(claim.segment_id, claim.claim_token), status="completed",
                                 result={"items": bundle.members[0].output})
            continue
        report = sweep(store, SweepConfig(reconcile_after_ms=0, stale_after_ms=10**9))
        for d in [*report.resent, *report.promoted]:
            tokens[d.opc] = d.token
        if report.released:
            continue
        unit = store.list_units(run.run_id)[0]
        for it in store.list_interactions(unit.unit_id):
            if it.status in ("dispatching", "dispatched") and it.opc in tokens:
                store.mark_ack([(it.opc, {})])
                admit = store.admit_terminal(it.opc, "completed", {"i": it.item_index}, source="callback",
                                             token=tokens[it.opc])
                for d in admit.dispatches:
                    tokens[d.opc] = d.token
                if admit.outcome == "admitted":
                    store.continue_release(it.opc, child_version=admit.child_version)
    raise AssertionError("run never finished")


@pytest.mark.parametrize("point", ["park", "ack", "admit:3", "materialize:2", "release", "finish"])
def test_crash_at_every_store_fault_point_recovers_once(db_url, point):
    """(store side): SIGKILL right after the commit at each point; a fresh process finishes the run
    with every item merged exactly once, in order, and no interaction sent more than twice."""
    path = db_url
    env = dict(os.environ, TXCL_TESTING="1", TXCL_FAULT=point)
    proc = subprocess.run([sys.executable, "-c", FLOW.format(here=str(HERE), path=str(path))], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, (proc.stdout, proc.stderr)
    store = open_store(path, node="node-b")
    received: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            received.update(json.loads(line))
    _recover(store, received)
    run = store.list_runs()[0]
    assert run.status == "completed"
    assert run.result == {"items": [{"i": i} for i in range(5)]}
    unit = store.list_units(run.run_id)[0]
    its = store.list_interactions(unit.unit_id)
    assert len(its) == 5 and all(i.status == "completed" for i in its)
    assert max(i.attempts for i in its) <= 2
    assert sum(e.kind == "run.released" for e in store.list_run_events(run.run_id)) == 1
    store.close()


DEFERRED = r"""
import sys
sys.path.insert(0, {here!r})
from contstore_util import open_store, run_spec, unary
from txcl.store.records import Fence
store = open_store({path!r}, node="doomed")
store.dispatch_deferred(run_spec("rid-9"), Fence("rid-9"), [unary("x", join_at=200, budget_ms=1_000)])
print("survived", flush=True)
"""


def test_crash_at_deferred_dispatch_expires_the_run_t9(db_url):
    path = db_url
    env = dict(os.environ, TXCL_TESTING="1", TXCL_FAULT="deferred-dispatch")
    proc = subprocess.run([sys.executable, "-c", DEFERRED.format(here=str(HERE), path=str(path))], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    clock = FakeClock()
    store = open_store(path, clock)
    run = store.list_runs()[0]
    clock.now = run.created_ms  # the child ran on the real clock
    assert run.status == "active"  # nobody drives it again
    assert not sweep(store, SweepConfig()).expired
    clock.now = run.expires_ms + 1
    assert sweep(store, SweepConfig()).expired == [run.run_id]
    opc = store.list_interactions(store.list_units(run.run_id)[0].unit_id)[0].opc
    assert store.admit_terminal(opc, "completed", {}, source="cli").outcome == "expired"  # 410
    store.close()
