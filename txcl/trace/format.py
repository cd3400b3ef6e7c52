"""The trace format: the rows a walk records (summary steps as tuples, timeline events by
kind number), how they are stored, and :class:`TraceRecord`, one segment's trace as the
store keeps it and the readers get it back. The walker, the recorder, the store and the
readers all take the format from here."""

from __future__ import annotations

import json
from typing import Any, Callable, Sequence, Union

JsonValue = Union[None, bool, int, float, str, list["JsonValue"], dict[str, "JsonValue"]]


# A summary step as the walker records it: a tuple in this field order (no dict per step).
# The store writes it as a JSON array with trailing nulls left out; `step_dict` turns it back.
STEP_ROW_FIELDS = ("seq", "stack", "scope", "name", "operation", "transport", "status", "started_ms",
                   "finished_ms", "duration_ms", "input_bytes", "output_bytes", "error")


def step_dict(row: Sequence[JsonValue], times_from: int = 0) -> dict[str, JsonValue]:
    """A step row (tuple or stored array, possibly shortened) as the step object readers use;
    its times are recorded as milliseconds after `times_from` (see `TraceRecord`)."""
    step: dict[str, JsonValue] = dict(zip(STEP_ROW_FIELDS, row))
    for name in STEP_ROW_FIELDS[len(row):]:
        step[name] = None
    step["stage"] = f"{step['stack']}/{step['scope']}"
    return shift_step(step, times_from) if times_from else step


def shift_step(step: dict[str, JsonValue], times_from: int) -> dict[str, JsonValue]:
    """`step` (changed in place) with its times made epoch milliseconds again."""
    for name in ("started_ms", "finished_ms"):
        value = step.get(name)
        if type(value) is int:
            step[name] = value + times_from
    return step


# The commonest timeline events are recorded and stored compact: `(seq, at_ms, code, *values)`
# with an integer code instead of `(seq, at_ms, kind, data)` with a dict, which costs the walk
# a dict per scope boundary and the stored row its repeated key names. Codes are part of the
# stored format: never renumber one; add new codes at the end.
COMPACT_EVENTS: dict[int, tuple[str, tuple[str, ...]]] = {
    1: ("stage.enter", ("stage", "fuel_used", "ttl")),
    2: ("stage.merge", ("stage", "ops")),
    3: ("request.start", ("stack", "src")),
    4: ("request.usage", ("fuel", "bytes_out")),
    5: ("request.end", ("status", "duration_ms", "reason")),  # reason left out when there is none
    6: ("stage.enter", ("stage", "fuel_used", "ttl")),  # a scope whose merge is implied (below)
    7: ("stage.enter", ("stage", "fuel_used", "ttl")),  # the same, its rules' steps folded in (below)
}
STAGE_ENTER, STAGE_MERGE, REQUEST_START, REQUEST_USAGE, REQUEST_END, STAGE_FUSED, STAGE_RULES = 1, 2, 3, 4, 5, 6, 7

# A scope of local rules only (no EXEC, WITH or LOOP) runs in one piece, and its `stage.merge`
# would repeat what the trace already holds: the ops merged are the rules whose steps the
# scope recorded, merged in name order, right after the last of them. So such a scope's entry
# is recorded as `STAGE_FUSED` and its merge is not written: the recorder only takes the
# merge's sequence number, which leaves the one gap in the scope's numbering, and readers put
# the merge back there (`expand_events`), stamped with the time of the record before it. A
# scope that ended without merging (the walk failed inside it) leaves no gap, so none is made
# up. Every event and step of a segment's trace is numbered from 1 without other gaps.


# A fused scope is stored as one `STAGE_RULES` event when its rules all ended well and
# recorded nothing else: `[seq, at_ms, 7, stage, fuel_used, ttl, entry_us, [name, us, …]]`,
# `entry_us` the microseconds past `at_ms` at which the scope was entered and each rule given
# by its name and duration in microseconds (every such rule ran without EXEC, WITH or LOOP:
# no operation, transport `noop`, status `ok`). Its steps are numbered after the entry, in
# order, and each started where the previous one ended, the first at the entry: readers
# rebuild them (`folded_steps`) and take the scope's merge as implied, as for STAGE_FUSED. A
# summary trace of local rules is a third smaller stored this way, and quicker to write.


def folded_steps(events: Sequence[Any], times_from: int = 0) -> list[dict[str, JsonValue]]:
    """The steps folded into a trace's `STAGE_RULES` events, as `step_dict` makes them (a
    malformed event gives none)."""
    steps: list[dict[str, JsonValue]] = []
    for event in events:
        if isinstance(event, dict) or len(event) < 8 or event[2] != STAGE_RULES:
            continue
        seq, at_ms, _code, stage, _fuel, _ttl, entry_us, fold = event[:8]
        if not (type(seq) is int and type(at_ms) is int and type(entry_us) is int and isinstance(fold, list)
                and isinstance(stage, str)):
            continue
        stack, _, scope_text = stage.rpartition("/")
        scope: JsonValue = int(scope_text) if scope_text.isdigit() else scope_text
        start = at_ms * 1000 + entry_us
        for i in range(0, len(fold) - 1, 2):
            took = fold[i + 1]
            if type(took) is not int:
                break
            seq += 1
            steps.append(step_dict((seq, stack, scope, fold[i], None, "noop", "ok", start // 1000,
                                    (start + took) // 1000, took / 1000), times_from))
            start += took
    return steps


def with_folded_steps(steps: list[dict[str, JsonValue]], events: Sequence[Any],
                      times_from: int = 0) -> list[dict[str, JsonValue]]:
    """`steps` (the trace's steps column, as dicts) and the steps folded into its events, in
    sequence order."""
    folded = folded_steps(events, times_from)
    if not folded:
        return steps
    return sorted(steps + folded, key=_step_seq)


def _step_seq(step: dict[str, JsonValue]) -> int:
    seq = step.get("seq")
    return seq if type(seq) is int else 0


def event_tuple(event: Sequence[JsonValue], times_from: int = 0) -> tuple:
    """A recorded or stored event as `(seq, at_ms, kind, data)`, compact ones expanded, its
    time recorded as milliseconds after `times_from` (see `TraceRecord`)."""
    code = event[2]
    at_ms = event[1]
    if times_from and type(at_ms) is int:
        at_ms += times_from
    if type(code) is not int:
        return (event[0], at_ms, *event[2:])
    known = COMPACT_EVENTS.get(code)
    if known is None:  # not ours to name: shown as it is stored
        return (event[0], at_ms, f"event.{code}", list(event[3:]))
    kind, fields = known
    return (event[0], at_ms, kind, dict(zip(fields, event[3:])))


def expand_events(events: Sequence[Any], steps: Sequence[dict[str, JsonValue]],
                  times_from: int = 0) -> list:
    """A trace's recorded or stored events as readers see them: compact ones expanded (to
    `(seq, at_ms, kind, data)`; events recorded as dicts stay dicts), times made epoch
    milliseconds, and the implied merges of `STAGE_FUSED` scopes put back. `steps`: the same
    trace's steps as dicts, their times in epoch milliseconds (`step_dict`)."""
    expanded = [event_dict(e, times_from) if isinstance(e, dict) else event_tuple(e, times_from)
                for e in events]
    fused = [i for i, e in enumerate(events) if not isinstance(e, dict) and e[2] in _IMPLIED_MERGE]
    return _with_implied_merges(expanded, fused, steps) if fused else expanded


_IMPLIED_MERGE = (STAGE_FUSED, STAGE_RULES)


def _with_implied_merges(expanded: list, fused: list[int], steps: Sequence[dict[str, JsonValue]]) -> list:
    """`expanded` with a `stage.merge` made for each scope entered at `expanded[i]`, i in
    `fused`, at the gap in its numbering (see `STAGE_FUSED`)."""
    at_of: dict[Any, Any] = {}
    for event in expanded:
        if isinstance(event, dict):
            at_of[event.get("seq")] = event.get("at_ms")
        else:
            at_of[event[0]] = event[1]
    name_of: dict[Any, Any] = {}
    for step in steps:
        at_of[step.get("seq")] = step.get("finished_ms")
        name_of[step.get("seq")] = step.get("name")
    last = max((seq for seq in at_of if type(seq) is int), default=0)
    merges = []
    for i in fused:
        seq, _at, _kind, data = expanded[i]
        if type(seq) is not int:
            continue
        names = []
        gap = seq + 1
        while gap in at_of:
            if gap in name_of:
                names.append(name_of[gap])
            gap += 1
        if gap < last:  # something was recorded after the merge: the scope did merge
            merges.append((gap, at_of[gap - 1], "stage.merge",
                           {"stage": data.get("stage") if isinstance(data, dict) else None,
                            "ops": sorted(names, key=str)}))
    if not merges:
        return expanded
    return sorted(expanded + merges, key=_event_seq)


def _event_seq(event: Any) -> int:
    seq = event.get("seq") if isinstance(event, dict) else event[0]
    return seq if type(seq) is int else 0


def event_dict(event: Sequence[JsonValue] | dict, times_from: int = 0) -> dict[str, JsonValue]:
    """A timeline event (a recorded tuple or a stored array) as the object readers use."""
    if isinstance(event, dict):
        at_ms = event.get("at_ms")
        return event | {"at_ms": at_ms + times_from} if times_from and type(at_ms) is int else event
    seq, at_ms, kind, data = event_tuple(event, times_from)
    return {"seq": seq, "at_ms": at_ms, "kind": kind, "data": data}


class TraceRecord:
    """One segment's trace, written in one transaction: the request row, its steps and its
    timeline events (``(seq, at_ms, kind, data)`` tuples as the recorder makes them, or the
    compact tuples of `COMPACT_EVENTS`; `events` gives every one in the first form).

    Steps are dicts, or summary rows (tuples in `STEP_ROW_FIELDS` order) as the walker
    records them; `steps` gives every one as a dict, `raw_steps` as recorded (for packing).

    `times_from`: the recorder keeps the steps' and events' times as milliseconds after the
    trace's start (small numbers, a quarter less text to store), and `steps` and `events` add
    it back; None when they are epoch milliseconds already (records read from the store,
    rows written before this form, records built by hand).

    A record waiting in a batch for its group commit is *packed* first (`pack()`): its
    steps and events become the two JSON texts the store writes, and the recorded lists are
    let go. Hundreds of records wait at a time; as texts they are a few objects each
    instead of dozens the garbage collector would scan again and again. Reading `steps` or
    `events` of a packed record decodes the texts (readers rarely do)."""

    __slots__ = ("request", "times_from", "rows_only", "_events", "_raw_steps", "_steps", "_expanded", "_packed")

    def __init__(self, request: dict[str, JsonValue], steps: list | None = None,
                 events: list[dict[str, JsonValue] | tuple] | None = None, times_from: int | None = None,
                 rows_only: bool = False, packed: tuple[str, str] | None = None):
        """`rows_only`: every step is a summary row (the recorder knows; packing then converts
        nothing). `packed`: the record made packed, its steps and events given as those texts."""
        self.request = request
        self.times_from = times_from
        self.rows_only = rows_only
        self._steps: list[dict[str, JsonValue]] | None = None
        self._expanded: list | None = None
        self._packed: tuple[str, str] | None = packed
        if packed is None:
            self._events: list | None = events if events is not None else []
            self._raw_steps: list | None = steps if steps is not None else []
        else:
            self._events = self._raw_steps = None

    def packed(self, pack: Callable[[list, list, bool], tuple[str, str]]) -> tuple[str, str]:
        """(steps, events) as JSON texts, made by `pack(raw_steps, events, rows_only)` once."""
        if self._packed is None:
            self._packed = pack(self._raw_steps or [], self._events or [], self.rows_only)
        return self._packed

    def pack(self, pack: Callable[[list, list, bool], tuple[str, str]]) -> None:
        """Keep only the packed texts (see the class docstring)."""
        self.packed(pack)
        self._raw_steps = self._events = self._steps = self._expanded = None

    @property
    def raw_steps(self) -> list:
        if self._raw_steps is None:
            self._raw_steps = [tuple(s) if isinstance(s, list) else s
                               for s in json.loads(self._packed[0])]  # type: ignore[index]
        return self._raw_steps

    @property
    def steps(self) -> list[dict[str, JsonValue]]:
        """Every step as a dict, times in epoch milliseconds."""
        if self._steps is None:
            since = self.times_from or 0
            self._steps = with_folded_steps(
                [step_dict(s, since) if type(s) is tuple else shift_step(dict(s), since) if since else s
                 for s in self.raw_steps], self._raw_events(), since)
        return self._steps

    def _raw_events(self) -> list:
        """The events as recorded, or as stored when the record is packed (decoded once)."""
        if self._events is None:
            self._events = json.loads(self._packed[1])  # type: ignore[index]
        return self._events

    @property
    def events(self) -> list:
        """Every event as `(seq, at_ms, kind, data)` (compact ones expanded, times in epoch
        milliseconds); the recorded list itself stays as it was, for packing."""
        if self._expanded is None:
            self._expanded = expand_events(self._raw_events(), self.steps, self.times_from or 0)
        return self._expanded

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TraceRecord):
            return NotImplemented
        return (self.request, self.steps, self.events) == (other.request, other.steps, other.events)

    def __repr__(self) -> str:
        return f"TraceRecord(request={self.request!r}, steps={self.steps!r}, events={self.events!r})"


