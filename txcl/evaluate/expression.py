"""`txcl.eval_expression`: evaluate one value expression as on a SET right-hand side.

The text is parsed by the one rule parser (as the value of a synthetic assignment) so
expressions and rules can never disagree; diagnostics are mapped back onto the
expression's own line and column.
"""

from __future__ import annotations

from typing import Any

import attrs

from txcl.errors import Diagnostic, Position, Span, TxclSyntaxError, depth_guarded
from txcl.evaluate.values import compile_value
from txcl.syntax import ast

_PREFIX = "SET .__txcl_expression__ = "


def parse_expression(text: str, filename: str = "<expression>") -> Any:
    """Parse a value expression into its AST node; raises TxclSyntaxError."""
    from txcl.syntax.parser import parse_rule

    try:
        rule = parse_rule(_PREFIX + text, filename=filename)
    except TxclSyntaxError as exc:
        raise TxclSyntaxError([_shift(d, text) for d in exc.diagnostics]) from None
    if len(rule.set_pre) != 1 or len(rule.clauses) != 1:
        end = _position_at(text, len(text))
        raise TxclSyntaxError(
            [Diagnostic("TX010", "expected a single value expression", filename, Span(end, end),
                        source=text)]
        )
    return rule.set_pre[0].value


@depth_guarded
def eval_expression(text: str, envelope: dict | None = None) -> Any:
    """Evaluate `text` against `envelope` (default `{}`); a failing call raises TxclEvalError."""
    node = parse_expression(text)
    return compile_value(node)(envelope if envelope is not None else {}, None)


def _position_at(text: str, offset: int) -> Position:
    before = text[:offset]
    line = before.count("\n") + 1
    column = offset - (before.rfind("\n") + 1) + 1
    return Position(line, column, offset)


def _shift_position(pos: Position, text: str) -> Position:
    offset = max(pos.offset - len(_PREFIX), 0)
    return _position_at(text, min(offset, len(text)))


def _shift(diag: Diagnostic, text: str) -> Diagnostic:
    span = Span(_shift_position(diag.span.start, text), _shift_position(diag.span.end, text))
    message = diag.message.replace(".__txcl_expression__", "the expression")
    return attrs.evolve(diag, span=span, message=message, source=text)


__all__ = ["eval_expression", "parse_expression", "ast"]
