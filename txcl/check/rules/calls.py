"""TX207 call-always-fails, TX208 try-wrong-arity."""

from __future__ import annotations

from typing import Iterator

from txcl.check.rules.base import FileContext, all_values, file_rule, is_literal, literal_value
from txcl.errors import Diagnostic
from txcl.syntax import ast


def _registry():
    from txcl.functions import registry

    return registry


def _lookup(registry, name: str):
    try:
        return registry.lookup(name)
    except Exception:
        return None


class _Failed(Exception):
    pass


class _OutOfBudget(Exception):
    pass


# How much work the literal calls of one file may do when TX207 evaluates them, counted in
# characters of the strings and elements of the arrays and objects their arguments and results
# hold. A call is bounded by the size limit of functions (1 MiB of growth), but forty of them
# in a file could take seconds on every keystroke; past this the check stops evaluating (TX215).
EVALUATION_BUDGET = 4_000_000


def _size(value) -> int:
    if isinstance(value, (str, list, dict)):
        return len(value)
    return 1


def _evaluate(registry, call: ast.Call, failures: list[tuple[ast.Call, str]], budget: list[int] | None = None):
    """Value of an all-literal call; records the innermost failing call. Raises _Failed, or
    _OutOfBudget when the file's evaluation budget is spent."""
    budget = budget if budget is not None else [EVALUATION_BUDGET]
    args = []
    for arg in call.args:
        if isinstance(arg, ast.Call):
            args.append(_evaluate(registry, arg, failures, budget))
        elif is_literal(arg):
            args.append(literal_value(arg))
        else:
            raise ValueError("not constant")
    spec = _lookup(registry, call.name)
    if spec is None or not spec.accepts(len(args)):
        raise ValueError("unknown or wrong arity: reported elsewhere")
    if budget[0] <= 0:
        raise _OutOfBudget()
    try:
        result = registry.call(call.name, args)
        budget[0] -= sum(_size(a) for a in args) + _size(result)
        return result
    except Exception as exc:  # TxclEvalError, or a bug in a function: both mean "fails"
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        message = message.removeprefix(f"&{call.name}: ")
        failures.append((call, message))
        raise _Failed() from None


def _constant(node) -> bool:
    if isinstance(node, ast.Call):
        return all(_constant(a) for a in node.args)
    return is_literal(node)


def _outermost_calls(rule: ast.Rule) -> Iterator[tuple[str, ast.Call]]:
    from txcl.check.rules.base import conditions, iter_comparisons, top_values
    for where, value in top_values(rule):
        if isinstance(value, ast.Call):
            yield where, value
        elif isinstance(value, ast.ArrayLit):
            continue
    for where, cond in conditions(rule):
        for cmp, _ in iter_comparisons(cond):
            if isinstance(cmp.right, ast.Call):
                yield where, cmp.right


def _constant_subcalls(call: ast.Call) -> Iterator[ast.Call]:
    """The largest all-constant calls inside `call` (itself when it is constant)."""
    if _constant(call):
        yield call
        return
    for arg in call.args:
        if isinstance(arg, ast.Call):
            yield from _constant_subcalls(arg)


@file_rule("TX207")
def call_always_fails(ctx: FileContext) -> Iterator[Diagnostic]:
    registry = _registry()
    if registry is None:
        return
    budget = [EVALUATION_BUDGET]
    for where, outer in _outermost_calls(ctx.rule):
        for call in _constant_subcalls(outer):
            failures: list[tuple[ast.Call, str]] = []
            try:
                _evaluate(registry, call, failures, budget)
            except (_Failed, ValueError):
                pass
            except _OutOfBudget:
                yield ctx.diag("TX215", call.span,
                               "txcl check stopped evaluating the literal calls of this file here: the ones before "
                               "built more than it evaluates per file; the rest are not checked for TX207",
                               hint="calls with only literal arguments are evaluated to find ones that always "
                                    "fail; very large literal values are better built at run time")
                return
            for failed, message in failures:
                tail = "; the comparison is always false" if where in ("WHEN", "LOOP UNTIL") else ""
                yield ctx.diag("TX207", failed.span,
                               f"&{failed.name}(...) always fails: {message}{tail}")


@file_rule("TX208")
def try_wrong_arity(ctx: FileContext) -> Iterator[Diagnostic]:
    registry = _registry()
    if registry is None:
        return
    for _, node in all_values(ctx.rule):
        if not isinstance(node, ast.Call) or not node.name.startswith("try_"):
            continue
        spec = _lookup(registry, node.name)
        if spec is None:
            continue
        base_name = getattr(registry, "TRY_VARIANTS", {}).get(node.name, node.name[4:])
        base = _lookup(registry, base_name) or spec
        if not base.accepts(len(node.args)):
            yield ctx.diag("TX208", node.name_span if node.name_span.end.offset else node.span,
                           f"&{node.name} {base.arity_text()}, got {len(node.args)}; it always returns null")
