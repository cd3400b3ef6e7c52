"""What the dashboard's pages show, built from the store: plain dicts and lists for the
templates (no HTML here). Every value that came from a worker or an envelope is redacted by
the trace rules (authorization, cookies, continuation tokens) before it is shown."""

from __future__ import annotations

import json
import time
from typing import Any

from txcl.continuations.progress import progress_text
from txcl.trace.reader import iso_ms
from txcl.trace.redact import Redactor

PAGE_SIZE = 50
INTERACTIONS_SHOWN = 200
STATES = ("active", "waiting", "resuming", "completed", "failed", "expired")
FINISHED = ("completed", "failed", "expired", "cancelled")
_REDACT = Redactor()

# interaction state -> the grid's colour class
ITEM_CLASS = {"queued": "queued", "dispatching": "inflight", "dispatched": "inflight", "completed": "done",
              "failed": "failed", "timed_out": "failed", "cancelled": "cancelled"}


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def clock(ms: int | None) -> str:
    """`2026-12-02T07:25:03.240Z` (the traces' own format), `—` for none."""
    return "—" if ms is None else iso_ms(ms)


def span(ms: int | None) -> str:
    """`2h 05m`, `3m 12s`, `4.2s`, `15ms` (negative: `-`)."""
    if ms is None:
        return "—"
    sign = "-" if ms < 0 else ""
    ms = abs(int(ms))
    if ms < 1000:
        return f"{sign}{ms}ms"
    seconds = ms / 1000.0
    if seconds < 60:
        return f"{sign}{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{sign}{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{sign}{hours}h {minutes:02d}m"
    return f"{sign}{hours // 24}d {hours % 24:02d}h"


def shown_json(value: Any, limit: int = 4000, redactor: Redactor | None = None) -> str:
    """A redacted, indented JSON text of `value`, cut at `limit` characters."""
    if value is None:
        return ""
    text = json.dumps((redactor or _REDACT).apply(value), ensure_ascii=False, indent=2, sort_keys=True)
    return text if len(text) <= limit else text[:limit] + "\n…"


# ------------------------------------------------------------------------------------------ runs


def parse_cursor(text: str | None) -> tuple[int, str] | None:
    """`<created_ms>:<run_id>` of the last row of the previous page."""
    if not text:
        return None
    ms, sep, run_id = text.partition(":")
    if not sep or not ms.isdigit() or not run_id:
        return None
    return int(ms), run_id


def runs_view(store: Any, *, state: str | None, stack: str | None, text: str | None,
              cursor: str | None, limit: int | None = None, stacks: list[str] | None = None) -> dict:
    """One page of runs. `stacks`: the filter's choices (the tree's stacks; else the store's)."""
    state = state if state in (*STATES, "cancelled") else None
    stack = stack or None
    text = (text or "").strip()[:100] or None
    now = now_ms()
    size = limit if limit is not None and 1 <= limit <= 500 else PAGE_SIZE
    rows = store.run_page(status=state, stack=stack, text=text, before=parse_cursor(cursor), limit=size + 1)
    more = len(rows) > size
    rows = rows[:size]
    for row in rows:
        row["age"] = span(now - row["created_ms"])
        row["created"] = clock(row["created_ms"])
        if row["status"] in FINISHED:
            row["expiry"] = "—"
        else:
            row["expiry"] = span(row["expires_ms"] - now) if row["expires_ms"] is not None else "—"
        row["waiting_at"] = row["stage"] if row["status"] in ("waiting", "resuming", "active") else ""
        row["attempts"] = row["attempts"] or 0
    counts = store.run_counts()
    queues = [{"queue": q["queue"], "ready": q["ready"], "leased": q["leased"],
               "oldest": span(now - q["oldest_ready_ms"]) if q["oldest_ready_ms"] is not None else "—"}
              for q in store.queue_depths()]
    return {
        "rows": rows,
        "queues": queues,
        "counts": [(s, counts.get(s, 0)) for s in STATES] + ([("cancelled", counts["cancelled"])]
                                                             if counts.get("cancelled") else []),
        "total": sum(counts.values()),
        "stacks": stacks if stacks is not None else store.run_stacks(),
        "filters": {"state": state or "", "stack": stack or "", "text": text or "",
                    "limit": str(size) if size != PAGE_SIZE else ""},
        "next_cursor": f"{rows[-1]['created_ms']}:{rows[-1]['run_id']}" if more and rows else None,
        "paged": cursor is not None and parse_cursor(cursor) is not None,
    }


# ------------------------------------------------------------------------------------------ one run


def _unit_view(store: Any, unit: Any, now: int, red: Redactor) -> dict:
    interactions = store.list_interactions(unit.unit_id)
    items = [{"index": it.item_index, "status": it.status, "cls": ITEM_CLASS.get(it.status, "queued"),
              "opc": it.opc} for it in interactions]
    counts: dict[str, int] = {}
    for item in items:
        counts[item["cls"]] = counts.get(item["cls"], 0) + 1
    rows = []
    for it in interactions[:INTERACTIONS_SHOWN]:
        terminal = store.get_terminal(it.opc) if it.status in ("completed", "failed") else None
        ack = it.ack if isinstance(it.ack, dict) else {}
        rows.append({
            "opc": it.opc, "index": it.item_index, "status": it.status, "attempts": it.attempts,
            "dispatched": clock(it.dispatch_ms), "job_id": ack.get("job_id"),
            "closed": clock(it.closed_ms),
            "took": span(it.closed_ms - it.dispatch_ms) if it.closed_ms and it.dispatch_ms else "—",
            "source": terminal.source if terminal else None,
            "transport": terminal.transport if terminal else None,
            "answer": shown_json(terminal.payload, 1500, red) if terminal else "",
            "progress": progress_text(it.progress) if it.progress is not None else "",
            "heartbeat": clock(it.heartbeat_ms) if it.heartbeat_ms else "",
        })
    return {
        "unit_id": unit.unit_id, "kind": unit.kind, "op": f"{unit.op_stack}/{unit.op_name}", "status": unit.status,
        "target": unit.exec_target, "stage": unit.dispatch_stage, "join_at_scope": unit.join_at_scope,
        "expected": unit.expected, "window": unit.window, "policy": unit.on_item_error,
        "created": clock(unit.created_ms), "closed": clock(unit.closed_ms),
        "deadline": clock(unit.deadline_ms),
        "left": span(unit.deadline_ms - now) if unit.deadline_ms and not unit.closed_ms else "—",
        "cells": items, "counts": counts, "in_flight": counts.get("inflight", 0),
        "interactions": rows, "more_interactions": max(0, len(interactions) - INTERACTIONS_SHOWN),
        "output": shown_json(unit.output, 3000, red) if unit.output is not None else "",
        "error": shown_json(unit.error, 1500, red) if unit.error is not None else "",
    }


def _segments(store: Any, run: Any) -> list[dict]:
    """The run's segments (the request and each resume) with their timelines."""
    out = []
    for summary in store.trace_summaries_for_run(run.run_id, run.origin_rid):
        trace = store.get_trace(summary["rid"])
        if trace is None:
            continue
        start = trace.request.get("started_ms") or 0
        lines = []
        for event in trace.events:
            kind = event["kind"]
            data = event.get("data") or {}
            if kind in ("stage.diff",):
                continue
            lines.append({"at": span(event["at_ms"] - start), "kind": kind,
                          "text": _event_text(kind, data)})
        steps = [{"stage": s.get("stage"), "name": s.get("name"), "transport": s.get("transport"),
                  "status": s.get("status"), "duration": _ms_text(s.get("duration_ms")),
                  "error": s.get("error")} for s in trace.steps]
        out.append({"rid": summary["rid"], "started": clock(summary["started_ms"]), "status": summary["status"],
                    "mode": summary["mode"], "resume": summary["rid"].startswith("resume-"),
                    "events": lines, "steps": steps})
    return out


def _ms_text(value: Any) -> str:
    if value is None:
        return ""
    try:
        return f"{float(value):.1f}ms"
    except (TypeError, ValueError):
        return str(value)


def _event_text(kind: str, data: Any) -> str:
    if not isinstance(data, dict):
        return "" if data is None else str(data)
    keep = {k: v for k, v in data.items() if k not in ("snapshot_id",)}
    return "  ".join(f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in keep.items())[:300]


def run_view(store: Any, run_id: str, redactor_for: Any = None) -> dict | None:
    """`redactor_for(stack)`: the trace redaction of a stack (its rules' WITH redact/omit)."""
    run = store.get_run(run_id)
    if run is None:
        return None
    now = now_ms()
    red = (redactor_for(run.entry_stack) if redactor_for is not None else None) or _REDACT
    units = [_unit_view(store, u, now, red) for u in store.list_units(run_id)]
    joins = [{"op": u["op"], "dispatched": u["created"], "floor": u["join_at_scope"], "status": u["status"],
              "closed": u["closed"]} for u in units if u["join_at_scope"] is not None]
    suspends = [{"stage": s.stage, "visit": s.visit, "kind": s.kind, "status": s.status,
                 "at": clock(s.suspended_ms), "closed": clock(s.closed_ms)} for s in store.list_suspends(run_id)]
    events = [{"at": clock(e.at_ms), "kind": e.kind, "text": _event_text(e.kind, e.data)}
              for e in store.list_run_events(run_id)]
    return {
        "run": {"run_id": run.run_id, "rcid": run.rcid, "origin_rid": run.origin_rid, "status": run.status,
                "stack": run.entry_stack, "stage": run.cur_stage, "visit": run.cur_visit,
                "created": clock(run.created_ms), "updated": clock(run.updated_ms),
                "expires": clock(run.expires_ms), "finished": clock(run.finished_ms),
                "age": span(now - run.created_ms),
                "left": span(run.expires_ms - now) if run.expires_ms and run.status not in FINISHED else "—",
                "fail_reason": run.fail_reason,
                "error": shown_json(run.error, 3000, red) if run.error is not None else "",
                "result": shown_json(run.result, 6000, red) if run.result is not None else ""},
        "finished": run.status in FINISHED,
        "units": units, "joins": joins, "suspends": suspends, "events": events,
        "segments": _segments(store, run),
    }


# ------------------------------------------------------------------------------------------ one trace


def trace_view(store: Any, rid: str) -> dict | None:
    trace = store.get_trace(rid)
    if trace is None:
        return None
    request = trace.request
    start = request.get("started_ms") or 0
    stages: list[dict] = []
    by_stage: dict[str, dict] = {}

    def entry_for(stage: str, at: str = "") -> dict:
        # a resumed scope has no stage.enter: its entry starts with its first step or diff
        entry = by_stage.get(stage)
        if entry is None:
            entry = {"stage": stage, "at": at, "steps": [], "diff": None, "more": 0}
            stages.append(entry)
            by_stage[stage] = entry
        return entry

    for event in trace.events:
        data = event.get("data") or {}
        if event["kind"] == "stage.enter" and isinstance(data, dict):
            entry = {"stage": data.get("stage"), "at": span(event["at_ms"] - start), "steps": [], "diff": None,
                     "more": 0}
            stages.append(entry)
            by_stage[str(data.get("stage"))] = entry
        elif event["kind"] == "stage.diff" and isinstance(data, dict):
            entry = entry_for(str(data.get("stage")), span(event["at_ms"] - start))
            entry["diff"] = [{"op": c.get("op"), "path": c.get("path"),
                              "before": _value_text(c.get("before")) if "before" in c else None,
                              "after": _value_text(c.get("after")) if "after" in c else None}
                             for c in data.get("changes", [])]
            entry["more"] = data.get("more", 0)
    loose: list[dict] = []
    for step in trace.steps:
        joined = step.get("dispatched_at") if step.get("joined") else None
        row = {"name": step.get("name"), "transport": step.get("transport"), "status": step.get("status"),
               "joined": joined,
               "duration": _ms_text(step.get("duration_ms")), "error": step.get("error"),
               "input": _pretty(step.get("input_json")), "output": _pretty(step.get("output_json"))}
        stage = step.get("stage")
        (entry_for(str(stage))["steps"] if stage else loose).append(row)
    return {
        "request": {k: request.get(k) for k in ("rid", "origin_rid", "run_id", "src", "entry_stack", "status",
                                                "http_status", "fuel_used", "mode")}
        | {"started": clock(request.get("started_ms")),
           "duration": span((request.get("finished_ms") or start) - start)},
        "input": _pretty(request.get("in_json")), "output": _pretty(request.get("out_json")),
        "error": _pretty(request.get("error_json")),
        "stages": stages, "loose": loose, "full": request.get("mode") == "full",
        "events": [{"at": span(e["at_ms"] - start), "kind": e["kind"], "text": _event_text(e["kind"], e.get("data"))}
                   for e in trace.events if e["kind"] != "stage.diff"],
        "debug": debug_launch(trace),
    }


def debug_launch(trace: Any) -> dict:
    """"Debug this request": the launch configuration `txcl dap` walks the request again with,
    and why it cannot when the request was not recorded for it."""
    from txcl.replay import replayable

    rid = trace.request.get("rid")
    launch = {"type": "txcl", "request": "launch", "name": f"Debug request {rid}",
              "workspace": "${workspaceFolder}", "trace": rid}
    return {"launch": json.dumps(launch, indent=2), "problem": replayable(trace)}


def _value_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False) if not isinstance(value, str) or not value.endswith("…") \
        else value


def _pretty(text: str | None) -> str:
    if not text:
        return ""
    try:
        return json.dumps(json.loads(text), ensure_ascii=False, indent=2)[:6000]
    except ValueError:
        return text[:6000]


__all__ = ["runs_view", "run_view", "trace_view", "span", "clock", "STATES", "PAGE_SIZE"]


# ---------------------------------------------------------------- stack schemas (typed envelopes)

def _analyzed(tree: Any) -> Any:
    from pathlib import Path

    from txcl.types.workspace import analyze

    workspace = getattr(tree, "workspace", None)
    if workspace is None or not (Path(workspace) / "OPS").is_dir():
        return None
    try:
        return analyze(Path(workspace) / "OPS")
    except Exception:  # noqa: BLE001 - a page must not fail on a tree that does not analyse
        return None


def _rows(shape: Any) -> list[dict]:
    from txcl.types.shape import lookup
    from txcl.types.workspace import describe, path_entries

    rows = []
    for segments, node in path_entries(shape):
        if segments[0] == "_ts":
            continue
        found = lookup(shape, segments)
        rows.append({"path": "." + ".".join(segments), "segments": list(segments), "depth": len(segments) - 1,
                     "type": describe(node, found.certain), "description": node.description or ""})
    return rows


def stacks_view(tree: Any) -> list[dict]:
    """Every user stack with its schema: the input and output as rows of paths, and the file."""
    analyzed = _analyzed(tree)
    flow = analyzed.flow if analyzed is not None else None
    out = []
    for stack in (tree.user_stacks() if tree is not None else []):
        types = flow.stack_types(stack) if flow is not None else None
        if types is None:
            out.append({"name": stack, "typed": False})
            continue
        out.append({"name": stack, "typed": True, "file": types.file.shown, "owner": types.stack,
                    "text": types.file.text, "input": _rows(types.input),
                    "output": _rows(types.output) if types.output is not None else None})
    return out


def schema_paths(tree: Any, stack: str) -> list[dict]:
    """The paths `$defs.input` of `stack` declares: [{segments, type, description}]."""
    analyzed = _analyzed(tree)
    flow = analyzed.flow if analyzed is not None else None
    types = flow.stack_types(stack) if flow is not None and stack else None
    if types is None:
        return []
    return [{"segments": r["segments"], "type": r["type"], "description": r["description"]} for r in _rows(types.input)]


TRACE_STATUSES = ("completed", "halted", "failed", "suspended", "deadline")


def _utc_ms(text: str | None) -> int | None:
    """Milliseconds of a `YYYY-MM-DDTHH:MM[:SS]` time read as UTC (a datetime-local field), or None."""
    import datetime as _dt

    if not text:
        return None
    try:
        moment = _dt.datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.timezone.utc)
    return int(moment.timestamp() * 1000)


def traces_view(store: Any, *, stack: str | None, before: str | None, stacks: list[str] | None = None,
                status: str | None = None, rid: str | None = None, since: str | None = None,
                until: str | None = None) -> dict:
    """The newest requests (a synchronous one has a trace but no run): one page, searched by
    stack, status, the beginning of a request id, and a time window (UTC)."""
    before_ms = int(before) if before and before.isdigit() else None
    until_ms = _utc_ms(until)
    if until_ms is not None:
        before_ms = until_ms if before_ms is None else min(before_ms, until_ms)
    status = status if status in TRACE_STATUSES else None
    rid = (rid or "").strip()[:64] or None
    rows = store.recent_traces(stack=stack or None, before_ms=before_ms, limit=PAGE_SIZE + 1, status=status,
                               rid_prefix=rid, since_ms=_utc_ms(since))
    more = len(rows) > PAGE_SIZE
    rows = rows[:PAGE_SIZE]
    out = []
    for r in rows:
        started, finished = r.get("started_ms") or 0, r.get("finished_ms")
        out.append({**r, "started": _iso(started), "duration": f"{finished - started} ms" if finished else "…"})
    filters = {"stack": stack or "", "status": status or "", "rid": rid or "", "since": since or "",
               "until": until or ""}
    return {"rows": out, "filters": filters, "statuses": TRACE_STATUSES,
            "stacks": stacks or sorted({r["entry_stack"] for r in rows if r.get("entry_stack")}),
            "next": str(rows[-1]["started_ms"]) if more and rows else None}


def schedules_view(store: Any, *, status: str | None) -> dict:
    """The scheduled events, pending ones soonest first, with the count in each state."""
    from txcl.scheduling import rfc3339
    from txcl.store.states.scheduled_events import MACHINE
    from txcl.values.jsonio import dumps

    wanted = status if status in MACHINE.states else None
    # the counts first: the rows, read after them, are at least as new (an event that fired in
    # between shows as fired in both, never as fired in the counts and still due in the rows)
    counts = store.count_events()
    rows = []
    for e in store.list_events(status=wanted, limit=PAGE_SIZE):
        payload = dumps(e.payload)
        rows.append({"key": e.idempotency_key, "event_id": e.event_id, "status": e.status,
                     "schedule_at": rfc3339(e.schedule_at_ms), "origin_stack": e.origin_stack or "",
                     "origin_rid": e.origin_rid, "attempts": e.attempts, "fired_at": rfc3339(e.fired_ms) or "",
                     "rid": e.rid, "error": e.error or "",
                     "payload": payload if len(payload) <= 200 else payload[:199] + "\u2026"})
    return {"rows": rows, "counts": counts, "statuses": MACHINE.states,
            "filters": {"status": wanted or ""}}


def _iso(ms: int) -> str:
    import datetime as _dt

    return _dt.datetime.fromtimestamp(ms / 1000, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
