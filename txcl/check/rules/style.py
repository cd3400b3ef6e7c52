"""Style: TX301 clause-order, TX302 split-clause."""

from __future__ import annotations

from typing import Iterator

from txcl.check.rules.base import FileContext, file_rule
from txcl.errors import Diagnostic, Position, Span

CANONICAL = ("when", "set_pre", "select", "set_post", "with", "priority", "exec", "loop", "emit")
RANK = {kind: i for i, kind in enumerate(CANONICAL)}
LIST_KINDS = ("set_pre", "set_post", "with", "emit")
KEYWORD = {"when": "WHEN", "set_pre": "SET", "select": "SELECT", "set_post": "SET", "with": "WITH",
           "priority": "PRIORITY", "exec": "EXEC", "loop": "LOOP", "emit": "EMIT"}


def label(kind: str) -> str:
    if kind == "set_pre":
        return "SET (before SELECT)"
    if kind == "set_post":
        return "SET (after SELECT)"
    return KEYWORD[kind]


def keyword_span(ctx: FileContext, span: Span) -> Span:
    """The span of the clause keyword alone (the first word of a clause mark)."""
    start = span.start
    i = start.offset
    while i < len(ctx.source) and ctx.source[i].isalpha():
        i += 1
    length = max(i - start.offset, 1)
    return Span(start, Position(start.line, start.column + length, start.offset + length))


def out_of_order(marks) -> list:
    """Clause marks that come after a clause of a later canonical rank."""
    bad = []
    highest = -1
    for mark in marks:
        rank = RANK.get(mark.kind, -1)
        if rank < highest:
            bad.append(mark)
        highest = max(highest, rank)
    return bad


@file_rule("TX301")
def clause_order(ctx: FileContext) -> Iterator[Diagnostic]:
    marks = ctx.rule.clauses
    highest = None
    for mark in marks:
        if highest is not None and RANK[mark.kind] < RANK[highest.kind]:
            yield ctx.diag("TX301", keyword_span(ctx, mark.span),
                           f"{label(mark.kind)} should come before {label(highest.kind)} "
                           f"(line {highest.span.start.line})",
                           hint="canonical order: WHEN, SET, SELECT, SET, WITH, PRIORITY, EXEC, LOOP, EMIT")
        elif highest is None or RANK[mark.kind] > RANK[highest.kind]:
            highest = mark


@file_rule("TX302")
def split_clause(ctx: FileContext) -> Iterator[Diagnostic]:
    first: dict[str, object] = {}
    for mark in ctx.rule.clauses:
        if mark.kind not in LIST_KINDS:
            continue
        if mark.kind not in first:
            first[mark.kind] = mark
            continue
        kw = KEYWORD[mark.kind]
        yield ctx.diag("TX302", keyword_span(ctx, mark.span),
                       f"this {kw} continues the {kw} list started at line {first[mark.kind].span.start.line}",
                       hint=f"join them into one {kw} clause")
