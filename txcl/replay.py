"""Replaying recorded requests through another OPS tree (`txcl replay`).

A request recorded with its op answers (`--trace-ops answers`, or `--trace-mode full`) is walked
again from its recorded input through the tree given; every op call is answered from the
recording — never made — by the same rule's recorded answer for the same input. The outcome is
compared with the recorded one:

- ``unchanged``: the same final envelope (or the same error);
- ``changed``: a structural diff of the final envelope (or of the error), and the first step
  where the walk went otherwise (its scope and rule);
- ``not replayable``: the recording cannot answer the walk — a request recorded without op
  answers, a durable run (its answer came from later segments), or an op the recording does
  not cover (a new rule, or one whose input changed), unless ``--mocks`` answers it.

Functions that read the clock see the request's recorded start; nothing is sent anywhere.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from txcl.runtime.dispatch import OpError

DIFF_MAX = 50  # differences listed per request


class NotReplayable(Exception):
    """The recording cannot answer this walk (the reason is the message)."""


@dataclass
class Recorded:
    """One recorded op call."""

    rule: str  # stack/scope/name
    operation: str | None
    status: str
    input: Any
    output: Any
    error: str | None
    used: bool = False


def _strip(value: Any) -> Any:
    """An op input without what changes from walk to walk (its `_txc` identity stamp, `_ts`)."""
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if k not in ("_txc", "_ts")}
    return value


def _loads(text: Any) -> Any:
    if not isinstance(text, str):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


class Recording:
    """The op answers of one recorded request, handed out to the replay's walk."""

    answers_http = True  # the walker asks it for http(s) ops too

    def __init__(self, steps: list[dict], mocks: dict[str, Any] | None = None) -> None:
        self.calls: list[Recorded] = []
        for step in steps:
            if step.get("transport") in (None, "noop", "goto") or "input_json" not in step:
                continue
            self.calls.append(Recorded(f"{step.get('stack')}/{step.get('scope')}/{step.get('name')}",
                                       step.get("operation"), str(step.get("status") or ""),
                                       _strip(_loads(step.get("input_json"))), _loads(step.get("output_json")),
                                       step.get("error")))
        self.mocks = mocks or {}
        self.mocked: list[str] = []

    def __call__(self, target: Any, op_input: dict, op: Any = None) -> Any:
        rule = f"{op.stack}/{op.scope}/{op.name}" if op is not None else "?"
        wanted = _strip(op_input)
        same_rule = [c for c in self.calls if c.rule == rule and not c.used]
        for call in same_rule:
            if call.input == wanted:
                call.used = True
                if call.status not in ("ok", "completed"):
                    raise OpError(call.error or f"the recorded call failed ({call.status})")
                return json.loads(json.dumps(call.output if call.output is not None else {}))
        mock = self.mocks.get(rule, self.mocks.get(target.text))
        if mock is not None:
            self.mocked.append(rule)
            return json.loads(json.dumps(mock))
        if same_rule:
            raise NotReplayable(f"the input of {rule} ({target.text}) changed, and the recording holds no answer "
                                "for the new one (give one with --mocks)")
        raise NotReplayable(f"{rule} ({target.text}) was not called in the recording (give its answer with --mocks)")


@dataclass
class Outcome:
    rid: str
    verdict: str  # unchanged | changed | not replayable
    reason: str | None = None
    diff: list[dict] = field(default_factory=list)
    diverged: dict | None = None  # the first step that went otherwise
    stack: str | None = None

    def as_json(self) -> dict:
        out: dict[str, Any] = {"rid": self.rid, "stack": self.stack, "verdict": self.verdict}
        if self.reason:
            out["reason"] = self.reason
        if self.verdict == "changed":
            out["diff"] = self.diff
            out["diverged_at"] = self.diverged
        return out


def diff_values(before: Any, after: Any, path: str = "", out: list[dict] | None = None) -> list[dict]:
    """Where two JSON values differ: `{"path", "before", "after"}` entries (a missing side is
    left out), at most DIFF_MAX."""
    out = [] if out is None else out
    if len(out) >= DIFF_MAX:
        return out
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(set(before) | set(after), key=str):
            where = f"{path}.{key}" if path else f".{key}"
            if key not in after:
                out.append({"path": where, "before": before[key]})
            elif key not in before:
                out.append({"path": where, "after": after[key]})
            else:
                diff_values(before[key], after[key], where, out)
            if len(out) >= DIFF_MAX:
                break
        return out
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for index, (b, a) in enumerate(zip(before, after)):
            diff_values(b, a, f"{path}[{index}]", out)
        return out
    if before != after or type(before) is not type(after):
        out.append({"path": path or ".", "before": before, "after": after})
    return out


def _path(steps: list[dict]) -> list[tuple]:
    return [(s.get("stack"), s.get("scope"), s.get("name"), s.get("status")) for s in steps]


def first_divergence(recorded: list[dict], replayed: list[dict]) -> dict | None:
    """The first step (scope and rule) where the replay's walk differs from the recorded one."""
    old, new = _path(recorded), _path(replayed)
    for index in range(max(len(old), len(new))):
        a = old[index] if index < len(old) else None
        b = new[index] if index < len(new) else None
        if a != b:
            where = b or a
            return {"stage": f"{where[0]}/{where[1]}", "rule": where[2],
                    "recorded": None if a is None else {"rule": f"{a[0]}/{a[1]}/{a[2]}", "status": a[3]},
                    "replayed": None if b is None else {"rule": f"{b[0]}/{b[1]}/{b[2]}", "status": b[3]}}
    return None


def replayable(record: Any) -> str | None:
    """Why a recorded request cannot be replayed (None: it can)."""
    request = record.request
    if request.get("run_id"):
        return "a durable run: its answer came from segments after the request (replay takes synchronous requests)"
    if request.get("in_json") is None:
        return ("recorded without op answers: record with --trace-ops answers (or --trace-mode full) to "
                "replay it")
    if request.get("status") not in ("completed", "failed", "halted"):
        return f"the request ended {request.get('status')!r}"
    return None


async def rewalk(tree: Any, settings: Any, record: Any, mocks: dict[str, Any] | None = None,
                 observer: Any = None, attach: Any = None) -> tuple[Any, list[Any]]:
    """Walk a recorded request again through `tree`, its ops answered from the recording (the
    outcome, and the replay's own full traces). `observer`: told of each scope's rule selection
    (`txcl why`); `attach`: called with the walker before the walk (`txcl dap`). Raises
    NotReplayable."""
    import httpx

    from txcl.functions.registry import use_environment
    from txcl.ruletest.standins import ClockEnvironment, VirtualClock
    from txcl.runtime.interpreter import Interpreter

    request = record.request
    why = replayable(record)
    if why is not None:
        raise NotReplayable(why)
    envelope = _loads(request.get("in_json"))
    if not isinstance(envelope, dict):
        raise NotReplayable("the recorded input was cut at the trace body cap")
    stack = request.get("entry_stack")
    if stack not in tree.stacks():
        raise NotReplayable(f"the tree has no stack {stack!r}")
    recording = Recording(list(record.steps), mocks)
    traces: list[Any] = []
    interp = Interpreter(tree, settings=settings.evolve(trace_mode="full"), trace_sink=traces.append)
    interp.services.stand_in = recording
    if observer is not None:
        interp.walker.observer = observer
        interp.walker.fuse_local = False  # every scope goes through the observed selection
    if attach is not None:
        attach(interp.walker)

    def refuse(request: Any) -> Any:
        raise httpx.ConnectError("replay makes no calls", request=request)

    interp.services.http_client = httpx.AsyncClient(transport=httpx.MockTransport(refuse))
    clock = VirtualClock(int(request.get("started_ms") or 0))
    try:
        with use_environment(ClockEnvironment(clock)):
            outcome = await interp.run(envelope, stack, src=request.get("src") or "replay",
                                       rid=request.get("rid"))
    finally:
        await interp.aclose_http()
    problem = _unanswered(traces)
    if problem is not None:
        raise NotReplayable(problem)
    return outcome, traces


async def replay_one(tree: Any, settings: Any, record: Any, mocks: dict[str, Any] | None = None) -> Outcome:
    """Walk one recorded request again through `tree` (see the module docstring)."""
    from txcl.runtime.interpreter import Completed, Failed

    request = record.request
    rid = request.get("rid") or "?"
    stack = request.get("entry_stack")
    try:
        outcome, traces = await rewalk(tree, settings, record, mocks)
    except NotReplayable as exc:
        return Outcome(rid, "not replayable", str(exc), stack=stack)
    if isinstance(outcome, Completed):
        new: Any = outcome.envelope
    elif isinstance(outcome, Failed):
        new = {"error": outcome.payload}
    else:
        return Outcome(rid, "not replayable", "the replay suspended (an async op in the changed tree)", stack=stack)
    old = _loads(request.get("out_json")) if request.get("status") != "failed" else {
        "error": _loads(request.get("error_json"))}
    steps = [s for t in traces for s in (t.steps or [])]
    diff = diff_values(_comparable(old), _comparable(new))
    if not diff:
        return Outcome(rid, "unchanged", stack=stack)
    return Outcome(rid, "changed", diff=diff, diverged=first_divergence(list(record.steps), steps), stack=stack)


def _unanswered(traces: list[Any]) -> str | None:
    """A replay step that failed because the recording could not answer it (raised inside the
    walk, where the walker turns it into the step's error)."""
    for trace in traces:
        for step in trace.steps or []:
            error = step.get("error") or ""
            if "was not called in the recording" in error or "changed, and the recording holds no answer" in error:
                return error
    return None


def _comparable(value: Any) -> Any:
    """An envelope without what differs between any two walks (`_txc.rid`, timings)."""
    if isinstance(value, dict):
        out = dict(value)
        txc = out.get("_txc")
        if isinstance(txc, dict):
            out["_txc"] = {k: v for k, v in txc.items() if k not in ("rid", "run_id", "debug")}
        return out
    return value


def load_mocks(path: Path) -> dict[str, Any]:
    """`--mocks FILE`: a JSON or YAML object from a rule (`stack/scope/name`) or an EXEC target to
    the output its calls answer with."""
    text = path.read_text(encoding="utf-8")
    if path.suffix in (".yaml", ".yml"):
        from txcl.ruletest.spec import load_plain_yaml

        data = load_plain_yaml(text)
    else:
        data = json.loads(text)
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        raise ValueError("the mocks are an object from a rule (stack/scope/name) or a target to its answer")
    return data


def replay_all(tree: Any, settings: Any, records: list[Any], mocks: dict[str, Any] | None = None) -> list[Outcome]:
    async def go() -> list[Outcome]:
        return [await replay_one(tree, settings, record, mocks) for record in records]
    return asyncio.run(go())


__all__ = ["Recording", "Outcome", "NotReplayable", "rewalk", "replay_one", "replay_all", "diff_values",
           "first_divergence", "load_mocks", "replayable"]
