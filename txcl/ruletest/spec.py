"""Test files: finding them, reading them (YAML through ruamel's safe round-trip loader, JSON
as JSON), and checking their shape into `TestFile` / `Case` records.

Every mistake is a Diagnostic with a TX4xx code at the line and column of the offending key or
value (never a traceback): unknown keys with a suggestion, wrong types, durations that do not
parse, inputs that are not JSON, a case name used twice. Checks that need the OPS tree (a
stack that does not exist, a mock for a target no rule uses) are in `txcl.ruletest.tree_checks`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable

import attrs

from txcl.errors import Diagnostic, Position, Span
from txcl.suggest import did_you_mean

SUFFIXES = (".test.yaml", ".test.yml", ".test.json")
STATUSES = ("completed", "halted", "failed", "suspended")
DEFAULT_CLOCK = "2026-01-01T00:00:00Z"

FILE_KEYS = ("stack", "cases")
CASE_KEYS = ("name", "input", "input_file", "stack", "tick", "mail", "rcpt", "scheduled", "clock", "mocks", "workers",
             "expect")
SCHEDULED_KEYS = ("payload", "idempotency_key", "schedule_at", "attempt")
MOCK_KEYS = ("output", "error", "status")
ANSWER_KEYS = ("after", "status", "output", "error", "each_output", "outputs", "ack", "duplicate", "conflicting")
EXPECT_KEYS = ("status", "envelope", "absent", "error", "ran", "not_ran")


def discover(paths: Iterable[str | Path]) -> list[Path]:
    """Test files under `paths` (a file given by name counts when its name ends like one), sorted.
    Below a given folder, `OPS/`, `node_modules/`, dot-folders and `_`-folders are not entered."""
    import os

    found: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            if path.name.endswith(SUFFIXES):
                found.add(path)
            continue
        if not path.is_dir():
            continue
        for folder, dirs, files in os.walk(path):
            dirs[:] = [d for d in dirs if not (d.startswith((".", "_")) or d in ("OPS", "node_modules"))]
            found.update(Path(folder) / f for f in files if f.endswith(SUFFIXES) and (Path(folder) / f).is_file())
    return sorted(found)


# ---------------------------------------------------------------- records


@attrs.frozen
class Answer:
    """One simulated worker answer (for one call, or for every call of a target)."""

    after_ms: int | None = 0  # None: never calls back
    status: str = "completed"  # completed | failed
    output: Any = None
    error: Any = None
    each_output: Any = None  # template with {item} / {index}, for itemized ops
    outputs: list | None = None  # by item index
    ack: bool = True
    duplicate: int = 0
    conflicting: Any = None


@attrs.frozen
class Mock:
    """A sync EXEC target answered without being called."""

    output: Any = None
    error: Any = None


@attrs.frozen
class Expect:
    status: str | None = None
    envelope: Any = None
    has_envelope: bool = False
    absent: tuple[str, ...] = ()
    error: Any = None
    ran: tuple[str, ...] = ()
    not_ran: tuple[str, ...] = ()


@attrs.frozen
class Case:
    name: str
    line: int  # 1-based line of the case in its file
    input: Any
    stack: str | None
    clock_ms: int
    mocks: dict[str, tuple[Mock, ...]]  # one answer for every call, or one per call in order
    workers: dict[str, tuple[Answer, ...]]  # one answer for every call, or one per call in order
    expect: Expect
    spans: dict[str, Span] = attrs.field(factory=dict, eq=False)  # where keys were written (for later checks)


@attrs.frozen
class TestFile:
    path: Path
    text: str
    stack: str | None
    cases: tuple[Case, ...]
    data: Any = attrs.field(default=None, eq=False)  # the round-trip document, when read with positions
    positioned: bool = True  # read with positions (key spans known), or by the fast loader

    def round_trip(self) -> Any:
        """The document as ruamel's round trip reads it (comments and styles kept; --update)."""
        if self.data is not None:
            return self.data
        return _yaml().load(self.text) if not self.path.name.endswith(".json") else json.loads(self.text)

    def with_positions(self) -> "TestFile":
        """The same file read again with every key's position (to report a problem there)."""
        if self.positioned:
            return self
        again, _ = parse_test_text(self.path, self.text, positions=True)
        return again if again is not None else self


# ---------------------------------------------------------------- reading


class _Reader:
    """Walks the loaded document and reports problems with their positions."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.file = str(path)
        self.text = text
        self.line_starts = [0]
        for i, ch in enumerate(text):
            if ch == "\n":
                self.line_starts.append(i + 1)
        self.diagnostics: list[Diagnostic] = []

    def span(self, line0: int, col0: int, length: int = 1) -> Span:
        line0 = max(0, min(line0, len(self.line_starts) - 1))
        start = self.line_starts[line0] + col0
        end_of_line = self.text.find("\n", start)
        end_of_line = len(self.text) if end_of_line < 0 else end_of_line
        length = max(1, min(length, end_of_line - start)) if end_of_line > start else 1
        return Span(Position(line0 + 1, col0 + 1, start), Position(line0 + 1, col0 + 1 + length, start + length))

    def key_span(self, node: Any, key: Any) -> Span:
        try:
            line, col = node.lc.key(key)
        except (AttributeError, KeyError, TypeError):
            return self.node_span(node)
        return self.span(line, col, len(str(key)))

    def value_span(self, node: Any, key: Any) -> Span:
        try:
            line, col = node.lc.value(key) if isinstance(key, str) else node.lc.item(key)
        except (AttributeError, KeyError, TypeError, IndexError):
            return self.key_span(node, key)
        return self.span(line, col, len(str(node[key])) if not isinstance(node[key], (dict, list)) else 1)

    def node_span(self, node: Any) -> Span:
        lc = getattr(node, "lc", None)
        if lc is not None and lc.line is not None:
            return self.span(lc.line, lc.col)
        return self.span(0, 0)

    def report(self, code: str, message: str, span: Span, hint: str | None = None) -> None:
        self.diagnostics.append(Diagnostic(code, message, self.file, span, hint, source=self.text))

    # -------------------------------------------------------------- shapes
    def mapping(self, node: Any, where: str, span: Span) -> dict | None:
        if isinstance(node, dict):
            return node
        self.report("TX402", f"{where} must be a mapping of keys to values, got {_kind(node)}", span)
        return None

    def keys(self, node: dict, allowed: tuple[str, ...], where: str) -> None:
        for key in node:
            if key in allowed:
                continue
            guess = did_you_mean(str(key), allowed)
            self.report("TX401", f"unknown key {key!r} in {where}", self.key_span(node, key),
                        f"did you mean {guess!r}?" if guess else f"the keys of {where} are: {', '.join(allowed)}")

    def string(self, node: dict, key: str, where: str, choices: tuple[str, ...] = ()) -> str | None:
        value = node.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            self.report("TX402", f"{where}.{key} must be a string, got {_kind(value)}", self.value_span(node, key))
            return None
        if choices and value not in choices:
            guess = did_you_mean(value, choices)
            self.report("TX402", f"{where}.{key} is {value!r}; it must be one of {', '.join(choices)}",
                        self.value_span(node, key), f"did you mean {guess!r}?" if guess else None)
            return None
        return str(value)

    def json_value(self, node: Any, key: Any, where: str) -> tuple[bool, Any]:
        """(ok, the value as plain JSON); a value JSON cannot hold is TX406."""
        value = node[key]
        try:
            return True, plain(value)
        except _NotJson as exc:
            self.report("TX406", f"{where} is not JSON: {exc}", self.value_span(node, key),
                        "quote dates and times; JSON has strings, numbers, booleans, null, lists and mappings")
            return False, None

    def json_object(self, node: Any, key: str, where: str, code: str, role: str) -> Any:
        """A JSON value that must be an object (the envelope, an op's output); None if not."""
        ok, value = self.json_value(node, key, where)
        if not ok:
            return None
        if not isinstance(value, dict):
            self.report(code, f"{where} must be a JSON object ({role}), got {_kind(value)}", self.value_span(node, key))
            return None
        return value

    def duration(self, node: dict, key: str, where: str, never_ok: bool = False) -> tuple[bool, int | None]:
        from txcl.values.coerce import duration_to_ms

        value = node.get(key)
        if isinstance(value, str):
            value = str(value)  # a quoted YAML scalar read with its quotes kept is a str subclass
        if never_ok and value == "never":
            return True, None
        ms = duration_to_ms(value) if not isinstance(value, bool) else None
        if ms is None or ms < 0:
            self.report("TX405", f"{where}.{key} is not a duration: {value!r}", self.value_span(node, key),
                        'write a duration such as "250ms", "5m" or "2h", or milliseconds'
                        + (', or "never"' if never_ok else ""))
            return False, 0
        return True, ms

    def string_list(self, node: dict, key: str, where: str) -> tuple[str, ...]:
        value = node.get(key)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.report("TX402", f"{where}.{key} must be a list of strings", self.value_span(node, key))
            return ()
        return tuple(str(v) for v in value)


class _NotJson(ValueError):
    pass


def plain(value: Any) -> Any:
    """A loaded YAML/JSON value as plain JSON (dict, list, str, int, float, bool, None)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _NotJson(f"{value} is not a finite number")
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise _NotJson(f"the key {k!r} is not a string")
            out[str(k)] = plain(v)
        return out
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    raise _NotJson(f"a {type(value).__name__} value ({value!s})")


def _kind(value: Any) -> str:
    """What a value is, in the words of a YAML or JSON file (`a mapping`, `nothing`)."""
    from txcl.functions.helpers import describe

    if value is None:
        return "nothing"
    text = describe(value)
    return {"an object": "a mapping"}.get(text, text)


def _yaml():
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt")  # round trip: positions and comments kept; safe (no Python objects)
    yaml.preserve_quotes = True
    return yaml


def load_document(path: Path, text: str) -> tuple[Any, list[Diagnostic]]:
    """The document of a test file, or TX400 with the parser's position."""
    reader = _Reader(path, text)
    if path.name.endswith(".json"):
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            reader.report("TX400", f"not valid JSON: {exc.msg}", reader.span(exc.lineno - 1, exc.colno - 1))
            return None, reader.diagnostics
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    try:
        data = _yaml().load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        span = reader.span(mark.line, mark.column) if mark is not None else reader.span(0, 0)
        reader.report("TX400", f"not valid YAML: {exc.problem or exc.context}", span)
        return None, reader.diagnostics
    except (YAMLError, ValueError) as exc:
        reader.report("TX400", f"not valid YAML: {exc}", reader.span(0, 0))
        return None, reader.diagnostics
    return data, reader.diagnostics


def read_test_file(path: Path) -> tuple[TestFile | None, list[Diagnostic]]:
    """The test file at `path`, and every problem of its shape (TX4xx)."""
    try:
        raw = path.read_bytes()
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None, [Diagnostic("TX400", "the test file is not UTF-8", str(path))]
    except OSError as exc:
        return None, [Diagnostic("TX400", f"cannot read the test file: {exc.strerror or exc}", str(path))]
    return parse_test_text(path, text)


def load_plain_yaml(text: str) -> Any:
    """A YAML (or JSON) document as plain data, by the safe loader (never Python objects);
    ValueError with the parser's message when it is not valid. The one place outside the test
    file reader that reads YAML (`txcl replay --mocks`)."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        return YAML(typ="safe", pure=True).load(text)
    except YAMLError as exc:
        raise ValueError(str(exc)) from None


def _fast_load(path: Path, text: str) -> Any:
    """The document without positions, by the C loader where it is installed (ruamel.yaml.clib;
    ten times quicker than the round trip); None when it cannot be read that way."""
    if path.name.endswith(".json"):
        try:
            return json.loads(text)
        except ValueError:
            return None
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        return YAML(typ="safe", pure=False).load(text)
    except (YAMLError, ValueError):
        return None


def parse_test_text(path: Path, text: str, positions: bool = False) -> tuple[TestFile | None, list[Diagnostic]]:
    """The test file of `text`, and its problems. A file is first read quickly, without
    positions; any problem sends it through the round-trip reader, which knows where each key
    and value was written."""
    if not positions:
        data = _fast_load(path, text)
        if data is not None:
            found, problems = _read(path, text, data, positioned=False)
            if found is not None and not problems:
                return found, problems
    data, problems = load_document(path, text)
    if problems:
        return None, problems
    return _read(path, text, data, positioned=True)


def _read(path: Path, text: str, data: Any, positioned: bool) -> tuple[TestFile | None, list[Diagnostic]]:
    reader = _Reader(path, text)
    top = reader.mapping(data, "the test file", reader.span(0, 0))
    if top is None:
        return None, reader.diagnostics
    reader.keys(top, FILE_KEYS, "the test file")
    stack = reader.string(top, "stack", "the test file")
    cases_node = top.get("cases")
    if cases_node is None:
        reader.report("TX402", "the test file has no `cases:` list", reader.span(0, 0),
                      "add `cases:` with at least one case (name, input, expect)")
        return None, reader.diagnostics
    if not isinstance(cases_node, list):
        reader.report("TX402", f"`cases` must be a list, got {_kind(cases_node)}", reader.value_span(top, "cases"))
        return None, reader.diagnostics
    cases: list[Case] = []
    seen: dict[str, int] = {}
    for i, node in enumerate(cases_node):
        case = _read_case(reader, cases_node, i, node, path)
        if case is None:
            continue
        if case.name in seen:
            reader.report("TX404", f"the case name {case.name!r} is used twice (first at line {seen[case.name]})",
                          case.spans["name"], "give every case of a file its own name")
            continue
        seen[case.name] = case.line
        cases.append(case)
    if reader.diagnostics and any(d.severity == "error" for d in reader.diagnostics):
        return None, reader.diagnostics
    if not positioned:  # the lines of the cases, for reports (the fast reader has no positions)
        cases = [attrs.evolve(c, line=_line_of(text, c.name)) for c in cases]
    return TestFile(path, text, stack, tuple(cases), data if positioned else None, positioned), reader.diagnostics


def _line_of(text: str, name: str) -> int:
    """The line of a case's name in the text (1 when it cannot be found): the first place the
    name stands as a value (after a `:`, optionally quoted)."""
    import re

    found = re.search(r":[ \t]*[\"']?" + re.escape(name), text)
    return text.count("\n", 0, found.start()) + 1 if found else 1


def _read_case(reader: _Reader, parent: list, index: int, node: Any, path: Path) -> Case | None:
    where = f"case {index + 1}"
    item_span = reader.value_span(parent, index)
    case = reader.mapping(node, where, item_span)
    if case is None:
        return None
    name = case.get("name")
    if not isinstance(name, str) or not name.strip():
        reader.report("TX402", f"{where} needs a `name:` (a non-empty string)",
                      reader.value_span(case, "name") if "name" in case else item_span)
        return None
    where = f"case {name!r}"
    reader.keys(case, CASE_KEYS, where)
    spans = {key: reader.key_span(case, key) for key in case}
    spans["name"] = reader.value_span(case, "name")
    before = len(reader.diagnostics)
    envelope: Any = {}
    if "input" in case and "input_file" in case:
        reader.report("TX402", f"{where} has both `input` and `input_file`; give one", spans["input_file"])
    elif "input" in case:
        envelope = reader.json_object(case, "input", f"{where}.input", "TX406", "the envelope")
    elif "input_file" in case:
        rel = reader.string(case, "input_file", where)
        if rel is not None:
            target = path.parent / rel
            try:
                envelope = json.loads(target.read_text(encoding="utf-8"))
            except OSError:
                reader.report("TX406", f"{where}.input_file: no file {rel} next to the test file",
                              reader.value_span(case, "input_file"))
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                reader.report("TX406", f"{where}.input_file: {rel} is not JSON ({exc})",
                              reader.value_span(case, "input_file"))
            else:
                if not isinstance(envelope, dict):
                    reader.report("TX406", f"{where}.input_file: {rel} holds {_kind(envelope)}, not a JSON object",
                                  reader.value_span(case, "input_file"))
    stack = reader.string(case, "stack", where)
    if "tick" in case:  # a cron tick: the envelope a _cron stack receives at that time
        from txcl.cronticks import JOB, tick_envelope

        tick_ms = _read_clock(reader, case, where, "tick")
        envelope = {**(envelope if isinstance(envelope, dict) else {}), **tick_envelope(tick_ms)}
        stack = stack or JOB
    clock_ms = _read_clock(reader, case, where)
    if "mail" in case:  # a delivered message: the envelope its recipients' stack receives
        mail = _read_mail(reader, case, where, path)
        if mail is not None:
            envelope = {**(envelope if isinstance(envelope, dict) else {}), **mail}
    if "scheduled" in case:  # a scheduled event firing: the envelope a _scheduled stack receives
        from txcl.scheduling import JOB

        event = _read_scheduled(reader, case, where, clock_ms)
        if event is not None:
            envelope = {**(envelope if isinstance(envelope, dict) else {}), **event}
        stack = stack or JOB
    mocks = _read_mocks(reader, case, where)
    workers = _read_workers(reader, case, where)
    expect = _read_expect(reader, case, where)
    if any(d.severity == "error" for d in reader.diagnostics[before:]):
        return None
    line = reader.node_span(case).start.line if hasattr(case, "lc") else 1
    return Case(str(name), line, envelope, stack, clock_ms, mocks, workers, expect, spans)


def _read_mail(reader: _Reader, case: dict, where: str, path: Path) -> dict | None:
    """`mail: message.eml` (next to the test file) and `rcpt:` (default: its To and Cc)."""
    from txcl.mail.envelope import mail_envelope
    from txcl.mail.message import parse_message

    rel = reader.string(case, "mail", where)
    if rel is None:
        return None
    try:
        raw = (path.parent / rel).read_bytes()
    except OSError:
        reader.report("TX406", f"{where}.mail: no file {rel} next to the test file", reader.value_span(case, "mail"))
        return None
    msg = parse_message(raw)
    rcpt = list(reader.string_list(case, "rcpt", where)) if "rcpt" in case else \
        [a["addr"] for a in (*msg["to"], *msg["cc"])]
    sender = msg["from"][0]["addr"] if msg["from"] else ""
    return mail_envelope(msg=msg, mail_from=sender, size=len(raw), rcpt=rcpt, transaction_rcpt=rcpt,
                         listener="test", helo="test")


def _read_scheduled(reader: _Reader, case: dict, where: str, clock_ms: int) -> dict | None:
    """`scheduled: {payload, idempotency_key, schedule_at, attempt}`: the event fires at the
    case's clock."""
    from txcl.scheduling import ScheduleError, parse_schedule_at, scheduled_envelope

    node = case.get("scheduled")
    if not isinstance(node, dict):
        reader.report("TX406", f"{where}.scheduled must be a mapping (payload, idempotency_key, schedule_at)",
                      reader.value_span(case, "scheduled"))
        return None
    reader.keys(node, SCHEDULED_KEYS, f"{where}.scheduled")
    payload = reader.json_object(node, "payload", f"{where}.scheduled.payload", "TX406",
                                 "the object scheduled") if "payload" in node else {}
    if payload is None:
        return None
    at_ms = clock_ms
    if "schedule_at" in node:
        value = node["schedule_at"]
        try:
            at_ms = parse_schedule_at(value.isoformat() if hasattr(value, "isoformat") else value)
        except ScheduleError as exc:
            reader.report("TX406", f"{where}.scheduled: {exc}", reader.value_span(node, "schedule_at"))
            return None
    attempt = node.get("attempt", 1)
    if not isinstance(attempt, int) or isinstance(attempt, bool) or attempt < 1:
        reader.report("TX406", f"{where}.scheduled.attempt must be a whole number from 1",
                      reader.value_span(node, "attempt"))
        return None
    return scheduled_envelope(payload=payload, key=str(node.get("idempotency_key", "test")),
                              event_id="sev_test", schedule_at_ms=at_ms, fired_at_ms=clock_ms, attempt=attempt,
                              origin_stack=None, origin_rid=None, node="test")


def _read_clock(reader: _Reader, case: dict, where: str, key: str = "clock") -> int:
    import datetime as dt

    value = case.get(key, DEFAULT_CLOCK)
    moment = value if isinstance(value, dt.datetime) else None
    if isinstance(value, str):
        try:
            moment = dt.datetime.fromisoformat(value)
        except ValueError:
            moment = None
    if moment is not None:
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=dt.timezone.utc)
        return int(moment.timestamp() * 1000)
    reader.report("TX405", f"{where}.{key} is not a time: {value!r}", reader.value_span(case, key),
                  'write an RFC 3339 time such as "2026-01-01T09:30:00Z"')
    return 0


def _read_mocks(reader: _Reader, case: dict, where: str) -> dict[str, tuple[Mock, ...]]:
    """Each mocked target's answers: one for every call, or a list of them, one per call in
    call order (the last one repeats) — as `workers` takes them."""
    node = case.get("mocks")
    if node is None:
        return {}
    mocks = reader.mapping(node, f"{where}.mocks", reader.value_span(case, "mocks"))
    out: dict[str, tuple[Mock, ...]] = {}
    for target, spec in (mocks or {}).items():
        at = f"{where}.mocks[{target!r}]"
        if isinstance(spec, list):
            answers = [_read_mock(reader, item, f"{at}[{i}]", reader.value_span(spec, i))
                       for i, item in enumerate(spec)]
            if not spec:
                reader.report("TX402", f"{at} is an empty list; give at least one answer",
                              reader.value_span(mocks, target))
            if spec and all(a is not None for a in answers):
                out[str(target)] = tuple(answers)  # type: ignore[arg-type]
            continue
        mock = _read_mock(reader, spec, at, reader.value_span(mocks, target))
        if mock is not None:
            out[str(target)] = (mock,)
    return out


def _read_mock(reader: _Reader, spec: Any, at: str, span: Span) -> Mock | None:
    body = reader.mapping(spec, at, span)
    if body is None:
        return None
    reader.keys(body, MOCK_KEYS, at)
    if "output" in body and "error" in body:
        reader.report("TX402", f"{at} has both `output` and `error`; a mock answers one",
                      reader.key_span(body, "error"))
        return None
    output = error = None
    if "output" in body:
        output = reader.json_object(body, "output", f"{at}.output", "TX402", "an op's output")
    elif "error" in body:
        ok, error = reader.json_value(body, "error", f"{at}.error")
    else:
        output = {}
    return Mock(output=output, error=error)


def _read_answer(reader: _Reader, node: Any, at: str, span: Span) -> Answer | None:
    body = reader.mapping(node, at, span)
    if body is None:
        return None
    reader.keys(body, ANSWER_KEYS, at)
    fields: dict[str, Any] = {}
    if "after" in body:
        _, fields["after_ms"] = reader.duration(body, "after", at, never_ok=True)
    status = reader.string(body, "status", at, ("completed", "failed"))
    if status:
        fields["status"] = status
    for key in ("output", "error", "each_output", "conflicting"):
        if key in body:
            _, fields[key] = reader.json_value(body, key, f"{at}.{key}")
    if "outputs" in body:
        ok, outputs = reader.json_value(body, "outputs", f"{at}.outputs")
        if ok and not isinstance(outputs, list):
            reader.report("TX402", f"{at}.outputs must be a list (one output per item index)",
                          reader.value_span(body, "outputs"))
        else:
            fields["outputs"] = outputs
    if "ack" in body:
        if not isinstance(body["ack"], bool):
            reader.report("TX402", f"{at}.ack must be true or false", reader.value_span(body, "ack"))
        else:
            fields["ack"] = body["ack"]
    if "duplicate" in body:
        value = body["duplicate"]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            reader.report("TX402", f"{at}.duplicate must be a whole number of extra deliveries",
                          reader.value_span(body, "duplicate"))
        else:
            fields["duplicate"] = int(value)
    return Answer(**fields)


def _read_workers(reader: _Reader, case: dict, where: str) -> dict[str, tuple[Answer, ...]]:
    node = case.get("workers")
    if node is None:
        return {}
    workers = reader.mapping(node, f"{where}.workers", reader.value_span(case, "workers"))
    out: dict[str, tuple[Answer, ...]] = {}
    for target, spec in (workers or {}).items():
        at = f"{where}.workers[{target!r}]"
        if isinstance(spec, list):
            answers = [_read_answer(reader, item, f"{at}[{i}]", reader.value_span(spec, i))
                       for i, item in enumerate(spec)]
            if answers and all(a is not None for a in answers):
                out[str(target)] = tuple(a for a in answers if a is not None)
            elif not answers:
                reader.report("TX402", f"{at} is an empty list of answers", reader.value_span(workers, target))
        else:
            answer = _read_answer(reader, spec, at, reader.value_span(workers, target))
            if answer is not None:
                out[str(target)] = (answer,)
    return out


def _read_expect(reader: _Reader, case: dict, where: str) -> Expect:
    node = case.get("expect")
    if node is None:
        return Expect()
    at = f"{where}.expect"
    expect = reader.mapping(node, at, reader.value_span(case, "expect"))
    if expect is None:
        return Expect()
    reader.keys(expect, EXPECT_KEYS, at)
    fields: dict[str, Any] = {"status": reader.string(expect, "status", at, STATUSES)}
    if "envelope" in expect:
        ok, envelope = reader.json_value(expect, "envelope", f"{at}.envelope")
        fields["envelope"], fields["has_envelope"] = envelope, ok
    if "error" in expect:
        _, fields["error"] = reader.json_value(expect, "error", f"{at}.error")
    for key in ("absent", "ran", "not_ran"):
        fields[key] = reader.string_list(expect, key, at)
    for i, path_text in enumerate(fields["absent"]):
        if not path_text.startswith("."):
            reader.report("TX402", f"{at}.absent: {path_text!r} is not a path (paths start with '.')",
                          reader.value_span(expect["absent"], i))
    for key in ("ran", "not_ran"):
        for i, op in enumerate(fields[key]):
            if op.count("/") < 2:
                reader.report("TX402", f"{at}.{key}: {op!r} does not name an op as <stack>/<scope>/<name>",
                              reader.value_span(expect[key], i), 'for example "shop/200/total"')
    return Expect(**fields)


__all__ = ["SUFFIXES", "TestFile", "Case", "Answer", "Mock", "Expect", "discover", "read_test_file",
           "parse_test_text", "plain", "load_document"]
