"""The per-segment trace recorder: steps and timeline events buffered in
memory and turned into one `TraceRecord` when the segment ends (written in one transaction).

In `summary` mode bodies are not kept; `full` keeps them (capped); `off` records nothing.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable

from txcl.trace.format import (REQUEST_END, REQUEST_START, REQUEST_USAGE, STAGE_ENTER, STAGE_FUSED, STAGE_MERGE,
                                STAGE_RULES, TraceRecord)
from txcl.trace.packing import _orjson, pack_trace
from txcl.trace.redact import ALWAYS_KEYS, Redactor
from txcl.values.merge import deep_copy


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False)
_perf_ns = time.perf_counter_ns  # read for every event: one global lookup instead of two


def _json_size(value: Any) -> int | None:
    """Size in bytes of the compact JSON text of `value` (None when it has none), as a
    compiled encoder writes it (number forms may differ from a response by a byte or two)."""
    if value is None:
        return None
    if _orjson is not None:
        try:
            return len(_orjson.dumps(value))
        except (TypeError, ValueError):
            pass  # beyond orjson (a 65-bit integer, say): the json module measures it
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
    return _cap_text(text, cap)


def _cap_text(text: str, cap: int) -> str:
    if len(text) * 4 <= cap:  # even at four bytes a character it fits
        return text
    data = text.encode("utf-8")
    if len(data) > cap:
        return json.dumps({"_truncated": True, "bytes": len(data),
                           "head": data[:cap].decode("utf-8", errors="ignore")})
    return text


class _Snapshot:
    """A body kept for a full-mode trace as its JSON text, taken when it is recorded (the
    walk goes on changing the live objects). Cheaper than a deep copy, and the text is what
    the trace stores when no redaction applies."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text


# Keys `Redactor` always masks, as they appear (lowercased) in JSON text.
_SECRET_KEYS = tuple(f'"{key}"' for key in ALWAYS_KEYS)


def _snapshot(value: Any) -> Any:
    """A private copy of a body: its JSON text, or a deep copy when it has none."""
    if value is None:
        return None
    try:
        return _Snapshot(_ENCODER.encode(value))
    except (TypeError, ValueError):
        return deep_copy(value)


def _masks_something(red: Redactor, text: str) -> bool:
    """Whether `red` could change the value recorded as `text`: a redaction path is given,
    or a key that is always masked appears in it (an upper bound: it may appear as a value)."""
    if red.omit or red.redact:
        return True
    lowered = text.lower()
    return any(key in lowered for key in _SECRET_KEYS)


def _body_json(snapshot: Any, red: Redactor, cap: int) -> str | None:
    """The stored text of a recorded body, redacted and capped."""
    if snapshot is None:
        return None
    if type(snapshot) is _Snapshot:
        text = snapshot.text
        if not _masks_something(red, text):
            return _cap_text(text, cap)  # nothing to mask: the text as recorded
        snapshot = json.loads(text)
    return _cap(red.apply(snapshot, owned=True), cap)


class _ScopeChange:
    """The envelope before and after one scope (full mode); made a diff when the trace is built."""

    __slots__ = ("stage", "before", "after")

    def __init__(self, stage: str, before: Any, after: Any) -> None:
        self.stage, self.before, self.after = stage, before, after


DIFF_ENTRIES_MAX = 200  # per scope
DIFF_VALUE_MAX = 2_000  # characters of JSON per value shown


def _loaded(snapshot: Any, red: Redactor, seen: dict[str, Any] | None = None) -> Any:
    """A recorded envelope, redacted, for a diff. `seen` keeps what was loaded by text: a
    scope's "after" is usually the next scope's "before" (diffs only read what they get)."""
    if snapshot is None:
        return None
    if type(snapshot) is not _Snapshot:
        return red.apply(deep_copy(snapshot), owned=True)
    text = snapshot.text
    if seen is not None and text in seen:
        return seen[text]
    value = json.loads(text)
    if _masks_something(red, text):
        value = red.apply(value, owned=True)
    if seen is not None:
        seen[text] = value
    return value


def _shown(value: Any) -> Any:
    text = json.dumps(value, ensure_ascii=False)
    return value if len(text) <= DIFF_VALUE_MAX else text[:DIFF_VALUE_MAX] + "…"


def envelope_diff(before: Any, after: Any, path: str = "") -> list[dict]:
    """Added, changed and removed paths from `before` to `after` (objects compared member by
    member, anything else as a whole), in path order."""
    out: list[dict] = []
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(set(before) | set(after)):
            sub = f"{path}.{key}"
            if key not in before:
                out.append({"op": "added", "path": sub, "after": _shown(after[key])})
            elif key not in after:
                out.append({"op": "removed", "path": sub, "before": _shown(before[key])})
            elif not _same_json(before[key], after[key]):
                out.extend(envelope_diff(before[key], after[key], sub))
    elif before != after or type(before) is not type(after):
        out.append({"op": "changed", "path": path or ".", "before": _shown(before), "after": _shown(after)})
    return out


def _same_json(a: Any, b: Any) -> bool:
    """Whether two JSON values are the same, 1 and 1.0 and true told apart: `==` (in C)
    first, then, as it equates those, their JSON texts. False when unsure (the caller then
    compares member by member)."""
    if a is b:
        return True
    if a != b:
        return False
    if _orjson is None:
        return False
    try:
        return _orjson.dumps(a) == _orjson.dumps(b)
    except (TypeError, ValueError):
        return False


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class TraceRecorder:
    """Collects one segment's trace. Cheap no-ops when the mode is `off`."""

    def __init__(self, mode: str, rid: str, src: str, entry_stack: str, *, body_cap: int = 65_536,
                 origin_rid: str | None = None, run_id: str | None = None,
                 clock_ms: Callable[[], int] | None = None, answers: bool = False):
        """`clock_ms` returns epoch milliseconds (tests may inject one). `answers`
        (--trace-ops answers): a summary trace also keeps the request's input and output and
        each op's input and answer (what `txcl replay` needs), not the scopes' diffs."""
        self.mode = mode
        self.enabled = mode != "off"
        self.full = mode == "full"
        self.answers = answers and self.enabled and not self.full
        self.body_cap = body_cap
        self.clock_ms = clock_ms or _now_ms
        self._wall_clock = clock_ms is None  # event() reads the clock inline
        # Steps and events keep their times as milliseconds after `times_from` (the trace's
        # start): small integers, cheaper to make and a quarter less text to store. With the
        # real clock they are read from perf_counter_ns(), counted from `_perf_start_ns`.
        self._perf_start_ns = _perf_ns()
        self.times_from: int = self.clock_ms()
        self.request: dict[str, Any] = {
            "rid": rid, "origin_rid": origin_rid, "run_id": run_id, "src": src, "entry_stack": entry_stack,
            "started_ms": self.times_from, "finished_ms": None, "status": None, "http_status": None,
            "fuel_used": 0, "bytes_in": None, "bytes_out": None, "mode": mode,
        }
        self._in: Any = None
        self.started = False  # request.start recorded
        self._out: Any = None
        self._error: Any = None
        self.steps: list[dict[str, Any] | tuple] = []  # dicts, or summary rows (summary_step)
        # (seq, at_ms, kind, data), or compact (seq, at_ms, code, *values) (COMPACT_EVENTS),
        # at_ms counted from `times_from`: packed as arrays by the store
        self.events: list[tuple] = []
        self.seq = 0  # the last sequence number given to an event or a step
        self.entered_ns = 0  # perf_counter_ns() as the current scope was entered (stage_enter)
        self._detailed = False  # a step holds bodies (full mode, WITH debug = true)
        self._step_dicts = False  # a step was recorded as a dict (`step`), not as a row
        self.omit: set[tuple[str, ...]] = set()
        self.redact: set[tuple[str, ...]] = set()
        # A fused scope's entry, held until its rules have run (`fused_enter`)
        self._pending: tuple | None = None
        # Whether a fused scope's steps may be folded into its entry (not under an injected
        # clock: folded steps are timed from the entry's perf_counter reading)
        self.folds = self._wall_clock

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def _at(self) -> int:
        """Now, in milliseconds after the trace's start. (The per-scope events below read the
        clock inline: a call per event is ~1% of a walk.)"""
        if self._wall_clock:
            return (_perf_ns() - self._perf_start_ns) // 1_000_000
        return self.clock_ms() - self.times_from

    def event(self, kind: str, data: dict[str, Any] | None = None) -> None:
        if self.enabled:
            self.seq += 1
            self.events.append((self.seq, self._at(), kind, data))

    # The two commonest events, recorded compact (see `COMPACT_EVENTS`). One method each, not
    # one taking `*values`: they run twice per scope, and unpacking costs ~1% of a walk. The
    # walker calls them and `local_step` only when the recorder is enabled, so they do not
    # check again (~2% of summary tracing's cost): on a disabled recorder they fill lists
    # that `build()` never reads.
    def stage_enter(self, stage: str, fuel_used: int, ttl: int, code: int = STAGE_ENTER) -> None:
        """Also keeps its clock reading as `entered_ns`: the walker times the first local
        rule's step from it. `code` STAGE_FUSED: the scope's merge will not be recorded but
        implied (see txcl.trace.format.STAGE_FUSED); the walker then takes the merge's
        sequence number (`seq += 1`) where it would have recorded it."""
        self.seq += 1
        now = self.entered_ns = _perf_ns()
        self.events.append((self.seq, (now - self._perf_start_ns) // 1_000_000
                            if self._wall_clock else self.clock_ms() - self.times_from,
                            code, stage, fuel_used, ttl))

    # A scope of local rules run in one piece (the walker's fused path) is recorded as one
    # event: its entry with the rules' steps folded in (`STAGE_RULES`, see
    # txcl.trace.format), made when its rules have run. Entering takes the entry's number
    # and clock reading; each rule that ends well and records nothing else adds its name and
    # duration to the walker's `fold` list; `fused_done` writes the event. Anything else in
    # the scope (an error, a dropped reserved write) makes the walker `unfold`: the entry
    # and the steps so far are recorded as they would be on their own, and the rest follow.
    def fused_enter(self, stage: str, fuel_used: int, ttl: int) -> None:
        """The fused scope `stage` entered (its entry recorded by `fused_done` or `unfold`);
        keeps the clock reading as `entered_ns`. Called only on an enabled recorder."""
        self.seq += 1
        self.entered_ns = _perf_ns()
        self._pending = (self.seq, stage, fuel_used, ttl)

    def fused_done(self, fold: list | None) -> None:
        """Record the pending fused entry, with `fold` ([name, microseconds, …]: its steps,
        numbered after it) when there is one; nothing when the walker unfolded it."""
        pending = self._pending
        if fold and pending is not None:
            self._pending = None
            seq, stage, fuel_used, ttl = pending
            since_us = (self.entered_ns - self._perf_start_ns) // 1000
            self.events.append((seq, since_us // 1000, STAGE_RULES, stage, fuel_used, ttl, since_us % 1000, fold))
            self.seq += len(fold) >> 1
            return
        entry = self._take_entry()
        if entry is not None:
            self.events.append(entry)

    def unfold(self, stack: str, scope: int, fold: list) -> None:
        """The pending fused entry and the steps of `fold` recorded on their own (a rule's
        start and end rebuilt from the durations, to the microsecond)."""
        entry = self._take_entry()
        if entry is None:
            return
        self.events.append(entry)
        start = self.entered_ns
        for i in range(0, len(fold), 2):
            end = start + fold[i + 1] * 1000
            self.local_step(stack, scope, fold[i], None, "ok", start, end)
            start = end

    def _take_entry(self) -> tuple | None:
        """The pending fused entry as a `STAGE_FUSED` event (None when there is none), no
        longer pending."""
        pending = self._pending
        if pending is None:
            return None
        self._pending = None
        seq, stage, fuel_used, ttl = pending
        if self._wall_clock:
            at = (self.entered_ns - self._perf_start_ns) // 1_000_000
        else:
            at = self.clock_ms() - self.times_from
        return (seq, at, STAGE_FUSED, stage, fuel_used, ttl)

    # A request's first and last events, compact too (once per trace each).
    def request_start(self, stack: str, src: str) -> None:
        if self.enabled and not self.started:
            self.started = True  # a resume starts its segment before applying what it resumes with
            self.seq += 1
            self.events.append((self.seq, self._at(), REQUEST_START, stack, src))

    def request_done(self, fuel: int, bytes_out: int | None, status: str, duration_ms: int,
                     reason: str | None = None) -> None:
        """The request's last two events, `request.usage` and `request.end` (with the reason
        it ended, when there is one), stamped with one clock reading."""
        if self.enabled:
            seq = self.seq
            self.seq = seq + 2
            at = self._at()
            self.events += ((seq + 1, at, REQUEST_USAGE, fuel, bytes_out),
                            (seq + 2, at, REQUEST_END, status, duration_ms, reason) if reason
                            else (seq + 2, at, REQUEST_END, status, duration_ms))

    def stage_merge(self, stage: str, ops: list[str]) -> None:
        self.seq += 1
        self.events.append((self.seq, (_perf_ns() - self._perf_start_ns) // 1_000_000
                            if self._wall_clock else self.clock_ms() - self.times_from,
                            STAGE_MERGE, stage, ops))

    def step(self, step: dict[str, Any], *, detail: bool = False, rule: str | None = None,
             input_value: Any = None, output_value: Any = None) -> None:
        """Record one step (its `started_ms`/`finished_ms` counted from `times_from`); bodies
        kept in full mode or when `detail` (WITH debug = true)."""
        if not self.enabled:
            return
        self.seq += 1
        step["seq"] = self.seq
        self._step_dicts = True
        if self.full or detail:
            step["rule"] = rule
            step["_input"] = _snapshot(input_value)
            step["_output"] = _snapshot(output_value)
            self._detailed = True
        self.steps.append(step)

    def local_step(self, stack: str, scope: int, name: str, operation: str, status: str, start_ns: int,
                   end_ns: int, error: str | None = None) -> None:
        """The summary row of a rule without EXEC, timed by `time.perf_counter_ns()` readings
        (milliseconds after the trace's start; the duration kept to the microsecond). Called
        only on an enabled recorder (see `stage_enter`)."""
        self.seq += 1
        since = start_ns - self._perf_start_ns
        took = end_ns - start_ns
        row = (self.seq, stack, scope, name, operation, "noop", status, since // 1_000_000,
               (since + took) // 1_000_000, took // 1000 / 1000)
        self.steps.append(row if error is None else (*row, None, None, error))

    def summary_step(self, *row: Any) -> None:
        """Record a summary step as a compact row (the walker's common case: no bodies, no
        extra fields): the values of `STEP_ROW_FIELDS` after `seq`, in order, trailing ones
        that are None left out, times counted from `times_from`. The same step `step()`
        records, without building a dict."""
        if self.enabled:
            self.seq += 1
            self.steps.append((self.seq, *row))

    def scope_entered(self, envelope: Any) -> Any:
        """Full mode: the envelope as a scope starts (given back to `scope_done`)."""
        return _snapshot(envelope) if self.full else None

    def scope_done(self, stage: str, before: Any, envelope: Any) -> None:
        """Full mode: record what the scope changed (a `stage.diff` event)."""
        if self.full and before is not None:
            self.event("stage.diff", _ScopeChange(stage, before, _snapshot(envelope)))  # type: ignore[arg-type]

    def set_input(self, envelope: Any, size: int | None = None) -> None:
        self.request["bytes_in"] = size if size is not None else (_json_size(envelope) if self.enabled else None)
        if self.full or self.answers:
            self._in = _snapshot(envelope)  # the walk changes the envelope in place

    def finish(self, status: str, *, http_status: int | None, fuel_used: int, out: Any = None,
               error: Any = None, bytes_out: int | None = None) -> None:
        request = self.request
        request["status"] = status
        request["http_status"] = http_status
        request["fuel_used"] = fuel_used
        request["finished_ms"] = self.clock_ms()
        if self.full or self.answers:
            self._out = _snapshot(out)
        if self.enabled:
            if bytes_out is None:
                if error is None and type(self._out) is _Snapshot:
                    text = self._out.text
                    bytes_out = len(text) if text.isascii() else len(text.encode("utf-8"))
                else:
                    bytes_out = _json_size(out if error is None else error)
            self.request["bytes_out"] = bytes_out
        self._error = error

    def add_redactions(self, omit: set[tuple[str, ...]], redact: set[tuple[str, ...]]) -> None:
        self.omit |= omit
        self.redact |= redact

    def build(self, packed: bool = False) -> TraceRecord | None:
        """The segment's trace. `packed`: its steps and events as the two JSON texts the
        store writes, made now (for a writer that would pack it at once anyway)."""
        if not self.enabled:
            return None
        entry = self._take_entry()
        if entry is not None:  # the walk stopped inside a fused scope: its entry, in its place by number
            at = len(self.events)
            while at and self.events[at - 1][0] > entry[0]:
                at -= 1
            self.events.insert(at, entry)
        red = Redactor(self.omit, self.redact) if self.full or self._detailed or self.answers else None
        request = dict(self.request)
        if red is not None and (self.full or self.answers):
            request["in_json"] = _body_json(self._in, red, self.body_cap)
            request["out_json"] = _body_json(self._out, red, self.body_cap)
        else:
            request["in_json"] = request["out_json"] = None
        request["error_json"] = json.dumps(self._error) if self._error is not None else None
        steps = self.steps
        if red is not None and self._detailed:
            steps = []
            for step in self.steps:
                if type(step) is dict and "_input" in step:
                    row = {k: v for k, v in step.items() if v is not None and not k.startswith("_")}
                    row["input_json"] = _body_json(step["_input"], red, self.body_cap)
                    row["output_json"] = _body_json(step["_output"], red, self.body_cap)
                    step = row
                steps.append(step)
        events = self.events
        if self.full:
            red = red or Redactor(self.omit, self.redact)
            seen: dict[str, Any] = {}
            events = [(e[0], e[1], e[2], self._diff(e[3], red, seen)) if type(e[3]) is _ScopeChange else e
                      for e in events]
        # Summary steps go out as recorded: keys holding None are left out when the store
        # packs them (txcl.trace.packing), as the readers treat a missing key as None.
        rows_only = not self._step_dicts
        if packed:
            return TraceRecord(request, times_from=self.times_from, rows_only=rows_only,
                               packed=pack_trace(steps, events, rows_only))
        return TraceRecord(request, list(steps), list(events), times_from=self.times_from,
                           rows_only=rows_only)

    @staticmethod
    def _diff(change: _ScopeChange, red: Redactor, seen: dict[str, Any] | None = None) -> dict:
        entries = envelope_diff(_loaded(change.before, red, seen), _loaded(change.after, red, seen))
        data: dict[str, Any] = {"stage": change.stage, "changes": entries[:DIFF_ENTRIES_MAX]}
        if len(entries) > DIFF_ENTRIES_MAX:
            data["more"] = len(entries) - DIFF_ENTRIES_MAX
        return data
