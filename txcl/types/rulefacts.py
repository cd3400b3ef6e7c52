"""What one rule reads and writes, as plain data for the flow checker (kept in the check
cache with the rule's other facts, so the checker never needs the AST of a cached file).

A read is `(doc, segments, at_sugar, span, comparison, argument)`; `doc` says which document it
reads: `env` (WHEN: the scope-entry envelope), `input` (SET PRE, WITH, SELECT: the op's input),
`emit` (EMIT: the op's answer, then its input), `post` (SET POST: the envelope after the
scope's merge), `view` (LOOP UNTIL and LOOP SET: the input with the passes merged in).
`comparison` is `(operator, kind, value)` for a WHEN/UNTIL comparison's left side; `argument`
is `(function, index)` for a call argument.

A write is `(kind, segments, span, value)` with kind `emit`, `post`, `select`, `pre` or
`loop_set`; `value` describes the written value: `["lit", v]`, `["path", segments, doc]`,
`["call", name, [args]]`, `["arr", [items]]`.
"""

from __future__ import annotations

from typing import Any

from txcl.syntax import ast

MAX_LITERAL_CHARS = 256  # longer string literals are kept as their type only


def _span(node: Any) -> tuple[int, ...]:
    return tuple(node.span)


def _literal(node: Any) -> tuple[bool, Any]:
    if isinstance(node, ast.StringLit):
        return True, node.value
    if isinstance(node, (ast.IntLit, ast.FloatLit, ast.BoolLit)):
        return True, node.value
    if isinstance(node, ast.NullLit):
        return True, None
    return False, None


def value_descriptor(node: Any, doc: str, depth: int = 0) -> list:
    if depth > 32:
        return ["any"]
    is_lit, value = _literal(node)
    if is_lit:
        if isinstance(value, str) and len(value) > MAX_LITERAL_CHARS:
            return ["type", "string"]
        return ["lit", value]
    if isinstance(node, ast.Path):
        return ["path", tuple(node.segments), doc]
    if isinstance(node, ast.Call):
        return ["call", node.name, [value_descriptor(a, doc, depth + 1) for a in node.args]]
    if isinstance(node, ast.ArrayLit):
        return ["arr", [value_descriptor(i, doc, depth + 1) for i in node.items]]
    return ["any"]


class _Collector:
    def __init__(self) -> None:
        self.reads: list[tuple] = []
        self.calls: list[tuple] = []

    def value(self, node: Any, doc: str, depth: int = 0) -> None:
        if depth > 32:
            return
        if isinstance(node, ast.Path):
            self.reads.append((doc, tuple(node.segments), node.at_sugar, _span(node), None, None))
        elif isinstance(node, ast.Call):
            args = [value_descriptor(a, doc) for a in node.args]
            self.calls.append((node.name, _span(node), args, doc))
            for i, arg in enumerate(node.args):
                if isinstance(arg, ast.Path):
                    self.reads.append((doc, tuple(arg.segments), arg.at_sugar, _span(arg), None, (node.name, i)))
                else:
                    self.value(arg, doc, depth + 1)
        elif isinstance(node, ast.ArrayLit):
            for item in node.items:
                self.value(item, doc, depth + 1)

    def condition(self, node: Any, doc: str, depth: int = 0) -> None:
        if depth > 64:
            return
        if isinstance(node, ast.Comparison):
            right = node.right
            kind, value = _comparison_kind(right)
            self.reads.append((doc, tuple(node.left.segments), node.left.at_sugar, _span(node.left),
                               (node.op.value, kind, value), None))
            if isinstance(right, ast.Call):
                self.value(right, doc, depth + 1)
        elif isinstance(node, ast.Not):
            self.condition(node.operand, doc, depth + 1)
        elif isinstance(node, (ast.And, ast.Or)):
            for item in node.items:
                self.condition(item, doc, depth + 1)


def _comparison_kind(right: Any) -> tuple[str, Any]:
    if isinstance(right, ast.IntLit):
        return "int", right.value
    if isinstance(right, ast.FloatLit):
        return "float", right.value
    if isinstance(right, ast.BoolLit):
        return "bool", right.value
    if isinstance(right, ast.NullLit):
        return "null", None
    if isinstance(right, ast.StringLit):
        return "string", right.value if len(right.value) <= MAX_LITERAL_CHARS else None
    if isinstance(right, ast.Regex):
        return ("null", None) if right.source == "null" else ("regex", right.pattern)
    if isinstance(right, ast.Call):
        return "call", right.name
    return "other", None


def flow_facts(rule: ast.Rule) -> dict[str, Any]:
    c = _Collector()
    writes: list[tuple] = []
    if rule.when is not None and not isinstance(rule.when.condition, ast.Star):
        c.condition(rule.when.condition, "env")
    for a in rule.set_pre:
        c.value(a.value, "input")
        writes.append(("pre", tuple(a.target.segments), _span(a.target), value_descriptor(a.value, "input")))
    for pair in rule.with_:
        c.value(pair.value, "input")
    select: Any = None
    if rule.select is not None:
        if rule.select.star:
            select = "*"
        else:
            select = []
            for item in rule.select.items:
                c.reads.append(("input", tuple(item.source.segments), item.source.at_sugar, _span(item.source),
                                None, None))
                default = None
                if item.default is not None:
                    c.value(item.default, "input")
                    default = value_descriptor(item.default, "input")
                dest = tuple(item.target.segments)
                select.append((dest, tuple(item.source.segments), _span(item), default))
                writes.append(("select", dest, _span(item.target), ["select", tuple(item.source.segments), default]))
    if rule.loop is not None:
        c.condition(rule.loop.until, "view")
        for a in rule.loop.set:
            c.value(a.value, "view")
            writes.append(("loop_set", tuple(a.target.segments), _span(a.target), value_descriptor(a.value, "view")))
    for a in rule.emit:
        c.value(a.value, "emit")
        writes.append(("emit", tuple(a.target.segments), _span(a.target), value_descriptor(a.value, "emit")))
    for a in rule.set_post:
        c.value(a.value, "post")
        writes.append(("post", tuple(a.target.segments), _span(a.target), value_descriptor(a.value, "post")))
    conditional = rule.when is not None and not isinstance(rule.when.condition, ast.Star)
    single = None  # a WHEN of one comparison with a literal (complementary pairs cover every walk)
    if conditional and isinstance(rule.when.condition, ast.Comparison):
        kind, value = _comparison_kind(rule.when.condition.right)
        if kind in ("int", "float", "string", "bool", "null"):
            single = (tuple(rule.when.condition.left.segments), rule.when.condition.op.value, kind, value)
    dyn_goto = any(a.target.segments == ("_txc", "goto") and not isinstance(a.value, (ast.StringLit, ast.IntLit))
                   for a in (*rule.emit, *rule.set_post))
    with_keys = {".".join(p.key): p for p in rule.with_}
    validate = with_keys.get("validate")
    return {
        "reads": c.reads,
        "calls": c.calls,
        "writes": writes,
        "select": select,
        "select_span": _span(rule.select) if rule.select is not None else None,
        "exec_span": _span(rule.exec) if rule.exec is not None else None,
        "priority": rule.priority.value if rule.priority is not None else 0,
        "conditional": conditional,
        "when_single": single,
        "dyn_goto": dyn_goto,
        "each": "each" in with_keys,
        "validate": isinstance(validate.value, ast.BoolLit) and validate.value.value if validate else False,
        "loop": rule.loop is not None,
    }


__all__ = ["flow_facts", "value_descriptor"]
