"""Conditions and value expressions compiled to Python source, once per AST node.

`compile_condition` and `compile_value` (in `when.py` and `values.py`) hand each node to this
module: it writes the source of one Python function for the whole expression and compiles it
with `compile()`. Path reads become chains of `dict.get` (a list, a missing value or anything
unusual goes through the generic one-segment read), comparisons are typed by their literal at
load, regexes are compiled once, and nothing dispatches on node kinds while a rule runs.

The node-by-node closures (`when.closure_condition`, `values.closure_value`) stay the
reference: a shape this generator does not specialise (a call on the right of a comparison)
embeds its closure, and a differential test runs both paths over every rule of the test
corpus and over generated rules and compares the results.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable

from txcl.errors import TxclEvalError
from txcl.evaluate.regex_shapes import (
    CONTAINS,
    EXACT,
    PREFIX,
    SUFFIX,
    UNANCHORED,
    literal_shape,
    match_span_reader,
)
from txcl.functions.registry import (
    CHECK_GROWTH_FROM,
    call_failure,
    check_growth,
    lookup,
)
from txcl.functions.registry import call as call_function
from txcl.syntax import ast
from txcl.values.coerce import bool_form, float_form, int_form, text_form
from txcl.values.merge import copy_value
from txcl.values.paths import MISSING, read

# Python's compiler gives up on very deep expressions (SyntaxError "too many nested
# parentheses", RecursionError, MemoryError): such a node keeps its reference closure.
_TOO_DEEP = (SyntaxError, RecursionError, MemoryError)

_OPS = {
    ast.CmpOp.EQ: "==", ast.CmpOp.NE: "!=", ast.CmpOp.LT: "<",
    ast.CmpOp.LE: "<=", ast.CmpOp.GT: ">", ast.CmpOp.GE: ">=",
}


# Longer paths are read by the generic loop: each inlined segment nests the expression once
# more, and Python's compiler refuses deeply nested expressions.
_INLINE_SEGMENTS = 12


def _step(cur: Any, segment: str) -> Any:
    """One segment of a read from anything but a plain dict (lists, subclasses, MISSING)."""
    return read(cur, (segment,))


class _Source:
    """The source of one generated function and the constants it refers to."""

    def __init__(self) -> None:
        self.constants: dict[str, Any] = {
            "M": MISSING, "_step": _step, "_int": int_form, "_float": float_form, "_text": text_form,
            "_bool": bool_form, "_deep": copy_value, "_call": call_function, "_read": read,
            "_EvalError": TxclEvalError, "_failure": call_failure, "_growth": check_growth, "_G": CHECK_GROWTH_FROM,
        }
        self._names = itertools.count()

    def name(self, prefix: str) -> str:
        return f"{prefix}{next(self._names)}"

    def constant(self, value: Any, prefix: str = "k") -> str:
        name = self.name(prefix)
        self.constants[name] = value
        return name

    def read(self, root: str, segments: tuple[str, ...]) -> str:
        """An expression reading `segments` from the variable `root` (MISSING when absent)."""
        if len(segments) > _INLINE_SEGMENTS:
            return f"_read({root}, {self.constant(segments, 's')})"
        expr = root
        for segment in segments:
            var = self.name("c")
            key = repr(segment)
            # a missing segment stays missing without a call (EMIT reads the output first,
            # where most paths are absent)
            expr = (f"({var}.get({key}, M) if type({var} := {expr}) is dict "
                    f"else M if {var} is M else _step({var}, {key}))")
        return expr

    def build(self, name: str, params: str, body: list[str]) -> Callable:
        text = f"def {name}({params}):\n" + "".join(f"    {line}\n" for line in body)
        namespace = dict(self.constants)
        exec(compile(text, f"<txcl compiled {name}>", "exec"), namespace)  # noqa: S102 - our own source
        function = namespace[name]
        function.source = text  # for debugging and the tests
        return function


# ------------------------------------------------------------------ conditions


def condition_function(node: Any, closure: Callable[[Any], Callable]) -> Callable[[Any], bool]:
    """The predicate `envelope -> bool` of a condition node, as one generated function.
    `closure` gives the reference closure of a node the generator embeds as it is (and the
    whole predicate, for a condition nested too deeply for Python's compiler)."""
    src = _Source()
    try:
        expr = _condition(src, node, closure)
        return src.build("when", "d", [f"return {expr}"])
    except _TOO_DEEP:
        return closure(node)


def _condition(src: _Source, node: Any, closure: Callable[[Any], Callable]) -> str:
    if isinstance(node, ast.Star):
        return "True"
    if isinstance(node, ast.Not):
        return f"(not {_condition(src, node.operand, closure)})"
    if isinstance(node, ast.And):
        return "(" + " and ".join(_condition(src, item, closure) for item in node.items) + ")"
    if isinstance(node, ast.Or):
        return "(" + " or ".join(_condition(src, item, closure) for item in node.items) + ")"
    if isinstance(node, ast.Comparison):
        return _comparison(src, node, closure)
    raise TypeError(f"not a condition node: {type(node).__name__}")


def _comparison(src: _Source, node: ast.Comparison, closure: Callable[[Any], Callable]) -> str:
    right, op = node.right, node.op
    if op in (ast.CmpOp.MATCH, ast.CmpOp.NOT_MATCH):
        return _match(src, node)
    if isinstance(right, ast.Call):  # evaluated once and typed by its result: the closure does it
        return f"{src.constant(closure(node), 'p')}(d)"
    value = src.read("d", node.left.segments)
    x = src.name("x")
    if isinstance(right, ast.BoolLit):
        if op not in (ast.CmpOp.EQ, ast.CmpOp.NE):
            return "False"
        return f"(_bool({value}) {_OPS[op]} {right.value!r})"
    if isinstance(right, ast.IntLit):
        return f"(({x} if type({x} := {value}) is int else _int({x})) {_OPS[op]} {src.constant(right.value)})"
    if isinstance(right, ast.FloatLit):
        return f"(({x} if type({x} := {value}) is float else _float({x})) {_OPS[op]} {src.constant(right.value)})"
    if isinstance(right, ast.StringLit):
        return f"(({x} if type({x} := {value}) is str else _text({x})) {_OPS[op]} {src.constant(right.value)})"
    if isinstance(right, ast.NullLit):
        return f"(_text({value}) {_OPS[op]} '')"
    raise TypeError(f"bad comparison value: {type(right).__name__}")


def _match(src: _Source, node: ast.Comparison) -> str:
    right, negate = node.right, node.op is ast.CmpOp.NOT_MATCH
    if isinstance(right, ast.NullLit) or (isinstance(right, ast.Regex) and right.source == "null"):
        return "False" if negate else "True"
    pattern = right.pattern if isinstance(right, ast.Regex) else right.value
    regex = right.compiled if isinstance(right, ast.Regex) else None
    if regex is None:
        import re2

        regex = re2.compile(pattern.encode("utf-8"))
    x = src.name("x")
    text = f"({x} if type({x} := {src.read('d', node.left.segments)}) is str else _text({x}))"
    shape = literal_shape(pattern)
    if shape is None:
        found = _regex_found(src, regex, text)
    else:  # plain text: a string test on ASCII text, RE2 for any other (see regex_shapes)
        t = src.name("t")
        kind, literal = shape
        k = src.constant(literal)
        test = {PREFIX: f"{t}.startswith({k})", SUFFIX: f"{t}.endswith({k})",
                EXACT: f"{t} == {k}", CONTAINS: f"{k} in {t}"}[kind]
        found = f"({test} if ({t} := {text}).isascii() else {_regex_found(src, regex, t)})"
    return f"(not {found})" if negate else found


def _regex_found(src: _Source, regex: Any, text: str) -> str:
    """Source of "RE2 finds `regex` in the str `text`": the engine's own match call where the
    library exposes it (see `match_span_reader`), else `search`."""
    match = match_span_reader(regex)
    if match is None:
        return f"({src.constant(regex.search, 'r')}({text}.encode('utf-8')) is not None)"
    b = src.name("b")
    return (f"({src.constant(match, 'r')}({src.constant(UNANCHORED, 'a')}, ({b} := {text}.encode('utf-8')), "
            f"0, len({b}))[0][0] != -1)")


# ------------------------------------------------------------------ values


def value_function(node: Any, literal: Callable[[Any], Any],
                   closure: Callable[[Any], Callable]) -> Callable[[Any, Any], Any]:
    """The function `(doc, fallback) -> value` of a value node, as one generated function.
    `literal` builds a fresh value of an array literal; `closure` gives the reference
    function, used for an expression nested too deeply for Python's compiler."""
    src = _Source()
    body: list[str] = []
    try:
        result = _value(src, node, body, literal)
        body.append(f"return {result}")
        return src.build("value", "d, f", body)
    except _TOO_DEEP:
        return closure(node)


def _value(src: _Source, node: Any, body: list[str], literal: Callable[[Any], Any]) -> str:
    """Statements appended to `body` compute the value; returns the expression naming it
    (arguments are computed left to right, before their call)."""
    if isinstance(node, ast.Path):
        var = src.name("v")
        body.append(f"{var} = {src.read('d', node.segments)}")
        body.append(f"if {var} is M and f is not None: {var} = {src.read('f', node.segments)}")
        body.append(f"{var} = None if {var} is M else _deep({var}) if isinstance({var}, (dict, list)) else {var}")
        return var
    if isinstance(node, ast.Call):
        args = [_value(src, arg, body, literal) for arg in node.args]
        var = src.name("v")
        spec = lookup(node.name)
        if spec is None or not spec.accepts(len(args)):  # `call` reports it, as a run would
            body.append(f"{var} = _call({node.name!r}, [{', '.join(args)}])")
            return var
        # `call`, written out: the registry never changes after import, so the function and
        # its arity are settled here, and the implementation is called directly
        listed = src.name("a")
        body += [f"{listed} = [{', '.join(args)}]",
                 "try:",
                 f"    {var} = {src.constant(spec.impl, 'i')}({listed})",
                 "except _EvalError:",
                 "    raise",
                 "except Exception as e:",
                 f"    raise _failure({node.name!r}, e) from None",
                 f"if type({var}) is str and len({var}) > _G: _growth({node.name!r}, {var}, {listed})"]
        return var
    if isinstance(node, ast.ArrayLit):
        return f"{src.constant(literal, 'lit')}({src.constant(node, 'n')})"
    if isinstance(node, (ast.IntLit, ast.FloatLit, ast.StringLit, ast.BoolLit)):
        return src.constant(node.value)
    if isinstance(node, ast.NullLit):
        return "None"
    raise TypeError(f"not a value node: {type(node).__name__}")
