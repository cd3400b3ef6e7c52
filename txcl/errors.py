"""Diagnostics and the exceptions that carry them.

Every problem a user can cause is a `Diagnostic` with a stable code and a span; the CLI,
the REPL, the language server and HTTP answers all render the same object.
"""

from __future__ import annotations

import re
from operator import itemgetter
from typing import Iterable

import attrs

from txcl import runtime_codes as rc

try:  # a compiled encoder: the quick way to know a value is not nested too deeply
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson is a dependency where wheels exist
    _orjson = None  # type: ignore[assignment]

from txcl.codes import CODES, default_severity

MAX_QUOTED = 200  # characters of one word (a path, a token, a file name) quoted in a message
_LONG_WORD = re.compile(r"\S{%d,}" % (MAX_QUOTED + 1))


def clip_words(text: str) -> str:
    """`text` with every run of more than MAX_QUOTED non-blank characters cut in the middle
    (its start, `…`, its end), so a message that quotes a huge token stays short and a long
    file path keeps its name."""
    if len(text) <= MAX_QUOTED:
        return text
    head, tail = MAX_QUOTED * 2 // 3, MAX_QUOTED // 3 - 1
    return _LONG_WORD.sub(lambda m: m.group(0)[:head] + "…" + m.group(0)[-tail:], text)


# Positions and syntax-tree nodes are made by the hundred for every rule parsed.
# attrs' frozen classes store each field through object.__setattr__, about three times the
# cost of a plain slot store, so these are ordinary slotted classes that are *treated* as
# immutable: nothing assigns to one after it is made (they are shared, by the parse cache
# among others); derive a changed copy with attrs.evolve. They compare and hash by value.
value_class = attrs.define(slots=True, unsafe_hash=True)


@value_class
class Position:
    """A point in source text: 1-based line and column (code points), 0-based offset."""

    line: int
    column: int
    offset: int


_new_tuple = tuple.__new__


class Span(tuple):
    """A source range; `end` is exclusive.

    A span is the six integers `(line, column, offset, end_line, end_column, end_offset)`, a
    tuple of them: a parse makes one for nearly every node, and a tuple is made in C, where a
    `Span` holding two `Position` objects cost three Python constructors. `start` and `end`
    give the positions (made when asked); the fields by name are cheaper. Make one with
    `Span(start, end)` or, from integers, `span_of(...)`.
    """

    __slots__ = ()

    def __new__(cls, start: Position, end: Position) -> "Span":
        return _new_tuple(cls, (start.line, start.column, start.offset,
                                end.line, end.column, end.offset))

    line = property(itemgetter(0), doc="Line of the first character (1-based).")
    column = property(itemgetter(1), doc="Column of the first character (1-based, code points).")
    offset = property(itemgetter(2), doc="Offset of the first character (0-based).")
    end_line = property(itemgetter(3), doc="Line just after the last character.")
    end_column = property(itemgetter(4), doc="Column just after the last character.")
    end_offset = property(itemgetter(5), doc="Offset just after the last character.")

    @property
    def start(self) -> Position:
        return Position(self[0], self[1], self[2])

    @property
    def end(self) -> Position:
        return Position(self[3], self[4], self[5])

    @classmethod
    def point(cls, pos: Position) -> "Span":
        return cls(pos, pos)

    def as_list(self) -> list[int]:
        return [self[0], self[1], self[3], self[4]]

    def __getnewargs__(self) -> tuple[Position, Position]:  # type: ignore[override]
        return (self.start, self.end)  # how pickle makes it again

    def __repr__(self) -> str:
        return f"Span(start={self.start!r}, end={self.end!r})"


def span_of(line: int, column: int, offset: int, end_line: int, end_column: int,
            end_offset: int) -> Span:
    """The span between two positions given as integers."""
    return _new_tuple(Span, (line, column, offset, end_line, end_column, end_offset))


NO_SPAN = Span(Position(1, 1, 0), Position(1, 1, 0))


@attrs.frozen(slots=True)
class Diagnostic:
    """One finding: code, message, file and span, with an optional hint.

    `source` is the full text of the file when known; it lets `render()` show the excerpt
    without reading the file again.
    """

    code: str
    message: str
    file: str = "<string>"
    span: Span = NO_SPAN
    hint: str | None = None
    severity: str = attrs.field(default=None)
    source: str | None = attrs.field(default=None, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if self.severity is None:
            object.__setattr__(self, "severity", default_severity(self.code))
        # a message quotes what it found; a 4 MB path must not make a 4 MB message
        object.__setattr__(self, "message", clip_words(self.message))
        if self.hint:
            object.__setattr__(self, "hint", clip_words(self.hint))

    @property
    def name(self) -> str:
        entry = CODES.get(self.code)
        return entry.name if entry else ""

    @property
    def line(self) -> int:
        return self.span.start.line

    @property
    def column(self) -> int:
        return self.span.start.column

    @property
    def end_line(self) -> int:
        return self.span.end.line

    @property
    def end_column(self) -> int:
        return self.span.end.column

    def headline(self) -> str:
        return f"{self.file}:{self.line}:{self.column}: {self.code} {self.message}"

    def render(self, source: str | None = None, color: bool = False) -> str:
        """Full form: headline, the source line, carets under the span, the hint."""
        text = source if source is not None else self.source
        out = [self.headline()]
        gutter = 1
        if text is not None:
            excerpt = _excerpt(text, self.span, color)
            out.extend(excerpt)
            if excerpt:
                gutter = len(excerpt[0]) - len(" |")  # the width of the line numbers' column
        if self.hint:
            out.append(f"{' ' * (gutter + 1)}= hint: {self.hint}")  # the `=` under the `|`
        return "\n".join(out)

    def with_file(self, file: str, source: str | None = None) -> "Diagnostic":
        return attrs.evolve(self, file=file, source=source if source is not None else self.source)

    def to_json(self) -> dict:
        return {
            "code": self.code,
            "name": self.name,
            "severity": self.severity,
            "message": self.message,
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "hint": self.hint,
        }


EXCERPT_WIDTH = 160  # characters of a source line shown under a diagnostic; longer lines are cut around the span

_last_split: tuple[str, list[str]] = ("", [""])


def _source_lines(text: str) -> list[str]:
    """`text` split into lines, kept for the last text asked for: rendering every finding of
    one file splits it once, not once per finding (which was quadratic on big files)."""
    global _last_split
    cached_text, lines = _last_split
    if cached_text is not text:
        lines = text.split("\n")
        _last_split = (text, lines)
    return lines


def _excerpt(text: str, span: Span, color: bool) -> list[str]:
    lines = _source_lines(text)
    lineno = span.start.line
    if lineno < 1 or lineno > len(lines):
        return []
    line = lines[lineno - 1].rstrip("\r")
    gutter = " " * len(str(lineno))
    start_col = max(span.start.column, 1)
    if span.end.line == lineno:
        width = max(span.end.column - start_col, 1)
    else:
        width = max(len(line) - start_col + 1, 1)
    if len(line) > EXCERPT_WIDTH:
        # a window of the line around the start of the span, marked with … where cut
        first = max(0, min(start_col - 1 - EXCERPT_WIDTH // 4, len(line) - EXCERPT_WIDTH))
        shown = line[first:first + EXCERPT_WIDTH]
        prefix = "…" if first else ""
        suffix = "…" if first + EXCERPT_WIDTH < len(line) else ""
        start_col = start_col - first + len(prefix)
        width = max(1, min(width, EXCERPT_WIDTH - (start_col - 1 - len(prefix))))
        line = prefix + shown + suffix
    # Tabs before the caret keep their width so the caret lines up.
    lead = "".join(ch if ch == "\t" else " " for ch in line[: start_col - 1])
    carets = "^" * width
    if color:
        carets = f"\x1b[1;31m{carets}\x1b[0m"
    return [f"{gutter} |", f"{lineno} | {line}", f"{gutter} | {lead}{carets}"]


def render_all(diagnostics: Iterable[Diagnostic], color: bool = False) -> str:
    return "\n".join(d.render(color=color) for d in diagnostics)


class TxclError(Exception):
    """Base class of every error txcl raises for a user's mistake."""


class _DiagnosticsError(TxclError):
    def __init__(self, diagnostics: Iterable[Diagnostic]):
        self.diagnostics: list[Diagnostic] = list(diagnostics)
        super().__init__(render_all(self.diagnostics))

    def __str__(self) -> str:
        return render_all(self.diagnostics)


class TxclSyntaxError(_DiagnosticsError):
    """A rule text has syntax (TX0xx) or per-rule load (TX1xx) errors."""


class TxclLoadError(_DiagnosticsError):
    """An OPS tree failed to load; carries every diagnostic of the tree."""


class TxclDepthError(TxclError, ValueError):
    """A value given to the Python API nests too deeply to be walked (JSON that txcl reads
    itself is refused beyond 256 levels before it gets this far)."""


def depth_guarded(fn):
    """Turn Python's RecursionError inside `fn` into a TxclDepthError that says what happened."""
    import functools

    @functools.wraps(fn)
    def guarded(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except RecursionError:
            raise TxclDepthError(f"{fn.__name__}: the value nests too deeply to walk; keep values within "
                                 "256 levels of arrays and objects (the limit for JSON txcl reads)") from None
    return guarded


def check_depth(value, limit: int = 256, what: str = "value") -> None:
    """Raise TxclDepthError when `value` nests arrays and objects deeper than `limit`
    (an iterative walk: it never recurses itself). Depth first, so a value given through the
    Python API that contains itself, or shares parts, needs memory only for one path:
    it stops at the limit.

    orjson is asked first: it writes nothing nested 255 levels or more, so a value it
    writes is within any limit from 255 up (about ten times quicker than the walk). A value
    it refuses — too deep, or holding what it does not write — is walked."""
    if _orjson is not None and limit >= 255:
        try:
            _orjson.dumps(value)
            return
        except (TypeError, ValueError):
            pass
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        t = type(v)
        if t is dict or t is list or isinstance(v, (dict, list)):
            if depth > limit:
                raise TxclDepthError(f"{what} nests arrays and objects deeper than {limit} levels")
            stack.extend([(x, depth + 1) for x in (v.values() if isinstance(v, dict) else v)
                          if isinstance(x, (dict, list))])


class TxclEvalError(TxclError):
    """A strict function call or value resolution failed at run time."""

    code: str | None = None  # a stable code, where the failure has one

    def __init__(self, message: str):
        self.message = message
        super().__init__(message)


class TxclValueTooDeepError(TxclEvalError, TxclDepthError):
    """A value a rule builds would nest arrays and objects deeper than the limit every value
    of an envelope keeps (so it can always be stored, answered and polled as JSON)."""

    code = rc.VALUE_TOO_DEEP.code



