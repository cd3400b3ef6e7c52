"""Lark callbacks that build the AST while the LALR parser reduces.

The transformer is used inline (`Lark(..., transformer=...)`), so nodes are built during
the parse and no parse tree is ever materialised. Tokens arrive as the scanner's rows
(tuples, see txcl.syntax.tokens); literal and path rows carry their node from the scanner;
a regex row becomes its node (compiled once) on shift. Clause callbacks
do not return the clause to the parent rule: they append it to `self.clauses`, so clauses
completed before a syntax error survive recovery.
Checks that need a value rather than a token (TX005, TX029–TX032) add diagnostics to
`self.diags` and never raise.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any

import attrs
import re2
from lark import Transformer

from txcl.errors import Diagnostic, Span
from txcl.syntax import ast
from txcl.vocabulary import parse_duration_ns
from txcl.syntax.tokens import DATA, END, END_COL, END_LINE, TYPE, VALUE, Row, describe_string, row_span

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False
_REGEX_CACHE: dict[str, Any] = {}

_CMP = {
    "EQ": ast.CmpOp.EQ, "NE": ast.CmpOp.NE, "LT": ast.CmpOp.LT, "LE": ast.CmpOp.LE,
    "GT": ast.CmpOp.GT, "GE": ast.CmpOp.GE, "MATCH": ast.CmpOp.MATCH,
    "NMATCH": ast.CmpOp.NOT_MATCH,
}


def compile_regex(pattern: str) -> Any:
    """RE2-compile `pattern` (as UTF-8 bytes); returns the pattern or the error text (str)."""
    hit = _REGEX_CACHE.get(pattern)
    if hit is not None:
        return hit
    try:
        result: Any = re2.compile(pattern.encode("utf-8", "surrogatepass"),
                                  options=_RE2_OPTIONS)
    except re2.error as exc:
        msg = exc.args[0] if exc.args else str(exc)
        result = msg.decode("utf-8", "replace") if isinstance(msg, bytes) else str(msg)
    except Exception as exc:  # noqa: BLE001 - RE2 may reject odd input other ways
        result = str(exc) or type(exc).__name__
    if len(_REGEX_CACHE) > 4096:
        _REGEX_CACHE.clear()
    _REGEX_CACHE[pattern] = result
    return result


_new_tuple = tuple.__new__  # a Span from its six integers, made in C


def _span(first: Any, last: Any) -> Span:
    """From the start of `first` to the end of `last` (token rows or nodes).

    A row's start is `row[3:6]` and its end `row[6:9]`, a span's `span[:3]` and `span[3:]`
    (see txcl.syntax.tokens). Read item by item, one branch per case: a parse calls this for
    most nodes it builds, and slicing and joining tuples measured slower."""
    if type(first) is tuple:
        if type(last) is tuple:
            return _new_tuple(Span, (first[3], first[4], first[5], last[6], last[7], last[8]))
        last = last.span
        return _new_tuple(Span, (first[3], first[4], first[5], last[3], last[4], last[5]))
    first = first.span
    if type(last) is tuple:
        return _new_tuple(Span, (first[0], first[1], first[2], last[6], last[7], last[8]))
    last = last.span
    return _new_tuple(Span, (first[0], first[1], first[2], last[3], last[4], last[5]))


class TxclTransformer(Transformer):
    """Inline LALR callbacks. Per-parse state is reset by `reset()` before each parse."""

    def __init__(self) -> None:
        super().__init__(visit_tokens=True)
        self.reset("<string>")

    def reset(self, filename: str) -> None:
        self.filename = filename
        self.clauses: list[tuple[str, Any, Row, Span]] = []
        self.diags: list[Diagnostic] = []
        self.calls: list[ast.Call] = []  # every call built, for the TX101/TX102 checks

    def _diag(self, code: str, message: str, span: Span, hint: str | None = None) -> None:
        self.diags.append(Diagnostic(code, message, self.filename, span, hint))

    # ------------------------------------------------------------ terminals

    # Literals and paths arrive with their node already built by the scanner, in `data`.
    INT = FLOAT = STRING = TRUE = FALSE = NULL = PATH = DOT_PATH = staticmethod(itemgetter(DATA))

    def REGEX(self, tok: Row) -> ast.Regex:
        return self._regex(tok[DATA], "literal", row_span(tok))

    def _regex(self, pattern: str, source: str, span: Span) -> ast.Regex:
        compiled = compile_regex(pattern)
        if isinstance(compiled, str):
            self._diag("TX005", f"invalid regular expression: {compiled}", span)
            compiled = None
        return ast.Regex(pattern, source, compiled, span=span)

    # ------------------------------------------------------------ values

    def array(self, c: list) -> ast.ArrayLit:
        items = tuple(x for x in c[1:-1] if x is not None and type(x) is not tuple)
        return ast.ArrayLit(items, span=_span(c[0], c[-1]))

    def call(self, c: list) -> ast.Call:
        head = c[0]
        args = tuple(x for x in c[1:-1] if x is not None and type(x) is not tuple)
        start = head[3:6]
        node = ast.Call(head[DATA], args,  # the name's span, without `(`
                        _new_tuple(Span, start + (head[END_LINE], head[END_COL] - 1, head[END] - 1)),
                        span=_new_tuple(Span, start + c[-1][6:9]))  # to `)`
        self.calls.append(node)
        return node

    const_call = call

    def assignment(self, c: list) -> ast.Assignment:
        return ast.Assignment(c[0], c[2], span=_span(c[0], c[2]))

    # ------------------------------------------------------------ conditions

    def comparison(self, c: list) -> ast.Comparison:
        left, op_tok, right = c
        op = _CMP[op_tok[TYPE]]
        if op is ast.CmpOp.MATCH or op is ast.CmpOp.NOT_MATCH:
            if type(right) is ast.StringLit:
                right = self._regex(right.value, "string", right.span)
            elif type(right) is ast.NullLit:
                right = ast.Regex("", "null", compile_regex(""), span=right.span)
        return ast.Comparison(left, op, right, span=_span(left, right))

    def not_cond(self, c: list) -> ast.Not:
        return ast.Not(c[1], span=_span(c[0], c[1]))

    def group(self, c: list) -> Any:
        return attrs.evolve(c[1], span=_span(c[0], c[2]))

    def and_cond(self, c: list) -> Any:
        if len(c) == 1:
            return c[0]
        items: list = []
        seps: list[str] = []
        for i, x in enumerate(c):
            if i % 2:
                seps.append(x[VALUE])
            elif type(x) is ast.And:  # a parenthesised chain: the parentheses are redundant
                items.extend(x.items)
                seps.extend(x.separators)
            else:
                items.append(x)
        return ast.And(tuple(items), tuple(seps), span=_span(c[0], c[-1]))

    def condition(self, c: list) -> Any:
        if len(c) == 1:
            return c[0]
        items: list = []
        for x in c[::2]:
            if type(x) is ast.Or:
                items.extend(x.items)
            else:
                items.append(x)
        return ast.Or(tuple(items), span=_span(c[0], c[-1]))

    # ------------------------------------------------------------ clauses

    def _clause(self, kind: str, node: Any, kw: Row, last: Any) -> None:
        self.clauses.append((kind, node, kw, _span(kw, last)))

    def when_bare(self, c: list) -> None:
        kw = c[0]
        span = row_span(kw)
        self.clauses.append(("when", ast.When(ast.Star(True, span=span), span=span), kw, span))

    def when_star(self, c: list) -> None:
        kw, star = c
        span = _span(kw, star)
        self.clauses.append(("when", ast.When(ast.Star(False, span=row_span(star)), span=span), kw, span))

    def when_cond(self, c: list) -> None:
        kw, cond = c
        span = _span(kw, cond)
        self.clauses.append(("when", ast.When(cond, span=span), kw, span))

    def set_clause(self, c: list) -> None:
        items = tuple(x for x in c[1:] if type(x) is ast.Assignment)
        self._clause("set", items, c[0], c[-1])

    def emit_clause(self, c: list) -> None:
        items = tuple(x for x in c[1:] if type(x) is ast.Assignment)
        self._clause("emit", items, c[0], c[-1])

    def select_star(self, c: list) -> None:
        kw, star = c
        span = _span(kw, star)
        self.clauses.append(("select", ast.Select(True, (), span=span), kw, span))

    def select_clause(self, c: list) -> None:
        kw = c[0]
        items = tuple(x for x in c[1:] if type(x) is ast.SelectItem)
        span = _span(kw, c[-1])
        self.clauses.append(("select", ast.Select(False, items, span=span), kw, span))

    def select_item(self, c: list) -> ast.SelectItem:
        source, _as, dest, _default, default = c
        last = default if default is not None else (dest if dest is not None else source)
        return ast.SelectItem(source, dest, default, span=_span(source, last))

    def with_clause(self, c: list) -> None:
        items = tuple(x for x in c[1:] if type(x) is ast.WithPair)
        self._clause("with", items, c[0], c[-1])

    def with_pair(self, c: list) -> ast.WithPair:
        name, tail, _eq, value = c
        key: tuple[str, ...] = (name[VALUE],)
        key_last: Any = name
        if tail is not None:
            key = key + tail.segments
            key_last = tail
        return ast.WithPair(key, value, _span(name, key_last), span=_span(name, value))

    def priority_clause(self, c: list) -> None:
        kw, lit = c
        span = _span(kw, lit)
        self.clauses.append(("priority", ast.Priority(lit.value, span=span), kw, span))

    def exec_clause(self, c: list) -> None:
        kw, lit = c
        span = _span(kw, lit)
        self.clauses.append(("exec", ast.Exec(lit.value, lit.span, span=span), kw, span))

    # ------------------------------------------------------------ LOOP

    def loop_until(self, c: list) -> tuple:
        return ("until", c[1], c[0], _span(c[0], c[1]))

    def loop_set(self, c: list) -> tuple:
        items = tuple(x for x in c[1:] if type(x) is ast.Assignment)
        return ("set", items, c[0], _span(c[0], c[-1]))

    def loop_every(self, c: list) -> tuple:
        kw, value = c
        span = _span(kw, value)
        if type(value) is ast.IntLit:
            if value.value < 0:
                self._diag("TX031", "LOOP EVERY cannot be negative", value.span)
                return ("every", None, kw, span)
            return ("every", value.value * 1_000_000, kw, span)
        ns = parse_duration_ns(value.value)
        if ns is None:
            tok_desc = describe_string(value.plain, value.b64)
            self._diag("TX031", 'LOOP EVERY needs a duration such as "250ms" or a whole '
                       f"number of milliseconds, found {tok_desc}", value.span)
        elif ns < 0:
            self._diag("TX031", "LOOP EVERY cannot be negative", value.span)
            ns = None
        return ("every", ns, kw, span)

    def loop_max(self, c: list) -> tuple:
        kw, value = c
        if value.value <= 0:
            self._diag("TX030", f"LOOP MAX needs a positive integer, found number {value.text}",
                       value.span)
        return ("max", value.value, kw, _span(kw, value))

    def loop_clause(self, c: list) -> None:
        kw = c[0]
        seen: dict[str, tuple] = {}
        marks = []
        for mod in c[1:]:
            kind, value, mkw, span = mod
            if kind in seen:
                self._diag("TX032", f"LOOP {kind.upper()} given more than once", row_span(mkw))
                continue
            seen[kind] = mod
            marks.append(ast.ClauseMark(kind, span=span))
        if "until" not in seen:
            self._diag("TX029", "LOOP requires an UNTIL condition", row_span(kw))
        last = c[-1][3]
        span = _new_tuple(Span, kw[3:6] + last[3:])
        loop = ast.Loop(
            until=seen["until"][1] if "until" in seen else None,
            set=seen["set"][1] if "set" in seen else (),
            every_ns=seen["every"][1] if "every" in seen else None,
            max=seen["max"][1] if "max" in seen else None,
            modifiers=tuple(marks),
            span=span,
        )
        self.clauses.append(("loop", loop, kw, span))

    def start(self, c: list) -> None:
        return None
