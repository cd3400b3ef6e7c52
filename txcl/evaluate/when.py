"""WHEN and LOOP UNTIL: conditions compiled to predicates.

A condition is compiled once into a predicate `envelope -> bool` (generated source, see
`txcl.evaluate.codegen`; the closures below are the reference); the comparison kind is
fixed by the right side (int, float, text, boolean, regex or call), so evaluation is a read
plus one coercion. Evaluation never raises: anything unexpected counts as "no match".
"""

from __future__ import annotations

import math
import operator
from typing import Any, Callable

from txcl.errors import TxclEvalError
from txcl.evaluate.codegen import condition_function
from txcl.evaluate.nodecache import NodeCache
from txcl.functions.registry import lookup
from txcl.syntax import ast
from txcl.values.coerce import bool_form, float_form, int_form, text_form
from txcl.values.paths import read

Predicate = Callable[[Any], bool]

_ORDER_OPS: dict[ast.CmpOp, Callable[[Any, Any], bool]] = {
    ast.CmpOp.EQ: operator.eq,
    ast.CmpOp.NE: operator.ne,
    ast.CmpOp.LT: operator.lt,
    ast.CmpOp.LE: operator.le,
    ast.CmpOp.GT: operator.gt,
    ast.CmpOp.GE: operator.ge,
}


def _always(_envelope: Any) -> bool:
    return True


def compile_condition(node: Any) -> Predicate:
    """The predicate of a condition node (or `Star`): one generated function per node
    (`txcl.evaluate.codegen`), cached by node identity."""
    return _GENERATED.get(node)


def closure_condition(node: Any) -> Predicate:
    """The reference predicate of a condition node: closures node by node (the generated
    functions must agree with these; they embed one where they do not specialise)."""
    return _CACHE.get(node)


def condition_matches(node: Any, envelope: Any) -> bool:
    """Evaluate a condition (LOOP UNTIL uses this); never raises."""
    try:
        return bool(compile_condition(node)(envelope))
    except Exception:  # noqa: BLE001 - evaluation never raises
        return False


def condition_leaves(condition: Any) -> list[Any]:
    """The comparisons of a condition, in source order (through NOT, AND and OR)."""
    if isinstance(condition, ast.Comparison):
        return [condition]
    if isinstance(condition, ast.Not):
        return condition_leaves(condition.operand)
    if isinstance(condition, (ast.And, ast.Or)):
        return [leaf for item in condition.items for leaf in condition_leaves(item)]
    return []


def when_matches(rule: ast.Rule, envelope: dict | None) -> bool:
    """Whether `rule`'s WHEN matches `envelope`. No envelope at all matches nothing."""
    if envelope is None or not isinstance(envelope, dict):
        return False
    when = rule.when
    if when is None:
        return True
    try:
        return bool(compile_condition(when.condition)(envelope))
    except Exception:  # noqa: BLE001 - evaluation never raises
        return False


def _compile(node: Any) -> Predicate:
    if isinstance(node, ast.Star):
        return _always
    if isinstance(node, ast.Comparison):
        return _compile_comparison(node)
    if isinstance(node, ast.Not):
        inner = closure_condition(node.operand)
        return lambda env: not inner(env)
    if isinstance(node, ast.And):
        parts = tuple(closure_condition(item) for item in node.items)
        if len(parts) == 2:
            a, b = parts
            return lambda env: a(env) and b(env)
        return lambda env: all(p(env) for p in parts)
    if isinstance(node, ast.Or):
        parts = tuple(closure_condition(item) for item in node.items)
        if len(parts) == 2:
            a, b = parts
            return lambda env: a(env) or b(env)
        return lambda env: any(p(env) for p in parts)
    raise TypeError(f"not a condition node: {type(node).__name__}")


def _compile_comparison(node: ast.Comparison) -> Predicate:
    segments = node.left.segments
    right = node.right
    op = node.op
    if op in (ast.CmpOp.MATCH, ast.CmpOp.NOT_MATCH):
        return _compile_match(segments, right, negate=op is ast.CmpOp.NOT_MATCH)
    compare = _ORDER_OPS[op]
    if isinstance(right, ast.Call):
        return _compile_call_comparison(segments, op, right)
    if isinstance(right, ast.BoolLit):
        return _bool_comparison(segments, op, right.value)
    if isinstance(right, ast.IntLit):
        value = right.value
        return lambda env: compare(int_form(read(env, segments)), value)
    if isinstance(right, ast.FloatLit):
        return _float_comparison(segments, compare, right.value)
    if isinstance(right, ast.StringLit):
        value = right.value
        return lambda env: compare(text_form(read(env, segments)), value)
    if isinstance(right, ast.NullLit):
        return lambda env: compare(text_form(read(env, segments)), "")
    raise TypeError(f"bad comparison value: {type(right).__name__}")


def _bool_comparison(segments: tuple[str, ...], op: ast.CmpOp, value: bool) -> Predicate:
    if op is ast.CmpOp.EQ:
        return lambda env: bool_form(read(env, segments)) == value
    if op is ast.CmpOp.NE:
        return lambda env: bool_form(read(env, segments)) != value
    return lambda env: False


def _float_comparison(segments: tuple[str, ...], compare: Callable, value: float) -> Predicate:
    # Python's float comparisons already give False for NaN except under !=.
    return lambda env: compare(float_form(read(env, segments)), value)


def _compile_match(segments: tuple[str, ...], right: Any, negate: bool) -> Predicate:
    if isinstance(right, ast.NullLit) or (isinstance(right, ast.Regex) and right.source == "null"):
        return (lambda env: False) if negate else _always
    regex = right.compiled if isinstance(right, ast.Regex) else None
    if regex is None:
        import re2

        pattern = right.pattern if isinstance(right, ast.Regex) else right.value
        regex = re2.compile(pattern.encode("utf-8"))
    search = regex.search

    if negate:
        return lambda env: search(text_form(read(env, segments)).encode("utf-8")) is None
    return lambda env: search(text_form(read(env, segments)).encode("utf-8")) is not None


def _compile_call_comparison(segments: tuple[str, ...], op: ast.CmpOp, call: ast.Call) -> Predicate:
    """A call on the right: evaluated with constant arguments; its result type decides."""
    from txcl.evaluate.values import closure_value

    evaluate = closure_value(call)
    spec = lookup(call.name)
    deterministic = bool(spec and spec.deterministic and _all_deterministic(call))
    compare = _ORDER_OPS[op]
    cached: list[Any] = []

    def result() -> Any:
        if cached:
            return cached[0]
        try:
            value = evaluate(None, None)
        except TxclEvalError:
            value = None
        if deterministic:
            cached.append(value)
        return value

    def predicate(env: Any) -> bool:
        value = result()
        if value is None or isinstance(value, (list, dict)):
            return False
        left = read(env, segments)
        if isinstance(value, bool):
            if op is ast.CmpOp.EQ:
                return bool_form(left) == value
            if op is ast.CmpOp.NE:
                return bool_form(left) != value
            return False
        if isinstance(value, int):
            return compare(int_form(left), value)
        if isinstance(value, float):
            if math.isnan(value):
                return op is ast.CmpOp.NE
            return compare(float_form(left), value)
        if isinstance(value, str):
            return compare(text_form(left), value)
        return False

    return predicate


_CACHE: NodeCache[Predicate] = NodeCache(_compile)
_GENERATED: NodeCache[Predicate] = NodeCache(lambda node: condition_function(node, closure_condition))


def _all_deterministic(call: ast.Call) -> bool:
    for arg in call.args:
        if isinstance(arg, ast.Call):
            spec = lookup(arg.name)
            if not (spec and spec.deterministic and _all_deterministic(arg)):
                return False
    return True
