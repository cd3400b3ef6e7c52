"""TX202 bare-when."""

from __future__ import annotations

from typing import Iterator

from txcl.check.rules.base import FileContext, file_rule
from txcl.errors import Diagnostic
from txcl.syntax import ast


@file_rule("TX202")
def bare_when(ctx: FileContext) -> Iterator[Diagnostic]:
    when = ctx.rule.when
    if when is not None and isinstance(when.condition, ast.Star) and when.condition.bare:
        yield ctx.diag("TX202", when.span, "WHEN with no condition matches everything",
                       hint="write WHEN * to match everything, or add a condition")
