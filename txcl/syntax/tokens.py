"""Tokens of the TXCL scanner and how diagnostics describe them.

The scanner makes each token a plain tuple, a *row*: `(type, value, data, line, col, start,
end_line, end_col, end)`, plus the diagnostic for an `ERROR` token. A tuple costs a tenth of
an object with an `__init__`, and a parse makes one per token; the parser and the AST
builder read rows by the indexes below. The last six fields are laid out as a `Span`'s
integers, so `row[3:9]` is the token's span and `row[3:6]`, `row[6:9]` its two ends. `Tok`
is the same token as an object with names, for everything that is not on that path (error
explanations, tools, tests).

Token types are the terminal names of grammar/txcl.lark, plus `ERROR` for text the scanner
rejected (its diagnostic rides along and is reported only if the parser reaches it).
"""

from __future__ import annotations

from typing import Any

from txcl.errors import Diagnostic, Position, Span
from txcl.vocabulary import CLAUSE_KEYWORDS, CONSTANTS, ITEM_WORDS, LOOP_MODIFIERS, RESERVED_WORDS  # noqa: F401

_new_tuple = tuple.__new__  # a Span from its six integers, made in C

CLAUSE_KW_SET = frozenset(CLAUSE_KEYWORDS)
KEYWORDS = {kw.lower(): kw for kw in (*CLAUSE_KEYWORDS, *ITEM_WORDS, "UNTIL", *CONSTANTS)}
CONTEXTUAL = {"every": "EVERY", "max": "MAX"}  # keywords only after LOOP
RESERVED = frozenset(word.lower() for word in RESERVED_WORDS)
ALL_KEYWORD_TYPES = frozenset(KEYWORDS.values()) | {"EVERY", "MAX"}

PUNCT_TEXT = {
    "EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">=", "MATCH": "=~",
    "NMATCH": "!~", "AND": "&&", "OR": "||", "BANG": "!", "ASSIGN": "=", "COMMA": ",",
    "LPAR": "(", "RPAR": ")", "LSQB": "[", "RSQB": "]", "STAR": "*",
}


# Indexes into a token row.
TYPE, VALUE, DATA, LINE, COL, START, END_LINE, END_COL, END, ERROR = range(10)

Row = tuple  # (type, value, data, line, col, start, end_line, end_col, end[, error])


def row_span(row: Row) -> Span:
    return _new_tuple(Span, row[3:9])


class Tok:
    """One token: type, source text, parsed data and its position.

    `line`/`col` are 1-based (columns in code points), `start`/`end` 0-based offsets,
    `end` exclusive; `end_line`/`end_col` give the position just after the token.
    """

    __slots__ = ("type", "value", "data", "line", "col", "start", "end_line", "end_col",
                 "end", "error", "_spos", "_epos")

    def __init__(self, type_: str, value: str, data: Any, line: int, col: int, start: int,
                 end_line: int, end_col: int, end: int, error: Diagnostic | None = None):
        self.type = type_
        self.value = value
        self.data = data
        self.line = line
        self.col = col
        self.start = start
        self.end_line = end_line
        self.end_col = end_col
        self.end = end
        self.error = error
        self._spos: Position | None = None
        self._epos: Position | None = None

    @property
    def spos(self) -> Position:
        p = self._spos
        if p is None:
            p = self._spos = Position(self.line, self.col, self.start)
        return p

    @property
    def epos(self) -> Position:
        p = self._epos
        if p is None:
            p = self._epos = Position(self.end_line, self.end_col, self.end)
        return p

    @property
    def span(self) -> Span:
        return Span(self.spos, self.epos)

    # Lark's error classes read these names.
    @property
    def column(self) -> int:
        return self.col

    @property
    def start_pos(self) -> int:
        return self.start

    def __repr__(self) -> str:
        return f"Tok({self.type}, {self.value!r}, {self.line}:{self.col})"


def describe(tok: Tok) -> str:
    """The `found …` text of a syntax error: `path .x`, `keyword SELECT`, `'=='`, `end of input`…"""
    t = tok.type
    if t == "$END":
        return "end of input"
    if t in ("PATH", "DOT_PATH"):
        return f"path {tok.value}"
    if t == "NAME":
        return f"identifier {tok.value}"
    if t == "STRING":
        b64 = tok.value.startswith("b64")
        return describe_string(tok.value[4:-1] if b64 else tok.value[1:-1], b64)
    if t in ("INT", "FLOAT"):
        return f"number {tok.value}"
    if t in ALL_KEYWORD_TYPES:
        return f"keyword {t}"
    if t == "CALL_START":
        return f"'{tok.value}'"
    if t == "REGEX":
        return f"regex {tok.value}"
    if t in PUNCT_TEXT:
        return f"'{PUNCT_TEXT[t]}'"
    if t == "ERROR":
        return describe_error_text(tok.value)
    return repr(tok.value)


def describe_string(inner: str, b64: bool = False) -> str:
    """`string "…"` with the content cut after 20 characters."""
    if len(inner) > 20:
        inner = inner[:20] + "…"
    return f'string {"b64" if b64 else ""}"{inner}"'


def describe_error_text(text: str) -> str:
    if text[:1].isdigit() or (text[:1] == "-" and len(text) > 1):
        return f"number {text}"
    if text[:1] in ".@":
        return f"path {text}"
    if text[:1] == '"' or text.startswith('b64"'):
        return "unterminated string"
    if text[:1] == "&" and len(text) > 1:
        return f"'{text}'"
    return char_text(text[:1])


def char_text(ch: str) -> str:
    """`'c'` for printable characters, `'U+FEFF'` for invisible ones."""
    if ch.isprintable() and not ch.isspace():
        return f"'{ch}'"
    return f"'U+{ord(ch):04X}'"
