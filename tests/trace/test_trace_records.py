"""Traces in SQLite: modes, redaction, `txcl trace` and `txcl run --trace`."""

from __future__ import annotations

from testtools import RawDb, reopened_after_downgrade

import json

from click.testing import CliRunner

from txcl.cli.main import cli


def test_summary_mode_has_metadata_only(workspace, run_tree):
    ws = workspace({"OPS/s/0100/a.txcl": 'EXEC "txco://noop"', "OPS/s/0200/b.txcl": "EMIT .b = 1"})
    outcome, store = run_tree(ws, {"x": 1})
    trace = store.get_trace(outcome.rid)
    req = trace.request
    assert req["status"] == "completed" and req["src"] == "api" and req["entry_stack"] == "s"
    assert req["in_json"] is None and req["out_json"] is None and req["bytes_in"] > 0
    assert req["fuel_used"] == outcome.fuel_used == 10 + 25 + 10
    assert [s["name"] for s in trace.steps] == ["a", "b"]
    assert all(s["input_json"] is None for s in trace.steps)
    kinds = [e["kind"] for e in trace.events]
    assert kinds[0] == "request.start" and kinds[-1] == "request.end"
    assert kinds.count("stage.enter") == 2 and kinds.count("stage.merge") == 2
    seqs = [s["seq"] for s in trace.steps] + [e["seq"] for e in trace.events]
    assert len(set(seqs)) == len(seqs)


def test_off_mode_records_nothing(workspace, run_tree):
    ws = workspace({"OPS/s/0100/a.txcl": "EMIT .b = 1"})
    outcome, store = run_tree(ws, {}, trace_mode="off")
    assert store.get_trace(outcome.rid) is None


def test_full_mode_redact_and_omit(workspace, run_tree):
    ws = workspace({
        "OPS/s/0100/a.txcl": 'WITH redact = "card.number, @web.req.body", omit = "password"\nEXEC "txco://noop"',
        "OPS/s/0200/b.txcl": "EMIT .seen = .card.number",
    })
    env = {"card": {"number": "4111", "exp": "12/30"}, "password": "hunter2",
           "_txc": {"web": {"req": {"body": "Ym9keQ==", "headers": {"authorization": ["Bearer x"]}}}}}
    outcome, store = run_tree(ws, env, trace_mode="full")
    assert outcome.envelope["seen"] == "4111"  # runtime data untouched
    trace = store.get_trace(outcome.rid)
    entry = json.loads(trace.request["in_json"])
    assert entry["card"] == {"number": "[redacted]", "exp": "12/30"} and "password" not in entry
    assert entry["_txc"]["web"]["req"]["body"] == "[redacted]"
    assert entry["_txc"]["web"]["req"]["headers"]["authorization"] == "[redacted]"
    out = json.loads(trace.request["out_json"])
    assert out["seen"] == "4111" and out["card"]["number"] == "[redacted]"
    step = trace.steps[0]
    assert step["rule"].startswith("WITH redact") and json.loads(step["input_json"])["card"]["number"] == "[redacted]"


def test_debug_directive_adds_detail_in_summary(workspace, run_tree):
    ws = workspace({"OPS/s/0100/a.txcl": 'WITH debug = true\nEXEC "txco://noop"', "OPS/s/0100/b.txcl": "EMIT .b = 1"})
    outcome, store = run_tree(ws, {"x": 1})
    steps = {s["name"]: s for s in store.get_trace(outcome.rid).steps}
    assert json.loads(steps["a"]["input_json"])["x"] == 1 and steps["a"]["rule"]
    assert steps["b"]["input_json"] is None


def test_failed_request_trace(workspace, run_tree):
    ws = workspace({"OPS/s/0100/a.txcl": 'EMIT @goto = "???"'})
    outcome, store = run_tree(ws, {})
    req = store.get_trace(outcome.rid).request
    assert req["status"] == "failed" and req["http_status"] == 500
    assert json.loads(req["error_json"])["error"]["code"] == "txcl_bad_goto"


def test_trace_cli(workspace):
    ws = workspace({
        "OPS/s/0100/a.txcl": 'EXEC "txco://noop"',
        "OPS/s/0200/b.txcl": 'EXEC "txco://nope"',
    })
    runner = CliRunner()
    ran = runner.invoke(cli, ["run", str(ws), "--input", "{}"])
    assert ran.exit_code == 0, ran.output
    db = str(ws / ".txcl-data" / "txcl.db")
    shown = runner.invoke(cli, ["trace", "last", "--db", db])
    assert shown.exit_code == 0
    assert "status=completed" in shown.output and "op not found: txco://nope" in shown.output
    assert "stage.enter" in shown.output
    as_json = runner.invoke(cli, ["trace", "last", "--db", db, "--json"])
    doc = json.loads(as_json.output)
    rid = doc["request"]["rid"]
    assert [s["name"] for s in doc["steps"]] == ["a", "b"]
    grep = runner.invoke(cli, ["trace", rid, "--db", db, "--grep", "nope"])
    assert " b " in grep.output and " a " not in grep.output.split("steps:")[1]
    seq = doc["steps"][1]["seq"]
    one = runner.invoke(cli, ["trace", rid, "--db", db, "--step", str(seq)])
    assert one.exit_code == 0 and "txco://nope" in one.output
    missing = runner.invoke(cli, ["trace", "01NOPE", "--db", db])
    assert missing.exit_code == 1
    by_workspace = runner.invoke(cli, ["trace", "--workspace", str(ws)])
    assert by_workspace.exit_code == 0 and rid in by_workspace.output


def test_run_trace_flag_prints_on_stderr(workspace):
    ws = workspace({"OPS/s/0100/a.txcl": "EMIT .a = 1"})
    result = CliRunner().invoke(cli, ["run", str(ws), "--trace"])
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {"a": 1}
    assert "request " in result.stderr and "stage.enter" in result.stderr


def test_hmac_key_never_in_trace(workspace, run_tree):
    ws = workspace({"OPS/s/0100/a.txcl": 'WITH message = "m", key = "topsecret"\nEXEC "txco://hmac-sign"'})
    outcome, store = run_tree(ws, {"auth": {"Authorization": "Bearer abc"}}, trace_mode="full")
    step = store.get_trace(outcome.rid).steps[0]
    assert "topsecret" not in step["rule"] and '"[redacted]"' in step["rule"]
    assert "Bearer abc" not in json.dumps(store.get_trace(outcome.rid).request["in_json"])


def test_v1_trace_tables_are_migrated(tmp_path):
    import sqlite3

    from txcl.store import open_store

    db = tmp_path / "old.db"
    conn = sqlite3.connect(db)
    conn.executescript("""
        CREATE TABLE txcl_schema (component TEXT PRIMARY KEY, version INTEGER NOT NULL);
        INSERT INTO txcl_schema VALUES ('traces', 1), ('kv', 1);
        CREATE TABLE traces (rid TEXT PRIMARY KEY, origin_rid TEXT, run_id TEXT, src TEXT, entry_stack TEXT,
            started_ms INTEGER, finished_ms INTEGER, status TEXT, http_status INTEGER, fuel_used INTEGER,
            bytes_in INTEGER, bytes_out INTEGER, mode TEXT, in_json TEXT, out_json TEXT, error_json TEXT);
        CREATE TABLE trace_steps (rid TEXT, seq INTEGER);
        INSERT INTO traces (rid, started_ms, status) VALUES ('old', 1, 'completed');
    """)
    conn.commit()
    conn.close()
    store = open_store(db)
    record = store.get_trace("old")
    assert record.request["status"] == "completed" and record.steps == [] and record.events == []
    assert RawDb(store).execute("SELECT version FROM txcl_schema WHERE component = 'traces'")[0][0] == 8
    store.close()


def test_v5_run_index_is_narrowed_to_durable_runs(tmp_path):
    """Upgrading from traces version 5 rebuilds the run index to hold only durable runs' rows;
    a lookup by run still finds them (through the index)."""
    from txcl.store import open_store
    from txcl.trace.recorder import TraceRecorder

    store, raw = reopened_after_downgrade(open_store, tmp_path / "v5.db", "traces", 5, "DROP INDEX traces_run",
                                          "CREATE INDEX traces_run ON traces (run_id, started_ms)")
    assert raw.execute("SELECT sql FROM sqlite_master WHERE name = 'traces_run'")[0][0].endswith(
        "WHERE run_id IS NOT NULL")
    assert raw.execute("SELECT version FROM txcl_schema WHERE component = 'traces'")[0][0] == 8
    rec = TraceRecorder("summary", "seg-1", "callback", "s", run_id="run-1")
    rec.finish("completed", http_status=200, fuel_used=1)
    store.write_traces([rec.build()])
    assert store.trace_rids_for_run("run-1") == ["seg-1"]
    plan = raw.execute("EXPLAIN QUERY PLAN SELECT rid FROM traces WHERE run_id = ? ORDER BY started_ms",
                       ("run-1",))
    assert "traces_run" in plan[0][-1]
    store.close()


def _built_trace(rid: str, **fields):
    from txcl.trace.recorder import TraceRecorder

    rec = TraceRecorder("summary", rid, "api", "s", run_id=fields.pop("run_id", None))
    rec.finish("completed", http_status=200, fuel_used=1, **fields)
    return rec.build()


def test_a_batch_of_traces_is_written_in_order_with_its_empty_columns_null(db_url):
    """Rows whose usual columns are empty and rows that fill them go out in one batch in the
    order given: a segment written twice keeps the later row, and empty columns read NULL."""
    from txcl.store import open_store

    store = open_store(db_url)
    store.write_traces([_built_trace("r1"), _built_trace("r1", run_id="run-1", error={"error": "x"}),
                        _built_trace("r2"), _built_trace("r3", run_id="run-3"), _built_trace("r3")])
    r1, r2, r3 = (store.get_trace(rid).request for rid in ("r1", "r2", "r3"))
    assert (r1["run_id"], json.loads(r1["error_json"])) == ("run-1", {"error": "x"})
    assert r3["run_id"] is None  # the later row of r3 won
    raw = RawDb(store).execute(
        "SELECT origin_rid, run_id, in_json, out_json, error_json, status FROM traces WHERE rid = ?", ("r2",))
    assert tuple(raw[0]) == (None, None, None, None, None, "completed")
    store.close()


def _traced_walks(workspace, count: int) -> list:
    """`count` summary traces of a 2-scope walk, as the interpreter builds them."""
    from txcl.ops.tree import load_ops
    from txcl.runtime.config import Settings
    from txcl.runtime.interpreter import Interpreter

    ws = workspace({"OPS/s/0100/a.txcl": "EMIT .a = 1", "OPS/s/0200/b.txcl": 'EXEC "txco://noop"'})
    kept: list = []
    interp = Interpreter(load_ops(ws), settings=Settings(trace_mode="summary"), trace_sink=kept.append)
    for n in range(count):
        interp.run_sync({"n": n}, "s")
    interp.close()
    return kept


def test_a_large_batch_goes_out_in_multi_row_statements_and_reads_back_whole(workspace, db_url, monkeypatch):
    """A batch of more traces than one multi-row INSERT holds is written as whole chunks
    plus the rest row by row; every trace reads back exactly as built, on each backend."""
    from txcl.store import open_store
    from txcl.store.procedures import traces_kv

    records = _traced_walks(workspace, 2 * traces_kv._CHUNK + 5)
    expected = {r.request["rid"]: (dict(r.request), r.steps, r.events) for r in records}
    store = open_store(db_url)
    from txcl.store.backend import Tx

    chunked: list[int] = []
    original = Tx.send

    def counted(self, sql, params=()):
        if sql in traces_kv._CHUNKED.values():
            chunked.append(len(params))
        original(self, sql, params)

    monkeypatch.setattr(Tx, "send", counted)
    store.write_traces(records)
    per_row = len(traces_kv._FILLED_COLUMNS) + 3  # and the steps, the events, times_from
    assert chunked == [traces_kv._CHUNK * per_row] * 2  # two whole chunks; five rows one by one
    for rid, (request, steps, events) in expected.items():
        stored = store.get_trace(rid)
        assert {k: stored.request[k] for k in ("status", "bytes_out", "fuel_used", "started_ms")} == {
            k: request[k] for k in ("status", "bytes_out", "fuel_used", "started_ms")}
        assert [{k: v for k, v in st.items() if v is not None} for st in stored.steps] == [
            {k: v for k, v in st.items() if v is not None} for st in steps]
        assert stored.events == [dict(zip(("seq", "at_ms", "kind", "data"), e)) for e in events]
    assert RawDb(store).execute("SELECT count(*) FROM traces")[0][0] == len(expected)
    store.close()


def test_a_large_batch_with_a_trace_written_twice_keeps_the_later(workspace, db_url):
    """A rid twice in a batch big enough for multi-row statements: written row by row, so
    the later write wins (PostgreSQL would refuse one statement changing a row twice)."""
    from txcl.store import open_store
    from txcl.store.procedures import traces_kv

    records = [_built_trace(f"r{n}") for n in range(traces_kv._CHUNK + 3)]
    records.append(_built_trace("r1", run_id="run-1"))
    store = open_store(db_url)
    store.write_traces(records)
    assert store.get_trace("r1").request["run_id"] == "run-1"
    assert RawDb(store).execute("SELECT count(*) FROM traces")[0][0] == traces_kv._CHUNK + 3
    store.close()


def test_group_commit_writer(workspace, db_url):
    from txcl.ops.tree import load_ops
    from txcl.runtime.config import Settings
    from txcl.runtime.interpreter import Interpreter
    from txcl.store import open_store

    ws = workspace({"OPS/s/0100/a.txcl": "EMIT .a = 1"})
    store = open_store(db_url)
    interp = Interpreter(load_ops(ws), store=store, settings=Settings(), trace_batch=3, trace_batch_delay_s=3600)
    rids = [interp.run_sync({}, "s").rid for _ in range(4)]
    # three traces went out together in one batch; the fourth waits for close()
    assert [store.get_trace(r) is not None for r in rids] == [True, True, True, False]
    interp.close()
    assert store.get_trace(rids[3]) is not None
    store.close()


def _packed_trace_columns(store, rid):
    return RawDb(store).execute("SELECT steps_json, events_json FROM traces WHERE rid = ?", (rid,))[0]


def test_summary_steps_are_stored_as_compact_rows(workspace, run_tree):
    """A summary step is stored as an array in a fixed field order (trailing nulls left out)
    and reads back as the same step object as one stored whole."""
    # b shares its scope with an EXEC, so it is not folded into a fused scope's entry
    ws = workspace({"OPS/s/0100/a.txcl": 'EXEC "txco://noop"', "OPS/s/0200/b.txcl": "EMIT .b = 1",
                    "OPS/s/0200/c.txcl": 'EXEC "txco://noop"'})
    outcome, store = run_tree(ws, {"x": 1})
    steps_json, _events = _packed_trace_columns(store, outcome.rid)
    rows = json.loads(steps_json)
    assert [type(r) for r in rows] == [list, list, list]
    noop = rows[1]  # a rule without EXEC: no sizes, no error, so the row ends at its duration
    assert noop[:8] == [noop[0], "s", 200, "b", None, "noop", "ok", noop[7]] and len(noop) == 10
    step = store.get_trace(outcome.rid).steps[1]
    assert step["stage"] == "s/200" and step["stack"] == "s" and step["scope"] == 200
    assert step["input_bytes"] is None and step["error"] is None and step["finished_ms"] >= step["started_ms"]
    remote = store.get_trace(outcome.rid).steps[0]
    assert remote["transport"] == "txco" and remote["input_bytes"] > 0 and remote["output_bytes"] == 2


def test_trace_records_beyond_the_compiled_encoder_fall_back(monkeypatch):
    """orjson refuses integers beyond 64 bits and non-string keys; the `json` encoder writes
    them instead, and without orjson at all the text reads back the same."""
    from txcl.trace.format import TraceRecord
    from txcl.trace import packing

    steps = [(1, "s", 100, "a", None, "noop", "ok", 5, 6, 0.5), (2, "s", 200, "b", "x", "http", "error", 7, 8,
                                                                1.25, 3, None, "bad")]
    events = [(1, 5, "request.start", {"big": 2**70}), (2, 6, "k", {1: "non-string key"})]
    record = TraceRecord({}, steps, events)
    fast = (packing.pack_steps(record.raw_steps), packing.pack_events(record.events))
    assert json.loads(fast[1]) == [[1, 5, "request.start", {"big": 2**70}], [2, 6, "k", {"1": "non-string key"}]]
    monkeypatch.setattr(packing, "_orjson", None)
    slow = (packing.pack_steps(record.raw_steps), packing.pack_events(record.events))
    assert [json.loads(t) for t in slow] == [json.loads(t) for t in fast]
    assert record.steps[1]["stage"] == "s/200" and record.steps[1]["output_bytes"] is None
    assert record.steps[0]["error"] is None and record.steps[1]["error"] == "bad"


def test_a_record_waiting_for_its_group_commit_is_packed_and_reads_back_the_same(workspace, tmp_path):
    """A batching writer keeps records as their two JSON texts while they wait; reading a
    packed record, or the stored trace, gives the same steps and events as the record had."""
    from txcl.ops.tree import load_ops
    from txcl.runtime.config import Settings
    from txcl.runtime.interpreter import Interpreter
    from txcl.store import open_store
    from txcl.trace.writer import ThreadedTraceWriter

    ws = workspace({"OPS/s/0100/a.txcl": 'EXEC "txco://noop"', "OPS/s/0200/b.txcl": "EMIT .b = 1"})
    kept: list = []
    interp = Interpreter(load_ops(ws), settings=Settings(trace_mode="summary"), trace_sink=kept.append)
    outcome = interp.run_sync({"x": 1}, None)
    interp.close()
    (record,) = kept
    steps, events = [dict(s) for s in record.steps], list(record.events)
    store = open_store(tmp_path / "t.db")
    writer = ThreadedTraceWriter(store, max_batch=10, max_delay_s=60)
    writer.submit(record)
    assert writer.pending() == 1 and record._raw_steps is None and record._events is None
    assert record.steps == steps and record.events == events
    writer.flush()
    stored = store.get_trace(outcome.rid)
    assert [{k: v for k, v in s.items() if v is not None} for s in stored.steps] == [
        {k: v for k, v in s.items() if v is not None} for s in steps]
    assert stored.events == [dict(zip(("seq", "at_ms", "kind", "data"), e)) for e in events]
    assert [e[2] for e in events][:2] == ["request.start", "stage.enter"]
    store.close()


def test_scope_events_are_stored_compact_and_read_back_whole(workspace, run_tree):
    """`stage.enter` and the request's start, usage and end are stored as `[seq, at_ms, code,
    values…]` arrays (no key names); a scope of local rules is stored as its entry alone (code
    7), its rules' steps folded into it, its merge implied. Every reader gets the events back
    as `{seq, at_ms, kind, data}`, the merges included, with the data the walk would have
    recorded for them, and the folded steps as steps."""
    ws = workspace({"OPS/s/0100/a.txcl": "EMIT .a = 1", "OPS/s/0100/b.txcl": "EMIT .b = 2",
                    "OPS/s/0200/c.txcl": "EMIT .c = 3"})
    outcome, store = run_tree(ws, {"x": 1})
    steps_json, events_json = _packed_trace_columns(store, outcome.rid)
    stored = json.loads(events_json)
    assert all(isinstance(e[2], int) for e in stored)
    assert [e[2] for e in stored] == [3, 7, 7, 4, 5]
    assert [e[0] for e in stored] == [1, 2, 6, 9, 10]  # 3-4 and 7: the steps, 5 and 8: the merges
    assert json.loads(steps_json) == []  # every step folded into its scope's entry
    assert stored[0][3:] == ["s", "api"] and stored[-2][3] == 20 and isinstance(stored[-2][4], int)
    assert stored[-1][3:5] == ["completed", stored[-1][4]] and len(stored[-1]) == 5  # no reason
    compact = stored[1:-2]
    assert compact[0][3:5] == ["s/100", 10] and isinstance(compact[0][5], int)
    assert compact[1][3:5] == ["s/200", 20]
    # the entry's microseconds past its millisecond, then each rule's name and microseconds
    assert 0 <= compact[0][6] < 1000 and [type(v) for v in compact[0][7]] == [str, int, str, int]
    assert compact[0][7][::2] == ["a", "b"] and compact[1][7][::2] == ["c"]
    steps = store.get_trace(outcome.rid).steps
    assert [(s["seq"], s["stage"], s["name"], s["transport"], s["status"]) for s in steps] == [
        (3, "s/100", "a", "noop", "ok"), (4, "s/100", "b", "noop", "ok"), (7, "s/200", "c", "noop", "ok")]
    assert steps[0]["duration_ms"] == compact[0][7][1] / 1000 and steps[0]["operation"] is None
    assert steps[1]["started_ms"] == (
        compact[0][1] * 1000 + compact[0][6] + compact[0][7][1]) // 1000 + store.get_trace(outcome.rid).request[
        "started_ms"]
    assert '"stage"' not in events_json  # no key names stored for them
    trace = store.get_trace(outcome.rid)
    events = trace.events
    assert [(e["seq"], e["kind"]) for e in events] == [
        (1, "request.start"), (2, "stage.enter"), (5, "stage.merge"), (6, "stage.enter"),
        (8, "stage.merge"), (9, "request.usage"), (10, "request.end")]
    enter, merge = events[1], events[2]
    assert enter["data"] == {"stage": "s/100", "fuel_used": 10, "ttl": compact[0][5]}
    assert merge["data"] == {"stage": "s/100", "ops": ["a", "b"]}
    assert events[4]["data"] == {"stage": "s/200", "ops": ["c"]}
    # an implied merge is stamped with the time of the scope's last step
    finished = {s["seq"]: s["finished_ms"] for s in trace.steps}
    assert merge["at_ms"] == finished[4] and events[4]["at_ms"] == finished[7]
    assert events[0]["kind"] == "request.start" and events[0]["data"] == {"stack": "s", "src": "api"}
    assert events[-2]["kind"] == "request.usage" and events[-2]["data"] == {
        "fuel": 20, "bytes_out": trace.request["bytes_out"]}
    assert events[-1]["kind"] == "request.end" and events[-1]["data"] == {
        "status": "completed", "duration_ms": stored[-1][4]}
    # stored as milliseconds after the trace's start, read back as epoch milliseconds
    assert 0 <= compact[0][1] < 60_000
    assert enter["seq"] == compact[0][0] and enter["at_ms"] == compact[0][1] + trace.request["started_ms"]


def _kinds_and_data(events):
    """Events without their times (a walk's durations vary from run to run)."""
    return [(e["seq"], e["kind"], {k: v for k, v in e["data"].items() if k != "duration_ms"})
            for e in events]


def _walk_with(run_tree, ws, cls, attribute, value):
    """`run_tree(ws, {"x": 1})` with `attribute` of every `cls` made meanwhile set to `value`."""
    made = cls.__init__

    def patched(self, *args, **kwargs):
        made(self, *args, **kwargs)
        setattr(self, attribute, value)

    cls.__init__ = patched
    try:
        return run_tree(ws, {"x": 1})
    finally:
        cls.__init__ = made


def test_a_fused_scope_reads_back_as_the_general_path_records_it(workspace, run_tree):
    """The same walk with scopes run in one piece (merges implied) and through the general
    path (every merge recorded) reads back the same events, numbers and data alike: a scope
    whose rules all fail to match merges nothing, events recorded in a scope (a refused
    delete, a dropped reserved write) come before its merge, and a jump after it."""
    rules = {"OPS/s/0100/a.txcl": "EMIT .a = 1, @delete = [\"@rid\"]",
             "OPS/s/0100/b.txcl": "WHEN .x == 1\nEMIT .b = 2",
             "OPS/s/0200/none.txcl": "WHEN .x == 99\nEMIT .never = true",
             "OPS/s/0300/c.txcl": "EMIT .c = 3, ._txc.goto = \"s/600\"",
             "OPS/s/0400/skipped.txcl": "EMIT .skipped = true",
             # a rule that drops a reserved write between two that do not: the scope's
             # steps are folded up to it, then recorded on their own
             "OPS/s/0600/e1.txcl": "EMIT .e1 = 1",
             "OPS/s/0600/e2.txcl": "EMIT .e2 = 2, ._txc.rid = \"forged\"",
             "OPS/s/0600/e3.txcl": "EMIT .e3 = 3",
             "OPS/s/0700/d.txcl": "EMIT .d = 4"}
    ws = workspace(rules)
    fused, store = run_tree(ws, {"x": 1})
    fused_trace = store.get_trace(fused.rid)
    fused_events = fused_trace.events
    steps_json, events_json = _packed_trace_columns(store, fused.rid)
    stored = json.loads(events_json)
    assert 7 in [e[2] for e in stored] and 2 not in [e[2] for e in stored]
    entries = {e[3]: e for e in stored if e[2] in (6, 7)}
    assert entries["s/100"][2] == 7 and entries["s/100"][7][::2] == ["a", "b"]
    assert entries["s/200"][2] == 6 and len(entries["s/200"]) == 6  # nothing matched: nothing folded
    assert entries["s/600"][2] == 6  # unfolded: its steps stored as rows
    assert [r[3] for r in json.loads(steps_json)] == ["e1", "e2", "e3"]

    from txcl.runtime.walker import Walker
    from txcl.trace.recorder import TraceRecorder

    general, store2 = _walk_with(run_tree, ws, Walker, "fuse_local", False)
    general_trace = store2.get_trace(general.rid)
    general_events = general_trace.events
    assert not {6, 7} & {e[2] for e in json.loads(_packed_trace_columns(store2, general.rid)[1])}
    assert _kinds_and_data(fused_events) == _kinds_and_data(general_events)

    def untimed(steps):
        return [{k: v for k, v in s.items() if k not in ("started_ms", "finished_ms", "duration_ms")}
                for s in steps]

    assert untimed(fused_trace.steps) == untimed(general_trace.steps) and len(fused_trace.steps) == 7
    dropped = next(e for e in fused_events if e["kind"] == "envelope.reserved_write_dropped")
    assert dropped["data"] == {"path": "._txc.rid", "op": "e2"}
    e1, e2 = (next(s["seq"] for s in fused_trace.steps if s["name"] == n) for n in ("e1", "e2"))
    assert e1 < dropped["seq"] < e2  # in the order the rules ran, as the general path records it
    for step in fused_trace.steps:
        assert step["started_ms"] <= step["finished_ms"] and step["duration_ms"] >= 0

    # a recorder that does not fold (an injected clock) records fused scopes entry first
    unfolded, store3 = _walk_with(run_tree, ws, TraceRecorder, "folds", False)
    stored3 = json.loads(_packed_trace_columns(store3, unfolded.rid)[1])
    assert 7 not in [e[2] for e in stored3] and [e[0] for e in stored3] == sorted(e[0] for e in stored3)
    unfolded_trace = store3.get_trace(unfolded.rid)
    assert _kinds_and_data(unfolded_trace.events) == _kinds_and_data(general_events)
    assert untimed(unfolded_trace.steps) == untimed(general_trace.steps)
    merges = [e["data"] for e in fused_events if e["kind"] == "stage.merge"]
    assert {"stage": "s/200", "ops": []} in merges
    kinds = [e["kind"] for e in fused_events]
    assert kinds.index("envelope.delete_refused") < kinds.index("stage.merge")
    assert kinds.index("stage.jump") == kinds.index("stage.merge", kinds.index("stage.enter", 5)) + 1
    assert fused.envelope["d"] == 4 and "skipped" not in fused.envelope and fused.envelope["e3"] == 3


def test_a_scope_that_never_merged_gets_no_merge_made_up():
    """A scope entered as fused whose merge never happened (the walk ended inside it) leaves
    no gap in the numbering, so readers add no merge; one that merged does."""
    from txcl.trace.format import STAGE_FUSED
    from txcl.trace.recorder import TraceRecorder

    def trace(merged: bool):
        rec = TraceRecorder("summary", "r", "api", "s", clock_ms=lambda: 1_000)
        rec.request_start("s", "api")
        rec.stage_enter("s/100", 10, 500, STAGE_FUSED)
        rec.local_step("s", 100, "a", None, "ok", rec.entered_ns, rec.entered_ns + 2_000_000)
        if merged:
            rec.seq += 1
        rec.finish("failed" if not merged else "completed", http_status=200, fuel_used=10)
        rec.request_done(10, 0, "completed", 0)
        return rec.build()

    assert [e[2] for e in trace(False).events] == ["request.start", "stage.enter", "request.usage",
                                                   "request.end"]
    merged = trace(True).events
    assert [(e[0], e[2]) for e in merged] == [(1, "request.start"), (2, "stage.enter"),
                                              (4, "stage.merge"), (5, "request.usage"), (6, "request.end")]
    assert merged[2][3] == {"stage": "s/100", "ops": ["a"]}


def test_a_fused_entry_is_recorded_in_number_order_whatever_ends_its_scope():
    """A fused scope's entry is written when its rules have run, yet always lands before
    what the scope recorded: folded (steps inside), unfolded (entry, then the steps on their
    own, rebuilt to the microsecond), or left pending by a walk that stopped inside the
    scope (put back in its place when the trace is built). Under an injected clock nothing
    is folded."""
    from txcl.trace.recorder import TraceRecorder

    rec = TraceRecorder("summary", "r", "api", "s")
    rec.fused_enter("s/100", 10, 500)
    entered = rec.entered_ns
    rec.fused_done(["a", 1_500, "b", 250])
    rec.seq += 1  # the implied merge
    rec.fused_enter("s/200", 20, 499)
    rec.unfold("s", 200, ["c", 2_000])
    rec.event("envelope.reserved_write_dropped", {"path": "._txc.rid", "op": "d"})
    rec.local_step("s", 200, "d", None, "ok", rec.entered_ns + 2_000_000, rec.entered_ns + 2_500_000)
    rec.seq += 1
    rec.fused_enter("s/300", 30, 498)
    rec.event("stage.late", {})  # the walk stopped inside the scope
    record = rec.build()
    assert [(e[0], e[2]) for e in record.events] == [
        (1, "stage.enter"), (4, "stage.merge"), (5, "stage.enter"), (7, "envelope.reserved_write_dropped"),
        (9, "stage.merge"), (10, "stage.enter"), (11, "stage.late")]
    assert [(s["seq"], s["name"], s["duration_ms"]) for s in record.steps] == [
        (2, "a", 1.5), (3, "b", 0.25), (6, "c", 2.0), (8, "d", 0.5)]
    a, b = record.steps[:2]
    assert a["finished_ms"] == b["started_ms"] and b["stage"] == "s/100" and b["scope"] == 100
    assert a["started_ms"] - record.request["started_ms"] == (entered - rec._perf_start_ns) // 1_000_000
    assert [s[0] for s in record.raw_steps] == [6, 8]  # only the unfolded ones are rows

    tested = TraceRecorder("summary", "r", "api", "s", clock_ms=lambda: 1_000)
    assert tested.folds is False and TraceRecorder("summary", "r", "api", "s").folds is True


def test_events_stored_as_objects_still_read(tmp_path):
    """Rows written before scope events were compact (every event `[seq, at_ms, kind, data]`)
    read as they always did."""
    from testtools import RawDb

    from txcl.store import open_store
    from txcl.store.procedures.traces_kv import TRACE_COLUMNS

    store = open_store(tmp_path / "t.db")
    old_events = [[1, 5, "request.start", {"stack": "s", "src": "api"}],
                  [2, 6, "stage.enter", {"stage": "s/100", "fuel_used": 10, "ttl": 499}],
                  [3, 7, "stage.merge", {"stage": "s/100", "ops": ["a"]}]]
    row = {c: None for c in TRACE_COLUMNS} | {"rid": "old", "started_ms": 5, "status": "completed"}
    cols = ", ".join((*TRACE_COLUMNS, "steps_json", "events_json"))
    marks = ", ".join("?" for _ in range(len(TRACE_COLUMNS) + 2))
    RawDb(store).execute(f"INSERT INTO traces ({cols}) VALUES ({marks})",
                         (*row.values(), "[]", json.dumps(old_events)))
    events = store.get_trace("old").events
    assert events == [dict(zip(("seq", "at_ms", "kind", "data"), e)) for e in old_events]
    store.close()


def test_an_unpacked_record_gives_compact_events_whole():
    """A record handed to a trace sink (never packed) lists compact events expanded too."""
    from txcl.trace.format import STAGE_ENTER, STAGE_MERGE, TraceRecord, event_dict

    record = TraceRecord({}, [], [(1, 5, "request.start", {"stack": "s"}), (2, 6, STAGE_ENTER, "s/100", 10, 499),
                                  (3, 7, STAGE_MERGE, "s/100", ["a"])])
    assert record.events == [(1, 5, "request.start", {"stack": "s"}),
                             (2, 6, "stage.enter", {"stage": "s/100", "fuel_used": 10, "ttl": 499}),
                             (3, 7, "stage.merge", {"stage": "s/100", "ops": ["a"]})]
    assert event_dict([3, 7, STAGE_MERGE, "s/100", ["a"]]) == {
        "seq": 3, "at_ms": 7, "kind": "stage.merge", "data": {"stage": "s/100", "ops": ["a"]}}
    # a code this txcl does not know is shown as stored, not refused
    assert event_dict([4, 8, 99, "x", 1]) == {"seq": 4, "at_ms": 8, "kind": "event.99", "data": ["x", 1]}


def test_a_local_step_is_timed_to_the_microsecond():
    """Rules without EXEC are timed with `perf_counter_ns` readings: start and finish in
    milliseconds after the trace's start (epoch milliseconds once read), the duration in
    milliseconds to the microsecond; an error is kept. A disabled recorder builds nothing."""
    import time

    from txcl.trace.recorder import TraceRecorder

    rec = TraceRecorder("summary", "r", "api", "s")
    t0 = time.perf_counter_ns()
    rec.local_step("s", 100, "a", "noop", "ok", t0, t0 + 2_345_678)
    rec.local_step("s", 100, "b", "noop", "error", t0 + 2_345_678, t0 + 2_345_679, "bad")
    first, second = rec.steps
    assert first[1:7] == ("s", 100, "a", "noop", "noop", "ok") and first[9] == 2.345 and len(first) == 10
    assert 0 <= first[7] < 5_000  # milliseconds after the trace's start
    assert abs(rec.build().steps[0]["started_ms"] - time.time_ns() // 1_000_000) < 5_000
    assert first[8] - first[7] in (2, 3)
    assert second[9] == 0.0 and second[10:] == (None, None, "bad") and second[0] == first[0] + 1
    off = TraceRecorder("off", "r", "api", "s")
    off.local_step("s", 100, "a", "noop", "ok", t0, t0 + 1)  # the walker does not call it when off
    assert off.build() is None


def test_times_are_stored_from_the_traces_start_and_read_back_as_epoch_milliseconds(workspace, run_tree):
    """Steps' and events' times are stored as small offsets from the trace's start (the
    `times_from` column) and every reader gets epoch milliseconds; reading a record's steps
    or events before it is written changes nothing that is stored."""
    import time

    from testtools import RawDb

    from txcl.trace.packing import pack_trace
    from txcl.trace.recorder import TraceRecorder

    before = time.time_ns() // 1_000_000
    ws = workspace({"OPS/s/0100/a.txcl": "EMIT .a = 1", "OPS/s/0200/b.txcl": 'EXEC "txco://noop"'})
    outcome, store = run_tree(ws, {})
    after = time.time_ns() // 1_000_000
    steps_json, events_json = _packed_trace_columns(store, outcome.rid)
    (times_from,), = RawDb(store).execute("SELECT times_from FROM traces WHERE rid = ?", (outcome.rid,))
    record = store.get_trace(outcome.rid)
    assert times_from == record.request["started_ms"] and before <= times_from <= after
    stored_steps = json.loads(steps_json)  # a's step is folded into its scope's entry
    assert all(0 <= s[7] <= s[8] < 60_000 for s in stored_steps) and len(stored_steps) == 1
    assert [s["started_ms"] for s in record.steps][1:] == [times_from + s[7] for s in stored_steps]
    folded = next(e for e in json.loads(events_json) if e[2] == 7)
    assert record.steps[0]["started_ms"] == times_from + folded[1] and record.steps[0]["name"] == "a"
    assert all(before <= s["started_ms"] <= s["finished_ms"] <= after for s in record.steps)
    assert all(before <= e["at_ms"] <= after for e in record.events)
    assert all(0 <= e[1] < 60_000 for e in json.loads(events_json))

    rec = TraceRecorder("summary", "r", "api", "s", clock_ms=lambda: 5_000)
    rec.event("request.start", {"stack": "s"})
    rec.stage_enter("s/100", 0, 10)
    built = rec.build()
    assert [e[1] for e in built.events] == [5_000, 5_000]  # read: epoch milliseconds
    assert [e[1] for e in json.loads(built.packed(pack_trace)[1])] == [0, 0]  # stored: offsets


def test_a_scope_of_local_rules_is_timed_from_its_entry(workspace, run_tree, monkeypatch):
    """The first local rule's step starts at the scope's entry (one clock reading for both);
    the next starts where the previous ended, and the scope's implied merge is stamped with
    the last one's end (no reading of its own). A clock that moves 5 ms per reading shows it."""
    import itertools

    from txcl.runtime import walker
    from txcl.trace import recorder

    ws = workspace({"OPS/s/0100/a.txcl": "EMIT .a = 1", "OPS/s/0100/b.txcl": "EMIT .b = 2"})
    ticks = itertools.count(10**12, 5_000_000)
    monkeypatch.setattr(recorder, "_perf_ns", lambda: next(ticks))
    monkeypatch.setattr(walker, "perf_counter_ns", lambda: next(ticks))
    outcome, store = run_tree(ws, {})
    trace = store.get_trace(outcome.rid)
    enter = next(e for e in trace.events if e["kind"] == "stage.enter")
    merge = next(e for e in trace.events if e["kind"] == "stage.merge")
    a, b = trace.steps
    assert a["started_ms"] == enter["at_ms"] and a["duration_ms"] == 5.0
    assert b["started_ms"] == a["finished_ms"] and b["duration_ms"] == 5.0
    assert merge["at_ms"] == b["finished_ms"]


def test_the_last_two_events_share_one_reading():
    """`request_done` records the usage and the end (with its reason, when there is one) as
    consecutive events at the same time."""
    from txcl.trace.recorder import TraceRecorder

    rec = TraceRecorder("summary", "r", "api", "s")
    rec.request_start("s", "api")
    rec.request_done(12, 34, "failed", 7, "txcl_bad_goto")
    kinds = [(e[0], e[2], e[3]) for e in rec.build().events]
    assert kinds == [(1, "request.start", {"stack": "s", "src": "api"}),
                     (2, "request.usage", {"fuel": 12, "bytes_out": 34}),
                     (3, "request.end", {"status": "failed", "duration_ms": 7, "reason": "txcl_bad_goto"})]
    usage, end = rec.events[1:]
    assert usage[1] == end[1]
    plain = TraceRecorder("summary", "r", "api", "s")
    plain.request_done(1, None, "completed", 0)
    assert plain.build().events[-1][3] == {"status": "completed", "duration_ms": 0}
    off = TraceRecorder("off", "r", "api", "s")
    off.request_done(1, None, "completed", 0)
    assert off.events == []


def test_packing_converts_step_dicts_only_when_the_recorder_made_some():
    """A recorder that recorded only summary rows says so (packing converts nothing); one
    that recorded a step dict does not, and the dict is stored without its None values. An
    event value JSON has no form for is stored as its str()."""
    from txcl.trace.packing import pack_trace
    from txcl.trace.recorder import TraceRecorder

    rows = TraceRecorder("summary", "r", "api", "s")
    rows.local_step("s", 100, "a", "noop", "ok", 0, 1)
    assert rows.build().rows_only is True
    mixed = TraceRecorder("summary", "r", "api", "s")
    mixed.local_step("s", 100, "a", "noop", "ok", 0, 1)
    mixed.step({"stack": "s", "scope": 200, "name": "b", "status": "ok", "error": None, "ack": {"x": 1}})

    class Odd:
        def __str__(self) -> str:
            return "odd thing"

    mixed.event("custom.note", {"value": Odd()})
    built = mixed.build()
    assert built.rows_only is False
    steps_text, events_text = built.packed(pack_trace)
    stored = json.loads(steps_text)
    assert isinstance(stored[0], list) and stored[1]["ack"] == {"x": 1} and "error" not in stored[1]
    assert json.loads(events_text)[-1][3] == {"value": "odd thing"}


def test_the_requests_list_searches_by_status_request_id_and_time(db_url):
    """`recent_traces` (the dashboard's Requests page) filters by status, the beginning of a
    request id and a time window, on each backend."""
    from txcl.store import open_store
    from txcl.trace.recorder import TraceRecorder

    def trace(rid: str, status: str, started: int):
        rec = TraceRecorder("summary", rid, "http", "shop")
        rec.finish(status, http_status=200, fuel_used=1)
        record = rec.build()
        record.request["started_ms"] = started
        return record

    store = open_store(db_url)
    try:
        store.write_traces([trace("01AAA1", "completed", 1_000), trace("01AAA2", "failed", 2_000),
                            trace("01BBB1", "completed", 3_000), trace("01BBB2", "halted", 4_000)])
        rids = lambda **kw: [t["rid"] for t in store.recent_traces(**kw)]  # noqa: E731
        assert rids() == ["01BBB2", "01BBB1", "01AAA2", "01AAA1"]
        assert rids(status="completed") == ["01BBB1", "01AAA1"]
        assert rids(rid_prefix="01AAA") == ["01AAA2", "01AAA1"]
        assert rids(rid_prefix="01BBB", status="halted") == ["01BBB2"]
        assert rids(since_ms=2_000, before_ms=4_000) == ["01BBB1", "01AAA2"]
        assert rids(rid_prefix="zz") == []
    finally:
        store.close()
