"""TX201 leading-zero-number."""

from __future__ import annotations

import re
from typing import Iterator

from txcl.check.rules.base import FileContext, all_values, file_rule
from txcl.errors import Diagnostic, Position, Span
from txcl.syntax import ast

LEADING_ZERO = re.compile(r"^-?0[0-9]+$")
_TAIL_INT = re.compile(r"-?[0-9]+\s*$")


def fixed_text(text: str) -> str:
    """`012` → `12`, `-007` → `-7`, `00` → `0`."""
    return str(int(text))


def leading_zero_spans(ctx: FileContext) -> Iterator[tuple[Span, str]]:
    """(span, token text) of every integer literal written with a leading zero."""
    rule = ctx.rule
    for _, node in all_values(rule):
        if isinstance(node, ast.IntLit) and LEADING_ZERO.match(node.text):
            yield node.span, node.text
    # PRIORITY, LOOP MAX and LOOP EVERY keep only the value: look at their source text.
    spans: list[Span] = []
    if rule.priority is not None:
        spans.append(rule.priority.span)
    if rule.loop is not None:
        spans.extend(m.span for m in rule.loop.modifiers if m.kind in ("max", "every"))
    for span in spans:
        text = ctx.text(span)
        match = _TAIL_INT.search(text)
        if match is None:
            continue
        token = match.group(0).rstrip()
        if not LEADING_ZERO.match(token):
            continue
        start = span.start.offset + match.start()
        yield _span_at(ctx.source, start, len(token)), token


def _span_at(source: str, offset: int, length: int) -> Span:
    line = source.count("\n", 0, offset) + 1
    col = offset - (source.rfind("\n", 0, offset) + 1) + 1
    return Span(Position(line, col, offset), Position(line, col + length, offset + length))


@file_rule("TX201")
def leading_zero(ctx: FileContext) -> Iterator[Diagnostic]:
    for span, text in leading_zero_spans(ctx):
        fixed = fixed_text(text)
        yield ctx.diag("TX201", span,
                       f"number {text} has a leading zero: it is {fixed} here but octal in the reference",
                       hint=f"write {fixed}")
