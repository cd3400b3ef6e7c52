"""Resolving value expressions, compiled once per AST node.

A value node becomes a function `fn(doc, fallback) -> value` (generated source, see
`txcl.evaluate.codegen`; the closures below are the reference): literals give their value
(arrays a fresh list), paths a deep copy of what they find (missing gives `None`; with a
`fallback` document, a path missing in `doc` is read there — EMIT's "output, then input"),
calls resolve their arguments left to right and then run the function. Failures raise
`TxclEvalError`.
"""

from __future__ import annotations

from typing import Any, Callable

from txcl.errors import TxclEvalError
from txcl.evaluate.codegen import value_function
from txcl.evaluate.nodecache import NodeCache
from txcl.functions.registry import call as call_function
from txcl.syntax import ast
from txcl.values.merge import copy_value
from txcl.values.paths import MISSING, read

ValueFn = Callable[[Any, Any], Any]

def literal_value(node: Any) -> Any:
    """The Python value of a literal node (arrays recursively, as a new list)."""
    if isinstance(node, ast.ArrayLit):
        return [literal_value(item) for item in node.items]
    if isinstance(node, ast.NullLit):
        return None
    return node.value


def compile_value(node: Any) -> ValueFn:
    """The function of a value node: one generated function per node
    (`txcl.evaluate.codegen`), cached by node identity."""
    return _GENERATED.get(node)


def closure_value(node: Any) -> ValueFn:
    """The reference function of a value node: closures node by node (the generated
    functions must agree with these)."""
    return _CACHE.get(node)


def resolve(node: Any, doc: Any, fallback: Any = None) -> Any:
    """Resolve one value node against `doc` (and `fallback` for missing paths)."""
    return compile_value(node)(doc, fallback)


def _compile(node: Any) -> ValueFn:
    if isinstance(node, ast.Path):
        return _compile_path(node.segments)
    if isinstance(node, ast.Call):
        return _compile_call(node)
    if isinstance(node, ast.ArrayLit):
        return lambda doc, fallback: literal_value(node)
    if isinstance(node, (ast.IntLit, ast.FloatLit, ast.StringLit, ast.BoolLit)):
        value = node.value
        return lambda doc, fallback: value
    if isinstance(node, ast.NullLit):
        return lambda doc, fallback: None
    raise TypeError(f"not a value node: {type(node).__name__}")


def _compile_path(segments: tuple[str, ...]) -> ValueFn:
    def read_path(doc: Any, fallback: Any) -> Any:
        found = read(doc, segments)
        if found is MISSING and fallback is not None:
            found = read(fallback, segments)
        if found is MISSING:
            return None
        if isinstance(found, (dict, list)):
            return copy_value(found)
        return found

    return read_path


def _compile_call(node: ast.Call) -> ValueFn:
    name = node.name
    arg_fns = [closure_value(arg) for arg in node.args]

    def run_call(doc: Any, fallback: Any) -> Any:
        args = [fn(doc, fallback) for fn in arg_fns]
        return call_function(name, args)

    return run_call


_CACHE: NodeCache[ValueFn] = NodeCache(_compile)
_GENERATED: NodeCache[ValueFn] = NodeCache(lambda node: value_function(node, literal_value, closure_value))

__all__ = ["compile_value", "closure_value", "resolve", "literal_value", "TxclEvalError"]
