"""The rule framework: contexts handed to rule functions, the registry, AST walkers.

A file rule is `fn(ctx: FileContext) -> Iterable[Diagnostic]` registered with
`@file_rule("TX201", ...)` naming the codes it may report, so unselected rules are skipped.
Tree rules (`@tree_rule`) see every rule of an OPS tree through compact `Facts`.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator

import attrs

from txcl.errors import Diagnostic, Span
from txcl.syntax import ast

FileRuleFn = Callable[["FileContext"], Iterable[Diagnostic]]


@attrs.frozen
class RegisteredRule:
    codes: tuple[str, ...]
    fn: Callable
    tree: bool


FILE_RULES: list[RegisteredRule] = []
TREE_RULES: list[RegisteredRule] = []


def file_rule(*codes: str):
    def deco(fn):
        FILE_RULES.append(RegisteredRule(codes, fn, False))
        return fn
    return deco


def tree_rule(*codes: str):
    def deco(fn):
        TREE_RULES.append(RegisteredRule(codes, fn, True))
        return fn
    return deco


@attrs.define
class FileContext:
    """One parsed rule with its source text."""

    rule: ast.Rule
    source: str
    file: str = "<string>"
    stack: str | None = None  # known when the file lies in an OPS tree

    def diag(self, code: str, span: Span, message: str, hint: str | None = None) -> Diagnostic:
        return Diagnostic(code, message, file=self.file, span=span, hint=hint, source=self.source)

    def text(self, span: Span) -> str:
        return self.source[span.start.offset:span.end.offset]


# ---------------------------------------------------------------- walkers

def iter_value_nodes(value) -> Iterator:
    """`value` and every node nested in it (call arguments, array items)."""
    yield value
    if isinstance(value, ast.Call):
        for arg in value.args:
            yield from iter_value_nodes(arg)
    elif isinstance(value, ast.ArrayLit):
        for item in value.items:
            yield from iter_value_nodes(item)


def iter_comparisons(cond, nots: int = 0) -> Iterator[tuple[ast.Comparison, int]]:
    """Comparison leaves of a condition with the number of enclosing `!`."""
    if isinstance(cond, ast.Comparison):
        yield cond, nots
    elif isinstance(cond, ast.Not):
        yield from iter_comparisons(cond.operand, nots + 1)
    elif isinstance(cond, (ast.And, ast.Or)):
        for item in cond.items:
            yield from iter_comparisons(item, nots)


def conditions(rule: ast.Rule) -> Iterator[tuple[str, object]]:
    """("WHEN" | "LOOP UNTIL", condition) pairs of a rule."""
    if rule.when is not None and not isinstance(rule.when.condition, ast.Star):
        yield "WHEN", rule.when.condition
    if rule.loop is not None and rule.loop.until is not None:
        yield "LOOP UNTIL", rule.loop.until


def assignment_lists(rule: ast.Rule) -> Iterator[tuple[str, tuple[ast.Assignment, ...]]]:
    yield "SET", rule.set_pre
    yield "SET", rule.set_post
    yield "EMIT", rule.emit
    if rule.loop is not None:
        yield "LOOP SET", rule.loop.set


def top_values(rule: ast.Rule) -> Iterator[tuple[str, object]]:
    """Every top-level value of a rule with the clause it sits in (not conditions)."""
    for where, items in assignment_lists(rule):
        for a in items:
            yield where, a.value
    if rule.select is not None:
        for item in rule.select.items:
            if item.default is not None:
                yield "SELECT", item.default
    for pair in rule.with_:
        yield "WITH", pair.value


def all_values(rule: ast.Rule) -> Iterator[tuple[str, object]]:
    """Every value node, nested ones included, plus the right sides of comparisons."""
    for where, value in top_values(rule):
        for node in iter_value_nodes(value):
            yield where, node
    for where, cond in conditions(rule):
        for cmp, _ in iter_comparisons(cond):
            for node in iter_value_nodes(cmp.right):
                yield where, node


def read_paths(rule: ast.Rule) -> Iterator[ast.Path]:
    """Paths a rule reads (TX222): comparison left sides, values, call args, SELECT sources."""
    for _, cond in conditions(rule):
        for cmp, _ in iter_comparisons(cond):
            yield cmp.left
    for _, node in all_values(rule):
        if isinstance(node, ast.Path):
            yield node
    if rule.select is not None:
        for item in rule.select.items:
            yield item.source


def literal_value(node):
    """The Python value of a literal node, or raise ValueError for non-literals."""
    if isinstance(node, (ast.IntLit, ast.FloatLit, ast.StringLit, ast.BoolLit)):
        return node.value
    if isinstance(node, ast.ArrayLit):
        return [literal_value(item) for item in node.items]
    raise ValueError("not a literal")


def is_literal(node) -> bool:
    return isinstance(node, (ast.IntLit, ast.FloatLit, ast.StringLit, ast.BoolLit, ast.ArrayLit))


def is_unconditional(rule: ast.Rule) -> bool:
    """No WHEN, `WHEN *` or a bare WHEN."""
    return rule.when is None or isinstance(rule.when.condition, ast.Star)


def truthy_literal(node) -> bool:
    """Boolean form of a literal, False for anything not a literal."""
    if not is_literal(node):
        return False
    value = literal_value(node)
    try:
        from txcl.values.coerce import bool_form
        return bool(bool_form(value))
    except Exception:  # values developer's module not there yet: the plain reading
        if isinstance(value, str):
            return value.strip().lower() in ("true", "1", "t", "yes")
        return bool(value)


def with_map(rule: ast.Rule) -> dict[str, ast.WithPair]:
    """The last WITH pair of each key (the one that wins at run time)."""
    return {pair.key_text: pair for pair in rule.with_}


def literal_with(rule: ast.Rule, key: str):
    """(value, pair) of a literal WITH key; (None, pair) for a non-literal; (None, None) absent."""
    pair = with_map(rule).get(key)
    if pair is None:
        return None, None
    if not is_literal(pair.value):
        return None, pair
    return literal_value(pair.value), pair
