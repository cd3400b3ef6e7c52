"""Trace and kv procedures, written once for every backend.

Traces: one row per segment (the request, its steps and its timeline events packed as JSON
arrays), written by ``write_traces`` for many segments in one transaction. Kv: the
``txco://kv/*`` builtins; every read-modify-write locks its key first (``tx.lock_key``), so
``incr`` and ``cas`` are atomic on every backend.
"""

from __future__ import annotations

import json
from itertools import chain
from operator import itemgetter

from txcl.store.backend import SqlBackend, Tx
from txcl.store.errors import KvError
from txcl.store.procedures import read_procedure, write_procedure
from txcl.store.records import JsonValue, KvEntry
from txcl.trace.format import TraceRecord, event_dict, expand_events, shift_step, step_dict, with_folded_steps
from txcl.trace.packing import pack_trace

STEP_FIELDS = ("seq", "stage", "stack", "scope", "name", "operation", "transport", "status",
               "started_ms", "finished_ms", "duration_ms", "input_bytes", "output_bytes", "error",
               "ack", "unit_id", "items", "passes", "stop", "rule", "input_json", "output_json", "traceback")
_EMPTY_STEP: dict = dict.fromkeys(STEP_FIELDS)
TRACE_COLUMNS = ("rid", "origin_rid", "run_id", "src", "entry_stack", "started_ms", "finished_ms",
                 "status", "http_status", "fuel_used", "bytes_in", "bytes_out", "mode", "in_json",
                 "out_json", "error_json")
# times_from: the steps' and events' times are milliseconds after it (NULL: epoch milliseconds,
# as rows written before traces schema v5 hold them)
_ALL_TRACE_COLUMNS = (*TRACE_COLUMNS, "steps_json", "events_json", "times_from")
_REQUEST_ITEMS = itemgetter(*TRACE_COLUMNS)


def _request_values(request: dict[str, JsonValue]) -> tuple:
    """The request's values in `TRACE_COLUMNS` order (None for those it lacks)."""
    try:
        return _REQUEST_ITEMS(request)  # a recorder's request has every column: one C call
    except KeyError:
        return tuple(request.get(c) for c in TRACE_COLUMNS)


_UPSERT = " ON CONFLICT (rid) DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in _ALL_TRACE_COLUMNS[1:])
_WRITE_TRACE = (
    f"INSERT INTO traces ({', '.join(_ALL_TRACE_COLUMNS)}) VALUES ({', '.join('?' for _ in _ALL_TRACE_COLUMNS)})"
    + _UPSERT
)
# The columns a trace answered at once leaves empty: no parent request, no durable run, no
# bodies (summary mode), no error. Such a row is written by a statement with NULL in their
# place: sqlite3 binds a None parameter through its adapter registry (~1.2 k instructions
# each, a seventh of writing the row), a literal NULL costs nothing.
_USUALLY_NULL = ("origin_rid", "run_id", "in_json", "out_json", "error_json")
_NO_VALUES = (None,) * len(_USUALLY_NULL)
_USUALLY_NULL_ITEMS = itemgetter(*_USUALLY_NULL)
_FILLED_COLUMNS = tuple(c for c in TRACE_COLUMNS if c not in _USUALLY_NULL)
_FILLED_ITEMS = itemgetter(*_FILLED_COLUMNS)
_WRITE_FILLED_TRACE = (
    f"INSERT INTO traces ({', '.join(_ALL_TRACE_COLUMNS)}) VALUES ("
    + ", ".join("NULL" if c in _USUALLY_NULL else "?" for c in _ALL_TRACE_COLUMNS) + ")"
    + _UPSERT
)


# A batch's traces go out `_CHUNK` rows per INSERT (one statement for many rows, not one per
# row: on SQLite ~7 k instructions less per trace, a fifth of writing it), the rest row by row.
# 48 rows of the widest statement bind 912 values, under the 999 older SQLite builds allow.
_CHUNK = 48


def _chunked(single_row_sql: str) -> str:
    """`single_row_sql` (``INSERT … VALUES (…) ON CONFLICT …``) inserting `_CHUNK` rows."""
    head, rest = single_row_sql.split(" VALUES (", 1)
    values, upsert = rest.split(") ON CONFLICT ", 1)
    return f"{head} VALUES {', '.join([f'({values})'] * _CHUNK)} ON CONFLICT {upsert}"


_CHUNKED = {_WRITE_TRACE: _chunked(_WRITE_TRACE), _WRITE_FILLED_TRACE: _chunked(_WRITE_FILLED_TRACE)}


def _write_rows(t: Tx, sql: str, rows: list[tuple]) -> None:
    """`rows` written by `sql`, whole chunks of them by its chunked form. Not when a rid
    repeats: the later of two writes of a trace wins, and PostgreSQL refuses one statement
    that changes a row twice."""
    whole = len(rows) - len(rows) % _CHUNK
    if whole and len({row[0] for row in rows}) == len(rows):
        chunked = _CHUNKED[sql]
        for start in range(0, whole, _CHUNK):
            t.send(chunked, tuple(chain.from_iterable(rows[start:start + _CHUNK])))
        rows = rows[whole:]
    t.many(sql, rows)


def _json_dumps(value: JsonValue) -> str:
    from txcl.values.jsonio import dumps

    return dumps(value)


def _json_loads(text: str) -> JsonValue:
    from txcl.values.jsonio import loads

    return loads(text)


class TraceProcedures:
    backend: SqlBackend

    @write_procedure
    def write_traces(self, t: Tx, traces: list[TraceRecord]) -> None:
        """Write every trace (one row each) in one transaction, in the order given (a
        segment's trace written twice keeps the later one)."""
        rows: list[tuple] = []
        sql = _WRITE_FILLED_TRACE
        for trace in traces:
            request = trace.request
            try:
                usual = _USUALLY_NULL_ITEMS(request) == _NO_VALUES
            except KeyError:  # a request built by hand may lack columns
                usual = False
            wanted = _WRITE_FILLED_TRACE if usual else _WRITE_TRACE
            if wanted is not sql:
                _write_rows(t, sql, rows)
                rows, sql = [], wanted
            values = _FILLED_ITEMS(request) if usual else _request_values(request)
            rows.append((*values, *trace.packed(pack_trace), trace.times_from))
        _write_rows(t, sql, rows)

    @read_procedure
    def get_trace(self, t: Tx, rid: str) -> TraceRecord | None:
        row = t.one(f"SELECT {', '.join(_ALL_TRACE_COLUMNS)} FROM traces WHERE rid = ?", (rid,))
        if row is None:
            return None
        n = len(TRACE_COLUMNS)
        request = {c: row[i] for i, c in enumerate(TRACE_COLUMNS)}
        since = row[n + 2] or 0
        raw_events = json.loads(row[n + 1])
        steps = [_EMPTY_STEP | step for step in with_folded_steps(
            [step_dict(s, since) if isinstance(s, list) else shift_step(s, since) for s in json.loads(row[n])],
            raw_events, since)]
        events = [event_dict(e) for e in expand_events(raw_events, steps, since)]
        return TraceRecord(request, steps, events)

    @read_procedure
    def last_trace_rid(self, t: Tx) -> str | None:
        order = self.backend.dialect.seq_order
        row = t.one(f"SELECT rid FROM traces ORDER BY started_ms DESC, {order} DESC LIMIT 1")
        return row[0] if row else None

    @read_procedure
    def recent_traces(self, t: Tx, stack: str | None = None, before_ms: int | None = None,
                      limit: int = 50, *, status: str | None = None, rid_prefix: str | None = None,
                      since_ms: int | None = None) -> list[dict]:
        """The newest requests' summaries (newest first): rid, stack, source, status, HTTP status,
        start, end, fuel, run id — what the dashboard's traces list shows; filtered by stack,
        status, a request id's beginning, and a time window (since, before)."""
        cols = ("rid", "entry_stack", "src", "status", "http_status", "started_ms", "finished_ms", "fuel_used",
                "run_id")
        where, args = [], []
        if stack:
            where.append("entry_stack = ?")
            args.append(stack)
        if before_ms is not None:
            where.append("started_ms < ?")
            args.append(before_ms)
        if since_ms is not None:
            where.append("started_ms >= ?")
            args.append(since_ms)
        if status:
            where.append("status = ?")
            args.append(status)
        if rid_prefix:
            where.append("rid >= ? AND rid < ?")  # a range the primary key answers (no LIKE escaping)
            args += [rid_prefix, rid_prefix + "\U0010ffff"]
        sql = (f"SELECT {', '.join(cols)} FROM traces{' WHERE ' + ' AND '.join(where) if where else ''} "
               f"ORDER BY started_ms DESC, {self.backend.dialect.seq_order} DESC LIMIT ?")
        return [dict(zip(cols, row)) for row in t.all(sql, (*args, limit))]

    @read_procedure
    def trace_documents(self, t: Tx, stack: str, limit: int = 1000) -> list[tuple[str | None, str | None]]:
        """(input JSON, answer JSON) of the newest full traces of requests that entered
        `stack` (what `txcl schema infer --from-traces` learns from)."""
        return [(r[0], r[1]) for r in t.all(
            "SELECT in_json, out_json FROM traces WHERE entry_stack = ? AND in_json IS NOT NULL "
            "ORDER BY started_ms DESC LIMIT ?", (stack, limit))]

    @read_procedure
    def trace_rids_for_run(self, t: Tx, run_id: str) -> list[str]:
        order = self.backend.dialect.seq_order
        return [r[0] for r in t.all(f"SELECT rid FROM traces WHERE run_id = ? ORDER BY started_ms, {order}",
                                    (run_id,))]

    @read_procedure
    def trace_summaries_for_run(self, t: Tx, run_id: str, origin_rid: str | None = None) -> list[dict]:
        """(rid, started_ms, finished_ms, status, mode, src) of a run's segments: the request
        that started it (`origin_rid`) and every resume, oldest first."""
        order = self.backend.dialect.seq_order
        cols = "rid, started_ms, finished_ms, status, mode, src, fuel_used"
        rows = t.all(f"SELECT {cols} FROM traces WHERE run_id = ? ORDER BY started_ms, {order}", (run_id,))
        found = [dict(zip(("rid", "started_ms", "finished_ms", "status", "mode", "src", "fuel_used"), r))
                 for r in rows]
        if origin_rid and not any(f["rid"] == origin_rid for f in found):
            first = t.one(f"SELECT {cols} FROM traces WHERE rid = ?", (origin_rid,))
            if first is not None:
                found.insert(0, dict(zip(("rid", "started_ms", "finished_ms", "status", "mode", "src",
                                          "fuel_used"), first)))
        return found

    @write_procedure
    def purge_traces(self, t: Tx, before_ms: int) -> int:
        return t.run("DELETE FROM traces WHERE started_ms < ?", (before_ms,))


class KvProcedures:
    backend: SqlBackend

    @staticmethod
    def _live(row: object, now_ms: int) -> bool:
        return row is not None and (row[2] is None or row[2] > now_ms)  # type: ignore[index]

    @staticmethod
    def _row(t: Tx, ns: str, key: str) -> object:
        return t.one("SELECT value_json, version, expires_ms FROM kv WHERE ns = ? AND key = ?", (ns, key))

    def _locked_row(self, t: Tx, ns: str, key: str) -> object:
        t.lock_key(json.dumps(["kv", ns, key]))
        return self._row(t, ns, key)

    @staticmethod
    def _put(t: Tx, ns: str, key: str, value: JsonValue, row: object, now_ms: int, expires_ms: int | None) -> int:
        version = row[1] + 1 if row is not None else 1  # type: ignore[index]  # monotonic, also across expiry
        t.send("INSERT INTO kv (ns, key, value_json, version, updated_ms, expires_ms) VALUES (?, ?, ?, ?, ?, ?) "
              "ON CONFLICT (ns, key) DO UPDATE SET value_json = excluded.value_json, version = excluded.version, "
              "updated_ms = excluded.updated_ms, expires_ms = excluded.expires_ms",
              (ns, key, _json_dumps(value), version, now_ms, expires_ms))
        return version

    @read_procedure
    def kv_get(self, t: Tx, ns: str, key: str, now_ms: int) -> KvEntry | None:
        row = self._row(t, ns, key)
        if not self._live(row, now_ms):
            return None
        return KvEntry(key, _json_loads(row[0]), row[1])  # type: ignore[index]

    @write_procedure
    def kv_set(self, t: Tx, ns: str, key: str, value: JsonValue, now_ms: int, expires_ms: int | None = None) -> int:
        return self._put(t, ns, key, value, self._locked_row(t, ns, key), now_ms, expires_ms)

    @write_procedure
    def kv_delete(self, t: Tx, ns: str, key: str, now_ms: int) -> bool:
        row = self._locked_row(t, ns, key)
        t.send("DELETE FROM kv WHERE ns = ? AND key = ?", (ns, key))
        return self._live(row, now_ms)

    @write_procedure
    def kv_incr(self, t: Tx, ns: str, key: str, by: int, now_ms: int) -> KvEntry:
        """Atomic add; a missing key counts as 0; raises KvError on a non-integer value."""
        row = self._locked_row(t, ns, key)
        current: JsonValue = 0
        expires = None
        if self._live(row, now_ms):
            current = _json_loads(row[0])  # type: ignore[index]
            expires = row[2]  # type: ignore[index]
        if isinstance(current, bool) or not isinstance(current, int):
            raise KvError(f"kv/incr: value of {key!r} is not an integer")
        value = current + by
        return KvEntry(key, value, self._put(t, ns, key, value, row, now_ms, expires))

    @write_procedure
    def kv_cas(self, t: Tx, ns: str, key: str, value: JsonValue, expect_version: int, now_ms: int
               ) -> tuple[bool, KvEntry | None]:
        """Atomic compare-and-swap; expect_version 0 means "must not exist"."""
        row = self._locked_row(t, ns, key)
        live = self._live(row, now_ms)
        current_version = row[1] if live else 0  # type: ignore[index]
        if current_version != expect_version:
            return False, (KvEntry(key, _json_loads(row[0]), row[1]) if live else None)  # type: ignore[index]
        return True, KvEntry(key, value, self._put(t, ns, key, value, row, now_ms, None))

    @read_procedure
    def kv_list(self, t: Tx, ns: str, prefix: str, limit: int, now_ms: int) -> tuple[list[KvEntry], bool]:
        rows = t.all(
            "SELECT key, value_json, version FROM kv WHERE ns = ? AND substr(key, 1, ?) = ? "
            "AND (expires_ms IS NULL OR expires_ms > ?) ORDER BY key LIMIT ?",
            (ns, len(prefix), prefix, now_ms, limit + 1))
        items = [KvEntry(r[0], _json_loads(r[1]), r[2]) for r in rows[:limit]]
        return items, len(rows) > limit


__all__ = ["TraceProcedures", "KvProcedures", "STEP_FIELDS", "TRACE_COLUMNS"]
