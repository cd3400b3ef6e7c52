"""Compact per-rule facts for the tree-wide rules (TX213, TX22x, TX23x).

Facts are plain Python data (dicts, tuples, strings, ints), so they are cheap to cache on
disk and the tree rules never need the AST. A span is a 6-tuple
(line, column, offset, end_line, end_column, end_offset).
"""

from __future__ import annotations

import re
from typing import Any

from txcl.check.rules.base import is_literal, is_unconditional, literal_value, read_paths, truthy_literal, with_map
from txcl.errors import Span
from txcl.syntax import ast
from txcl.types.rulefacts import flow_facts

SpanT = tuple[int, int, int, int, int, int]
_new_tuple = tuple.__new__
_STAGE = re.compile(r"^(?:(?P<stack>[A-Za-z0-9_-]+(?:/[A-Za-z0-9_-]+)*)/)?(?P<scope>[0-9]{1,9})$")

JOIN_OPTIONS = ("join_deadline", "on_join_deadline", "join_wait")


def span_t(span: Span) -> SpanT:
    """A span as a plain tuple of its six integers (what the check cache keeps)."""
    return tuple(span)  # type: ignore[return-value]


def span_of(t: SpanT) -> Span:
    return _new_tuple(Span, t)


def jump_of_exec(target: str) -> tuple[str | None, int] | None:
    """(stack or None for the rule's own, scope) of a stage-jump EXEC target, else None."""
    if target.startswith("goto://"):
        body = target[len("goto://"):]
    elif "://" in target:
        return None
    else:
        body = target
        if "/" not in body:
            return None
    match = _STAGE.match(body)
    if match is None:
        return None
    return match.group("stack"), int(match.group("scope"))


def jump_of_goto_value(text: str) -> tuple[str | None, int] | None:
    """A literal @goto value: `stack/123` or digits only."""
    match = _STAGE.match(text)
    if match is None:
        return None
    return match.group("stack"), int(match.group("scope"))


def read_text(segments: tuple[str, ...], at_sugar: bool) -> str:
    """A read path as the author wrote it (for messages)."""
    return ast.Path(tuple(segments), at_sugar).source_text


def _loop_max(rule: ast.Rule):
    """(MAX, span of the MAX modifier) of a LOOP with an explicit MAX, else None."""
    loop = rule.loop
    if loop is None or loop.max is None:
        return None
    span = next((m.span for m in loop.modifiers if m.kind == "max"), loop.span)
    return loop.max, span_t(span)


def extract(rule: ast.Rule) -> dict[str, Any]:
    pairs = with_map(rule)
    halt_emit = any(a.target.segments == ("_txc", "halt") and truthy_literal(a.value) for a in rule.emit)
    halt_post = any(a.target.segments == ("_txc", "halt") and truthy_literal(a.value) for a in rule.set_post)
    gotos: list[tuple[str | None, int, str, SpanT]] = []
    for kind, items in (("EMIT", rule.emit), ("SET", rule.set_post)):
        for a in items:
            if a.target.segments != ("_txc", "goto"):
                continue
            if isinstance(a.value, (ast.StringLit, ast.IntLit)):
                text = a.value.value if isinstance(a.value, ast.StringLit) else a.value.text
                shown = f'"{text}"' if isinstance(a.value, ast.StringLit) else text
                jump = jump_of_goto_value(str(text).strip())
                if jump is not None:
                    gotos.append((jump[0], jump[1], f"{kind} @goto = {shown}", span_t(a.span)))
    exec_target = rule.exec.target if rule.exec is not None else None
    if exec_target is not None:
        jump = jump_of_exec(exec_target)
        if jump is not None:
            gotos.append((jump[0], jump[1], f'EXEC "{exec_target}"', span_t(rule.exec.span)))

    def lit(key: str):
        pair = pairs.get(key)
        if pair is None or not is_literal(pair.value):
            return None, None
        return literal_value(pair.value), span_t(pair.span)

    mode, _ = lit("mode")
    join, join_span = lit("join_at_scope")
    into, _ = lit("into")
    return {
        "unconditional": is_unconditional(rule),
        "halt_emit": halt_emit,
        "halts": halt_emit or halt_post,
        "gotos": gotos,
        "exec": exec_target,
        "exec_span": span_t(rule.exec.span) if rule.exec is not None else None,
        # the secrets the op names, with the span of each `secrets.….secret = "NAME"` value (TX242)
        "secrets": [(p.value.value, span_t(p.value.span)) for p in rule.with_
                    if len(p.key) >= 4 and p.key[0] == "secrets" and p.key[-1] == "secret"
                    and isinstance(p.value, ast.StringLit)],
        "loop": span_t(rule.loop.span) if rule.loop is not None else None,
        "loop_max": _loop_max(rule),
        "mode": mode if isinstance(mode, str) else None,
        "join": join if isinstance(join, int) and not isinstance(join, bool) else None,
        "join_span": join_span,
        "into": into if isinstance(into, str) else None,
        # the deferred join's own options: key -> (literal value or None, span of the pair)
        "join_options": {key: (lit(key)[0], span_t(pairs[key].span))
                         for key in JOIN_OPTIONS if key in pairs},
        "reads": [(p.segments, p.at_sugar, span_t(p.span)) for p in read_paths(rule)],
        # what the op's EMIT and SET POST write (merged with a deferred op's result at its join)
        "writes": [a.target.segments for a in (*rule.emit, *rule.set_post) if not a.target.at_sugar],
        # what the typed-envelope checker follows (txcl.types.rulefacts)
        "flow": flow_facts(rule),
    }
