"""Scheduled events on real servers: a request schedules events with `txco://schedule`; at
their time a `_scheduled` stack reports each to an HTTP server. Two nodes on one database
fire each event once; rescheduling happens in place; a cancelled event never fires; events
that came due while no node ran fire at start-up."""

from __future__ import annotations

import json
import time

from cont_support import wait_until
from contworker import post_json
from testtools import EchoServer


def scheduled_tree(url: str) -> dict[str, str]:
    return {
        "OPS/shop/100/schedule.txcl": ('WHEN .cancel != true\n'
                                       'EXEC "txco://schedule" WITH idempotency_key = .key, schedule_at = .at,\n'
                                       '    payload = .payload'),
        "OPS/shop/100/cancel.txcl": ('WHEN .cancel == true\n'
                                     'EXEC "txco://schedule" WITH idempotency_key = .key, cancel = true'),
        "OPS/_scheduled/100/report.txcl": ("SET .key = @scheduled.idempotency_key, .payload = @scheduled.payload,\n"
                                           "    .node = @scheduled.node, .at = @scheduled.schedule_at,\n"
                                           "    .fired = @scheduled.fired_at, .attempt = @scheduled.attempt,\n"
                                           "    .origin = @scheduled.origin_stack\n"
                                           f'EXEC "{url}/fired"'),
    }


def fired(reports: EchoServer) -> list[dict]:
    return [json.loads(raw) for _, raw in reports.received]


def _at(seconds: float) -> str:
    import datetime as dt

    moment = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _epoch(text: str) -> float:
    import datetime as dt

    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_two_nodes_fire_each_event_once_near_its_time(serve, workspace, reports, store_at):
    ws = workspace(scheduled_tree(reports.url))
    node_a = serve(ws, "--scheduled-poll", "200ms", "--node-id", "a")
    node_b = serve(ws, "--scheduled-poll", "200ms", "--node-id", "b")
    for i in range(8):
        status, answer = post_json(node_a.url + "/", {"key": f"drip:{i}", "at": _at(2.0), "payload": {"i": i}})
        assert status == 200 and answer["status"] == "scheduled" and answer["event_id"].startswith("sev_"), answer
    wait_until(lambda: len(fired(reports)) >= 8, timeout=20)
    time.sleep(1.0)  # a second firing would have come by now
    node_a.stop()
    node_b.stop()
    seen = fired(reports)
    assert sorted(e["key"] for e in seen) == [f"drip:{i}" for i in range(8)]  # each once
    assert {e["node"] for e in seen} <= {"a", "b"} and all(e["attempt"] == 1 for e in seen)
    assert all(e["payload"] == {"i": int(e["key"].split(":")[1])} and e["origin"] == "shop" for e in seen)
    for e in seen:
        late = _epoch(e["fired"]) - _epoch(e["at"])
        assert 0 <= late < 3.0, e  # not before its time; about a poll after it
    store = store_at(ws / ".txcl-data" / "txcl.db")
    assert store.count_events() == {"fired": 8}
    traced = wait_until(lambda: store.recent_traces(stack="_scheduled", limit=100), timeout=5)
    assert {t["src"] for t in traced} == {"scheduled"} and len(traced) == 8


def test_reschedule_in_place_cancel_and_a_spent_key(serve, workspace, reports):
    ws = workspace(scheduled_tree(reports.url))
    node = serve(ws, "--scheduled-poll", "200ms")
    assert post_json(node.url + "/", {"key": "k1", "at": _at(30), "payload": {"v": 1}})[1]["status"] == "scheduled"
    assert post_json(node.url + "/", {"key": "k1", "at": _at(1.5), "payload": {"v": 2}})[1]["status"] == "rescheduled"
    post_json(node.url + "/", {"key": "k2", "at": _at(1.5), "payload": {"v": 3}})
    status, answer = post_json(node.url + "/", {"key": "k2", "cancel": True})
    assert status == 200 and answer["status"] == "cancelled"
    wait_until(lambda: fired(reports), timeout=10)
    time.sleep(1.0)
    assert [(e["key"], e["payload"]) for e in fired(reports)] == [("k1", {"v": 2})]
    assert post_json(node.url + "/", {"key": "k1", "at": _at(1), "payload": {"v": 4}})[1]["status"] == "spent"
    assert post_json(node.url + "/", {"key": "k1", "cancel": True})[1]["status"] == "fired"
    node.stop()


def test_events_due_while_no_node_ran_fire_at_start_up(serve, workspace, reports):
    ws = workspace(scheduled_tree(reports.url))
    idle = serve(ws, "--scheduled-poll", "0")  # this node fires nothing
    post_json(idle.url + "/", {"key": "late", "at": _at(0.5), "payload": {"late": True}})
    time.sleep(1.0)
    idle.stop()
    assert fired(reports) == []
    started = time.time()
    node = serve(ws, "--scheduled-poll", "10s")  # the first look is at start-up, not a period later
    wait_until(lambda: fired(reports), timeout=8)
    assert time.time() - started < 8
    node.stop()
    assert [e["key"] for e in fired(reports)] == ["late"]


def test_txcl_run_schedules_and_txcl_schedules_lists_shows_and_cancels(workspace, reports, store_at):
    import subprocess

    from cont_support import TXCL

    def txcl(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([TXCL, *args], capture_output=True, text=True, timeout=60)

    ws = workspace(scheduled_tree(reports.url))
    for key, at in (("b", "2031-01-01T00:00:00Z"), ("a", "2030-01-01T00:00:00Z")):
        ran = txcl("run", str(ws), "--stack", "shop", "--input",
                   json.dumps({"key": key, "at": at, "payload": {"k": key}}))
        assert ran.returncode == 0 and json.loads(ran.stdout)["status"] == "scheduled", ran.stderr
    listed = txcl("schedules", "--workspace", str(ws))
    lines = listed.stdout.splitlines()
    assert listed.returncode == 0 and lines[0].split()[:2] == ["KEY", "STATUS"]
    assert [line.split()[0] for line in lines[1:]] == ["a", "b"]  # soonest first
    shown = json.loads(txcl("schedules", "show", "a", "--workspace", str(ws), "--json").stdout)
    assert shown["schedule_at"] == "2030-01-01T00:00:00Z" and shown["payload"] == {"k": "a"}
    assert shown["origin_stack"] == "shop" and shown["status"] == "pending"
    by_id = txcl("schedules", "show", shown["event_id"], "--workspace", str(ws))
    assert by_id.returncode == 0 and "event a  pending" in by_id.stdout
    cancelled = txcl("schedules", "cancel", "a", "--workspace", str(ws))
    assert cancelled.returncode == 0 and cancelled.stdout.strip() == "cancelled a"
    again = txcl("schedules", "cancel", "a", "--workspace", str(ws))
    assert again.returncode == 0 and again.stdout.strip() == "a was already cancelled"
    store = store_at(ws / ".txcl-data" / "txcl.db")
    store.schedule_event("c", 0, {})  # due at once
    [claimed] = store.claim_due_events(limit=5, stale_after_ms=60_000)
    store.finish_event("c", claimed.event_id, status="fired", rid="r")
    late = txcl("schedules", "cancel", "c", "--workspace", str(ws))
    assert late.returncode == 1 and "is fired; only a pending event" in late.stderr
    missing = txcl("schedules", "show", "zzz", "--workspace", str(ws))
    assert missing.returncode == 1 and "no scheduled event zzz" in missing.stderr
    pending = json.loads(txcl("schedules", "list", "--status", "pending", "--workspace", str(ws), "--json").stdout)
    assert [e["idempotency_key"] for e in pending] == ["b"]
    fired_ = json.loads(txcl("schedules", "list", "--status", "fired", "--workspace", str(ws), "--json").stdout)
    assert [(e["idempotency_key"], e["rid"]) for e in fired_] == [("c", "r")]
    usage = txcl("schedules", "show", "--workspace", str(ws))
    assert usage.returncode == 2 and "needs an idempotency key" in usage.stderr and "Traceback" not in usage.stderr


def test_the_dashboard_lists_the_scheduled_events(serve, workspace, reports):
    from cont_support import http_get

    ws = workspace(scheduled_tree(reports.url))
    node = serve(ws, "--scheduled-poll", "200ms", "--ui")
    post_json(node.url + "/", {"key": "soon", "at": _at(0.5), "payload": {"n": 1}})
    post_json(node.url + "/", {"key": "<b>later</b>", "at": "2031-01-01T00:00:00Z", "payload": {"n": 2}})
    wait_until(lambda: fired(reports), timeout=10)

    def recorded():  # the event's walk sent its report; its status is written when the walk ends
        status, _, body = http_get(node.url + "/_txc/ui/schedules", accept="text/html")
        return (status, body.decode()) if "1 fired" in body.decode() else None
    status, page = wait_until(recorded, timeout=10)
    assert status == 200 and "Scheduled events" in page and 'aria-current="page">Schedules' in page
    assert page.index("&lt;b&gt;later&lt;/b&gt;") < page.index(">soon<")  # pending first; keys escaped
    assert "2031-01-01T00:00:00Z" in page and "1 pending" in page and "1 fired" in page
    status, _, body = http_get(node.url + "/_txc/ui/schedules?status=fired", accept="text/html")
    assert ">soon<" in body.decode() and "later" not in body.decode()
