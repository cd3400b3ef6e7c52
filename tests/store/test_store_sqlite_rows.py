"""SQLite binds None through an adapter txcl registers (one dict lookup instead of sqlite3's
failing attribute lookups); the value stored is still NULL and reads back as None."""

from __future__ import annotations

import sqlite3

from txcl.store import open_store
from txcl.store.records import TraceRecord


def test_none_is_adapted_cheaply_and_still_stored_as_null(tmp_path):
    store = open_store(tmp_path / "t.db")
    try:
        adapter = sqlite3.adapters.get((type(None), sqlite3.PrepareProtocol))
        assert adapter is not None and adapter(None) is None
        request = {"rid": "r-1", "origin_rid": None, "run_id": None, "src": "test", "entry_stack": "s",
                   "started_ms": 1, "finished_ms": 2, "status": "completed", "http_status": None,
                   "fuel_used": 0, "bytes_in": None, "bytes_out": None, "mode": "summary"}
        store.write_traces([TraceRecord(request, [], [])])
        back = store.get_trace("r-1")
        assert back is not None
        assert {k: back.request[k] for k in ("origin_rid", "run_id", "http_status", "bytes_in")} == dict.fromkeys(
            ("origin_rid", "run_id", "http_status", "bytes_in"))
        assert back.request["status"] == "completed"
    finally:
        store.close()
    with sqlite3.connect(tmp_path / "t.db") as raw:  # NULL in the file, not the text "None"
        assert raw.execute("SELECT typeof(run_id), typeof(bytes_in) FROM traces WHERE rid = 'r-1'").fetchone() == (
            "null", "null")


def test_record_builders_read_rows_as_dicts_and_the_first_of_a_repeated_name_wins(tmp_path):
    """The record builders turn a row into a dict once (reading a `sqlite3.Row` by name
    scans its columns); a name selected twice keeps its first column, as `sqlite3.Row` does."""
    from txcl.store.procedures.rows import columns

    with sqlite3.connect(tmp_path / "r.db") as raw:
        raw.row_factory = sqlite3.Row
        row = raw.execute("SELECT 1 AS a, 2 AS b, 3 AS a").fetchone()
        assert row["a"] == 1  # sqlite3.Row: the first column of that name
        assert columns(row) == {"a": 1, "b": 2}
        plain = raw.execute("SELECT 'x' AS run_id, NULL AS rcid").fetchone()
        assert columns(plain) == {"run_id": "x", "rcid": None}


def test_record_builders_read_postgresql_rows_as_the_row_reads_them():
    """The PostgreSQL backend's rows list each name once: a name selected twice falls back to
    reading every column by name, so each name still gets the column the row gives it."""
    from txcl.store.backends.pq_exec import Row as _Row
    from txcl.store.procedures.rows import columns

    names = ["a", "a", "b"]
    index = {name: i for i, name in enumerate(names)}  # as the backend's row factory builds it
    row = _Row((10, 20, 30), index)
    assert columns(row) == {"a": row["a"], "b": row["b"]} == {"a": 20, "b": 30}
    assert columns(_Row((1, b"x"), {"n": 0, "blob": 1})) == {"n": 1, "blob": b"x"}
