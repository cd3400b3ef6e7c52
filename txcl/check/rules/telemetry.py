"""TX243 telemetry-intent-dropped: a literal application metric the runtime would drop."""

from __future__ import annotations

from typing import Iterator

from txcl.check.rules.base import FileContext, file_rule, is_literal, literal_value
from txcl.errors import Diagnostic
from txcl.syntax import ast

_REASONS = {
    "not_an_object": "is not an object",
    "bad_name": "needs a name of letters, digits and '_' in dot-joined parts (book.queued)",
    "bad_kind": 'needs kind "counter" or "histogram"',
    "bad_value": "needs a number as its value",
    "negative_counter": "is a counter with a negative value",
    "bad_unit": "has a unit that is not a short string",
    "bad_attrs": "has attrs that are not an object",
    "bad_attr_key": "has an attribute key that is not a plain name",
    "bad_attr_value": "has an attribute value that is not a string, number or boolean",
    "too_many": "is past the 64 intents a request may write",
    "not_an_array": "is not an array of intents",
}


def _value(node):
    """The value of an all-literal expression (literals, &array and &object of literals), or
    raise ValueError."""
    if is_literal(node):
        return literal_value(node)
    if isinstance(node, ast.Call) and node.name in ("array", "object"):
        args = [_value(a) for a in node.args]
        if node.name == "array":
            return args
        if len(args) % 2 or not all(isinstance(k, str) for k in args[::2]):
            raise ValueError("not an object")
        return dict(zip(args[::2], args[1::2]))
    raise ValueError("not literal")


@file_rule("TX243")
def dropped_intent(ctx: FileContext) -> Iterator[Diagnostic]:
    from txcl.telemetry import MAX_INTENTS, PATH, check_intent

    for assignment in (*ctx.rule.emit, *ctx.rule.set_post):
        if tuple(assignment.target.segments) != PATH:
            continue
        try:
            value = _value(assignment.value)
        except ValueError:
            continue  # computed: only the run time knows
        items = value if isinstance(value, list) else [value]
        for index, item in enumerate(items):
            reason = "too_many" if index >= MAX_INTENTS else check_intent(item)[1]
            if reason is not None:
                which = f"intent {index + 1}" if len(items) > 1 else "the intent"
                node = assignment.value
                if isinstance(node, ast.Call) and node.name == "array" and index < len(node.args):
                    node = node.args[index]  # point at the intent itself
                yield ctx.diag("TX243", node.span,
                               f"@telemetry.metrics: {which} {_REASONS.get(reason, 'is not valid')}; the runtime "
                               "drops it (and counts it in txcl_telemetry_dropped_total)",
                               hint='an intent is &object("name", "domain.action", "kind", "counter", "value", 1)')
