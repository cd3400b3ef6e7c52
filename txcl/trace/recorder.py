"""The per-segment trace recorder (RUNTIME.md §8.1): steps and timeline events buffered in
memory and turned into one `TraceRecord` when the segment ends (written in one transaction).

In `summary` mode bodies are not kept; `full` keeps them (capped); `off` records nothing.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable

from txcl.store.base import TraceRecord
from txcl.trace.redact import Redactor
from txcl.values.merge import deep_copy


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False)


def _json_size(value: Any) -> int | None:
    """Size in bytes of the compact JSON text of `value` (None when it has none)."""
    if value is None:
        return None
    try:
        text = _ENCODER.encode(value)
    except (TypeError, ValueError):
        return None
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def _cap(value: Any, cap: int) -> str | None:
    if value is None:
        return None
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        text = json.dumps(str(value))
    data = text.encode("utf-8")
    if len(data) > cap:
        return json.dumps({"_truncated": True, "bytes": len(data),
                           "head": data[:cap].decode("utf-8", errors="ignore")})
    return text


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class TraceRecorder:
    """Collects one segment's trace. Cheap no-ops when the mode is `off`."""

    def __init__(self, mode: str, rid: str, src: str, entry_stack: str, *, body_cap: int = 65_536,
                 origin_rid: str | None = None, run_id: str | None = None,
                 clock_ms: Callable[[], int] | None = None):
        """`clock_ms` returns epoch milliseconds (tests may inject one)."""
        self.mode = mode
        self.enabled = mode != "off"
        self.full = mode == "full"
        self.body_cap = body_cap
        self.clock_ms = clock_ms or _now_ms
        self.request: dict[str, Any] = {
            "rid": rid, "origin_rid": origin_rid, "run_id": run_id, "src": src, "entry_stack": entry_stack,
            "started_ms": self.clock_ms(), "finished_ms": None, "status": None, "http_status": None,
            "fuel_used": 0, "bytes_in": None, "bytes_out": None, "mode": mode,
        }
        self._in: Any = None
        self._out: Any = None
        self._error: Any = None
        self.steps: list[dict[str, Any]] = []
        self.events: list[tuple] = []  # (seq, at_ms, kind, data): packed as arrays by the store
        self._seq = 0
        self._detailed = False  # a step holds bodies (full mode, WITH debug = true)
        self.omit: set[tuple[str, ...]] = set()
        self.redact: set[tuple[str, ...]] = set()

    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def event(self, kind: str, data: dict[str, Any] | None = None) -> None:
        if self.enabled:
            self._seq += 1
            self.events.append((self._seq, self.clock_ms(), kind, data))

    def step(self, step: dict[str, Any], *, detail: bool = False, rule: str | None = None,
             input_value: Any = None, output_value: Any = None) -> None:
        """Record one step; bodies kept in full mode or when `detail` (WITH debug = true)."""
        if not self.enabled:
            return
        self._seq += 1
        step["seq"] = self._seq
        if self.full or detail:
            step["rule"] = rule
            step["_input"] = input_value
            step["_output"] = output_value
            self._detailed = True
        self.steps.append(step)

    def set_input(self, envelope: Any, size: int | None = None) -> None:
        self.request["bytes_in"] = size if size is not None else (_json_size(envelope) if self.enabled else None)
        if self.full:
            self._in = deep_copy(envelope)  # the walk changes the envelope in place

    def finish(self, status: str, *, http_status: int | None, fuel_used: int, out: Any = None,
               error: Any = None, bytes_out: int | None = None) -> None:
        self.request.update(status=status, http_status=http_status, fuel_used=fuel_used,
                            finished_ms=self.clock_ms())
        if self.enabled:
            payload = out if error is None else error
            self.request["bytes_out"] = bytes_out if bytes_out is not None else _json_size(payload)
        if self.full:
            self._out = out
        self._error = error

    def add_redactions(self, omit: set[tuple[str, ...]], redact: set[tuple[str, ...]]) -> None:
        self.omit |= omit
        self.redact |= redact

    def build(self) -> TraceRecord | None:
        if not self.enabled:
            return None
        red = Redactor(self.omit, self.redact)
        request = dict(self.request)
        request["in_json"] = _cap(red.apply(self._in, owned=True), self.body_cap) if self.full else None
        request["out_json"] = _cap(red.apply(self._out), self.body_cap) if self.full else None
        request["error_json"] = json.dumps(self._error) if self._error is not None else None
        steps = self.steps
        if self._detailed:
            steps = []
            for step in self.steps:
                if "_input" in step:
                    row = {k: v for k, v in step.items() if v is not None and not k.startswith("_")}
                    row["input_json"] = _cap(red.apply(step["_input"], owned=True), self.body_cap)
                    row["output_json"] = _cap(red.apply(step["_output"], owned=True), self.body_cap)
                    step = row
                steps.append(step)
        # Summary steps go out as recorded: keys holding None are left out when the store
        # packs them (txcl.trace.packing), as the readers treat a missing key as None.
        return TraceRecord(request, list(steps), list(self.events))
