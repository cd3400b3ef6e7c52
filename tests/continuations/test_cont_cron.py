"""Cron ticks on real servers: two nodes on one database, a `_cron` stack that reports each tick
to an HTTP server; every tick is fired by exactly one node. Ticks missed while no node ran
are skipped by default, or fired at start-up with `--cron-missed catch-up`."""

from __future__ import annotations

import json
import time

from cont_support import wait_until
from testtools import EchoServer


def cron_tree(url: str) -> dict[str, str]:
    return {"OPS/_cron/100/report.txcl": ("SET .bucket = @cron.bucket, .node = @cron.node, .mod5 = @cron.mod5,\n"
                                          "    .tick = @cron.tick\n"
                                          f'EXEC "{url}/tick"'),
            "OPS/site/100/hello.txcl": "EMIT .hello = true"}


def ticks(reports: EchoServer) -> list[dict]:
    return [json.loads(raw) for _, raw in reports.received]


def test_two_nodes_fire_each_tick_once(serve, workspace, reports, store_at):
    ws = workspace(cron_tree(reports.url))
    node_a = serve(ws, "--cron-period", "1s", "--node-id", "a")
    node_b = serve(ws, "--cron-period", "1s", "--node-id", "b")
    wait_until(lambda: len({t["bucket"] for t in ticks(reports)}) >= 4, timeout=15)
    node_a.stop()
    node_b.stop()
    seen = ticks(reports)
    buckets = [t["bucket"] for t in seen]
    assert len(buckets) == len(set(buckets)), buckets  # no tick fired twice
    assert all(t["bucket"].endswith("Z") and _epoch(t["bucket"]) % 1 == 0 for t in seen)  # on the second
    assert {t["node"] for t in seen} <= {"a", "b"} and all(0 <= t["mod5"] < 5 for t in seen)
    store = store_at(ws / ".txcl-data" / "txcl.db")
    traced = wait_until(lambda: store.recent_traces(stack="_cron", limit=100), timeout=5)
    assert {t["src"] for t in traced} == {"cron"} and all(t["status"] == "completed" for t in traced)
    assert store.last_tick("_cron") is not None


def test_missed_ticks_are_skipped_by_default_and_fired_with_catch_up(serve, workspace, reports):
    ws = workspace(cron_tree(reports.url))
    first = serve(ws, "--cron-period", "1s")
    wait_until(lambda: ticks(reports), timeout=10)
    first.stop()
    stopped = time.time()
    time.sleep(3.2)  # three ticks pass with no node running
    skipping = serve(ws, "--cron-period", "1s")
    started = time.time()
    time.sleep(1.5)
    skipping.stop()
    missed = [t for t in ticks(reports) if stopped + 0.5 < _epoch(t["bucket"]) < started - 1]
    assert missed == []  # skipped
    time.sleep(3.2)
    reports.received.clear()
    catching_up = serve(ws, "--cron-period", "1s", "--cron-missed", "catch-up")
    started = time.time()
    wait_until(lambda: len(ticks(reports)) >= 3, timeout=10)
    catching_up.stop()
    fired_late = [t for t in ticks(reports) if _epoch(t["bucket"]) < started - 1]
    assert len(fired_late) >= 2, ticks(reports)  # the ticks of the pause, fired at start-up


def _epoch(bucket: str) -> float:
    import datetime as dt

    return dt.datetime.fromisoformat(bucket.replace("Z", "+00:00")).timestamp()


def test_a_bad_cron_setting_is_a_usage_error(tmp_path):
    import subprocess

    from cont_support import TXCL

    (tmp_path / "OPS" / "_cron" / "100").mkdir(parents=True)
    (tmp_path / "OPS" / "_cron" / "100" / "a.txcl").write_text("EMIT .a = 1\n")
    for flags, message in ((["--cron-period", "200ms"], "must be at least 1s"),
                           (["--cron-timezone", "Mars/Olympus"], "is not an IANA time zone"),
                           (["--cron-missed", "sometimes"], "must be skip or catch-up")):
        done = subprocess.run([TXCL, "serve", str(tmp_path), "--port", "0", *flags], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, done.stderr
