"""Reading and printing stored traces (`txcl trace`, `txcl run --trace`)."""

from __future__ import annotations

import datetime as _dt
import json
from typing import Any

from txcl.trace.format import TraceRecord


def iso_ms(ms: int) -> str:
    """Epoch milliseconds as `2026-12-02T07:25:03.240Z`."""
    t = _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{int(ms % 1000):03d}Z"


def _iso(ms: int | None) -> str:
    return "-" if ms is None else iso_ms(ms)


def _loads(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def trace_to_json(record: TraceRecord) -> dict[str, Any]:
    """The records as plain JSON (bodies parsed back)."""
    req = dict(record.request)
    request = {k: v for k, v in req.items() if not k.endswith("_json")}
    request["started_at"] = _iso(req.get("started_ms"))
    request["finished_at"] = _iso(req.get("finished_ms"))
    for key in ("in_json", "out_json", "error_json"):
        if req.get(key) is not None:
            request[key[:-5]] = _loads(req[key])
    steps = []
    for step in record.steps:
        row = {k: v for k, v in step.items() if v is not None and not k.endswith("_json")}
        row["started_at"] = _iso(step.get("started_ms"))
        row["finished_at"] = _iso(step.get("finished_ms"))
        for key in ("input_json", "output_json"):
            if step.get(key) is not None:
                row[key[:-5]] = _loads(step[key])
        steps.append(row)
    events = [{"seq": e["seq"], "at": _iso(e["at_ms"]), "kind": e["kind"], "data": e.get("data")}
              for e in record.events]
    return {"request": request, "steps": steps, "events": events}


def filter_steps(record: TraceRecord, grep: str | None) -> list[dict[str, Any]]:
    if not grep:
        return list(record.steps)
    needle = grep.lower()
    return [s for s in record.steps
            if any(needle in str(s.get(k) or "").lower() for k in ("name", "operation", "error"))]


def _event_text(data: Any) -> str:
    if not isinstance(data, dict):
        return "" if data is None else json.dumps(data)
    parts = []
    for key, value in data.items():
        parts.append(f"{key}={value if isinstance(value, (str, int, float)) else json.dumps(value)}")
    return " ".join(parts)


def step_line(step: dict[str, Any]) -> str:
    dur = step.get("duration_ms")
    text = (f"  #{step['seq']:<4} {step.get('stage') or '-':<20} {step.get('name') or '-':<20} "
            f"{step.get('transport') or '-':<8} {step.get('status') or '-':<9} "
            f"{(f'{dur:.1f}ms' if isinstance(dur, (int, float)) else '-'):>9}")
    extras = []
    if step.get("passes") is not None:
        extras.append(f"passes={step['passes']} stop={step.get('stop')}")
    if step.get("error"):
        extras.append(f"error: {step['error']}")
    return text + ("  " + "  ".join(extras) if extras else "")


def format_trace(record: TraceRecord, *, verbose: bool = False, grep: str | None = None) -> str:
    req = record.request
    started = req.get("started_ms")
    finished = req.get("finished_ms")
    duration = f"{finished - started}ms" if started is not None and finished is not None else "-"
    lines = [
        f"request {req['rid']}  status={req.get('status')}  http={req.get('http_status')}  "
        f"stack={req.get('entry_stack')}  src={req.get('src')}  fuel={req.get('fuel_used')}  "
        f"duration={duration}  started={_iso(started)}"
    ]
    if req.get("run_id"):
        lines.append(f"  run {req['run_id']}" + (f"  origin {req['origin_rid']}" if req.get("origin_rid") else ""))
    if req.get("error_json"):
        lines.append(f"  error: {req['error_json']}")
    lines.append("timeline:")
    for event in record.events:
        offset = event["at_ms"] - started if started is not None and event.get("at_ms") is not None else 0
        lines.append(f"  +{offset}ms  {event['kind']}  {_event_text(event.get('data'))}".rstrip())
    steps = filter_steps(record, grep)
    lines.append("steps:" if steps else "steps: (none)")
    for step in steps:
        lines.append(step_line(step))
        if verbose:
            lines.extend(_step_detail(step, indent="      "))
    return "\n".join(lines)


def _step_detail(step: dict[str, Any], indent: str) -> list[str]:
    out = []
    if step.get("operation"):
        out.append(f"{indent}operation: {step['operation']}")
    if step.get("input_bytes") is not None or step.get("output_bytes") is not None:
        out.append(f"{indent}bytes: in={step.get('input_bytes')} out={step.get('output_bytes')}")
    for key, label in (("input_json", "input"), ("output_json", "output")):
        if step.get(key) is not None:
            out.append(f"{indent}{label}: {step[key]}")
    if step.get("rule"):
        out.append(f"{indent}rule:")
        out.extend(f"{indent}  {line}" for line in str(step["rule"]).rstrip("\n").split("\n"))
    if step.get("traceback"):
        out.append(f"{indent}traceback:")
        out.extend(f"{indent}  {line}" for line in str(step["traceback"]).rstrip("\n").split("\n"))
    return out


def format_step(record: TraceRecord, seq: int) -> str | None:
    for step in record.steps:
        if step["seq"] == seq:
            head = step_line(step).strip()
            rows = [head, f"  started: {_iso(step.get('started_ms'))}  finished: {_iso(step.get('finished_ms'))}"]
            rows.extend(_step_detail(step, indent="  "))
            return "\n".join(rows)
    return None
