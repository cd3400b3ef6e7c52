"""JSON text read with the position of every value, so a finding about a schema can point at
the line and column of the keyword it is about.

`parse(text)` gives the value (as `json.loads` would: first of duplicate keys kept, as the
language reads JSON) and a map from JSON pointer (`/$defs/input/properties/total`) to the span
of the value there, and `key_spans` for the spans of object keys. Malformed text raises
`JsonPosError` with a line and a column. Nesting deeper than `MAX_DEPTH` is refused instead
of recursing without bound.
"""

from __future__ import annotations

import json
import re
from typing import Any

from txcl.errors import Position, Span

MAX_DEPTH = 128

_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"')


class JsonPosError(ValueError):
    def __init__(self, message: str, line: int, column: int, offset: int) -> None:
        super().__init__(message)
        self.message, self.line, self.column, self.offset = message, line, column, offset


def escape_pointer(segment: str) -> str:
    return segment.replace("~", "~0").replace("/", "~1")


class Positions:
    """Spans of a parsed document's values and keys, by JSON pointer."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.values: dict[str, tuple[int, int]] = {}
        self.keys: dict[str, tuple[int, int]] = {}
        self._lines = [0]
        for i, ch in enumerate(text):
            if ch == "\n":
                self._lines.append(i + 1)

    def position(self, offset: int) -> Position:
        lo, hi = 0, len(self._lines) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._lines[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return Position(lo + 1, offset - self._lines[lo] + 1, offset)

    def span(self, start: int, end: int) -> Span:
        return Span(self.position(start), self.position(max(start + 1, end)))

    def span_of(self, pointer: str, key: bool = False) -> Span:
        """The span of the value (or, with `key`, the key) at `pointer`; its nearest parent's
        when the pointer names nothing written (a default, a missing keyword)."""
        table = self.keys if key else self.values
        while True:
            found = table.get(pointer) or self.values.get(pointer)
            if found is not None:
                return self.span(*found)
            if not pointer:
                return self.span(0, 1)
            pointer = pointer.rsplit("/", 1)[0]


def parse(text: str) -> tuple[Any, Positions]:
    positions = Positions(text)
    parser = _Parser(text, positions)
    value = parser.value("", 0)
    parser.skip()
    if parser.i != len(text):
        parser.fail("extra text after the JSON value")
    return value, positions


class _Parser:
    def __init__(self, text: str, positions: Positions) -> None:
        self.text, self.positions, self.i = text, positions, 0

    def fail(self, message: str) -> None:
        at = self.positions.position(min(self.i, len(self.text)))
        raise JsonPosError(message, at.line, at.column, at.offset)

    def skip(self) -> None:
        self.i = _WS.match(self.text, self.i).end()

    def value(self, pointer: str, depth: int) -> Any:
        if depth > MAX_DEPTH:
            self.fail(f"nested deeper than {MAX_DEPTH} levels")
        self.skip()
        start = self.i
        if start >= len(self.text):
            self.fail("unexpected end of the text: a value was expected")
        ch = self.text[start]
        if ch == "{":
            result: Any = self.object(pointer, depth)
        elif ch == "[":
            result = self.array(pointer, depth)
        elif ch == '"':
            result = self.string()
        else:
            match = _NUMBER.match(self.text, start)
            if match is not None and match.end() > start:
                self.i = match.end()
                token = match.group()
                result = float(token) if any(c in token for c in ".eE") else int(token)
            else:
                for word, value in (("true", True), ("false", False), ("null", None)):
                    if self.text.startswith(word, start):
                        self.i = start + len(word)
                        result = value
                        break
                else:
                    self.fail(f"unexpected character {ch!r}: a value was expected")
        self.positions.values.setdefault(pointer, (start, self.i))
        return result

    def string(self) -> str:
        match = _STRING.match(self.text, self.i)
        if match is None:
            self.fail("malformed or unterminated string")
        self.i = match.end()
        return json.loads(match.group())

    def object(self, pointer: str, depth: int) -> dict:
        self.i += 1
        out: dict = {}
        self.skip()
        if self.text.startswith("}", self.i):
            self.i += 1
            return out
        while True:
            self.skip()
            if not self.text.startswith('"', self.i):
                self.fail("an object key (a string in double quotes) was expected")
            key_start = self.i
            key = self.string()
            child = f"{pointer}/{escape_pointer(key)}"
            self.positions.keys.setdefault(child, (key_start, self.i))
            self.skip()
            if not self.text.startswith(":", self.i):
                self.fail("':' was expected after the key")
            self.i += 1
            value = self.value(child, depth + 1)
            if key not in out:
                out[key] = value
            self.skip()
            if self.text.startswith(",", self.i):
                self.i += 1
                continue
            if self.text.startswith("}", self.i):
                self.i += 1
                return out
            self.fail("',' or '}' was expected")

    def array(self, pointer: str, depth: int) -> list:
        self.i += 1
        out: list = []
        self.skip()
        if self.text.startswith("]", self.i):
            self.i += 1
            return out
        while True:
            out.append(self.value(f"{pointer}/{len(out)}", depth + 1))
            self.skip()
            if self.text.startswith(",", self.i):
                self.i += 1
                continue
            if self.text.startswith("]", self.i):
                self.i += 1
                return out
            self.fail("',' or ']' was expected")


__all__ = ["parse", "Positions", "JsonPosError", "escape_pointer", "MAX_DEPTH"]
